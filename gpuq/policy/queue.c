/* Queues, service classes and the scheduling configuration's lookups; see queue.h. */
#include "gpuq/policy/queue.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/config.h"
#include "lib/macro.h"

static const char *const class_names[] = {
    [SERVICE_GUARANTEED] = "guaranteed",
    [SERVICE_BURSTABLE] = "burstable",
    [SERVICE_BESTEFFORT] = "besteffort",
};

const char *service_class_name(enum service_class c)
{
    if ((unsigned)c >= ELEMENTSOF(class_names))
        return NULL;
    return class_names[c];
}

int service_class_from_name(const char *name, enum service_class *ret)
{
    if (!name)
        return -EINVAL;
    for (size_t i = 0; i < ELEMENTSOF(class_names); i++)
        if (strcasecmp(name, class_names[i]) == 0) {
            *ret = (enum service_class)i;
            return 0;
        }
    return -EINVAL;
}

void sched_config_done(struct sched_config *c)
{
    if (!c)
        return;
    for (unsigned i = 0; i < c->n_queues; i++)
        free(c->queues[i].windows);
    free(c->queues);
    free(c->classes);
    free(c->time_zone);
    free(c->default_class);
    *c = (struct sched_config){0};
}

const struct queue *sched_config_queue(const struct sched_config *c, const char *name)
{
    if (!name)
        return NULL;
    for (unsigned i = 0; i < c->n_queues; i++)
        if (strcmp(c->queues[i].name, name) == 0)
            return &c->queues[i];
    return NULL;
}

const struct priority_class *sched_config_class(const struct sched_config *c, const char *name)
{
    if (!name)
        return NULL;
    for (unsigned i = 0; i < c->n_classes; i++)
        if (strcmp(c->classes[i].name, name) == 0)
            return &c->classes[i];
    return NULL;
}

bool queue_name_valid(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n >= QUEUE_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)name[i]) && !strchr("._-", name[i]))
            return false;
    return true;
}

/* Reads min..max digits at *p into *ret and moves *p past them; false when fewer than min. */
static bool read_digits(const char **p, size_t min, size_t max, unsigned long *ret)
{
    unsigned long v = 0;
    size_t n = 0;
    for (; n < max && isdigit((unsigned char)(*p)[n]); n++)
        v = v * 10 + (unsigned long)((*p)[n] - '0');
    if (n < min)
        return false;
    *p += n;
    *ret = v;
    return true;
}

/* Slurm's time forms: "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS". A bare number is
 * not one of them here: parse_duration() reads it, as seconds. */
static int parse_slurm_time(const char *s, double *ret_s)
{
    unsigned long days = 0, f[3] = {0, 0, 0};
    const char *p = s;
    bool have_days = false;
    if (strchr(s, '-')) {
        if (!read_digits(&p, 1, 5, &days) || *p++ != '-')
            return -EINVAL;
        have_days = true;
    }
    size_t n = 0;
    for (;;) {
        if (n == 3 || !read_digits(&p, 1, 6, &f[n]))
            return -EINVAL;
        n++;
        if (*p == '\0')
            break;
        if (*p++ != ':')
            return -EINVAL;
    }
    if (!have_days && n < 2)
        return -EINVAL;
    unsigned long h = 0, m = 0, sec = 0;
    if (have_days) {
        /* D-HH, D-HH:MM, D-HH:MM:SS */
        h = f[0];
        m = n > 1 ? f[1] : 0;
        sec = n > 2 ? f[2] : 0;
    } else if (n == 2) {
        m = f[0];
        sec = f[1];
    } else {
        h = f[0];
        m = f[1];
        sec = f[2];
    }
    /* Only the leading field may run over (Slurm takes "90:00" as 90 minutes). */
    bool leading_h = !have_days && n == 3, leading_m = !have_days && n == 2;
    if ((!leading_h && h > 23) || (!leading_m && m > 59) || sec > 59)
        return -EINVAL;
    *ret_s = (double)days * 86400.0 + (double)h * 3600.0 + (double)m * 60.0 + (double)sec;
    return 0;
}

int queue_parse_time(const char *s, double *ret_s)
{
    if (!s)
        return -EINVAL;
    double v;
    if (strchr(s, ':') || strchr(s, '-')) {
        if (parse_slurm_time(s, &v) < 0)
            return -EINVAL;
        /* parse_duration()'s bound: past a hundred years is a mistake in units. */
        if (v > 100.0 * 365.0 * 86400.0)
            return -ERANGE;
    } else {
        int r = parse_duration(s, &v);
        if (r < 0)
            return r;
    }
    *ret_s = v;
    return 0;
}
