/* Pull progress on a terminal or a log; see progress.h. */
#include "capsule/cli/progress.h"

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
#include "lib/fileio.h"
#include "lib/units.h"

#define PROGRESS_LABEL_MAX 32
#define PROGRESS_REDRAW_MS 100

struct progress_item {
    char label[PROGRESS_LABEL_MAX];
    int64_t done, total;
    enum pull_layer_state state;
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
    [PULL_LAYER_WAITING] = "waiting",        [PULL_LAYER_DOWNLOADING] = "downloading",
    [PULL_LAYER_UNPACKING] = "unpacking",    [PULL_LAYER_DONE] = "done",
    [PULL_LAYER_EXISTS] = "already present", [PULL_LAYER_FAILED] = "failed",
};

int progress_new(int fd, struct progress **ret)
{
    struct progress *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->fd = fd;
    p->tty = isatty(fd) == 1;
    pthread_mutex_init(&p->lock, NULL);
    *ret = p;
    return 0;
}

/* A display is best effort: a write that fails is not retried nor reported. */
static void write_all(int fd, const char *buf, size_t len)
{
    (void)fd_write_all(fd, buf, len);
}

static void item_line(const struct progress_item *it, char *out, size_t size)
{
    char d[16], t[16];
    const char *name = state_names[it->state];
    if (it->state == PULL_LAYER_DOWNLOADING && it->total > 0) {
        int pct = (int)(it->done * 100 / it->total);
        char bar[21];
        memset(bar, ' ', 20);
        memset(bar, '=', (size_t)(pct / 5));
        bar[20] = '\0';
        snprintf(out, size, "%-12s  %s [%s] %s / %s", it->label, name, bar,
                 units_format_bytes(it->done, d), units_format_bytes(it->total, t));
    } else
        snprintf(out, size, "%-12s  %s  %s", it->label, name, units_format_bytes(it->total, t));
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

/* The pull's first event: the layers, each waiting. */
static void on_layers(void *userdata, size_t n, const char *const *ids, const int64_t *sizes)
{
    struct progress *p = userdata;
    struct progress_item *items = calloc(n, sizeof(*items));
    if (!items)
        return; /* no display, the pull goes on */
    for (size_t i = 0; i < n; i++) {
        snprintf(items[i].label, PROGRESS_LABEL_MAX, "%s", ids[i]);
        items[i].total = sizes[i];
    }
    pthread_mutex_lock(&p->lock);
    free(p->items);
    p->items = items;
    p->n = n;
    pthread_mutex_unlock(&p->lock);
}

static void on_bytes(void *userdata, size_t i, int64_t done, int64_t total)
{
    struct progress *p = userdata;
    pthread_mutex_lock(&p->lock);
    if (i < p->n) {
        p->items[i].done = done;
        p->items[i].total = total;
        if (p->tty && (int64_t)clock_now_msec() - p->last_draw_ms >= PROGRESS_REDRAW_MS)
            redraw_locked(p);
    }
    pthread_mutex_unlock(&p->lock);
}

static void on_state(void *userdata, size_t i, enum pull_layer_state state)
{
    struct progress *p = userdata;
    pthread_mutex_lock(&p->lock);
    if (i >= p->n) {
        pthread_mutex_unlock(&p->lock);
        return;
    }
    struct progress_item *it = &p->items[i];
    it->state = state;
    if (state == PULL_LAYER_DONE)
        it->done = it->total;
    if (p->tty)
        redraw_locked(p);
    else if (state == PULL_LAYER_DONE || state == PULL_LAYER_EXISTS || state == PULL_LAYER_FAILED) {
        char line[160];
        item_line(it, line, sizeof(line) - 1);
        strcat(line, "\n");
        write_all(p->fd, line, strlen(line));
    }
    pthread_mutex_unlock(&p->lock);
}

struct pull_events progress_events(struct progress *p)
{
    return (struct pull_events){
        .layers = on_layers, .layer_bytes = on_bytes, .layer_state = on_state, .userdata = p};
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
