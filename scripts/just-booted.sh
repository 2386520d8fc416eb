#!/usr/bin/env bash
# just-booted.sh BUILD CMD [ARG...]: runs CMD as on a machine that booted a moment ago and never
# had gpunode installed, so that a test which passes only on a machine that has been up for a
# while, or only after an earlier quickstart, fails here (scripts/test.sh runs the plain build's
# unit and system tests this way):
#
#   - a time namespace whose CLOCK_MONOTONIC and CLOCK_BOOTTIME read about 20 s when CMD starts;
#   - a private mount namespace in which every file BUILD would install (meson introspect
#     --installed: capsule, capsule-pull, gpumon, coold, ...) is covered by /dev/null where it
#     exists, and libexec/gpunode (quickstart's demo halt script too) by an empty tmpfs.
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
    off=$((up > 20 ? up - 20 : 0))
    exec unshare --mount --propagation private --time --monotonic="-$off" --boottime="-$off" \
        --kill-child=SIGTERM \
        --fork -- "$0" --inside "$build" "$@"
fi

shift
build=$1
shift
installed=$(meson introspect "$build" --installed | /usr/bin/python3 -c '
import json, sys
for path in json.load(sys.stdin).values():
    print(path)')
prefixes=""
while IFS= read -r path; do
    [ -n "$path" ] || continue
    case $path in
    */libexec/gpunode/*) prefixes="$prefixes ${path%/*}" ;;
    *) [ -e "$path" ] && mount --bind /dev/null "$path" ;;
    esac
done <<<"$installed"
for dir in $(printf '%s\n' $prefixes | sort -u); do
    [ -d "$dir" ] && mount -t tmpfs -o size=1m,mode=0755 gpunode-hidden "$dir"
done
exec "$@"
