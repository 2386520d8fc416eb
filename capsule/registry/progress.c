/* Pull progress on a terminal or a log; see progress.h. */
#include "capsule/registry/progress.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"

#define PROGRESS_LABEL_MAX 32
#define PROGRESS_REDRAW_MS 100

struct progress_item {
    char label[PROGRESS_LABEL_MAX];
    int64_t done, total;
    enum progress_state state;
};

struct progress {
    int fd;
    bool tty;
    bool drawn; /* a frame is on the screen: the next one first moves the cursor up */
    size_t n;
    int64_t last_draw_ms;
    pthread_mutex_t lock;
    struct progress_item *items;
};

static const char *const state_names[] = {
    [PROGRESS_WAITING] = "waiting",        [PROGRESS_DOWNLOADING] = "downloading",
    [PROGRESS_UNPACKING] = "unpacking",    [PROGRESS_DONE] = "done",
    [PROGRESS_EXISTS] = "already present", [PROGRESS_FAILED] = "failed",
};

static char *format_size(int64_t bytes, int base, const char *const units[6], char buf[16])
{
    if (bytes < base) {
        snprintf(buf, 16, "%lld B", (long long)(bytes < 0 ? 0 : bytes));
        return buf;
    }
    double v = (double)bytes;
    size_t u = 0;
    while (v >= base && u + 1 < 6) {
        v /= base;
        u++;
    }
    snprintf(buf, 16, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, units[u]);
    return buf;
}

char *progress_format_bytes(int64_t bytes, char buf[static 16])
{
    static const char *const units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
    return format_size(bytes, 1000, units, buf);
}

char *progress_format_binary(int64_t bytes, char buf[static 16])
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    return format_size(bytes, 1024, units, buf);
}

int progress_new(int fd, size_t n, struct progress **ret)
{
    struct progress *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->items = calloc(n ? n : 1, sizeof(*p->items));
    if (!p->items) {
        free(p);
        return -ENOMEM;
    }
    p->fd = fd;
    p->tty = isatty(fd) == 1;
    p->n = n;
    pthread_mutex_init(&p->lock, NULL);
    *ret = p;
    return 0;
}

/* Writes all of buf; a display is best effort, so errors are ignored. */
static void write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        buf += w;
        len -= (size_t)w;
    }
}

static void item_line(const struct progress_item *it, char *out, size_t size)
{
    char d[16], t[16];
    const char *name = state_names[it->state];
    if (it->state == PROGRESS_DOWNLOADING && it->total > 0) {
        int pct = (int)(it->done * 100 / it->total);
        char bar[21];
        memset(bar, ' ', 20);
        memset(bar, '=', (size_t)(pct / 5));
        bar[20] = '\0';
        snprintf(out, size, "%-12s  %s [%s] %s / %s", it->label, name, bar,
                 progress_format_bytes(it->done, d), progress_format_bytes(it->total, t));
    } else
        snprintf(out, size, "%-12s  %s  %s", it->label, name, progress_format_bytes(it->total, t));
}

/* Redraws every line in place; lock held. */
static void redraw_locked(struct progress *p)
{
    size_t cap = (p->n + 1) * 128 + 32, len = 0;
    char *buf = malloc(cap);
    if (!buf)
        return;
    if (p->drawn && p->n > 0)
        len += (size_t)snprintf(buf, cap, "\033[%zuA", p->n);
    for (size_t i = 0; i < p->n; i++) {
        char line[120];
        item_line(&p->items[i], line, sizeof(line));
        len += (size_t)snprintf(buf + len, cap - len, "\r\033[K%s\n", line);
    }
    write_all(p->fd, buf, len);
    free(buf);
    p->drawn = true;
    p->last_draw_ms = (int64_t)clock_now_msec();
}

void progress_set_label(struct progress *p, size_t i, const char *label, int64_t total)
{
    if (!p || i >= p->n)
        return;
    pthread_mutex_lock(&p->lock);
    snprintf(p->items[i].label, PROGRESS_LABEL_MAX, "%s", label);
    p->items[i].total = total;
    pthread_mutex_unlock(&p->lock);
}

void progress_update(struct progress *p, size_t i, int64_t done, int64_t total)
{
    if (!p || i >= p->n)
        return;
    pthread_mutex_lock(&p->lock);
    p->items[i].done = done;
    p->items[i].total = total;
    if (p->tty && (int64_t)clock_now_msec() - p->last_draw_ms >= PROGRESS_REDRAW_MS)
        redraw_locked(p);
    pthread_mutex_unlock(&p->lock);
}

void progress_set_state(struct progress *p, size_t i, enum progress_state state)
{
    if (!p || i >= p->n)
        return;
    pthread_mutex_lock(&p->lock);
    struct progress_item *it = &p->items[i];
    it->state = state;
    if (state == PROGRESS_DONE)
        it->done = it->total;
    if (p->tty)
        redraw_locked(p);
    else if (state == PROGRESS_DONE || state == PROGRESS_EXISTS || state == PROGRESS_FAILED) {
        char line[160];
        item_line(it, line, sizeof(line) - 1);
        strcat(line, "\n");
        write_all(p->fd, line, strlen(line));
    }
    pthread_mutex_unlock(&p->lock);
}

void progress_free(struct progress *p)
{
    if (!p)
        return;
    if (p->tty && p->drawn)
        redraw_locked(p);
    pthread_mutex_destroy(&p->lock);
    free(p->items);
    free(p);
}
