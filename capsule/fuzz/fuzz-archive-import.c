/* Fuzzes the import of OCI image archives: the input is the archive file (what a user hands
 * --container-image), imported into an empty store.
 *
 * Invariants: archive_import returns 0 or a negative errno with a message; a failed import
 * leaves no image record; nothing appears beside the store (the archive's member names are
 * never paths to write). When started as root the target drops to nobody first, so that a bug
 * cannot write to the real /etc. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capsule/store/archive.h"
#include "capsule/store/store.h"
#include "capsule/fuzz/fuzz-scratch.h"
#include "lib/fuzz-check.h"
#include "lib/rm-tree.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *base;
static char input[96], cache[96];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    base = fuzz_scratch_make("fuzz-archive-import");
    snprintf(input, sizeof(input), "%s/input.tar", base);
    snprintf(cache, sizeof(cache), "%s/cache", base);
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = open(input, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, data, size) == (ssize_t)size);
    close(fd);

    /* A fresh store each time: what one input stored must not decide the next one's fate. */
    struct store *s = NULL;
    struct errmsg e = {""};
    CHECK(store_open(cache, &s, &e) == 0);
    struct image_record rec = {0};
    int r = archive_import(s, input, "localhost/fuzz:latest", NULL, &rec, &e);
    CHECK(r <= 0);
    CHECK(r == 0 || (r > -4096 && e.text[0]));
    struct image_record *list = NULL;
    size_t n = 0;
    CHECK(store_image_list(s, &list, &n, &e) == 0);
    CHECK(n == (r == 0 ? 1u : 0u));
    for (size_t i = 0; i < n; i++)
        image_record_done(&list[i]);
    free(list);
    if (r == 0) {
        CHECK(rec.n_layers <= ARCHIVE_LAYERS_MAX);
        for (size_t i = 0; i < rec.n_layers; i++)
            CHECK(store_has_layer(s, rec.layers[i]));
        image_record_done(&rec);
    }
    store_free(s);
    CHECK(count_entries(base) == 2);
    CHECK(rm_tree(cache) == 0);
    return 0;
}
