# shellcheck shell=bash
# Sourced by the GPU-machine bundle scripts (gpumon/tests/gpu/make-bundle.sh,
# capsule/tests/gpu/make-bundle.sh): copies the shared libraries programs built here need into a
# bundle's lib/, for a machine that has none of Debian's libraries.

# True for glibc's own libraries: never copied, the machine's newer glibc must be the one that
# runs (Debian 12 ships 2.36; the GPU machine's is at least that).
bundle_is_glibc() {
    case "$1" in
    ld-linux*.so.* | libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | \
        libresolv.so.* | libanl.so.* | libutil.so.* | libnss_*.so.* | libmvec.so.* | \
        libBrokenLocale.so.* | libthread_db.so.* | libc_malloc_debug.so.*)
        return 0
        ;;
    esac
    return 1
}

# bundle_libs LIBDIR MANIFEST PROG...: copies every library ldd names for the programs, under its
# soname (the name the loader looks for), except glibc's and the driver's NVML (which must come
# from the machine), and appends "lib/SONAME <- PATH" to MANIFEST for each. Exits 1 when ldd
# cannot find one.
bundle_libs() {
    local libdir=$1 manifest=$2 prog soname arrow path _
    shift 2
    for prog in "$@"; do
        # ldd lists the whole closure (dependencies of dependencies too), one "soname => path"
        # each.
        while read -r soname arrow path _; do
            [ "$arrow" = "=>" ] || continue
            case "$path" in /*) ;; *)
                echo "make-bundle: $prog: $soname not found by ldd" >&2
                exit 1
                ;;
            esac
            bundle_is_glibc "$soname" && continue
            case "$soname" in libnvidia-ml.so*) continue ;; esac
            if [ ! -e "$libdir/$soname" ]; then
                cp -L "$path" "$libdir/$soname"
                echo "lib/$soname <- $path" >>"$manifest"
            fi
        done < <(ldd "$prog")
    done
}
