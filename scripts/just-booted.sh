#!/usr/bin/env bash
# just-booted.sh BUILD CMD [ARG...]: runs CMD as on a machine that booted a moment ago, never
# had gpunode installed, and keeps the checkout where only root can enter (/root/x, mktemp -d),
# so that a test which passes only on a machine that has been up for a while, only after an
# earlier quickstart, or only when other users can reach the checkout, fails here
# (scripts/test.sh runs the plain build's unit and system tests this way):
#
#   - a time namespace whose CLOCK_MONOTONIC and CLOCK_BOOTTIME read about 20 s when CMD starts;
#   - a private mount namespace in which every file BUILD would install (meson introspect
#     --installed: capsule, capsule-pull, gpumon, coold, ...) is covered where it exists (a file
#     by /dev/null, a directory and libexec/gpunode, which also holds quickstart's demo halt
#     script, by an empty tmpfs);
#   - CMD runs in the checkout as seen through a directory of mode 0700 (a tmpfs over a fresh
#     mktemp -d), with GPUNODE_BUILD, if set, moved there too: a test that hands another user
#     a path in the checkout, rather than a copy it can reach, fails.
#
# Needs root. Exit status: CMD's (unshare's 1, with its message, if the namespaces cannot be
# made: `just-booted.sh BUILD true` tells whether they can).
set -euo pipefail

if [ $# -lt 2 ]; then
    echo "usage: $0 BUILD CMD [ARG...]" >&2
    exit 2
fi

if [ "$1" != --inside ]; then
    build=$1
    shift
    up=$(cut -d. -f1 /proc/uptime)
    # Offsets count from the machine's clocks, not from those of a time namespace this already
    # runs in (a caller may have made one): start from the current namespace's own offsets.
    mono=0 boot=0
    if [ -r /proc/self/timens_offsets ]; then
        mono=$(awk '$1 == "monotonic" {print $2}' /proc/self/timens_offsets)
        boot=$(awk '$1 == "boottime" {print $2}' /proc/self/timens_offsets)
    fi
    back=$((up > 20 ? up - 20 : 0))
    locked=$(mktemp -d /tmp/gn-locked-XXXXXX) # 0700: root's alone
    unshare --mount --propagation private --time --monotonic="$((${mono:-0} - back))" \
        --boottime="$((${boot:-0} - back))" \
        --kill-child=SIGTERM --fork -- "$0" --inside "$build" "$locked" "$@" &
    pid=$!
    trap 'kill -TERM "$pid" 2>/dev/null' TERM INT HUP
    rc=0
    # wait returns early when a trapped signal arrives: wait again until the child is gone.
    while :; do
        wait "$pid" && rc=0 || rc=$?
        kill -0 "$pid" 2>/dev/null || break
    done
    rmdir "$locked" 2>/dev/null || true
    exit "$rc"
fi

shift
build=$(cd "$1" && pwd)
locked=$2
shift 2
installed=$(meson introspect "$build" --installed | /usr/bin/python3 -c '
import json, sys
for path in json.load(sys.stdin).values():
    print(path)')
dirs=""
while IFS= read -r path; do
    [ -n "$path" ] || continue
    case $path in
    */libexec/gpunode/*) dirs="$dirs ${path%/*}" ;;
    *) if [ -d "$path" ]; then dirs="$dirs $path"; elif [ -e "$path" ]; then
        mount --bind /dev/null "$path"
    fi ;;
    esac
done <<<"$installed"
for dir in $(printf '%s\n' $dirs | sort -u); do
    [ -d "$dir" ] && mount -t tmpfs -o size=1m,mode=0755 gpunode-hidden "$dir"
done

# The checkout behind a directory only root can enter.
root=$(cd "$(dirname "$0")/.." && pwd)
mount -t tmpfs -o size=1m,mode=0700 gpunode-locked "$locked"
mkdir "$locked/checkout"
mount --bind "$root" "$locked/checkout"
here=$PWD
case $here in "$root" | "$root"/*) here=$locked/checkout${here#"$root"} ;; esac
cd "$here"
if [ -n "${GPUNODE_BUILD:-}" ]; then
    case $GPUNODE_BUILD in "$root" | "$root"/*) export GPUNODE_BUILD=$locked/checkout${GPUNODE_BUILD#"$root"} ;; esac
fi
exec "$@"
