/* What a person reads: gpuq's tables, durations and times, made from gpuqd's JSON replies.
 *
 * Pure: the current time comes in as an argument, output goes to a FILE* (tests capture it with
 * open_memstream), and nothing is read from the system but the local time zone (localtime_r).
 * Missing or mistyped fields print as "-" or "?" instead of failing: a reply from a newer or
 * older gpuqd still gives a table. Text that came from users (job names, commands) has its
 * control characters replaced by '?', so that a name cannot move the terminal's cursor. */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

/* The widest a NAME column gets; longer names end in "…". */
#define RENDER_NAME_MAX 24

/* A duration as squeue-like text, two units at most: "0s", "45s", "12m03s", "1h02m", "3d04h".
 * Negative and non-finite values print as "0s" and "-". Returns buf. */
char *render_duration(double seconds, char *buf, size_t size);

/* A UNIX time as local time, "2026-12-02 21:00" (with_seconds: "2026-12-02 21:00:05"). A time
 * that is not positive and finite prints as "-". Returns buf. */
char *render_time(double t, int with_seconds, char *buf, size_t size);

/* A pending job's estimated start (the API's "estimated_start": a time or null): "now" when it
 * is due, "in 5m" / "in 2h10m" within six hours, else the local time "2026-12-02 21:00";
 * "unknown" for null (a job ahead of it has no time limit). Returns buf. */
char *render_start(json_t *estimated_start, double now, char *buf, size_t size);

/* A job's "gpus" object as one word: "2" (whole GPUs of any model), "H100:2" (of one model),
 * "mig-1g.10gb:1" (MIG instances), "0" (none), "?" (unreadable). Returns buf. */
char *render_gpus(json_t *gpus, char *buf, size_t size);

/* An amount of one quota key (gpus, gpus.MODEL, mig.PROFILE, cpus in thousandths, memory in
 * bytes, jobs) as a person counts it: "4", "2.5" (cpus), "64G" (memory). Returns buf. */
char *render_amount(const char *key, json_t *value, char *buf, size_t size);

/* A queue's quota as "gpus 4/8, memory 100G/512G" (used/limit per limited key, in the order
 * gpuqd lists them), "unlimited" when it lists none. Returns buf; cut at size. */
char *render_quota(json_t *queue, char *buf, size_t size);

/* What a queue borrows beyond its quota ("gpus 2"), "-" when nothing. Returns buf. */
char *render_borrowed(json_t *queue, char *buf, size_t size);

/* Writes the `gpuq ls` table for a GET /v1/jobs reply ({"jobs": [...]}), in the reply's order:
 * ID, QUEUE, NAME, USER, STATE, GPUS, TIME (run time; a pending job's wait), POS, START, REASON.
 * Column widths fit the content. Returns the number of jobs listed. */
size_t render_jobs(FILE *f, json_t *doc, double now);

/* Writes `gpuq show`: the job's fields as "key: value" lines (times local, durations short,
 * commands quoted as a shell would need them, the environment as a count), any field this
 * version does not know as its JSON, then its events with their local times. doc is a GET
 * /v1/jobs/ID reply ({"job": {...}, "events": [...]}). */
void render_job(FILE *f, json_t *doc, double now);

/* Writes `gpuq queues` for a GET /v1/queues reply: the node line ("node: 6/8 GPUs allocated",
 * ", DRAINED" when drained), then QUEUE, CLASS, PRIO, QUOTA, BORROWED, WINDOW, NEXT CHANGE,
 * PENDING, RUNNING. */
void render_queues(FILE *f, json_t *doc);

/* Writes a JSON document pretty-printed (two-space indent, keys in gpuqd's order) with a final
 * newline; a NULL document as "null". */
void render_json(FILE *f, json_t *doc);

/* Joins a command's arguments (a JSON array of strings) into one line a shell would read back
 * as the same arguments: words that need it are single-quoted. Returns buf, cut at size. */
char *render_command(json_t *argv, char *buf, size_t size);
