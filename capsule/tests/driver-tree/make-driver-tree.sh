#!/bin/sh
# make-driver-tree.sh DEST STUBS FAKE_NVML: a stand-in NVIDIA driver installation under DEST for
# capsule's GPU injection tests (capsule run --driver-root DEST), shaped like the GPU machine's
# (driver 580.159.04, CUDA 13.0; see tests/fixtures/nvml/capsule-h200-mig.json for its GPUs):
#
#   usr/lib/x86_64-linux-gnu/   the driver's libraries (STUBS, built by meson.build here) with
#                               their soname links; libnvidia-ml.so.580.159.04 is FAKE_NVML
#   usr/local/nvidia/lib64/     libcuda.so.470.00 + libcuda.so.1: a stale driver's, never to be
#                               injected (listed first in the ld cache)
#   etc/ld.so.conf, etc/ld.so.cache   made by `ldconfig -r DEST`
#   usr/bin/nvidia-smi          STUBS' stand-in: dlopens libnvidia-ml.so.1, prints -L lines
#   dev/                        nvidia0, nvidia1, nvidiactl, nvidia-uvm, nvidia-uvm-tools,
#                               nvidia-modeset, nvidia-caps/nvidia-cap{1,2,12,13,21,22}: regular
#                               files holding their own names, so a container can show which it got
#   proc/driver/nvidia/         version, params, gpus/<bus id>/information, and the MIG
#                               capabilities of GPU 1 (minor 1): gi1 -> 12, gi1/ci0 -> 13,
#                               gi2 -> 21, gi2/ci0 -> 22
#   lib/firmware/nvidia/580.159.04/   gsp_ga10x.bin, gsp_tu10x.bin (and a stale 470.00/)
#
# ldconfig -r chroots: as an ordinary user it runs under `unshare -r`.
set -eu

if [ $# -ne 3 ]; then
    echo "usage: $0 DEST STUBS FAKE_NVML" >&2
    exit 2
fi
dest=$1
stubs=$2
nvml=$3
v=580.159.04
lib=$dest/usr/lib/x86_64-linux-gnu
old=$dest/usr/local/nvidia/lib64

mkdir -p "$lib" "$old" "$dest/usr/bin" "$dest/etc" "$dest/var/cache/ldconfig" \
    "$dest/dev/nvidia-caps" "$dest/lib/firmware/nvidia/$v" "$dest/lib/firmware/nvidia/470.00"

for stem in libcuda libnvidia-cfg libnvidia-ptxjitcompiler libnvidia-encode libnvcuvid \
    libEGL_nvidia libnvidia-eglcore; do
    cp "$stubs/$stem.so.$v" "$lib/"
done
cp "$stubs/libnvidia-opticalflow.so.1" "$lib/"
cp "$nvml" "$lib/libnvidia-ml.so.$v"
# The driver installer's development link.
ln -sf libcuda.so.1 "$lib/libcuda.so"
# Left behind by an older driver: same soname, another version.
cp "$stubs/libcuda.so.$v" "$old/libcuda.so.470.00"
cp "$stubs/nvidia-smi" "$dest/usr/bin/nvidia-smi"

printf '/usr/local/nvidia/lib64\n/usr/lib/x86_64-linux-gnu\n' >"$dest/etc/ld.so.conf"
ldconfig=$(command -v ldconfig || echo /sbin/ldconfig)
if [ "$(id -u)" -eq 0 ]; then
    "$ldconfig" -r "$dest"
else
    unshare -r "$ldconfig" -r "$dest"
fi

for n in nvidia0 nvidia1 nvidiactl nvidia-uvm nvidia-uvm-tools nvidia-modeset; do
    echo "$n" >"$dest/dev/$n"
done
for m in 1 2 12 13 21 22; do
    echo "nvidia-cap$m" >"$dest/dev/nvidia-caps/nvidia-cap$m"
done

p=$dest/proc/driver/nvidia
mkdir -p "$p/gpus/0000:19:00.0" "$p/gpus/0000:3b:00.0" "$p/capabilities/mig" \
    "$p/capabilities/gpu1/mig/gi1/ci0" "$p/capabilities/gpu1/mig/gi2/ci0"
cat >"$p/version" <<VERSION
NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  $v  Release Build  (dvs-builder@U16-I3-B03-4-3)  Thu Oct  9 20:49:15 UTC 2025
GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)
VERSION
printf 'ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 1\n' >"$p/params"
for bus in 0000:19:00.0 0000:3b:00.0; do
    printf 'Model: \t\t NVIDIA H200\nBus Location: \t %s\n' "$bus" >"$p/gpus/$bus/information"
done
cap() { printf 'DeviceFileMinor: %s\nDeviceFileMode: 292\nDeviceFileModify: 1\n' "$1" >"$2"; }
cap 1 "$p/capabilities/mig/config"
cap 2 "$p/capabilities/mig/monitor"
cap 12 "$p/capabilities/gpu1/mig/gi1/access"
cap 13 "$p/capabilities/gpu1/mig/gi1/ci0/access"
cap 21 "$p/capabilities/gpu1/mig/gi2/access"
cap 22 "$p/capabilities/gpu1/mig/gi2/ci0/access"

echo "gsp firmware $v" >"$dest/lib/firmware/nvidia/$v/gsp_ga10x.bin"
echo "gsp firmware $v" >"$dest/lib/firmware/nvidia/$v/gsp_tu10x.bin"
echo "gsp firmware 470" >"$dest/lib/firmware/nvidia/470.00/gsp_tu10x.bin"
