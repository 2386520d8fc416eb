#!/usr/bin/env bash
# Installs every Debian package gpunode needs to build, test, fuzz and run. Idempotent and quiet:
# when everything is already installed it only asks dpkg and returns (well under a second).
#
#   scripts/install-deps.sh            # as root (or through sudo)
#   GPUNODE_START_SERVICES=1 ...       # let packages start their services (docker, prometheus)
#
# Services are NOT started by default: the tests start their own private daemons, and a stray
# system prometheus or dockerd on a build machine only gets in the way.
set -euo pipefail

PACKAGES=(
    # build
    meson ninja-build pkg-config gcc git
    # libraries (DESIGN.md, "Dependencies")
    libmicrohttpd-dev libcurl4-openssl-dev libjansson-dev libyaml-dev libinih-dev
    libsqlite3-dev libarchive-dev libzstd-dev libssl-dev libcmocka-dev libsystemd-dev zlib1g-dev
    libseccomp-dev
    # fuzzing and the format check
    clang libclang-rt-14-dev clang-format
    # system tests and their real peers (TESTBED.md)
    python3 python3-pytest python3-requests docker.io busybox-static socat prometheus
    docker-registry skopeo umoci apache2-utils python3-cryptography python3-jwt
    # the Slurm plugin (spank.h) and the real Slurm its tests run; Slurm's mpi/pmix opens
    # pmix2/lib/libpmix.so, which only libpmix-dev provides
    libslurm-dev slurmctld slurmd slurm-client libpmix2 libpmix-dev
    # gpuq's calendar tests set the clock of gpuqd alone (libfaketime)
    faketime
    curl util-linux passwd procps
    # systemd-analyze verify checks the shipped units
    systemd
    # capsule mounts the node cache's layers with fuse-overlayfs (it brings fuse3)
    fuse-overlayfs
    # the node cache's tests run a real Debian, made from Debian's mirror
    debootstrap
)

# One dpkg-query for all: it is what makes the already-installed case fast.
declare -A have=()
while read -r name status; do
    [ "$status" = installed ] && have[$name]=1
done < <(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "${PACKAGES[@]}" 2>/dev/null || true)
missing=()
for p in "${PACKAGES[@]}"; do
    [ -n "${have[$p]:-}" ] || missing+=("$p")
done
# fuse-overlayfs opens /dev/fuse as the user who runs capsule. Debian's udev rule makes it 0666;
# a machine without udev (a container, a CI image) keeps the kernel's 0600.
fuse_dev_ok() { [ ! -e /dev/fuse ] || [ "$(stat -c %a /dev/fuse)" = 666 ]; }
fix_fuse_dev() {
    [ -e /dev/fuse ] || modprobe fuse 2>/dev/null || true
    if ! fuse_dev_ok; then
        chmod 0666 /dev/fuse
        echo "install-deps: /dev/fuse made 0666, as Debian's udev rule sets it" >&2
    fi
}

if [ ${#missing[@]} -eq 0 ] && fuse_dev_ok; then
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    exec sudo -E "$0" "$@"
fi

if [ ${#missing[@]} -eq 0 ]; then
    fix_fuse_dev
    exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive

# Keep package scripts from starting services, unless asked to, with a temporary policy-rc.d
# (removed again even on failure); an existing one is left as it is.
policy=/usr/sbin/policy-rc.d
if [ -z "${GPUNODE_START_SERVICES:-}" ] && [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    made_policy=1
fi

apt_opts=(-q -y -o Dpkg::Use-Pty=0 -o Dpkg::Options::=--force-confdef
    -o Dpkg::Options::=--force-confold --no-install-recommends)
log=$(mktemp)
trap 'rm -f "$log"; if [ -n "${made_policy:-}" ]; then rm -f "$policy"; fi' EXIT
# Quiet when it works, the whole apt output when it does not.
if ! { apt-get -q update && apt-get "${apt_opts[@]}" install "${missing[@]}"; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "install-deps: apt-get failed" >&2
    exit 1
fi
fix_fuse_dev
echo "install-deps: done" >&2
