/* The EEPROM image: read, verify, write atomically. */
#include "sim-eeprom.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/fileio.h"
#include "lib/macro.h"

#define IMAGE_MAX  8192 /* a real image is well under 1 KiB; anything this big is not ours */
#define HEADER     "# coolsim controller EEPROM image; edits break the CRC and reset it\n"
#define CRC_PREFIX "crc="

struct image {
    char buf[IMAGE_MAX];
    size_t len;
    int err; /* -ENOBUFS once the image outgrew buf */
};

static void image_add(struct image *img, const char *key, const char *value)
{
    int n = snprintf(img->buf + img->len, sizeof(img->buf) - img->len, "%s=%s\n", key, value);
    if (n < 0 || (size_t)n >= sizeof(img->buf) - img->len)
        img->err = -ENOBUFS;
    else
        img->len += (size_t)n;
}

struct key_list {
    char names[32][CTL_KEY_MAX + 1];
    unsigned n;
};

static void collect_key(const char *key, void *userdata)
{
    struct key_list *l = userdata;
    if (l->n < ELEMENTSOF(l->names))
        snprintf(l->names[l->n++], sizeof(l->names[0]), "%s", key);
}

static int image_build(struct image *img, const struct ctl_settings *s, struct errmsg *e)
{
    struct key_list keys = {.n = 0};
    char value[CTL_FRAME_MAX], pumps[16], crc[8];

    img->len = strlen(HEADER);
    img->err = 0;
    memcpy(img->buf, HEADER, img->len);
    snprintf(pumps, sizeof(pumps), "%u", s->n_pumps);
    image_add(img, "pumps", pumps);
    ctl_settings_keys(s, collect_key, &keys);
    for (unsigned i = 0; i < keys.n; i++) {
        int r = ctl_settings_get(s, keys.names[i], value, sizeof(value));
        if (r < 0)
            return errmsg_set(e, -EINVAL, "setting '%s': %s", keys.names[i], ctl_strerror(r));
        image_add(img, keys.names[i], value);
    }
    snprintf(crc, sizeof(crc), "%04X", ctl_crc16(img->buf, img->len));
    image_add(img, "crc", crc);
    if (img->err < 0)
        return errmsg_set(e, img->err, "EEPROM image larger than %d bytes", IMAGE_MAX);
    return 0;
}

/* fsyncs the directory holding path, so the rename itself survives a power loss. */
static int sync_dir(const char *path)
{
    _cleanup_free_ char *copy = strdup(path);
    if (!copy)
        return -ENOMEM;
    _cleanup_close_ int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return negative_errno();
    return fsync(fd) < 0 ? negative_errno() : 0;
}

int sim_eeprom_save(const char *path, const struct ctl_settings *s, struct errmsg *e)
{
    struct image img;
    int r = image_build(&img, s, e);
    if (r < 0)
        return r;

    _cleanup_free_ char *tmp = NULL;
    if (asprintf(&tmp, "%s.XXXXXX", path) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    _cleanup_close_ int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return errmsg_set(e, negative_errno(), "cannot create a temporary file beside '%s': %m",
                          path);
    r = fd_write_all(fd, img.buf, img.len);
    if (r >= 0 && fchmod(fd, 0644) < 0)
        r = negative_errno();
    if (r >= 0 && fsync(fd) < 0)
        r = negative_errno();
    if (r >= 0 && rename(tmp, path) < 0)
        r = negative_errno();
    if (r < 0) {
        unlink(tmp);
        errno = -r;
        return errmsg_set(e, r, "cannot write '%s': %m", path);
    }
    r = sync_dir(path);
    if (r < 0) {
        errno = -r;
        return errmsg_set(e, r, "cannot sync the directory of '%s': %m", path);
    }
    return 0;
}

static int read_image(const char *path, struct image *img, struct errmsg *e)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errmsg_set(e, negative_errno(), "cannot open '%s': %m", path);
    /* A file that fills the buffer (NUL kept aside) is larger than any image. */
    int r = fd_read_up_to(fd, img->buf, sizeof(img->buf) - 1, &img->len);
    if (r < 0)
        return errmsg_set(e, r, "cannot read '%s': %s", path, strerror(-r));
    if (img->len == sizeof(img->buf) - 1)
        return errmsg_set(e, -EBADMSG, "'%s': larger than an EEPROM image", path);
    img->buf[img->len] = '\0';
    return 0;
}

/* Checks the final "crc=XXXX\n" line against the bytes before it; returns the length of the
 * covered part or -EBADMSG. */
static long verify_crc(const struct image *img, const char *path, struct errmsg *e)
{
    const char *end = img->buf + img->len;
    const char *line = end;

    if (img->len > 0 && end[-1] == '\n')
        line--;
    while (line > img->buf && line[-1] != '\n')
        line--;
    unsigned crc;
    int used = 0;
    if (strncmp(line, CRC_PREFIX, strlen(CRC_PREFIX)) != 0 ||
        sscanf(line + strlen(CRC_PREFIX), "%4x%n", &crc, &used) != 1 || used != 4)
        return errmsg_set(e, -EBADMSG, "'%s': no CRC line at the end", path);
    uint16_t want = ctl_crc16(img->buf, (size_t)(line - img->buf));
    if (want != crc)
        return errmsg_set(e, -EBADMSG, "'%s': CRC %04X, the contents give %04X", path, crc, want);
    return line - img->buf;
}

/* Splits the covered lines into settings fields (pointing into img) and applies them to the
 * factory defaults, so a missing line falls back to its default. */
static int parse_image(struct image *img, long covered, unsigned n_pumps, struct ctl_settings *s,
                       const char *path, struct errmsg *e)
{
    struct ctl_field fields[CTL_FIELDS_MAX];
    unsigned n = 0, line_no = 0;
    char why[200] = "";
    char *save = NULL;

    img->buf[covered] = '\0';
    for (char *line = strtok_r(img->buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        line_no++;
        if (line[0] == '#')
            continue;
        char *eq = strchr(line, '=');
        if (!eq)
            return errmsg_set(e, -EBADMSG, "'%s' line %u: not key=value", path, line_no);
        *eq = '\0';
        if (strcmp(line, "pumps") == 0) {
            long v;
            if (ctl_parse_long(eq + 1, 1, CTL_PUMPS_MAX, &v) < 0 || (unsigned)v != n_pumps)
                return errmsg_set(e, -EBADMSG, "'%s': an image for %s pumps, this has %u", path,
                                  eq + 1, n_pumps);
            continue;
        }
        if (n == ELEMENTSOF(fields))
            return errmsg_set(e, -EBADMSG, "'%s': too many settings", path);
        fields[n++] = (struct ctl_field){.key = line, .value = eq + 1};
    }
    ctl_settings_defaults(s, n_pumps);
    if (n > 0 && ctl_settings_apply(s, fields, n, why, sizeof(why)) < 0)
        return errmsg_set(e, -EBADMSG, "'%s': %s", path, why);
    return 0;
}

int sim_eeprom_load(const char *path, unsigned n_pumps, struct ctl_settings *ret, struct errmsg *e)
{
    _cleanup_free_ struct image *img = malloc(sizeof(*img));
    struct ctl_settings s;

    if (!img)
        return errmsg_set(e, -ENOMEM, "out of memory");
    int r = read_image(path, img, e);
    if (r < 0)
        return r;
    long covered = verify_crc(img, path, e);
    if (covered < 0)
        return (int)covered;
    r = parse_image(img, covered, n_pumps, &s, path, e);
    if (r < 0)
        return r;
    *ret = s;
    return 0;
}

int sim_eeprom_open(const char *path, unsigned n_pumps, struct ctl_settings *ret, struct errmsg *e)
{
    struct ctl_settings s;
    int r = sim_eeprom_load(path, n_pumps, &s, e);

    if (r >= 0) {
        *ret = s;
        return SIM_EEPROM_LOADED;
    }
    if (r == -ENOENT) {
        ctl_settings_defaults(ret, n_pumps);
        return SIM_EEPROM_DEFAULTS;
    }
    if (r != -EBADMSG)
        return r;
    ctl_settings_defaults(&s, n_pumps);
    struct errmsg save_err;
    int q = sim_eeprom_save(path, &s, &save_err);
    if (q < 0) {
        if (e)
            *e = save_err;
        return q;
    }
    *ret = s;
    return SIM_EEPROM_RESET;
}
