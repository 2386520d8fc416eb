/* The daemon's event list: controller events (alarms, boots, power cuts) and the daemon's own
 * (safety transitions, shutdown stages, link changes), newest last, bounded. Thread-safe: the
 * main loop, the shutdown thread and API threads all use it. */
#pragma once

#include <jansson.h>
#include <stddef.h>

#define EVENTLOG_CAPACITY 512

struct eventlog;

/* Returns a new, empty event list or NULL when out of memory. */
struct eventlog *eventlog_new(void);
void eventlog_free(struct eventlog *l);

/* Records an event stamped with the wall clock. `fields` (may be NULL) is borrowed: a reference
 * is taken. The oldest event is dropped when the list is full. */
void eventlog_add(struct eventlog *l, const char *source, const char *type, json_t *fields,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Returns a new JSON array of the newest `limit` events (all when limit is 0), oldest first,
 * each {"time", "source", "type", "message", "fields"}; NULL when out of memory. */
json_t *eventlog_to_json(struct eventlog *l, size_t limit);
