#!/bin/bash
# dry-run.sh BUILD [BUNDLE]: check-gpu.sh on a machine without a GPU, against the stand-in driver
# tree (capsule/tests/driver-tree) and the fake NVML with one H200 (GPU 0 of
# tests/fixtures/nvml/capsule-h200-mig.json), so the bundle and the script can be tried before
# the GPU machine's few minutes are spent. The CUDA programs are skipped (the stand-in libcuda
# computes nothing). BUNDLE defaults to a fresh make-bundle.sh BUILD in a temp dir.
set -euo pipefail

if [ $# -lt 1 ]; then
    echo "usage: $0 BUILD [BUNDLE]" >&2
    exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
build=$(cd "$1" && pwd)
t=$(mktemp -d /tmp/capsule-dry-XXXXXX)
chmod 755 "$t"
trap 'rm -rf -- "$t"' EXIT
bundle=${2:-}
if [ -z "$bundle" ]; then
    bundle=$t/bundle
    "$here/make-bundle.sh" "$build" "$bundle"
fi

"$repo/capsule/tests/driver-tree/make-driver-tree.sh" "$t/tree" \
    "$build/capsule/tests/driver-tree" "$build/tests/fake-nvml/libnvidia-ml.so.1"
mkdir -p "$t/fixture"
/usr/bin/python3 - "$repo/tests/fixtures/nvml/capsule-h200-mig.json" "$t/fixture/one.json" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))
f["gpus"] = f["gpus"][:1]
json.dump(f, open(sys.argv[2], "w"))
PY
chmod -R a+rX "$t/tree" "$t/fixture"
cat >"$t/nvidia-smi" <<SH
#!/bin/sh
LD_LIBRARY_PATH=$t/tree/usr/lib/x86_64-linux-gnu exec $t/tree/usr/bin/nvidia-smi "\$@"
SH
chmod 755 "$t/nvidia-smi"

export FAKE_NVML_FIXTURE=$t/fixture/one.json
NVIDIA_SMI=$t/nvidia-smi CAPSULE_DRIVER_ROOT=$t/tree CAPSULE_CHECK_CUDA=0 \
    CAPSULE_RUN_ARGS="--mount $t/fixture:$t/fixture:ro -e FAKE_NVML_FIXTURE=$FAKE_NVML_FIXTURE" \
    "$bundle/check-gpu.sh" "$bundle"
