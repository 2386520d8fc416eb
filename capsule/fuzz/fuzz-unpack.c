/* Fuzzes layer unpacking (and the merge fallback on what unpacked): the input is a layer blob
 * as a registry would send it, tar in gzip, zstd or nothing. Each input is unpacked twice: as a
 * per-user cache does (unpack_layer) and as the node cache does (unpack_layer_shared).
 *
 * Invariants: nothing appears beside dest (a directory "outside" next to it stays as it was);
 * what unpacked holds no device other than whiteouts and no setuid/setgid bit; a merge of it
 * holds no whiteout at all. In shared mode every regular file is 0644 or 0755, every directory
 * 0755, and each of them carries a well-formed override xattr. When started as root the target
 * drops to nobody first, so that a bug cannot write to the real /etc. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "capsule/fuzz/fuzz-scratch.h"
#include "lib/fuzz-check.h"
#include "lib/rm-tree.h"
#include "capsule/store/store.h"
#include "capsule/store/unpack.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *base;
static char dest[96], merged[96], outside[96], sentinel[128];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    base = fuzz_scratch_make("fuzz-unpack");
    snprintf(dest, sizeof(dest), "%s/dest", base);
    snprintf(merged, sizeof(merged), "%s/merged", base);
    snprintf(outside, sizeof(outside), "%s/outside", base);
    snprintf(sentinel, sizeof(sentinel), "%s/sentinel", outside);
    CHECK(mkdir(outside, 0755) == 0);
    int fd = open(sentinel, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    CHECK(fd >= 0 && write(fd, "keep", 4) == 4);
    close(fd);
    return 0;
}

static int count_entries(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    CHECK(d);
    for (struct dirent *de; (de = readdir(d));)
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    closedir(d);
    return n;
}

static void check_outside_untouched(void)
{
    CHECK(count_entries(outside) == 1);
    struct stat st;
    CHECK(lstat(sentinel, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 4);
    CHECK((st.st_mode & 07777) == 0644 && st.st_nlink == 1);
    CHECK(lstat(outside, &st) == 0 && (st.st_mode & 07777) == 0755);
}

static int check_unpacked(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    CHECK(!(st->st_mode & (S_ISUID | S_ISGID)));
    CHECK(!S_ISBLK(st->st_mode));
    CHECK(!S_ISCHR(st->st_mode) || st->st_rdev == 0);
    return 0;
}

/* "UID:GID:MODE:TYPE" with the type that the entry has. */
static bool override_ok(const char *path, const struct stat *st)
{
    char v[96], type[8];
    ssize_t n = lgetxattr(path, UNPACK_OVERRIDE_XATTR, v, sizeof(v) - 1);
    if (n <= 0)
        return false;
    v[n] = '\0';
    unsigned uid, gid, mode;
    int mode_at = 0, type_at = 0, end = 0;
    if (sscanf(v, "%u:%u:%n%o:%n%7[a-z]%n", &uid, &gid, &mode_at, &mode, &type_at, type, &end) !=
            4 ||
        end != n || type_at - mode_at != 5)
        return false;
    return !(mode & (S_ISUID | S_ISGID)) &&
           strcmp(type, S_ISDIR(st->st_mode) ? "dir" : "file") == 0;
}

static int check_shared(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    CHECK(check_unpacked(path, st, flag, ftw) == 0);
    if (S_ISREG(st->st_mode))
        CHECK((st->st_mode & 07777) == 0644 || (st->st_mode & 07777) == 0755);
    if (S_ISDIR(st->st_mode))
        CHECK((st->st_mode & 07777) == 0755);
    if (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode))
        CHECK(override_ok(path, st));
    return 0;
}

static int check_merged(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    CHECK(!S_ISCHR(st->st_mode) && !S_ISBLK(st->st_mode));
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("layer", MFD_CLOEXEC);
    CHECK(fd >= 0);
    CHECK(write(fd, data, size) == (ssize_t)size && lseek(fd, 0, SEEK_SET) == 0);
    CHECK(mkdir(dest, 0755) == 0 && mkdir(merged, 0755) == 0);

    struct unpack_stats st = {0};
    struct errmsg e = {""};
    int r = unpack_layer(fd, dest, &st, &e);
    close(fd);
    CHECK(r <= 0);
    CHECK(r == 0 || e.text[0]);
    if (r == 0) {
        /* nftw on a 0000 directory just reports it unreadable; chmod is not needed here. */
        CHECK(nftw(dest, check_unpacked, 16, FTW_PHYS) == 0);
        if (unpack_merge_layer(dest, merged, &e) == 0)
            CHECK(nftw(merged, check_merged, 16, FTW_PHYS) == 0);
    }
    CHECK(count_entries(base) == 3);
    check_outside_untouched();
    CHECK(rm_tree(dest) == 0);
    CHECK(rm_tree(merged) == 0);

    fd = memfd_create("layer", MFD_CLOEXEC);
    CHECK(fd >= 0);
    CHECK(write(fd, data, size) == (ssize_t)size && lseek(fd, 0, SEEK_SET) == 0);
    CHECK(mkdir(dest, 0755) == 0);
    r = unpack_layer_shared(fd, dest, 0, 0, &st, &e);
    close(fd);
    CHECK(r <= 0);
    CHECK(r == 0 || e.text[0]);
    if (r == 0)
        CHECK(nftw(dest, check_shared, 16, FTW_PHYS) == 0);
    CHECK(count_entries(base) == 2);
    check_outside_untouched();
    CHECK(rm_tree(dest) == 0);
    return 0;
}
