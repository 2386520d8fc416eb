#!/bin/bash
# build-glibc-image.sh LAYOUT TAG [SRC=DEST]...: a small glibc image as an OCI layout, for the GPU
# injection checks (the CI system test with the stand-in driver, and the GPU machine's bundle).
#
# What the NVIDIA driver's libraries and tools need inside a container, taken from this machine:
# the dynamic loader and glibc's libraries, libgcc_s and libstdc++ (CUDA runtime programs),
# libjansson (the fake libnvidia-ml.so.1 of tests/fake-nvml), ldconfig (static: the runtime
# refreshes the container's ld cache with it after injecting libraries), busybox for a shell,
# and each SRC copied to DEST. /usr/lib/x86_64-linux-gnu exists, so that is where capsule puts
# the driver's libraries; /lib, /lib64, /bin and /sbin are links into /usr as on current distros.
# The image sets PATH and runs /bin/sh; it does not set NVIDIA_VISIBLE_DEVICES, so only --gpus
# (or the caller's environment) gives it GPUs.
#
# Needs umoci and busybox-static (Debian packages); runs as root or, for ldconfig -r, under
# `unshare -r`.
set -euo pipefail

if [ $# -lt 2 ]; then
    echo "usage: $0 LAYOUT TAG [SRC=DEST]..." >&2
    exit 2
fi
layout=$1
tag=$2
shift 2
for tool in umoci busybox; do
    command -v "$tool" >/dev/null || { echo "build-glibc-image: $tool is not installed" >&2; exit 2; }
done

work=$(mktemp -d /tmp/glibc-image-XXXXXX)
trap 'rm -rf -- "$work"' EXIT
r=$work/rootfs
multi=/usr/lib/x86_64-linux-gnu
mkdir -p "$r$multi" "$r/usr/lib64" "$r/usr/bin" "$r/usr/sbin" "$r/usr/local/bin" "$r/etc" \
    "$r/tmp" "$r/root" "$r/dev" "$r/proc" "$r/sys"
chmod 1777 "$r/tmp"
ln -s usr/lib "$r/lib"
ln -s usr/lib64 "$r/lib64"
ln -s usr/bin "$r/bin"
ln -s usr/sbin "$r/sbin"

cp -L /lib64/ld-linux-x86-64.so.2 "$r/usr/lib64/"
for lib in libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 libresolv.so.2 \
    libutil.so.1 libanl.so.1 libnss_files.so.2 libnss_dns.so.2 libgcc_s.so.1 libstdc++.so.6 \
    libjansson.so.4; do
    if [ -e "$multi/$lib" ]; then
        cp -L "$multi/$lib" "$r$multi/"
    elif [ -e "/lib/x86_64-linux-gnu/$lib" ]; then
        cp -L "/lib/x86_64-linux-gnu/$lib" "$r$multi/"
    fi
done
[ -e "$r$multi/libc.so.6" ] || { echo "build-glibc-image: no libc.so.6 in $multi" >&2; exit 1; }
ldconfig=$(command -v ldconfig || echo /sbin/ldconfig)
cp "$ldconfig" "$r/usr/sbin/ldconfig"
cp "$(command -v busybox)" "$r/usr/bin/busybox"
for app in sh ls cat echo env readlink wc grep head tail true false sleep id test stat \
    find sort uniq tr cut mkdir; do
    ln -s busybox "$r/usr/bin/$app"
done
printf '%s\n' /usr/local/lib "$multi" /usr/lib64 /usr/lib >"$r/etc/ld.so.conf"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n' \
    >"$r/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$r/etc/group"

for spec in "$@"; do
    src=${spec%%=*}
    dest=${spec#*=}
    mkdir -p "$(dirname "$r$dest")"
    cp -L "$src" "$r$dest"
done

if [ "$(id -u)" -eq 0 ]; then
    "$ldconfig" -r "$r"
else
    unshare -r "$ldconfig" -r "$r"
fi

[ -d "$layout" ] || umoci init --layout "$layout"
umoci new --image "$layout:$tag"
umoci unpack --rootless --image "$layout:$tag" "$work/bundle" >/dev/null
cp -a "$r/." "$work/bundle/rootfs/"
umoci repack --image "$layout:$tag" "$work/bundle"
umoci config --image "$layout:$tag" --config.cmd /bin/sh \
    --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
echo "build-glibc-image: $layout:$tag ($(du -sh "$r" | cut -f1) unpacked)"
