#include "eventlog.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/macro.h"

struct event {
    struct timespec when;
    char source[16];
    char type[24];
    char message[256];
    json_t *fields;
};

struct eventlog {
    pthread_mutex_t lock;
    struct event ring[EVENTLOG_CAPACITY];
    size_t next;  /* slot the next event goes to */
    size_t count; /* events held, at most EVENTLOG_CAPACITY */
};

struct eventlog *eventlog_new(void)
{
    struct eventlog *l = calloc(1, sizeof(*l));
    if (l)
        pthread_mutex_init(&l->lock, NULL);
    return l;
}

void eventlog_free(struct eventlog *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < EVENTLOG_CAPACITY; i++)
        json_decref(l->ring[i].fields);
    pthread_mutex_destroy(&l->lock);
    free(l);
}

void eventlog_add(struct eventlog *l, const char *source, const char *type, json_t *fields,
                  const char *fmt, ...)
{
    struct event ev = {.fields = json_incref(fields)};
    clock_gettime(CLOCK_REALTIME, &ev.when);
    snprintf(ev.source, sizeof(ev.source), "%s", source);
    snprintf(ev.type, sizeof(ev.type), "%s", type);
    va_list ap;
    va_start(ap, fmt);
    if (vsnprintf(ev.message, sizeof(ev.message), fmt, ap) < 0)
        ev.message[0] = '\0';
    va_end(ap);

    pthread_mutex_lock(&l->lock);
    json_decref(l->ring[l->next].fields);
    l->ring[l->next] = ev;
    l->next = (l->next + 1) % EVENTLOG_CAPACITY;
    if (l->count < EVENTLOG_CAPACITY)
        l->count++;
    pthread_mutex_unlock(&l->lock);
}

static json_t *event_to_json(const struct event *ev)
{
    struct tm tm;
    char stamp[40];
    gmtime_r(&ev->when.tv_sec, &tm);
    size_t n = strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(stamp + n, sizeof(stamp) - n, ".%03ldZ", ev->when.tv_nsec / 1000000);
    return json_pack("{s:s, s:s, s:s, s:s, s:O}", "time", stamp, "source", ev->source, "type",
                     ev->type, "message", ev->message, "fields",
                     ev->fields ? ev->fields : json_null());
}

json_t *eventlog_to_json(struct eventlog *l, size_t limit)
{
    json_t *array = json_array();
    if (!array)
        return NULL;
    pthread_mutex_lock(&l->lock);
    size_t n = (limit == 0 || limit > l->count) ? l->count : limit;
    size_t first = (l->next + EVENTLOG_CAPACITY - n) % EVENTLOG_CAPACITY;
    for (size_t i = 0; i < n; i++)
        json_array_append_new(array, event_to_json(&l->ring[(first + i) % EVENTLOG_CAPACITY]));
    pthread_mutex_unlock(&l->lock);
    return array;
}
