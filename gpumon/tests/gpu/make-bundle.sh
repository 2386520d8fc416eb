#!/bin/bash
# make-bundle.sh BUILD OUTDIR: packs gpumon for the GPU machine, which has a driver but neither
# meson nor the Debian libraries gpumon links (libmicrohttpd, jansson, inih, curl, ...).
#
# OUTDIR gets
#   bin/gpumon, bin/fake-nvidia-smi (if built)  the programs
#   bin/static-server (if built)  the benchmark's floor: a wrapper that starts
#                              libexec/static-server with lib/ (the harness starts it with a clean
#                              environment)
#   bin/gpm-load               the GPM check's CUDA load, built here with nvcc (-arch=sm_90,
#                              static cudart: it needs only the driver's libcuda); without nvcc
#                              it is missing, MANIFEST says so and the check runs no load
#   lib/                       every shared library ldd names for the C programs except glibc's
#                              own (glibc there is newer and must be the one that runs; mixing
#                              two glibcs' parts fails at load time) and except libnvidia-ml,
#                              which is dlopen()ed from the machine's driver anyway
#   check-gpu.sh, gpm_compare.py, gpumonbench.py, MANIFEST   the check and its GPM step, the
#                              benchmark harness, what went in
# Run it here, from anywhere; put OUTDIR inside the checkout under an ignored name (build-*) so
# the device tool can carry it, e.g.
#   gpumon/tests/gpu/make-bundle.sh build-rel build-gpu-bundle
set -euo pipefail

if [ $# -ne 2 ]; then
    echo "usage: $0 BUILD OUTDIR" >&2
    exit 2
fi
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
# shellcheck source=SCRIPTDIR/../../../tests/gpu/bundle-libs.sh
. "$repo/tests/gpu/bundle-libs.sh"
build=$(cd "$1" && pwd)
out=$2
gpumon=$build/gpumon/gpumon
smi=$build/bench/gpumon/fake-nvidia-smi
static_server=$build/bench/gpumon/static-server
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}

if [ ! -x "$gpumon" ]; then
    echo "make-bundle: $gpumon not built (ninja -C $1)" >&2
    exit 1
fi
if ldd "$gpumon" | grep -q 'libasan\|libubsan'; then
    # A sanitizer runtime would have to travel too, and its reports are not what this check is
    # about; the bundle is for a plain (ideally release) build.
    echo "make-bundle: $gpumon is a sanitizer build; bundle a plain build" >&2
    exit 1
fi

rm -rf -- "$out"
mkdir -p "$out/bin" "$out/lib"
cp "$gpumon" "$out/bin/gpumon"
progs=("$out/bin/gpumon")
if [ -x "$smi" ]; then
    cp "$smi" "$out/bin/fake-nvidia-smi"
    progs+=("$out/bin/fake-nvidia-smi")
fi
if [ -x "$static_server" ]; then
    mkdir -p "$out/libexec"
    cp "$static_server" "$out/libexec/static-server"
    progs+=("$out/libexec/static-server")
    cat >"$out/bin/static-server" <<'WRAPPER'
#!/bin/sh
# The bundle's static-server with the bundle's libraries (gpumonbench.py clears LD_LIBRARY_PATH).
here=$(dirname "$0")
LD_LIBRARY_PATH=$here/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec "$here/../libexec/static-server" "$@"
WRAPPER
    chmod 755 "$out/bin/static-server"
fi

: >"$out/MANIFEST"
bundle_libs "$out/lib" "$out/MANIFEST" "${progs[@]}"

# The load for the GPM comparison. -static-libstdc++/-static-libgcc: with cudart static too it
# links only glibc, so it runs without lib/ (the driver's libcuda is found by the runtime).
if [ -x "$nvcc" ]; then
    "$nvcc" -O3 -arch=sm_90 -cudart static -Xcompiler -static-libstdc++,-static-libgcc \
        -o "$out/bin/gpm-load" "$repo/gpumon/tests/gpu/gpm-load.cu"
    echo "# gpm-load built with $("$nvcc" --version | grep -o 'release [0-9.]*'), -arch=sm_90" \
        >>"$out/MANIFEST"
else
    echo "# gpm-load not built: no nvcc here ($nvcc); the GPM check runs without a load" \
        >>"$out/MANIFEST"
fi

cp "$repo/gpumon/tests/gpu/check-gpu.sh" "$out/check-gpu.sh"
cp "$repo/gpumon/tests/gpu/gpm_compare.py" "$out/gpm_compare.py"
cp "$repo/bench/gpumon/gpumonbench.py" "$out/gpumonbench.py"
chmod 755 "$out/check-gpu.sh"
{
    echo "# built from $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?') in $build"
    echo "# buildtype $(/usr/bin/python3 -c 'import json,sys
print(next((o["value"] for o in json.load(open(sys.argv[1])) if o["name"] == "buildtype"), "?"))' \
        "$build/meson-info/intro-buildoptions.json" 2>/dev/null || echo '?')"
    echo "# $(LC_ALL=C ldd --version | head -n 1)"
    # The newest glibc symbol version anything in the bundle needs: the machine's glibc must
    # be at least that.
    echo "# needs $(for f in "$out"/bin/* "$out"/libexec/* "$out"/lib/*; do
        objdump -T "$f" 2>/dev/null || true # bin/static-server is a script
    done |
        grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)"
} >>"$out/MANIFEST"
echo "make-bundle: $(find "$out/lib" -type f | wc -l) libraries, $(du -sh "$out" | cut -f1) in $out"
