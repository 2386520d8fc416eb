#!/bin/bash
# check-gpu.sh [BUNDLE]: gpumon against a real GPU and driver, compared with nvidia-smi.
#
# The ONE script for the GPU machine (an H200, Ubuntu 24.04, driver under /usr/local/nvidia, no
# network, no meson, none of the Debian libraries). It runs a bundle made here with
#   gpumon/tests/gpu/make-bundle.sh <build> build-gpu-bundle
# BUNDLE defaults to the folder of this script when that holds bin/gpumon (the bundle's own
# copy), else build-gpu-bundle in the current directory (the repo root).
#
#  1. starts gpumon with LD_LIBRARY_PATH=BUNDLE/lib (libnvidia-ml.so.1 comes from the machine's
#     ld cache), waits for /health;
#  2. scrapes /metrics, runs nvidia-smi --query-gpu=... at the same moment, scrapes again, and
#     compares per GPU: uuid, name, bus id, driver version exactly; memory used/free within
#     1 MiB; SM and memory clocks exactly; power, temperature and utilisation within a tolerance
#     (they move between two reads). Up to 3 rounds, the first that agrees counts;
#  3. checks the OpenMetrics and HEAD answers;
#  4. GPM (gpm_compare.py): gpumon's DCGM_FI_PROF_* against `nvidia-smi dmon --gpm-metrics` (and
#     pynvml's GPM calls where pynvml is installed), medians over a window idle and one under
#     BUNDLE/bin/gpm-load (tensor, FP32 and DRAM kernels); a GPU without them must be without
#     them in dmon too, with gpumon's reason. No gpm-load in the bundle: the idle window only;
#  5. runs the benchmark (bench/gpumon/gpumonbench.py, quick, with BUNDLE/bin/static-server for
#     the floor figure when the bundle has it) against the real driver and the real nvidia-smi and
#     prints its summary.
# Writes the comparison table to $OUT/compare.txt (and the GPM table to $OUT/gpm-compare.txt with
# its raw material in $OUT/gpm-dmon.txt and $OUT/gpm-samples.txt, the benchmark to $OUT/bench.txt,
# the gpumon log to $OUT/gpumon.log: six files) when OUT is set. Exits 1 on a mismatch, 2 when
# something could not run. It changes no GPU setting (no nvidia-smi -pm/-lgc/-mig/-r, nothing);
# the only thing it does to the GPU is step 4's load.
#
# Environment: NVIDIA_SMI (default: nvidia-smi on PATH, else /usr/local/nvidia/bin/nvidia-smi),
# PYTHON (default python3), GPUMON_GPM=0 skips step 4, GPUMON_BENCH=0 skips step 5,
# GPUMON_BENCH_ARGS (default --quick).
# For a dry run without a GPU: NVIDIA_SMI=<build>/bench/gpumon/fake-nvidia-smi,
# GPUMON_NVML_DIR=<build>/tests/fake-nvml and FAKE_NVML_FIXTURE=<fixture>. Step 4 then runs no
# load and compares gpumon with the stand-in's dmon on the fixture's constant GPM figures: that
# proves the plumbing, not the numbers.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ $# -ge 1 ]; then
    bundle=$1
elif [ -x "$here/bin/gpumon" ]; then
    bundle=$here
else
    bundle=build-gpu-bundle
fi
bundle=$(cd "$bundle" 2>/dev/null && pwd) || { echo "check-gpu: no bundle at '$bundle'" >&2; exit 2; }
python=${PYTHON:-python3}
out=${OUT:-}
if [ -z "${NVIDIA_SMI:-}" ]; then
    NVIDIA_SMI=$(command -v nvidia-smi || echo /usr/local/nvidia/bin/nvidia-smi)
fi
bench=$bundle/gpumonbench.py
[ -r "$bench" ] || bench=$here/../../../bench/gpumon/gpumonbench.py
gpm_compare=$bundle/gpm_compare.py
[ -r "$gpm_compare" ] || gpm_compare=$here/gpm_compare.py

libpath=$bundle/lib
# A dry run puts the fake libnvidia-ml.so.1 in front, for gpumon and the stand-in nvidia-smi;
# on the GPU machine the ld cache finds the driver's.
if [ -n "${GPUMON_NVML_DIR:-}" ]; then
    libpath=$GPUMON_NVML_DIR:$libpath
    export LD_LIBRARY_PATH=$GPUMON_NVML_DIR
fi

for f in "$bundle/bin/gpumon" "$NVIDIA_SMI"; do
    [ -x "$f" ] || { echo "check-gpu: $f is missing" >&2; exit 2; }
done
command -v "$python" >/dev/null || { echo "check-gpu: no $python" >&2; exit 2; }

# worst A B: the exit status that says more, a mismatch (1) before could-not-run (2) before 0.
worst() {
    if [ "$1" -eq 1 ] || [ "$2" -eq 1 ]; then
        echo 1
    elif [ "$1" -ne 0 ]; then
        echo "$1"
    else
        echo "$2"
    fi
}

work=$(mktemp -d /tmp/check-gpu-XXXXXX)
port=$("$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
gpumon_pid=
# shellcheck disable=SC2317 # called by the trap
cleanup() {
    if [ -n "$gpumon_pid" ] && kill -0 "$gpumon_pid" 2>/dev/null; then
        kill -TERM "$gpumon_pid"
        wait "$gpumon_pid" 2>/dev/null
    fi
    [ -n "$out" ] && cp "$work/gpumon.log" "$out/gpumon.log" 2>/dev/null
    rm -rf -- "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "check-gpu: bundle $bundle, nvidia-smi $NVIDIA_SMI, $(uname -r)"
"$NVIDIA_SMI" --query-gpu=index,name,driver_version,mig.mode.current --format=csv,noheader ||
    { echo "check-gpu: nvidia-smi does not answer" >&2; exit 2; }

LD_LIBRARY_PATH=$libpath "$bundle/bin/gpumon" --listen "127.0.0.1:$port" --hostname gpucheck \
    --interval 1s >"$work/gpumon.log" 2>&1 &
gpumon_pid=$!

# The comparison itself is Python (stdlib only): parsing the exposition and CSV in bash would be
# more code than the check.
GPUMON_PORT=$port NVIDIA_SMI=$NVIDIA_SMI GPUMON_PID=$gpumon_pid COMPARE_OUT=${out:+$out/compare.txt} \
    "$python" - <<'EOF'
import csv, http.client, io, os, re, subprocess, sys, time

port = int(os.environ["GPUMON_PORT"])
smi = os.environ["NVIDIA_SMI"]
QUERY = ["index", "uuid", "utilization.gpu", "memory.used", "memory.free", "temperature.gpu",
         "power.draw", "clocks.sm", "clocks.mem"]
LABELS_QUERY = ["index", "uuid", "name", "pci.bus_id", "driver_version", "memory.reserved"]
# field -> (gpumon family, how to compare, tolerance)
CHECKS = [
    ("memory.used", "DCGM_FI_DEV_FB_USED", "abs", 1),
    ("memory.free", "DCGM_FI_DEV_FB_FREE", "abs", 1),
    ("clocks.sm", "DCGM_FI_DEV_SM_CLOCK", "abs", 0),
    ("clocks.mem", "DCGM_FI_DEV_MEM_CLOCK", "abs", 0),
    ("temperature.gpu", "DCGM_FI_DEV_GPU_TEMP", "abs", 3),
    ("utilization.gpu", "DCGM_FI_DEV_GPU_UTIL", "abs", 10),
    ("power.draw", "DCGM_FI_DEV_POWER_USAGE", "rel", 0.10),  # and at least 10 W
]

def get(path, headers=None, method="GET"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request(method, path, headers=headers or {})
        r = c.getresponse()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()
    finally:
        c.close()

SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')

def scrape():
    status, _, body = get("/metrics")
    assert status == 200, status
    series = []
    for line in body.decode().splitlines():
        m = SAMPLE.match(line)
        if m and not line.startswith("#"):
            series.append((m.group(1), dict(LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return series

def gpu_value(series, family, index, device_wide=True):
    # The whole GPU's series: MIG instance series carry GPU_I_ID. In MIG mode gpumon, as
    # dcgm-exporter, shows a GPU's series once per GPU instance only; for a figure of the whole
    # device (a clock, a label) any instance's will do.
    first = (None, None)
    for name, labels, value in series:
        if name == family and labels.get("gpu") == index:
            if "GPU_I_ID" not in labels:
                return value, labels
            if first[0] is None and device_wide:
                first = (value, labels)
    return first

def in_mig_mode(series, index):
    return any(l.get("gpu") == index and "GPU_I_ID" in l for _, l, _ in series)

def smi_rows(fields):
    r = subprocess.run([smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return None
    rows = {}
    for row in csv.reader(io.StringIO(r.stdout), skipinitialspace=True):
        if len(row) == len(fields):
            rows[row[0]] = dict(zip(fields, (c.strip() for c in row)))
    return rows

def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None  # "[N/A]", "[Not Supported]"

deadline = time.monotonic() + 60
while True:
    try:
        status, _, body = get("/health")
        if status == 200:
            break
        why = body.decode(errors="replace").strip()
    except OSError as e:
        why = repr(e)
    if time.monotonic() > deadline:
        print(f"check-gpu: gpumon not healthy after 60 s: {why}")
        sys.exit(2)
    time.sleep(0.5)
time.sleep(2.5)  # a couple of 1 s passes, so every field has been read at least once

labels_rows = smi_rows(LABELS_QUERY) or smi_rows(LABELS_QUERY[:-1]) or {}
lines, failures = [], 0
for attempt in range(1, 4):
    before = scrape()
    rows = smi_rows(QUERY)
    after = scrape()
    if rows is None:
        print("check-gpu: nvidia-smi --query-gpu failed")
        sys.exit(2)
    lines, failures = [], 0
    def add(gpu, field, ours, theirs, ok, note=""):
        global failures
        failures += 0 if ok else 1
        lines.append(f"{gpu:>3}  {field:<18} {str(ours):>40} {str(theirs):>40}  "
                     f"{'ok' if ok else 'MISMATCH'}{'  ' + note if note else ''}")
    up = [v for n, l, v in after if n == "gpumon_up"]
    add("-", "gpumon_up", up[0] if up else None, 1, up == [1.0])
    n_gpu = len({l.get("gpu") for n, l, v in after if n == "gpumon_gpu_up"})
    add("-", "GPU count", n_gpu, len(rows), n_gpu == len(rows))
    for index, row in sorted(rows.items()):
        _, labels = gpu_value(after, "gpumon_gpu_up", index, device_wide=False)
        labels = labels or {}
        add(index, "uuid", labels.get("UUID"), row["uuid"], labels.get("UUID") == row["uuid"])
        lab = labels_rows.get(index, {})
        # The DCGM labels of any of the GPU's series: in MIG mode not every family has a
        # series for a GPU instance (no memory figures for one without them, for instance).
        _, dl = gpu_value(after, "DCGM_FI_DEV_FB_TOTAL", index)
        dl = dl or next((l for _, l, _ in after
                         if l.get("gpu") == index and "modelName" in l), {})
        for field, label in (("name", "modelName"), ("pci.bus_id", "pci_bus_id"),
                             ("driver_version", "DCGM_FI_DRIVER_VERSION")):
            if field in lab:
                add(index, field, dl.get(label), lab[field], dl.get(label) == lab[field])
        for field, family, how, tol in CHECKS:
            theirs = num(row[field])
            if field.startswith("memory.") and in_mig_mode(after, index):
                add(index, field, "per instance", row[field], True,
                    "MIG mode: gpumon shows memory per GPU instance; not compared")
                continue
            vals = [gpu_value(s, family, index)[0] for s in (before, after)]
            ours = [v for v in vals if v is not None]
            if theirs is None or not ours:
                add(index, field, ours[-1] if ours else "absent", row[field],
                    theirs is None and not ours, "both n/a" if theirs is None and not ours else "")
                continue
            limit = tol if how == "abs" else max(10.0, tol * theirs)
            best = min(ours, key=lambda v: abs(v - theirs))
            ok = abs(best - theirs) <= limit
            note = f"±{limit:g}" if limit else "exact"
            if (not ok and field == "memory.used" and num(lab.get("memory.reserved")) is not None
                    and abs(best - theirs - num(lab["memory.reserved"])) <= 1):
                note = (f"gpumon counts the driver's reserved {lab['memory.reserved']} MiB as "
                        "used; nvidia-smi and DCGM do not (nvmlMemory_t v1 vs v2)")
            add(index, field, f"{best:g}", f"{theirs:g}", ok, note)
    if failures == 0:
        break
    time.sleep(1.5)

# Formats: OpenMetrics ends with # EOF; HEAD answers without a body.
status, headers, body = get("/metrics", {"Accept": "application/openmetrics-text; version=1.0.0"})
om_ok = status == 200 and headers.get("content-type", "").startswith(
    "application/openmetrics-text") and body.endswith(b"# EOF\n")
lines.append(f"  -  {'openmetrics':<18} {status:>40} {'# EOF':>40}  {'ok' if om_ok else 'MISMATCH'}")
failures += not om_ok
status, _, body = get("/metrics", method="HEAD")
head_ok = status == 200 and body == b""
lines.append(f"  -  {'HEAD /metrics':<18} {status:>40} {'200, no body':>40}  "
             f"{'ok' if head_ok else 'MISMATCH'}")
failures += not head_ok

header = (f"gpumon vs nvidia-smi (round {attempt} of at most 3; gpumon read before and after "
          "nvidia-smi, the closer value counts)\n"
          f"gpu  {'field':<18} {'gpumon':>40} {'nvidia-smi':>40}  result\n")
table = header + "\n".join(lines) + f"\n{failures} mismatch(es)\n"
print(table, end="")
if os.environ.get("COMPARE_OUT"):
    with open(os.environ["COMPARE_OUT"], "w") as f:
        f.write(table)
sys.exit(1 if failures else 0)
EOF
rc=$?

if [ "${GPUMON_GPM:-1}" != 0 ] && kill -0 "$gpumon_pid" 2>/dev/null; then
    echo "--- GPM: gpumon's DCGM_FI_PROF_* against nvidia-smi dmon --gpm-metrics"
    gpm_args=(--port "$port" --nvidia-smi "$NVIDIA_SMI")
    [ -n "$out" ] && gpm_args+=(--out "$out")
    if [ -n "${GPUMON_NVML_DIR:-}" ]; then
        gpm_args+=(--dry-run)
    elif [ -x "$bundle/bin/gpm-load" ]; then
        gpm_args+=(--load "$bundle/bin/gpm-load")
    fi
    "$python" "$gpm_compare" "${gpm_args[@]}"
    rc=$(worst "$rc" $?)
fi

if ! kill -0 "$gpumon_pid" 2>/dev/null; then
    echo "check-gpu: gpumon died; its log:" >&2
    tail -n 40 "$work/gpumon.log" >&2
    exit 2
fi
kill -TERM "$gpumon_pid"
wait "$gpumon_pid"
stop_rc=$?
gpumon_pid=
if [ "$stop_rc" -ne 0 ]; then
    echo "check-gpu: gpumon exited $stop_rc on SIGTERM; log:" >&2
    tail -n 40 "$work/gpumon.log" >&2
    rc=1
fi
echo "--- gpumon log (tail)"
tail -n 15 "$work/gpumon.log"

if [ "${GPUMON_BENCH:-1}" != 0 ]; then
    static_server=
    [ -x "$bundle/bin/static-server" ] && static_server=$bundle/bin/static-server
    if [ -n "${GPUMON_NVML_DIR:-}" ]; then
        echo "--- benchmark (dry run: fake NVML, stand-in nvidia-smi)"
    else
        echo "--- benchmark (real driver, real nvidia-smi)"
    fi
    # shellcheck disable=SC2086 # GPUMON_BENCH_ARGS is a list of words on purpose
    "$python" "$bench" --gpumon "$bundle/bin/gpumon" --gpumon-lib-path "$libpath" \
        --nvidia-smi "$NVIDIA_SMI" ${FAKE_NVML_FIXTURE:+--fixture "$FAKE_NVML_FIXTURE"} \
        ${GPUMON_NVML_DIR:+--peer-lib-path "$GPUMON_NVML_DIR" --stand-in} \
        ${static_server:+--static-server "$static_server"} \
        --tmpdir "$work" ${GPUMON_BENCH_ARGS:---quick} 2>&1 | tee "$work/bench.txt"
    bench_rc=${PIPESTATUS[0]}
    [ -n "$out" ] && cp "$work/bench.txt" "$out/bench.txt"
    if [ "$bench_rc" -ne 0 ]; then
        echo "check-gpu: the benchmark failed ($bench_rc)" >&2
        rc=$(worst "$rc" 2)
    fi
fi
[ "$rc" -eq 0 ] && echo "check-gpu: PASS" || echo "check-gpu: FAIL ($rc)"
exit "$rc"
