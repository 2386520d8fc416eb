#!/usr/bin/env bash
# Installs, builds and starts the gpunode stack on this machine:
#   dependencies -> build-release/ -> meson install (/usr/local) -> /etc/coold/coold.conf and
#   /etc/gpumon/gpumon.conf (written when missing) -> gpuqd (the GPU job queue), coolsim (unless
#   a real controller is configured) + coold, gpumon (GPU telemetry on :9400), and capsule-cached
#   (capsule's node image cache, with /etc/capsule.conf written when missing to use it). Under
#   systemd the units in deploy/systemd/ are installed and started; otherwise the programs run in
#   the background with logs in /var/log/{coold,gpumon,gpuq}/ and /var/log/capsule-cached.log,
#   pid files in /run/{coold,gpumon,gpuq}/ and /run/capsule-cached.pid.
#
#   scripts/quickstart.sh              start (again: restarts the daemons, new binaries)
#   scripts/quickstart.sh demo         watch a simulated pump failure end in a clean stop
#   scripts/quickstart.sh --stop       stop what it started (gpuq's running jobs keep running)
#   COOLD_DEVICE=/dev/ttyACM0 scripts/quickstart.sh   use a real controller, no simulator
#   COOLSIM_SCENARIO=overheat scripts/quickstart.sh   run the simulator with another scenario
#
# Simulator mode (no COOLD_DEVICE) is real but harmless: coold acts on alarms (drill = no), but
# its shutdown command is coolant-demo-halt, which only logs that the host would power off now,
# and its Docker socket is a private demo Docker Engine (/run/gpunode-demo/docker.sock, own data
# and exec roots, no networking) holding one demo container, never this host's own engine. With
# a real controller coold.conf has `command = systemctl poweroff` and the host's Docker socket.
#
# QUICKSTART_ROOT=/tmp/x puts everything (install, /etc, /var/log, /var/lib, /run) under that
# dir, never uses systemd, starts no Docker Engine but the demo's (its files under the dir too),
# and takes the metrics ports from COOLD_METRICS_LISTEN, GPUMON_LISTEN and GPUQ_METRICS_LISTEN:
# for trying and testing the script. It makes no accounts there: capsule-cached runs as nobody.
# The build installed is an optimised one, build-release/ (meson's release build type, the one
# the benchmarks in bench/ measure); QUICKSTART_BUILD=DIR builds and installs from DIR instead,
# as it is set up (tests hand it the build under test), with prefix /usr/local;
# QUICKSTART_SKIP_DEPS=1 skips scripts/install-deps.sh.
set -euo pipefail

cd "$(dirname "$0")/.."
R=${QUICKSTART_ROOT:-}
BUILD=${QUICKSTART_BUILD:-build-release}
BUILDTYPE=release # what quickstart sets its own build up as (QUICKSTART_BUILD is used as it is)
ETC=$R/etc/coold
LOGDIR=$R/var/log/coold
RUNDIR=$R/run/coold
SIMDIR=$R/run/coolsim
SIMSTATE=$R/var/lib/coolsim
BIN=$R/usr/local/bin
SBIN=$R/usr/local/sbin
SIM_LINK=/run/coolsim/ttyCOOL0
[ -z "$R" ] || SIM_LINK=$SIMDIR/ttyCOOL0
METRICS=${COOLD_METRICS_LISTEN:-127.0.0.1:9420}
SCENARIO=${COOLSIM_SCENARIO:-normal}
# gpumon: GPU telemetry. Without a GPU or driver it still serves /metrics, with gpumon_up 0 and
# the reason; GPUMON_LISTEN and GPUMON_NVML_LIBRARY (default: libnvidia-ml.so.1 through the
# dynamic loader) only go into a new /etc/gpumon/gpumon.conf.
GPUMON_ETC=$R/etc/gpumon
GPUMON_LOGDIR=$R/var/log/gpumon
GPUMON_RUNDIR=$R/run/gpumon
GPUMON_LISTEN=${GPUMON_LISTEN:-:9400}
GPUMON_NVML_LIBRARY=${GPUMON_NVML_LIBRARY:-}
# gpuq: the GPU job queue. gpuqd runs without a config (one queue, "default", over every GPU)
# unless /etc/gpunode/gpuqd.conf exists; quickstart never writes that file. Under systemd the
# unit takes its options from /etc/default/gpuqd, which quickstart writes (--config when the file
# exists) unless it is someone else's. Under QUICKSTART_ROOT gpuqd's paths must lie below the
# root, so quickstart runs it with a config of its own (the defaults moved there), rewritten in
# $GPUQ_RUNDIR at each start, with /metrics on GPUQ_METRICS_LISTEN. GPUQ_NVML_LIBRARY: the NVML
# gpuqd loads when it runs in the background (default libnvidia-ml.so.1).
GPUQ_CONF=$R/etc/gpunode/gpuqd.conf
GPUQ_LOGDIR=$R/var/log/gpuq
GPUQ_RUNDIR=$R/run/gpuq
GPUQ_STATE=$R/var/lib/gpuq
GPUQ_RUN_PROGRAM=$R/usr/local/libexec/gpunode/gpuq-run
GPUQ_DEFAULTS=/etc/default/gpuqd
GPUQ_DEFAULTS_MARK="# Written by scripts/quickstart.sh"
GPUQ_METRICS_LISTEN=${GPUQ_METRICS_LISTEN:-127.0.0.1:9430}
GPUQ_NVML_LIBRARY=${GPUQ_NVML_LIBRARY:-}
# capsule-cached: capsule's node-wide image cache (docs/capsule.md, "The node cache"). It runs
# as its own system account, capsule-cache, which quickstart makes; it refuses to run as root.
# Under QUICKSTART_ROOT no account is made and it runs as nobody (whoever else runs as nobody
# could then write its layers: good enough for a trial tree, not for a node), with a config of
# its own below the root, written when missing. /etc/capsule.conf is written when missing, with
# node_cache naming the service's socket; one without node_cache is kept, with a note.
CACHED_USER=capsule-cache
[ -z "$R" ] || CACHED_USER=nobody
CACHED_CONF=$R/etc/gpunode/capsule-cached.conf
CAPSULE_CONF=$R/etc/capsule.conf
# Its pid file and log go in root's folders, not in the account's /run/capsule: the account
# could put a link there that root's next write would follow.
CACHED_RUNDIR=$R/run
CACHED_LOGDIR=$R/var/log
PYTHON=/usr/bin/python3

# The demo's private Docker Engine, its container, and the shutdown command of simulator mode.
# The paths under /var/lib/gpunode-demo and /run/gpunode-demo match
# deploy/systemd/gpunode-demo-docker.service.
DEMO_STATE=$R/var/lib/gpunode-demo
DEMO_RUN=$R/run/gpunode-demo
DEMO_SOCK=$DEMO_RUN/docker.sock
DEMO_CKPT=$DEMO_STATE/checkpoint
DEMO_IMAGE=gpunode-demo-busybox:1
DEMO_CONTAINER=gpunode-demo-workload
DEMO_HALT=$R/usr/local/libexec/gpunode/coolant-demo-halt
DEMO_HALT_LOG=$LOGDIR/demo-halt.log
DEMO_REPORT=$SIMDIR/demo-report.json
# Checkpoints on SIGTERM (the second it takes stands for a real one), then exits 0.
# shellcheck disable=SC2016 # expanded by the container's shell
DEMO_WORKLOAD='echo "demo workload running; on SIGTERM it writes /ckpt/checkpoint"
trap "echo SIGTERM: checkpointing; sleep 1; echo saved \$(date -u +%FT%TZ) >/ckpt/checkpoint; echo checkpoint written; exit 0" TERM
while :; do sleep 1 & wait $!; done'
# The Debian CLI matches the Debian engine; another docker on PATH may be newer.
DOCKER=/usr/bin/docker
[ -x "$DOCKER" ] || DOCKER=docker

say() { printf 'quickstart: %s\n' "$*"; }
die() { printf 'quickstart: %s\n' "$*" >&2; exit 1; }

use_systemd() { [ -z "$R" ] && [ -d /run/systemd/system ]; }

# ---- background mode: pid files ----

# Prints the pid in a pid file if that process is alive and is the named program.
live_pid() {
    local pidfile=$1 name=$2 pid
    [ -f "$pidfile" ] || return 1
    pid=$(cat "$pidfile")
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ] || return 1
    echo "$pid"
}

# stop_bg NAME [PROGRAM] [SECONDS]: SIGTERM to what NAME.pid names, SIGKILL after SECONDS (10).
stop_bg() {
    local name=$1 prog=${2:-$1} wait=${3:-10} pid
    if pid=$(live_pid "$RUNDIR/$name.pid" "$prog"); then
        kill -TERM "$pid"
        for _ in $(seq $((wait * 10))); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
        say "stopped $name (pid $pid)"
    fi
    rm -f "$RUNDIR/$name.pid"
}

# start_bg NAME COMMAND...: runs COMMAND in its own session, output to NAME.log; sets BG_PID.
start_bg() {
    local name=$1
    shift
    mkdir -p "$LOGDIR" "$RUNDIR"
    setsid "$@" </dev/null >>"$LOGDIR/$name.log" 2>&1 &
    BG_PID=$!
    echo "$BG_PID" >"$RUNDIR/$name.pid"
    say "started $name (pid $BG_PID), log $LOGDIR/$name.log"
}

# ---- the demo's Docker Engine ----

ddocker() { "$DOCKER" -H "unix://$DEMO_SOCK" "$@"; }
engine_up() { curl -sf -o /dev/null --max-time 2 --unix-socket "$1" http://docker/_ping; }

# Its own namespace in containerd too: if the host runs a containerd of its own, dockerd uses it.
write_demo_engine_config() {
    local ns=gpunode-demo
    [ -z "$R" ] || ns=gpunode-demo-$(printf '%s' "$R" | md5sum | cut -c1-8)
    mkdir -p "$DEMO_STATE" "$DEMO_CKPT"
    cat >"$DEMO_STATE/daemon.json" <<EOF
{
  "data-root": "$DEMO_STATE/docker",
  "exec-root": "$DEMO_RUN/exec",
  "hosts": ["unix://$DEMO_SOCK"],
  "pidfile": "$DEMO_RUN/docker.pid",
  "containerd-namespace": "$ns",
  "containerd-plugins-namespace": "$ns-plugins",
  "storage-driver": "vfs",
  "iptables": false,
  "ip6tables": false,
  "bridge": "none"
}
EOF
}

start_demo_engine() {
    engine_up "$DEMO_SOCK" && return 0
    write_demo_engine_config
    if use_systemd; then
        systemctl enable --quiet gpunode-demo-docker.service
        systemctl restart gpunode-demo-docker.service
    else
        stop_bg demo-dockerd dockerd 30
        mkdir -p "$DEMO_RUN"
        start_bg demo-dockerd dockerd --config-file="$DEMO_STATE/daemon.json"
    fi
    for _ in $(seq 120); do
        engine_up "$DEMO_SOCK" && return 0
        sleep 0.5
    done
    die "the demo Docker Engine did not come up; see $(use_systemd &&
        echo 'journalctl -u gpunode-demo-docker' || echo "$LOGDIR/demo-dockerd.log")"
}

# A one-layer image: busybox-static and a link for each of its applets.
import_demo_image() {
    ddocker image inspect "$DEMO_IMAGE" >/dev/null 2>&1 && return 0
    local tmp applet
    tmp=$(mktemp -d)
    mkdir -p "$tmp/bin" "$tmp/ckpt" "$tmp/tmp"
    chmod 1777 "$tmp/tmp"
    cp /bin/busybox "$tmp/bin/busybox"
    for applet in $(/bin/busybox --list); do
        [ "$applet" = busybox ] || ln -s busybox "$tmp/bin/$applet"
    done
    tar -C "$tmp" -cf - . | ddocker import - "$DEMO_IMAGE" >/dev/null
    rm -rf "$tmp"
    say "imported $DEMO_IMAGE (busybox-static) into the demo Docker Engine"
}

# (Re)creates the demo container; with "keep", one already running is left as it is.
start_demo_workload() {
    local running
    running=$(ddocker inspect -f '{{.State.Running}}' "$DEMO_CONTAINER" 2>/dev/null || true)
    [ "${1:-}" = keep ] && [ "$running" = true ] && return 0
    ddocker rm -f "$DEMO_CONTAINER" >/dev/null 2>&1 || true
    mkdir -p "$DEMO_CKPT"
    ddocker run -d --name "$DEMO_CONTAINER" --network=none --restart=unless-stopped \
        -v "$DEMO_CKPT:/ckpt" "$DEMO_IMAGE" /bin/sh -c "$DEMO_WORKLOAD" >/dev/null
    for _ in $(seq 40); do
        [ "$(ddocker inspect -f '{{.State.Running}}' "$DEMO_CONTAINER")" = true ] && return 0
        sleep 0.25
    done
    die "the demo container did not start: $(ddocker logs "$DEMO_CONTAINER" 2>&1 | tail -n 5)"
}

# ---- configuration ----

conf_get() { sed -n "s/^$1 *= *//p" "$ETC/coold.conf" | head -n 1; }

# Whether coold.conf is the simulator demo's: acts on alarms, but with the demo halt script and
# the demo engine. Prints what differs.
demo_config_problems() {
    [ "$(conf_get drill)" = no ] || echo "drill = $(conf_get drill) (the demo needs no)"
    [ "$(conf_get docker_socket)" = "$DEMO_SOCK" ] ||
        echo "docker_socket = $(conf_get docker_socket) (the demo needs $DEMO_SOCK)"
    case "$(conf_get command)" in
        "$DEMO_HALT"*) ;;
        *) echo "command = $(conf_get command) (the demo needs $DEMO_HALT)" ;;
    esac
}

write_config() {
    local device drill command docker_socket halt_within admin_group
    if [ -n "$R" ]; then
        admin_group=root
    else
        admin_group=coolant
        getent group coolant >/dev/null || groupadd --system coolant
    fi
    if [ -n "${COOLD_DEVICE:-}" ]; then
        device=$COOLD_DEVICE drill=no docker_socket=/run/docker.sock halt_within=60s
        command="systemctl poweroff"
        use_systemd || command=poweroff
    else
        device=$SIM_LINK drill=no docker_socket=$DEMO_SOCK halt_within=15s
        command="$DEMO_HALT $DEMO_HALT_LOG"
    fi
    local tmp
    tmp=$(mktemp)
    sed -e "s|^device = .*|device = $device|" \
        -e "s|^listen = .*|listen = $METRICS|" \
        -e "s|^socket = .*|socket = $RUNDIR/coold.sock|" \
        -e "s|^admin_group = .*|admin_group = $admin_group|" \
        -e "s|^audit_log = .*|audit_log = $LOGDIR/audit.log|" \
        -e "s|^hooks_dir = .*|hooks_dir = $ETC/hooks.d|" \
        -e "s|^command = .*|command = $command|" \
        -e "s|^docker_socket = .*|docker_socket = $docker_socket|" \
        -e "s|^halt_within = .*|halt_within = $halt_within|" \
        -e "s|^drill = .*|drill = $drill|" \
        -e "s|^gpuqd_socket = .*|gpuqd_socket = $(gpuq_socket)|" \
        deploy/coold.conf.example >"$tmp"
    {
        head -n 2 "$tmp"
        if [ -z "${COOLD_DEVICE:-}" ]; then
            cat <<EOF
;
; Written by scripts/quickstart.sh for the simulator (coolsim). coold acts on its alarms for real,
; but harmlessly: the shutdown command only logs that the host would power off now, and the
; containers it stops are those of the demo's private Docker Engine. The simulated host "powers
; off" in no time, hence the short halt_within. For a real controller: command = systemctl
; poweroff, docker_socket = /run/docker.sock, halt_within = 60s (see coold.conf.example).
EOF
        fi
        tail -n +3 "$tmp"
    } >"$ETC/coold.conf"
    rm -f "$tmp"
    say "wrote $ETC/coold.conf (device $device, drill = $drill, command '$command')"
}

# ---- running coold and coolsim ----

coolctl() { "$BIN/coolctl" --socket "$(conf_get socket)" "$@"; }

# Waits up to 20 s until coold answers with the controller link up (coolctl status exit 0).
wait_for_coold() {
    for _ in $(seq 100); do
        coolctl status >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    return 1
}

start_coolsim_bg() {
    mkdir -p "$SIMDIR" "$SIMSTATE"
    start_bg coolsim "$BIN/coolsim" --scenario "$1" --link "$SIM_LINK" \
        --eeprom "$SIMSTATE/eeprom" --report "$SIMDIR/report.json"
}

stop_stack() {
    if use_systemd; then
        systemctl stop coold.service coolsim.service
    else
        stop_bg coold
        stop_bg coolsim
    fi
}

# ---- gpumon ----

# gpumon keeps its pid file and log in its own folders.
stop_gpumon_bg() { RUNDIR=$GPUMON_RUNDIR LOGDIR=$GPUMON_LOGDIR stop_bg gpumon; }
start_gpumon_bg() {
    RUNDIR=$GPUMON_RUNDIR LOGDIR=$GPUMON_LOGDIR start_bg gpumon "$BIN/gpumon" \
        --config "$GPUMON_ETC/gpumon.conf"
}

gpumon_conf_get() { sed -n "s/^$1 *= *//p" "$GPUMON_ETC/gpumon.conf" | head -n 1; }

write_gpumon_config() {
    mkdir -p "$GPUMON_ETC"
    local nvml=()
    [ -z "$GPUMON_NVML_LIBRARY" ] ||
        nvml=(-e "s|^nvml_library =.*|nvml_library = $GPUMON_NVML_LIBRARY|")
    sed -e "s|^listen = .*|listen = $GPUMON_LISTEN|" "${nvml[@]}" deploy/gpumon.conf.example \
        >"$GPUMON_ETC/gpumon.conf.new"
    mv "$GPUMON_ETC/gpumon.conf.new" "$GPUMON_ETC/gpumon.conf"
    say "wrote $GPUMON_ETC/gpumon.conf (listen $GPUMON_LISTEN)"
}

# The address to scrape gpumon at: an empty host (all addresses) is reached on loopback.
gpumon_url() {
    local l
    l=$(gpumon_conf_get listen)
    [ "${l#:}" = "$l" ] || l=127.0.0.1$l
    echo "http://$l/metrics"
}

# Waits up to 10 s for gpumon's first answer, then says whether it sees GPUs.
report_gpumon() {
    local url out
    url=$(gpumon_url)
    for _ in $(seq 50); do
        out=$(curl -sf --max-time 2 "$url" 2>/dev/null) && break
        sleep 0.2
    done
    if [ -z "${out:-}" ]; then
        say "gpumon is not answering on $url yet; see its log"
    elif grep -q '^gpumon_up 1' <<<"$out"; then
        say "gpumon: $(sed -n 's/^gpumon_gpus //p' <<<"$out") GPU(s) on $url"
    else
        say "gpumon: no GPUs to watch here ($(sed -n 's/^gpumon_last_error_info{reason="\(.*\)"} 1$/\1/p' <<<"$out" | head -n 1)); it picks them up when a driver appears"
    fi
}

# ---- gpuq ----

# The config gpuqd runs with: /etc/gpunode/gpuqd.conf when it exists; else none, but under
# QUICKSTART_ROOT quickstart's own (write_gpuq_root_config). Prints nothing for none.
gpuq_config() {
    if [ -f "$GPUQ_CONF" ]; then
        echo "$GPUQ_CONF"
    elif [ -n "$R" ]; then
        echo "$GPUQ_RUNDIR/quickstart.conf"
    fi
}

# gpuqd's socket: its config's [gpuqd] socket (the only section with that key), else the default.
gpuq_socket() {
    local conf s=
    conf=$(gpuq_config)
    if [ -n "$conf" ] && [ -f "$conf" ]; then
        s=$(sed -n 's/^socket *= *\([^;]*\).*/\1/p' "$conf" | head -n 1 | sed 's/[[:space:]]*$//')
    fi
    echo "${s:-$GPUQ_RUNDIR/gpuq.sock}"
}

gpuq() { timeout 30 "$BIN/gpuq" --socket "$(gpuq_socket)" "$@"; }

# gpuqd's defaults with every path below QUICKSTART_ROOT; capsule (for container jobs) is the
# installed one there too.
write_gpuq_root_config() {
    mkdir -p "$GPUQ_RUNDIR"
    cat >"$GPUQ_RUNDIR/quickstart.conf" <<EOC
; Written by scripts/quickstart.sh at each start: gpuqd's defaults below $R.
[gpuqd]
socket = $GPUQ_RUNDIR/gpuq.sock
state_dir = $GPUQ_STATE
metrics_listen = $GPUQ_METRICS_LISTEN
audit_log = $R/var/log/gpunode/gpuq-audit.log
capsule = $BIN/capsule

[queue.default]
class = burstable
EOC
}

# /etc/default/gpuqd for the unit: --config when /etc/gpunode/gpuqd.conf exists. One that
# quickstart did not write is left as it is.
write_gpuqd_defaults() {
    if [ -f "$GPUQ_DEFAULTS" ] && ! grep -q "^$GPUQ_DEFAULTS_MARK" "$GPUQ_DEFAULTS"; then
        say "note: keeping $GPUQ_DEFAULTS (not quickstart's): the gpuqd unit takes its options from it"
        return 0
    fi
    local opts=
    [ ! -f "$GPUQ_CONF" ] || opts="--config $GPUQ_CONF"
    printf '%s at each run (delete this line to keep the file as you edit it).\nGPUQD_OPTS=%s\n' \
        "$GPUQ_DEFAULTS_MARK" "$opts" >"$GPUQ_DEFAULTS"
}

# The cgroup v2 hierarchy: /sys/fs/cgroup on a pure v2 host, its unified folder on a hybrid one.
cgroup_v2() {
    local d
    for d in /sys/fs/cgroup /sys/fs/cgroup/unified; do
        [ -f "$d/cgroup.subtree_control" ] && echo "$d" && return 0
    done
    return 1
}

cgroup_populated() { grep -q '^populated 1' "$1/cgroup.events" 2>/dev/null; }
# Removes a cgroup and those below it, the deepest first; ones still holding processes stay.
cgroup_remove() { [ ! -d "$1" ] || find "$1" -depth -type d -exec rmdir {} + 2>/dev/null || true; }

# The cgroup quickstart starts gpuqd in (its jobs' scopes go below it), as a systemd unit with
# Delegate=yes gets one; one per QUICKSTART_ROOT, so that trial trees do not share it.
gpuqd_cgroup_name() {
    if [ -z "$R" ]; then
        echo gpuqd.quickstart
    else
        echo "gpuqd.quickstart-$(printf '%s' "$R" | md5sum | cut -c1-8)"
    fi
}

# Prints gpuqd's cgroup, made ready for it; fails where it cannot have one: no cgroup v2, or
# systemd manages the tree (only a unit's delegated cgroup is then ours to change; gpuqd runs
# without job scopes and says so).
gpuqd_cgroup_prepare() {
    local v2 dir
    [ ! -d /run/systemd/system ] && v2=$(cgroup_v2) && [ -w "$v2" ] || return 1
    dir=$v2/$(gpuqd_cgroup_name)
    cgroup_populated "$dir" || cgroup_remove "$dir"
    # gpuqd runs in the leaf "daemon" (as DelegateSubgroup=daemon puts it) and its jobs' scopes
    # go beside it, so that the cgroup can hand the cpu and memory controllers to the jobs and a
    # restarted gpuqd can still enter its leaf while jobs run.
    mkdir -p "$dir/daemon" || return 1
    echo "$dir"
}

stop_gpuqd_bg() { RUNDIR=$GPUQ_RUNDIR LOGDIR=$GPUQ_LOGDIR stop_bg gpuqd; }

start_gpuqd_bg() {
    local conf cg argv=("$SBIN/gpuqd")
    [ -z "$R" ] || [ -f "$GPUQ_CONF" ] || write_gpuq_root_config
    conf=$(gpuq_config)
    [ -z "$conf" ] || argv+=(--config "$conf")
    # An installed gpuqd finds gpuq-run in /usr/local/libexec/gpunode; below a root it cannot.
    [ -z "$R" ] || argv+=(--run-program "$GPUQ_RUN_PROGRAM")
    [ -z "$GPUQ_NVML_LIBRARY" ] || argv+=(--nvml-library "$GPUQ_NVML_LIBRARY")
    # What the unit's LogsDirectory= and StateDirectory= make: gpuqd makes its state dir but not
    # the folders above it, nor the audit log's.
    mkdir -p "$GPUQ_RUNDIR" "$R/var/log/gpunode" "$(dirname "$GPUQ_STATE")"
    if cg=$(gpuqd_cgroup_prepare); then
        echo "$cg" >"$GPUQ_RUNDIR/gpuqd.cgroup"
        # shellcheck disable=SC2016 # expanded by sh: its own pid, then gpuqd in its place
        RUNDIR=$GPUQ_RUNDIR LOGDIR=$GPUQ_LOGDIR start_bg gpuqd \
            sh -c 'echo $$ >"$0/daemon/cgroup.procs" && exec "$@"' "$cg" "${argv[@]}"
        say "gpuqd runs in cgroup $cg; its jobs' scopes go below it"
    else
        rm -f "$GPUQ_RUNDIR/gpuqd.cgroup"
        RUNDIR=$GPUQ_RUNDIR LOGDIR=$GPUQ_LOGDIR start_bg gpuqd "${argv[@]}"
    fi
}

# After gpuqd stopped in the background: its cgroup goes too once no job is left in it.
remove_gpuqd_cgroup() {
    local cg
    [ -f "$GPUQ_RUNDIR/gpuqd.cgroup" ] || return 0
    cg=$(cat "$GPUQ_RUNDIR/gpuqd.cgroup")
    cgroup_populated "$cg" && return 0
    cgroup_remove "$cg"
    rm -f "$GPUQ_RUNDIR/gpuqd.cgroup"
}

# How many jobs run (or are stopping) now; nothing when gpuqd does not answer.
gpuq_running_jobs() {
    gpuq ls --json 2>/dev/null | "$PYTHON" -c 'import json, sys
print(sum(j.get("state") in ("RUNNING", "STOPPING") for j in json.load(sys.stdin)["jobs"]))' \
        2>/dev/null || true
}

# The gpuq command as the user types it here.
gpuq_cmd() {
    local sock
    sock=$(gpuq_socket)
    if [ -n "$R" ]; then
        echo "$BIN/gpuq --socket $sock"
    elif [ "$sock" != /run/gpuq/gpuq.sock ]; then
        echo "gpuq --socket $sock"
    else
        echo gpuq
    fi
}

# Waits up to 20 s for gpuqd's first answer, then says what it schedules.
report_gpuq() {
    local out=
    for _ in $(seq 100); do
        out=$(gpuq queues --json 2>/dev/null) && break
        out=
        sleep 0.2
    done
    if [ -z "$out" ]; then
        say "gpuqd is not answering on $(gpuq_socket) yet; see its log"
        return 0
    fi
    "$PYTHON" -c 'import json, sys
q, gq = json.loads(sys.argv[1]), sys.argv[2]
names = ", ".join(x["name"] for x in q["queues"])
n = q["gpus_total"]
if n:
    line = (f"gpuq: {n} GPU(s) and MIG instance(s) to schedule (queues: {names}); "
            f"try: {gq} submit --gpus 1 -- nvidia-smi -L")
else:
    line = (f"gpuq: no GPUs to schedule here (gpuqd found no driver; see its log), jobs without "
            f"GPUs still run (queues: {names}); try: {gq} submit -- hostname")
if q.get("drained"):
    line += f"; the node is drained: {gq} resume"
print("quickstart: " + line)' "$out" "$(gpuq_cmd)"
}

# Says what a stop of gpuqd leaves running: its jobs, by design.
report_gpuq_stop() {
    local running=$1 gq
    gq=$(gpuq_cmd)
    # Nothing to say when gpuqd was not answering.
    [ -n "$running" ] || return 0
    if [ "$running" -gt 0 ]; then
        say "gpuq: $running running job(s) keep running without gpuqd (a stop of gpuqd never stops jobs; it picks them up again when it starts). To stop them too, first: $gq drain --wait 5m (they checkpoint and go back to the queue; $gq resume once gpuqd runs again) or $gq cancel ID"
    else
        say "gpuq: no job was running (a stop of gpuqd never stops jobs: '$gq drain' stops them first)"
    fi
}

# ---- capsule-cached ----

# A [cache] key of capsule-cached's config, else the service's default ($2).
cached_conf_get() {
    local v=
    if [ -f "$CACHED_CONF" ]; then
        v=$(sed -n "s/^$1 *= *\([^;]*\).*/\1/p" "$CACHED_CONF" | head -n 1 | sed 's/[[:space:]]*$//')
    fi
    echo "${v:-$2}"
}
cached_dir() { cached_conf_get dir /var/cache/capsule; }
cached_socket() { cached_conf_get socket /run/capsule/cache.sock; }

# The example with the store and the socket below QUICKSTART_ROOT.
write_cached_root_config() {
    mkdir -p "$(dirname "$CACHED_CONF")"
    {
        echo "; Written by scripts/quickstart.sh: capsule-cached's paths below $R."
        sed -e "s|^;dir = .*|dir = $R/var/cache/capsule|" \
            -e "s|^;socket = .*|socket = $R/run/capsule/cache.sock|" \
            deploy/capsule-cached.conf.example
    } >"$CACHED_CONF.new"
    mv "$CACHED_CONF.new" "$CACHED_CONF"
    say "wrote $CACHED_CONF (store $(cached_dir), socket $(cached_socket))"
}

# The system account the service runs as, with a group of its own (the unit's Group=).
make_cached_account() {
    getent passwd capsule-cache >/dev/null && return 0
    local group=(--user-group)
    getent group capsule-cache >/dev/null && group=(--gid capsule-cache)
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
        "${group[@]}" capsule-cache
    say "made the system account capsule-cache, which capsule-cached runs as"
}

# AS_CACHED: the command prefix that runs a program as the service's account.
cached_as_account() {
    AS_CACHED=(setpriv "--reuid=$CACHED_USER" "--regid=$(id -g "$CACHED_USER")" --init-groups --)
}

# What the unit's CacheDirectory= and RuntimeDirectory= make, for the background: the store and
# the socket's folder, the account's (the service makes its layout inside the store). A socket
# configured elsewhere than in /run/capsule needs its folder made by whoever configured it: a
# shared folder such as /run must never become the account's. Fails, after saying why, where
# the account cannot reach them.
cached_dirs_prepare() {
    local dir sock group
    if ! getent passwd "$CACHED_USER" >/dev/null; then
        say "note: capsule-cached not started: there is no account $CACHED_USER to run it as"
        return 1
    fi
    dir=$(cached_dir)
    sock=$(cached_socket)
    group=$(id -gn "$CACHED_USER")
    install -d -m 0711 -o "$CACHED_USER" -g "$group" "$dir"
    if [ "$(dirname "$sock")" = "$R/run/capsule" ]; then
        install -d -m 0755 -o "$CACHED_USER" -g "$group" "$R/run/capsule"
    fi
    cached_as_account
    "${AS_CACHED[@]}" test -x "$SBIN/capsule-cached" -a -w "$dir" -a -w "$(dirname "$sock")" &&
        return 0
    say "note: capsule-cached not started: $CACHED_USER cannot reach $SBIN/capsule-cached, $dir and $(dirname "$sock")${R:+ (every folder above $R must be open to all)}"
    return 1
}

stop_cached_bg() { RUNDIR=$CACHED_RUNDIR LOGDIR=$CACHED_LOGDIR stop_bg capsule-cached; }

# Starts capsule-cached in the background as its account; fails where it cannot run.
start_cached_bg() {
    local argv=("$SBIN/capsule-cached")
    [ -z "$R" ] || argv+=(--config "$CACHED_CONF")
    cached_dirs_prepare || return 1
    RUNDIR=$CACHED_RUNDIR LOGDIR=$CACHED_LOGDIR start_bg capsule-cached "${AS_CACHED[@]}" \
        "${argv[@]}"
}

# The node_cache that /etc/capsule.conf names, if any.
capsule_conf_node_cache() {
    [ -f "$CAPSULE_CONF" ] || return 0
    sed -n 's/^[[:space:]]*node_cache[[:space:]]*=[[:space:]]*//p' "$CAPSULE_CONF" | head -n 1 |
        sed 's/[[:space:]]*$//'
}

# /etc/capsule.conf: written when missing, so that every user's capsule pulls through the node
# cache; one that is there is the administrator's and stays as it is.
write_capsule_conf() {
    local sock have
    sock=$(cached_socket)
    if [ ! -f "$CAPSULE_CONF" ]; then
        mkdir -p "$(dirname "$CAPSULE_CONF")"
        cat >"$CAPSULE_CONF" <<EOF
; capsule's settings for every user of this node (docs/capsule.md; every key with its default:
; deploy/capsule.conf.example). Written by scripts/quickstart.sh.
[capsule]
; Pulls go through the node cache (capsule-cached): each image is downloaded and unpacked once
; for the whole node, with each user's own registry credentials. Without this line every user
; has a cache of their own.
node_cache = $sock
EOF
        say "wrote $CAPSULE_CONF (node_cache = $sock)"
        return 0
    fi
    have=$(capsule_conf_node_cache)
    if [ -z "$have" ]; then
        say "note: keeping $CAPSULE_CONF, which has no node_cache: users' capsule keeps a cache per user. To pull through the node cache, add 'node_cache = $sock' to its [capsule] section"
    elif [ "$have" != "$sock" ]; then
        say "note: $CAPSULE_CONF has node_cache = $have, but capsule-cached listens on $sock"
    fi
}

# Waits up to 10 s for capsule-cached's first answer, then says what it holds.
report_cached() {
    local sock out=
    sock=$(cached_socket)
    for _ in $(seq 50); do
        out=$(curl -sf --max-time 2 --unix-socket "$sock" http://capsule/v1/images 2>/dev/null) &&
            break
        out=
        sleep 0.2
    done
    if [ -z "$out" ]; then
        say "capsule-cached is not answering on $sock yet; see its log"
        return 0
    fi
    say "capsule-cached: node cache $(cached_dir) with $("$PYTHON" -c 'import json, sys
print(len(json.loads(sys.argv[1])))' "$out") image(s), on $sock"
}

# The capsule command as a user types it here; below a root it reads that root's capsule.conf
# and finds its helper, which an installed capsule looks for in /usr/local.
capsule_cmd() {
    if [ -n "$R" ]; then
        echo "CAPSULE_PULL=$R/usr/local/libexec/gpunode/capsule-pull $BIN/capsule --config $CAPSULE_CONF"
    else
        echo capsule
    fi
}

# ---- stop ----

quickstart_stop() {
    local running
    running=$(gpuq_running_jobs)
    if use_systemd; then
        # coold (After=gpuqd.service) stops before gpuqd.
        systemctl stop gpumon.service capsule-cached.service coold.service gpuqd.service \
            coolsim.service gpunode-demo-docker.service 2>/dev/null || true
        say "stopped gpumon.service, capsule-cached.service, coold.service, gpuqd.service, coolsim.service and gpunode-demo-docker.service"
    else
        stop_gpumon_bg
        stop_cached_bg
        stop_bg coold
        stop_gpuqd_bg
        remove_gpuqd_cgroup
        stop_bg coolsim
        # dockerd stops the demo container first (it checkpoints), then itself.
        stop_bg demo-dockerd dockerd 30
        stop_bg dockerd dockerd 30
    fi
    report_gpuq_stop "$running"
    if [ "$(capsule_conf_node_cache)" = "$(cached_socket)" ]; then
        say "capsule: pulls fail while capsule-cached is stopped ($CAPSULE_CONF names its socket in node_cache); run ${R:+QUICKSTART_ROOT=$R }$0 again to start it"
    fi
}

# ---- the pump-failure demo ----

# The live view: every second, one line from `coolctl --json status`, until coolsim (pid argv[2])
# has ended. argv[1] is coolsim's start (epoch seconds), argv[3:] the coolctl command.
VIEW_PY='
import json, os, subprocess, sys, time
start, pid, ctl = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
def alive():
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
def line(t):
    out = subprocess.run(ctl + ["--json", "status"], capture_output=True, text=True).stdout
    try:
        s = json.loads(out)
    except ValueError:
        return f"{t:4d}s  coold not answering"
    tel = s.get("telemetry") or {}
    pumps = "/".join(str(p["rpm"]) for p in tel.get("pumps", [])) + " rpm"
    level = tel.get("level", "-")
    if tel.get("reason", "none") != "none":
        level += "/" + tel["reason"]
    cut = tel.get("cut_in_seconds")
    cut = "-" if cut is None else "in %.0f s" % cut
    if tel.get("halt"):
        cut += ", HALT"
    link = s["controller"]["link"]
    link = "" if link == "up" else f"  (link {link})"
    safety, stage = s["safety"]["state"], s["shutdown"]["stage"]
    return f"{t:4d}s  {pumps:<15} {level:<25} {cut:<14} {safety:<14} {stage}{link}"
print("%5s  %-15s %-25s %-14s %-14s %s" % ("time", "pumps", "controller level", "power cut",
                                           "coold safety", "shutdown stage"), flush=True)
t = max(0, int(time.time() - start))
try:
    while alive():
        print(line(t), flush=True)
        t += 1
        while alive() and time.time() < start + t:
            time.sleep(0.05)
except (KeyboardInterrupt, BrokenPipeError):
    sys.exit(130)
'

# Prints coolsim's verdict from its report and exit status; returns 0 when it was clean.
VERDICT_PY='
import json, sys
path, rc = sys.argv[1], int(sys.argv[2])
try:
    with open(path) as f:
        r = json.load(f)
except (OSError, ValueError) as e:
    print(f"FAIL  coolsim: no report ({e}), exit {rc}")
    sys.exit(1)
cut, halt, end = r.get("cut_at_s"), r.get("halt_at_s"), r.get("end")
if r["power_cut"] and r["orderly"] and rc == 0:
    print(f"ok    coolsim: power cut orderly: the host had said HALT (HALT at {halt:.1f} s,"
          f" cut at {cut:.1f} s); exit {rc}")
    sys.exit(0)
if r["power_cut"] and not r["orderly"]:
    print(f"FAIL  coolsim: power cut at {cut:.1f} s under a host that never said HALT; exit {rc}")
elif not r["power_cut"]:
    print(f"FAIL  coolsim: ended ({end}) without a power cut; exit {rc}")
else:
    print(f"FAIL  coolsim: exit {rc}")
sys.exit(1)
'

DEMO_SIM_PID=

count_lines() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }

# Puts the stack back as quickstart leaves it: coolsim `normal`, a fresh coold (the simulated host
# came back after its power cut), the demo container running again.
demo_restore() {
    if [ -n "$DEMO_SIM_PID" ] && kill -0 "$DEMO_SIM_PID" 2>/dev/null; then
        kill -TERM "$DEMO_SIM_PID"
        wait "$DEMO_SIM_PID" 2>/dev/null || true
    fi
    DEMO_SIM_PID=
    if use_systemd; then
        systemctl start coolsim.service
        systemctl restart coold.service
    else
        stop_bg coold >/dev/null
        rm -f "$RUNDIR/coolsim.pid"
        start_coolsim_bg "$SCENARIO" >/dev/null
        start_bg coold "$SBIN/coold" --config "$ETC/coold.conf" >/dev/null
    fi
    start_demo_workload
    wait_for_coold || say "coold is not answering yet; see its log"
    # coold drained gpuqd at its first stage; the simulated host is back, so is the queue.
    gpuq resume >/dev/null 2>&1 || true
}

demo_interrupted() {
    trap - INT TERM
    echo
    say "interrupted: putting the normal simulator back"
    demo_restore
    exit 130
}

demo_preflight() {
    [ -z "${COOLD_DEVICE:-}" ] ||
        die "COOLD_DEVICE is set: the demo plays a pump failure on the simulator only, never on a real controller"
    [ "$(id -u)" -eq 0 ] || die "run as root: the demo restarts coold and coolsim"
    if [ ! -x "$SBIN/coold" ] || [ ! -f "$ETC/coold.conf" ]; then
        die "nothing installed yet: run ${R:+QUICKSTART_ROOT=$R }$0 first"
    fi
    [ "$(conf_get device)" = "$SIM_LINK" ] ||
        die "$ETC/coold.conf names a real controller ($(conf_get device)): the demo only drives the simulator"
    local problems
    problems=$(demo_config_problems)
    [ -z "$problems" ] || die "$ETC/coold.conf is not set up for the demo:
$(sed 's/^/  /' <<<"$problems")
A pump failure would then not end in a clean stop. Move the file away and run
${R:+QUICKSTART_ROOT=$R }$0 again to have it written for the simulator."
}

demo_start_sim() {
    mkdir -p "$SIMDIR" "$SIMSTATE" "$LOGDIR"
    rm -f "$DEMO_REPORT"
    # A safety net only: the scenario ends with the power cut well before --duration.
    setsid "$BIN/coolsim" --scenario pump-failure --link "$SIM_LINK" --duration 240 \
        --eeprom "$SIMSTATE/eeprom" --report "$DEMO_REPORT" \
        </dev/null >>"$LOGDIR/coolsim-demo.log" 2>&1 &
    DEMO_SIM_PID=$!
    use_systemd || { mkdir -p "$RUNDIR" && echo "$DEMO_SIM_PID" >"$RUNDIR/coolsim.pid"; }
    for _ in $(seq 50); do
        [ -e "$SIM_LINK" ] && return 0
        sleep 0.1
    done
    die "coolsim did not start; see $LOGDIR/coolsim-demo.log"
}

# Prints the outcome; returns 0 when the stop was clean.
demo_outcome() {
    local rc=$1 bad=0 state runs
    echo
    echo "coold's events (coolctl events):"
    coolctl events 2>&1 | sed 's/^/  /'
    echo
    echo "Outcome:"
    if [ -s "$DEMO_CKPT/checkpoint" ]; then
        echo "ok    checkpoint written by the container on SIGTERM: $DEMO_CKPT/checkpoint ($(cat "$DEMO_CKPT/checkpoint"))"
    else
        echo "FAIL  no checkpoint in $DEMO_CKPT"
        bad=1
    fi
    state=$(ddocker inspect -f '{{.State.Running}} {{.State.ExitCode}}' "$DEMO_CONTAINER" 2>&1 || true)
    if [ "$state" = "false 0" ]; then
        echo "ok    demo container $DEMO_CONTAINER stopped by coold (exit 0, after its checkpoint)"
    else
        echo "FAIL  demo container $DEMO_CONTAINER: running/exit code '$state'"
        bad=1
    fi
    runs=$(($(count_lines "$DEMO_HALT_LOG") - DEMO_HALT_BEFORE))
    if [ "$runs" -eq 1 ]; then
        echo "ok    shutdown command ran once: $(tail -n 1 "$DEMO_HALT_LOG")"
    else
        echo "FAIL  shutdown command ran $runs times (log $DEMO_HALT_LOG)"
        bad=1
    fi
    "$PYTHON" -c "$VERDICT_PY" "$DEMO_REPORT" "$rc" || bad=1
    echo
    if [ $bad -eq 0 ]; then
        echo "Clean stop: the workload checkpointed and stopped, coold told the controller HALT and"
        echo "ran its shutdown command once, and power was cut only after HALT."
    else
        echo "NOT a clean stop; logs: ${LOGDIR}/ (coold.log, coolsim-demo.log)"
    fi
    return $bad
}

quickstart_demo() {
    demo_preflight
    start_demo_engine
    import_demo_image
    say "pump-failure demo: restarting coold and the demo container, coolsim plays pump-failure"
    stop_stack >/dev/null
    rm -f "$DEMO_CKPT/checkpoint"
    DEMO_HALT_BEFORE=$(count_lines "$DEMO_HALT_LOG")
    start_demo_workload
    trap demo_interrupted INT TERM
    local start rc=0 clean=0
    start=$(date +%s.%N)
    demo_start_sim
    if use_systemd; then
        systemctl start coold.service
    else
        start_bg coold "$SBIN/coold" --config "$ETC/coold.conf" >/dev/null
    fi
    wait_for_coold || say "coold is not answering yet; see its log"
    cat <<EOF

The last pump stops 5 s in. The controller raises a precritical alarm and will cut the power
30 s later. coold drains gpuq (running jobs get their checkpoint signal and go back to the
queue), stops the demo container (it checkpoints), tells the controller HALT (host off within
$(conf_get halt_within)) and runs its shutdown command, which here powers nothing off. Then the
simulated controller cuts the power, as it would a real host's.

EOF
    # In the background so that a signal interrupts the wait at once (demo_interrupted); the view
    # ends by itself when coolsim does.
    "$PYTHON" -c "$VIEW_PY" "$start" "$DEMO_SIM_PID" "$BIN/coolctl" --socket "$(conf_get socket)" &
    wait $! || true
    wait "$DEMO_SIM_PID" || rc=$?
    DEMO_SIM_PID=
    echo "coolsim ended: $(grep -E '^(power cut|no power cut)' "$LOGDIR/coolsim-demo.log" |
        tail -n 1)"
    demo_outcome "$rc" || clean=1
    trap - INT TERM
    echo
    say "the simulated host is back: the normal simulator, a fresh coold and the demo container run again, gpuq admits jobs again"
    demo_restore
    return $clean
}

# ---- main ----

case "${1:-}" in
    --stop)
        quickstart_stop
        exit 0
        ;;
    demo)
        quickstart_demo
        exit
        ;;
    --build-info)
        # Which build this script installs, and as what build type: "build-release release".
        if [ -n "${QUICKSTART_BUILD:-}" ]; then
            echo "$BUILD (as set up)"
        else
            echo "$BUILD $BUILDTYPE"
        fi
        exit 0
        ;;
    "") ;;
    *) die "usage: $0 [demo | --stop | --build-info]" ;;
esac
[ "$(id -u)" -eq 0 ] || die "run as root: it installs packages and programs and starts daemons"

# ---- 1. dependencies, build, install ----
[ -n "${QUICKSTART_SKIP_DEPS:-}" ] || scripts/install-deps.sh
build_option() {
    meson introspect "$BUILD" --buildoptions | "$PYTHON" -c 'import json,sys
print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == sys.argv[1]))' "$1"
}
if [ ! -f "$BUILD/build.ninja" ]; then
    meson setup "$BUILD" --prefix=/usr/local "-Dbuildtype=$BUILDTYPE" >/dev/null
elif [ -z "${QUICKSTART_BUILD:-}" ] && [ "$(build_option buildtype)" != "$BUILDTYPE" ]; then
    meson configure "$BUILD" "-Dbuildtype=$BUILDTYPE" >/dev/null
fi
prefix=$(build_option prefix)
[ "$prefix" = /usr/local ] || die "$BUILD/ has prefix $prefix; quickstart installs to /usr/local"
say "building $BUILD/ ($(build_option buildtype) build)"
ninja -C "$BUILD" >/dev/null || ninja -C "$BUILD"
DESTDIR=$R meson install -C "$BUILD" --no-rebuild --quiet
install -D -m 0755 deploy/coolant-demo-halt "$DEMO_HALT"
for prog in "$SBIN/coold" "$BIN/coolctl" "$BIN/coolsim" "$BIN/gpumon" "$BIN/capsule" \
    "$SBIN/capsule-cached" "$SBIN/gpuqd" "$BIN/gpuq" "$GPUQ_RUN_PROGRAM"; do
    [ -x "$prog" ] || die "meson install did not install $prog"
done
say "installed coold, coolctl, coolsim, gpumon, capsule, capsule-cached, gpuqd, gpuq, gpuq-run (libexec/gpunode), coolant-demo-halt under $R/usr/local"

# ---- 2. configuration ----
mkdir -p "$ETC/hooks.d" "$LOGDIR"
[ -f "$GPUMON_ETC/gpumon.conf" ] || write_gpumon_config
[ -z "$R" ] || [ -f "$CACHED_CONF" ] || write_cached_root_config
if [ ! -f "$ETC/coold.conf" ]; then
    write_config
elif [ -n "${COOLD_DEVICE:-}" ] && [ "$(conf_get device)" != "$COOLD_DEVICE" ]; then
    say "note: keeping $ETC/coold.conf, which names $(conf_get device); COOLD_DEVICE only goes into a new one (move the file away first)"
fi
simulated=no
[ "$(conf_get device)" = "$SIM_LINK" ] && simulated=yes
socket=$(conf_get socket)
listen=$(conf_get listen)

# ---- 3. start ----
cached=no
if [ $simulated = yes ]; then
    if use_systemd; then
        install -m 0644 deploy/systemd/gpunode-demo-docker.service /etc/systemd/system/
        systemctl daemon-reload
    fi
    start_demo_engine
    import_demo_image
    start_demo_workload keep
    say "demo Docker Engine on $DEMO_SOCK, container $DEMO_CONTAINER running"
fi
if use_systemd; then
    # gpuqd first: coold (After=gpuqd.service) drains it at the first shutdown stage. A restart
    # never stops running jobs.
    install -m 0644 deploy/systemd/gpuqd.service /etc/systemd/system/
    write_gpuqd_defaults
    systemctl daemon-reload
    systemctl enable --quiet gpuqd.service
    systemctl restart gpuqd.service
    install -m 0644 deploy/systemd/coold.service deploy/systemd/coolsim.service /etc/systemd/system/
    if [ "$SCENARIO" != normal ] || [ ! -f /etc/default/coolsim ]; then
        echo "COOLSIM_SCENARIO=$SCENARIO" >/etc/default/coolsim
    fi
    systemctl daemon-reload
    if [ $simulated = no ] && systemctl list-unit-files docker.service >/dev/null 2>&1 &&
        ! systemctl is-active --quiet docker.service; then
        systemctl start docker.service || say "docker.service did not start: no containers to stop"
    fi
    if [ $simulated = yes ]; then
        systemctl enable --quiet coolsim.service
        systemctl restart coolsim.service
    fi
    systemctl enable --quiet coold.service
    systemctl restart coold.service
    install -m 0644 deploy/systemd/gpumon.service /etc/systemd/system/
    systemctl daemon-reload
    systemctl enable --quiet gpumon.service
    systemctl restart gpumon.service
    make_cached_account
    install -m 0644 deploy/systemd/capsule-cached.service /etc/systemd/system/
    systemctl daemon-reload
    systemctl enable --quiet capsule-cached.service
    systemctl restart capsule-cached.service
    cached=yes
    say "started with systemd: gpuqd.service, gpumon.service, capsule-cached.service, coold.service$([ $simulated = no ] || echo ', coolsim.service, gpunode-demo-docker.service')"
else
    if [ -z "$R" ] && [ $simulated = no ] && ! engine_up /run/docker.sock; then
        start_bg dockerd dockerd
        # A host without iptables or bridges (a container, a minimal VM) needs the plain setup.
        if ! timeout 20 sh -c 'until curl -sf -o /dev/null --unix-socket /run/docker.sock \
                http://docker/_ping; do sleep 0.5; done'; then
            stop_bg dockerd dockerd 30
            say "dockerd did not come up with defaults; trying without iptables and bridge"
            start_bg dockerd dockerd --iptables=false --ip6tables=false --bridge=none
        fi
    fi
    stop_bg coold
    stop_bg coolsim
    # gpuqd first, as under systemd: coold drains it. Its jobs run on across the restart.
    stop_gpuqd_bg
    start_gpuqd_bg
    [ $simulated = no ] || start_coolsim_bg "$SCENARIO"
    start_bg coold "$SBIN/coold" --config "$ETC/coold.conf"
    stop_gpumon_bg
    start_gpumon_bg
    [ -n "$R" ] || make_cached_account
    stop_cached_bg
    start_cached_bg && cached=yes
fi
# Users' capsule pulls through the node cache once it runs.
[ $cached = no ] || write_capsule_conf

# ---- 4. wait, then tell how to look ----
wait_for_coold || true
coolctl status || say "coold is not answering yet; see its log"
report_gpumon
report_gpuq
[ $cached = no ] || report_cached

ctl="coolctl"
[ "$socket" = /run/coold/coold.sock ] || ctl="coolctl --socket $socket"
[ -z "$R" ] || ctl="$BIN/$ctl"
rerun="${R:+QUICKSTART_ROOT=$R }$0"
gq=$(gpuq_cmd)
if use_systemd; then
    logs="journalctl -u coold -u coolsim -u gpumon -u gpuqd -u capsule-cached -f"
else
    logs="tail -f $LOGDIR/coold.log $LOGDIR/coolsim.log $GPUMON_LOGDIR/gpumon.log $GPUQ_LOGDIR/gpuqd.log"
    [ $cached = no ] || logs+=" $CACHED_LOGDIR/capsule-cached.log"
fi
node_cache=
if [ $cached = yes ] && [ "$(capsule_conf_node_cache)" = "$(cached_socket)" ]; then
    node_cache="
  $(capsule_cmd) images --node   # the node cache: each image pulled once for every user"
elif [ $cached = yes ]; then
    node_cache="
  curl -s --unix-socket $(cached_socket) http://capsule/v1/images   # the node cache's images"
fi
cat <<EOF

Running. Look at it:
  $ctl status        # controller, temperatures, pumps, safety state
  $ctl events        # alarms, link changes, shutdown stages
  curl -s http://$listen/metrics | grep ^coold_
  curl -s $(gpumon_url) | grep -E '^(gpumon_up|DCGM_FI_DEV_GPU_UTIL|DCGM_FI_DEV_FB_USED)'
  $gq submit --gpus 1 -- nvidia-smi -L   # as any user; then: $gq ls, $gq logs -f ID
  $gq queues         # queues, quotas, what runs (docs/gpuq.md)$node_cache
  $logs

Rehearse the emergency stop: every stage runs, but no container is stopped, no HALT is sent
and no shutdown command runs:
  $ctl drill
EOF
if [ $simulated = yes ]; then
    problems=$(demo_config_problems)
    if [ -z "$problems" ]; then
        cat <<EOF

Watch a simulated pump failure end in a clean stop: coold stops the demo container (it
checkpoints), tells the controller HALT and runs its shutdown command, which on the simulator only
logs "simulated host: coold would power off now" (in $DEMO_HALT_LOG); about 40 s:
  $rerun demo
EOF
    else
        cat <<EOF
$ETC/coold.conf was not written for the simulator demo:
$(sed 's/^/  /' <<<"$problems")
Move it away and run $rerun again to get one, then '$rerun demo'.
EOF
    fi
else
    cat <<EOF
A real controller is configured: a pump failure stops this host's containers and runs
'$(conf_get command)'. To make every alarm a rehearsal, set drill = yes in
$ETC/coold.conf (or run coold --drill). 'quickstart.sh demo' needs the simulator.
EOF
fi
