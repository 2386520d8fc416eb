#!/usr/bin/env bash
# Installs, builds and starts the gpunode cooling stack on this machine:
#   dependencies -> build/ -> meson install (/usr/local) -> /etc/coold/coold.conf (written when
#   missing) -> coolsim (unless a real controller is configured) + coold (+ dockerd when none
#   runs). Under systemd the units in deploy/systemd/ are installed and started; otherwise the
#   programs run in the background with logs in /var/log/coold/ and pid files in /run/coold/.
#
#   scripts/quickstart.sh                       start (again: restarts with the new binaries)
#   scripts/quickstart.sh --stop                stop what it started (background mode)
#   COOLD_DEVICE=/dev/ttyACM0 scripts/quickstart.sh   use a real controller, no simulator
#   COOLSIM_SCENARIO=pump-failure scripts/quickstart.sh   run the simulator with a scenario
#
# QUICKSTART_ROOT=/tmp/x puts everything (install, /etc, /var/log, /run) under that dir, never
# uses systemd or starts dockerd, and takes the metrics port from COOLD_METRICS_LISTEN: a dry
# run that touches nothing outside the dir.
set -euo pipefail

cd "$(dirname "$0")/.."
R=${QUICKSTART_ROOT:-}
BUILD=${QUICKSTART_BUILD:-build}
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

stop_bg() {
    local name=$1 pid
    if pid=$(live_pid "$RUNDIR/$name.pid" "$name"); then
        kill -TERM "$pid"
        for _ in $(seq 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
        say "stopped $name (pid $pid)"
    fi
    rm -f "$RUNDIR/$name.pid"
}

start_bg() {
    local name=$1
    shift
    mkdir -p "$LOGDIR" "$RUNDIR"
    setsid "$@" </dev/null >>"$LOGDIR/$name.log" 2>&1 &
    echo $! >"$RUNDIR/$name.pid"
    say "started $name (pid $!), log $LOGDIR/$name.log"
}

if [ "${1:-}" = "--stop" ]; then
    if use_systemd; then
        systemctl stop coold.service coolsim.service 2>/dev/null || true
        say "stopped coold.service and coolsim.service"
    else
        stop_bg coold
        stop_bg coolsim
        stop_bg dockerd
    fi
    exit 0
fi
[ $# -eq 0 ] || die "usage: $0 [--stop]"
[ "$(id -u)" -eq 0 ] || die "run as root: it installs packages and programs and starts daemons"

# ---- 1. dependencies, build, install ----
scripts/install-deps.sh
if [ ! -f "$BUILD/build.ninja" ]; then
    meson setup "$BUILD" --prefix=/usr/local >/dev/null
fi
say "building $BUILD/"
ninja -C "$BUILD" >/dev/null || ninja -C "$BUILD"
DESTDIR=$R meson install -C "$BUILD" --no-rebuild --quiet
say "installed coold, coolctl, coolsim under $R/usr/local"

# ---- 2. configuration ----
mkdir -p "$ETC/hooks.d" "$LOGDIR"
if [ -n "$R" ]; then
    admin_group=root
else
    admin_group=coolant
    getent group coolant >/dev/null || groupadd --system coolant
fi
if [ ! -f "$ETC/coold.conf" ]; then
    if [ -n "${COOLD_DEVICE:-}" ]; then
        device=$COOLD_DEVICE drill=no
    else
        # Against the simulator, an alarm is rehearsed, never acted on: a simulated pump
        # failure must not power this machine off.
        device=$SIM_LINK drill=yes
    fi
    sed -e "s|^device = .*|device = $device|" \
        -e "s|^listen = .*|listen = $METRICS|" \
        -e "s|^socket = .*|socket = $RUNDIR/coold.sock|" \
        -e "s|^admin_group = .*|admin_group = $admin_group|" \
        -e "s|^audit_log = .*|audit_log = $LOGDIR/audit.log|" \
        -e "s|^hooks_dir = .*|hooks_dir = $ETC/hooks.d|" \
        -e "s|^drill = .*|drill = $drill|" \
        deploy/coold.conf.example >"$ETC/coold.conf"
    use_systemd || sed -i "s|^command = .*|command = poweroff|" "$ETC/coold.conf"
    say "wrote $ETC/coold.conf (device $device, drill = $drill)"
fi
device=$(sed -n 's/^device *= *//p' "$ETC/coold.conf" | head -n 1)
simulated=no
[ "$device" = "$SIM_LINK" ] && simulated=yes
socket=$(sed -n 's/^socket *= *//p' "$ETC/coold.conf" | head -n 1)
listen=$(sed -n 's/^listen *= *//p' "$ETC/coold.conf" | head -n 1)

# ---- 3. start ----
if use_systemd; then
    install -m 0644 deploy/systemd/coold.service deploy/systemd/coolsim.service /etc/systemd/system/
    if [ "$SCENARIO" != normal ] || [ ! -f /etc/default/coolsim ]; then
        echo "COOLSIM_SCENARIO=$SCENARIO" >/etc/default/coolsim
    fi
    systemctl daemon-reload
    if systemctl list-unit-files docker.service >/dev/null 2>&1 &&
        ! systemctl is-active --quiet docker.service; then
        systemctl start docker.service || say "docker.service did not start: no containers to stop"
    fi
    if [ $simulated = yes ]; then
        systemctl enable --quiet coolsim.service
        systemctl restart coolsim.service
    fi
    systemctl enable --quiet coold.service
    systemctl restart coold.service
    say "started with systemd: coold.service$([ $simulated = no ] || echo ' and coolsim.service')"
else
    if [ -z "$R" ] && ! pgrep -x dockerd >/dev/null; then
        start_bg dockerd dockerd
        # A host without iptables or bridges (a container, a minimal VM) needs the plain setup.
        if ! timeout 20 sh -c \
            'until docker -H unix:///run/docker.sock info >/dev/null 2>&1; do sleep 0.5; done'; then
            stop_bg dockerd
            say "dockerd did not come up with defaults; trying without iptables and bridge"
            start_bg dockerd dockerd --iptables=false --ip6tables=false --bridge=none
        fi
    fi
    stop_bg coold
    stop_bg coolsim
    if [ $simulated = yes ]; then
        mkdir -p "$SIMDIR" "$SIMSTATE"
        start_bg coolsim "$BIN/coolsim" --scenario "$SCENARIO" --link "$SIM_LINK" \
            --eeprom "$SIMSTATE/eeprom" --report "$SIMDIR/report.json"
    fi
    start_bg coold "$SBIN/coold" --config "$ETC/coold.conf"
fi

# ---- 4. wait, then tell how to look ----
for _ in $(seq 100); do
    [ -S "$socket" ] && "$BIN/coolctl" --socket "$socket" status >/dev/null 2>&1 && break
    sleep 0.2
done
"$BIN/coolctl" --socket "$socket" status || say "coold is not answering yet; see its log"

ctl="coolctl"
[ "$socket" = /run/coold/coold.sock ] || ctl="coolctl --socket $socket"
[ -z "$R" ] || ctl="$BIN/$ctl"
if use_systemd; then
    logs="journalctl -u coold -u coolsim -f"
    rehearse="echo COOLSIM_SCENARIO=pump-failure > /etc/default/coolsim; systemctl restart coolsim"
    back="echo COOLSIM_SCENARIO=normal > /etc/default/coolsim; systemctl restart coolsim"
else
    logs="tail -f $LOGDIR/coold.log $LOGDIR/coolsim.log"
    rehearse="COOLSIM_SCENARIO=pump-failure ${R:+QUICKSTART_ROOT=$R }$0"
    back="${R:+QUICKSTART_ROOT=$R }$0"
fi
cat <<EOF

Running. Look at it:
  $ctl status        # controller, temperatures, pumps, safety state
  $ctl events        # alarms, link changes, shutdown stages
  curl -s http://$listen/metrics | grep ^coold_
  $logs

Try the emergency stop safely. Drill mode runs every stage but stops no container, sends no
HALT and runs no shutdown command:
  $ctl drill         # one rehearsal of the whole staged shutdown, now
EOF
if [ $simulated = yes ]; then
    cat <<EOF
The simulator can play a pump failure; coold.conf has drill = yes, so the alarm is rehearsed
while '$ctl status' counts down to the simulated power cut:
  $rehearse
and back to normal:
  $back
EOF
else
    cat <<EOF
A real controller is configured: rehearse with '$ctl drill' only ('coold --drill', or
drill = yes in $ETC/coold.conf, makes every alarm a rehearsal).
EOF
fi
