#!/bin/bash
# make-bundle.sh BUILD OUTDIR: packs capsule's GPU machine check (check-gpu.sh) with everything it
# needs, for a machine with an NVIDIA driver but no network, no registry, no meson and none of
# the Debian libraries capsule links (libarchive, libcurl, jansson, inih, OpenSSL, ...).
#
# OUTDIR gets
#   check-gpu.sh      the check (runs from here: OUTDIR/check-gpu.sh, or check-gpu.sh OUTDIR)
#   payload.tar.xz    compressed, since the libraries alone are ~60 MB (libicudata):
#     bin/capsule, bin/capsule-pull   BUILD's programs (capsule finds capsule-pull beside it)
#     bin/docker-registry   Debian's registry (a Go program needing only glibc 2.34)
#     lib/                  every shared library ldd names for them except glibc's own (the
#                           machine's newer glibc must be the one that runs): capsule runs with
#                           LD_LIBRARY_PATH=lib, the programs inside containers never do
#     registry/             the registry's storage holding 127.0.0.1/gpucheck:1, a glibc image
#                           (build-glibc-image.sh) with /usr/local/bin/cuda-check (cuda-check.c,
#                           dlopens libcuda.so.1, built here) and, when nvcc is installed here,
#                           /usr/local/bin/cuda-vecadd (cuda-vecadd.cu, cudart static, sm_90 +
#                           PTX)
#     src/                  cuda-vecadd.cu and cuda-check.c, so that check-gpu.sh can build
#                           cuda-vecadd with the machine's nvcc when the image has none
#     MANIFEST              what went in, from where, and the newest glibc symbol it needs
#   MANIFEST          the same, readable without unpacking
# Put OUTDIR under an ignored name in the checkout (build-*) so the device tool carries it:
#   capsule/tests/gpu/make-bundle.sh build-rel build-capsule-gpu-bundle
set -euo pipefail

if [ $# -ne 2 ]; then
    echo "usage: $0 BUILD OUTDIR" >&2
    exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
# shellcheck source=SCRIPTDIR/../../../tests/gpu/bundle-libs.sh
. "$repo/tests/gpu/bundle-libs.sh"
build=$(cd "$1" && pwd)
out=$2
capsule=$build/capsule/capsule
capsule_pull=$build/capsule/capsule-pull
registry_bin=${DOCKER_REGISTRY:-/usr/bin/docker-registry}

for prog in "$capsule" "$capsule_pull"; do
    [ -x "$prog" ] || { echo "make-bundle: $prog not built (ninja -C $1)" >&2; exit 1; }
    if ldd "$prog" | grep -q 'libasan\|libubsan'; then
        echo "make-bundle: $prog is a sanitizer build; bundle a plain build" >&2
        exit 1
    fi
done
for tool in skopeo umoci busybox xz; do
    command -v "$tool" >/dev/null || { echo "make-bundle: $tool is not installed" >&2; exit 1; }
done
# The registry must run on the other machine as it is: an x86-64 program that needs nothing but
# glibc.
file -L "$registry_bin" | grep -q 'ELF 64-bit.*x86-64' ||
    { echo "make-bundle: $registry_bin is not an x86-64 program" >&2; exit 1; }
if ldd "$registry_bin" 2>/dev/null | grep '=>' | grep -qv 'libc.so\|libpthread\|libdl\|libresolv'; then
    echo "make-bundle: $registry_bin needs more than glibc: $(ldd "$registry_bin")" >&2
    exit 1
fi

work=$(mktemp -d /tmp/capsule-bundle-XXXXXX)
registry_pid=
# shellcheck disable=SC2317 # called by the trap
cleanup() {
    if [ -n "$registry_pid" ]; then
        kill "$registry_pid" 2>/dev/null
        wait "$registry_pid" 2>/dev/null
    fi
    rm -rf -- "$work"
}
trap cleanup EXIT
stage=$work/stage
mkdir -p "$stage/bin" "$stage/lib" "$stage/registry" "$stage/src"
cp "$capsule" "$stage/bin/capsule"
cp "$capsule_pull" "$stage/bin/capsule-pull"
cp "$registry_bin" "$stage/bin/docker-registry"
cp "$here/cuda-vecadd.cu" "$here/cuda-check.c" "$stage/src/"

: >"$stage/MANIFEST"
bundle_libs "$stage/lib" "$stage/MANIFEST" "$capsule" "$capsule_pull"

# The image: cuda-check always, cuda-vecadd when this machine can compile it.
cc -std=gnu17 -O2 -Wall -Wextra -o "$work/cuda-check" "$here/cuda-check.c"
extra=("$work/cuda-check=/usr/local/bin/cuda-check")
nvcc=$(command -v nvcc || true)
if [ -n "$nvcc" ]; then
    "$nvcc" -O2 -cudart static -gencode arch=compute_90,code=sm_90 \
        -gencode arch=compute_90,code=compute_90 -o "$work/cuda-vecadd" "$here/cuda-vecadd.cu"
    extra+=("$work/cuda-vecadd=/usr/local/bin/cuda-vecadd")
    echo "image: /usr/local/bin/cuda-vecadd built with $("$nvcc" --version | tail -n 1)" \
        >>"$stage/MANIFEST"
else
    echo "image: no cuda-vecadd (no nvcc here; check-gpu.sh builds it there if it can)" \
        >>"$stage/MANIFEST"
fi
"$here/build-glibc-image.sh" "$work/oci" gpucheck "${extra[@]}"

# Into the registry's own storage layout, which docker-registry on the other machine serves as
# it is.
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$work/registry.yml" <<CONF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $stage/registry
http:
  addr: 127.0.0.1:$port
CONF
"$registry_bin" serve "$work/registry.yml" >"$work/registry.log" 2>&1 &
registry_pid=$!
for _ in $(seq 100); do
    if /usr/bin/python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$port/v2/', timeout=1)" 2>/dev/null; then
        break
    fi
    sleep 0.1
done
skopeo copy --quiet --dest-tls-verify=false "oci:$work/oci:gpucheck" "docker://127.0.0.1:$port/gpucheck:1"
kill "$registry_pid"
wait "$registry_pid" 2>/dev/null || true
registry_pid=

{
    echo "bin/capsule <- $capsule"
    echo "bin/capsule-pull <- $capsule_pull"
    echo "bin/docker-registry <- $registry_bin ($(dpkg-query -W -f '${Version}' docker-registry 2>/dev/null || echo '?'))"
    echo "registry/ <- 127.0.0.1/gpucheck:1 from build-glibc-image.sh"
    echo "# built from $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?') in $build"
    echo "# $(LC_ALL=C ldd --version | head -n 1)"
    echo "# needs $(for f in "$stage"/bin/* "$stage"/lib/*; do objdump -T "$f"; done |
        grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)"
} >>"$stage/MANIFEST"

rm -rf -- "$out"
mkdir -p "$out"
tar -C "$stage" -cf - . | xz -T0 -6 >"$out/payload.tar.xz"
cp "$here/check-gpu.sh" "$out/check-gpu.sh"
chmod 755 "$out/check-gpu.sh"
cp "$stage/MANIFEST" "$out/MANIFEST"
echo "make-bundle: $(find "$stage/lib" -type f | wc -l) libraries; $(du -sh "$stage" | cut -f1) unpacked, $(du -sh "$out" | cut -f1) in $out"
