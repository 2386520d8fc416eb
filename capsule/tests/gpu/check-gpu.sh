#!/bin/bash
# check-gpu.sh [BUNDLE]: capsule against a real GPU and driver. The ONE script for the GPU machine
# (an H200, Ubuntu 24.04, driver 580.159.04 under /usr/local/nvidia, no network, no registry).
# BUNDLE (default: this script's folder) is what capsule/tests/gpu/make-bundle.sh made: it starts
# the bundled docker-registry on 127.0.0.1, pulls 127.0.0.1:PORT/gpucheck:1 with capsule (its own
# XDG_* dirs in a temp dir), then checks, each one a line in results.txt:
#
#   1. `capsule check` reports the driver and every line ok;
#   2. `capsule run --gpus all IMAGE nvidia-smi -L` prints what `nvidia-smi -L` prints on the host;
#   3. cuda-check (dlopens libcuda.so.1: memcpy and a PTX kernel on each GPU) and, if the image or
#      the machine's nvcc has it, cuda-vecadd (CUDA runtime, a compiled kernel) run inside and see
#      the host's GPUs (same names and UUIDs) and compute right;
#   4. --gpus 0 and --gpus <UUID of GPU 0> give exactly GPU 0; --gpus none gives no device node
#      and no nvidia-smi; /proc/driver/nvidia/version inside names the host's driver;
#   5. the same nvidia-smi -L as an ordinary user (nobody, through setpriv), pull included;
#   6. timing: median wall time of `capsule run IMAGE true` with --gpus none and --gpus all.
#
# It reads only: no GPU setting is changed (no nvidia-smi -pm/-mig/-r, nothing). Writes
# results.txt, check.txt and log.txt to $OUT when OUT is set. Exit status 0 all ok, 1 a check
# failed, 2 something could not run.
#
# Environment: NVIDIA_SMI (default nvidia-smi on PATH, else /usr/local/nvidia/bin/nvidia-smi);
# CAPSULE_DRIVER_ROOT (default /); CAPSULE_RUN_ARGS (extra words for every capsule run);
# CAPSULE_CHECK_CUDA=0 skips step 3; CAPSULE_CHECK_NOBODY=0 skips step 5. A dry run on a machine
# without a GPU: capsule/tests/gpu/dry-run.sh (stand-in driver tree and fake NVML).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bundle=${1:-$here}
bundle=$(cd "$bundle" 2>/dev/null && pwd) || { echo "check-gpu: no bundle at '$bundle'" >&2; exit 2; }
out=${OUT:-}
driver_root=${CAPSULE_DRIVER_ROOT:-/}
read -r -a run_args <<<"${CAPSULE_RUN_ARGS:-}"
if [ -z "${NVIDIA_SMI:-}" ]; then
    NVIDIA_SMI=$(command -v nvidia-smi || echo /usr/local/nvidia/bin/nvidia-smi)
fi

work=$(mktemp -d /tmp/capsule-gpu-check-XXXXXX)
chmod 755 "$work"
registry_pid=
# shellcheck disable=SC2317 # called by the trap
cleanup() {
    if [ -n "$registry_pid" ]; then
        kill "$registry_pid" 2>/dev/null
        wait "$registry_pid" 2>/dev/null
    fi
    if [ -n "$out" ]; then
        cp "$work/results.txt" "$work/check.txt" "$out/" 2>/dev/null
        cp "$work/log.txt" "$out/log.txt" 2>/dev/null
    fi
    rm -rf -- "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log=$work/log.txt
results=$work/results.txt
: >"$results"
failures=0
record() { # record ok|FAIL|skip NAME DETAIL
    printf '%-5s %-28s %s\n' "$1" "$2" "$3" | tee -a "$results"
    [ "$1" = FAIL ] && failures=$((failures + 1))
    return 0
}
die() {
    echo "check-gpu: $*" | tee -a "$results" >&2
    exit 2
}

# The payload: unpacked already (a bundle folder) or as make-bundle.sh leaves it.
if [ -x "$bundle/bin/capsule" ]; then
    b=$bundle
elif [ -r "$bundle/payload.tar.xz" ]; then
    mkdir -p "$work/b"
    tar -xJf "$bundle/payload.tar.xz" -C "$work/b" || die "cannot unpack $bundle/payload.tar.xz"
    chmod -R a+rX "$work/b"
    b=$work/b
else
    die "no bin/capsule or payload.tar.xz in $bundle"
fi
[ -x "$NVIDIA_SMI" ] || die "$NVIDIA_SMI is missing"

# capsule runs with the bundle's libraries; what runs inside containers does not see them.
cap() {
    LD_LIBRARY_PATH=$b/lib "$b/bin/capsule" "$@"
}
export XDG_CACHE_HOME=$work/xdg/cache XDG_DATA_HOME=$work/xdg/data XDG_CONFIG_HOME=$work/xdg/config
export XDG_RUNTIME_DIR=$work/xdg/run
mkdir -p "$XDG_CACHE_HOME" "$XDG_DATA_HOME" "$XDG_CONFIG_HOME" "$XDG_RUNTIME_DIR"

{
    echo "== $(date -u +%FT%TZ) $(uname -srm)"
    echo "== bundle"
    cat "$b/MANIFEST" 2>/dev/null
    echo "== nvidia-smi"
    "$NVIDIA_SMI" --query-gpu=index,name,uuid,driver_version,mig.mode.current --format=csv,noheader
    echo "== driver files"
    ls -la /usr/local/nvidia/lib64 /usr/local/nvidia/bin 2>&1 | head -n 80
    ls -la /dev/nvidia* /dev/nvidia-caps 2>&1
    ldconfig -p 2>/dev/null | grep -E 'nvidia|cuda' | head -n 40
} >>"$log" 2>&1

# ---- the registry, and the pull
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((20000 + RANDOM % 20000)))
cp -a "$b/registry" "$work/registry"
printf 'version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%s\n' \
    "$work/registry" "$port" >"$work/registry.yml"
"$b/bin/docker-registry" serve "$work/registry.yml" >>"$log" 2>&1 &
registry_pid=$!
image=127.0.0.1:$port/gpucheck:1
pulled=
for _ in $(seq 50); do
    sleep 0.2
    if cap pull -q "$image" >>"$log" 2>&1; then
        pulled=1
        break
    fi
    kill -0 "$registry_pid" 2>/dev/null || break
done
[ -n "$pulled" ] || die "capsule pull $image failed (log: $(tail -n 3 "$log" | tr '\n' ' '))"
record ok pull "$image"

run() { # run ARGS... -- capsule run with the common options
    cap run --pull never --no-home --driver-root "$driver_root" "${run_args[@]}" "$@"
}

# ---- 1. capsule check
cap check --driver-root "$driver_root" >"$work/check.txt" 2>&1
check_rc=$?
cat "$work/check.txt" >>"$log"
if [ "$check_rc" -eq 0 ] && grep -q 'driver' "$work/check.txt"; then
    record ok "capsule check" "$(grep -m1 'driver' "$work/check.txt" | cut -c1-100)"
else
    record FAIL "capsule check" "exit $check_rc: $(grep -v '^ok' "$work/check.txt" | head -n 3 | tr '\n' ' ')"
fi

# ---- 2. nvidia-smi -L inside and outside
"$NVIDIA_SMI" -L >"$work/host-L.txt" 2>&1 || die "nvidia-smi -L failed on the host"
run --gpus all "$image" nvidia-smi -L >"$work/ctr-L.txt" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && cmp -s "$work/host-L.txt" "$work/ctr-L.txt"; then
    record ok "nvidia-smi -L, --gpus all" "$(wc -l <"$work/host-L.txt") line(s), same as the host"
else
    record FAIL "nvidia-smi -L, --gpus all" "exit $rc; inside: $(head -n 3 "$work/ctr-L.txt" | tr '\n' ' ')"
    diff "$work/host-L.txt" "$work/ctr-L.txt" >>"$log"
fi
gpu_lines() { grep -E '^GPU [0-9]+: ' "$1" | sort; }
n_host=$(grep -cE '^GPU [0-9]+: ' "$work/host-L.txt")

# ---- 3. computing inside
cuda_program() { # cuda_program NAME RESULT_PATTERN COMMAND...
    local name=$1 pattern=$2
    shift 2
    run --gpus all "$@" >"$work/$name.txt" 2>&1
    local rc=$?
    cat "$work/$name.txt" >>"$log"
    local ok_lines
    ok_lines=$(grep -cE "$pattern" "$work/$name.txt")
    if [ "$rc" -eq 0 ] && [ "$ok_lines" -eq "$n_host" ] &&
        [ "$(gpu_lines "$work/$name.txt")" = "$(gpu_lines "$work/host-L.txt")" ]; then
        record ok "$name" "$(head -n 1 "$work/$name.txt"); $ok_lines GPU(s) computed right"
    else
        record FAIL "$name" "exit $rc: $(grep -vE '^GPU ' "$work/$name.txt" | head -n 3 | tr '\n' ' ')"
    fi
}
if [ "${CAPSULE_CHECK_CUDA:-1}" = 0 ]; then
    record skip cuda-check "CAPSULE_CHECK_CUDA=0"
else
    cuda_program cuda-check 'memcpy 16 MiB ok, kernel ok' "$image" /usr/local/bin/cuda-check
    if run "$image" test -x /usr/local/bin/cuda-vecadd >/dev/null 2>&1; then
        cuda_program cuda-vecadd 'vecadd [0-9]+ ok' "$image" /usr/local/bin/cuda-vecadd
    elif nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null) && [ -n "$nvcc" ]; then
        # Built here against this machine's glibc, which may be newer than the image's: then
        # it cannot run inside, which says nothing about capsule.
        if "$nvcc" -O2 -cudart static -arch=native -o "$work/cuda-vecadd" \
            "$b/src/cuda-vecadd.cu" >>"$log" 2>&1; then
            chmod 755 "$work/cuda-vecadd"
            cuda_program cuda-vecadd 'vecadd [0-9]+ ok' \
                --mount "$work/cuda-vecadd:/opt/cuda-vecadd:ro" "$image" /opt/cuda-vecadd
        else
            record skip cuda-vecadd "nvcc here failed (log)"
        fi
    else
        record skip cuda-vecadd "not in the image and no nvcc here"
    fi
fi

# ---- 4. selection
first=$(grep -m1 -E '^GPU 0: ' "$work/host-L.txt")
uuid0=$(sed -n 's/.*(UUID: \(GPU-[^)]*\)).*/\1/p' <<<"$first")
for sel in 0 "$uuid0"; do
    got=$(run --gpus "$sel" "$image" nvidia-smi -L 2>&1 | grep -E '^GPU [0-9]+: ')
    if [ "$got" = "$first" ]; then
        record ok "--gpus $(cut -c1-12 <<<"$sel")" "exactly GPU 0"
    else
        record FAIL "--gpus $(cut -c1-12 <<<"$sel")" "got: $(tr '\n' ' ' <<<"$got" | cut -c1-150)"
    fi
done
got=$(run --gpus none "$image" sh -c 'ls /dev | grep -c "^nvidia"; command -v nvidia-smi || echo no-smi' 2>&1 | tr '\n' ' ')
if [ "$got" = "0 no-smi " ]; then
    record ok "--gpus none" "no device node, no nvidia-smi"
else
    record FAIL "--gpus none" "got: $got"
fi
# The container's /proc shows this kernel's driver (a stand-in tree's proc/ is not mounted).
host_version=$(head -n 1 /proc/driver/nvidia/version 2>/dev/null)
if [ -z "$host_version" ]; then
    record skip "/proc/driver/nvidia" "this kernel has no NVIDIA driver"
else
    got=$(run --gpus all "$image" head -n 1 /proc/driver/nvidia/version 2>&1)
    if [ "$got" = "$host_version" ]; then
        record ok "/proc/driver/nvidia" "$(cut -c1-90 <<<"$got")"
    else
        record FAIL "/proc/driver/nvidia" "inside: '$(cut -c1-80 <<<"$got")'"
    fi
fi

# ---- 5. as an ordinary user
if [ "${CAPSULE_CHECK_NOBODY:-1}" = 0 ]; then
    record skip "as nobody" "CAPSULE_CHECK_NOBODY=0"
elif ! command -v setpriv >/dev/null; then
    record skip "as nobody" "no setpriv"
else
    u=$work/nobody
    mkdir -p "$u/cache" "$u/data" "$u/config" "$u/run"
    chown -R 65534:65534 "$u"
    chmod 700 "$u/run"
    as_nobody() {
        setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$u" \
            XDG_CACHE_HOME="$u/cache" XDG_DATA_HOME="$u/data" XDG_CONFIG_HOME="$u/config" \
            XDG_RUNTIME_DIR="$u/run" LD_LIBRARY_PATH="$b/lib" "$b/bin/capsule" "$@"
    }
    if ! as_nobody pull -q "$image" >>"$log" 2>&1; then
        record FAIL "as nobody" "pull failed: $(tail -n 2 "$log" | tr '\n' ' ')"
    else
        as_nobody run --pull never --no-home --driver-root "$driver_root" "${run_args[@]}" \
            --gpus all "$image" nvidia-smi -L >"$work/nobody-L.txt" 2>&1
        rc=$?
        if [ "$rc" -eq 0 ] && cmp -s "$work/host-L.txt" "$work/nobody-L.txt"; then
            record ok "as nobody" "pull + nvidia-smi -L as uid 65534, same as the host"
        else
            record FAIL "as nobody" "exit $rc: $(head -n 3 "$work/nobody-L.txt" | tr '\n' ' ')"
        fi
    fi
fi

# ---- 6. what GPU injection costs at start
median_ms() { # median_ms ARGS...: 7 runs of `capsule run ARGS`
    local t=()
    for _ in 1 2 3 4 5 6 7; do
        local s e
        s=$(date +%s%N)
        run "$@" >/dev/null 2>&1 || { echo fail; return; }
        e=$(date +%s%N)
        t+=($(((e - s) / 1000)))
    done
    printf '%s\n' "${t[@]}" | sort -n | sed -n 4p | awk '{printf "%.1f", $1 / 1000}'
}
none_ms=$(median_ms --gpus none "$image" true)
all_ms=$(median_ms --gpus all "$image" true)
if [ "$none_ms" = fail ] || [ "$all_ms" = fail ]; then
    record FAIL timing "capsule run true failed"
else
    record ok timing "capsule run IMAGE true: --gpus none ${none_ms} ms, --gpus all ${all_ms} ms (median of 7)"
fi

echo "check-gpu: $failures failure(s)" | tee -a "$results"
[ "$failures" -eq 0 ] && echo "check-gpu: PASS" || echo "check-gpu: FAIL"
[ "$failures" -eq 0 ]
