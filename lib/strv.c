#include "lib/strv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t strv_length(char *const *v)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    return n;
}

void strv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

char **strv_new(void)
{
    return calloc(1, sizeof(char *));
}

char **strv_copy(char *const *v)
{
    char **c = strv_new();
    if (c && strv_extend(&c, v) < 0) {
        strv_free(c);
        return NULL;
    }
    return c;
}

int strv_consume(char ***v, char *s)
{
    size_t n = strv_length(*v);
    char **nv = realloc(*v, (n + 2) * sizeof(char *));
    if (!nv) {
        free(s);
        return -ENOMEM;
    }
    nv[n] = s;
    nv[n + 1] = NULL;
    *v = nv;
    return 0;
}

int strv_push(char ***v, const char *s)
{
    char *c = strdup(s);
    return c ? strv_consume(v, c) : -ENOMEM;
}

int strv_extend(char ***v, char *const *add)
{
    size_t before = strv_length(*v);
    for (size_t i = 0; add && add[i]; i++) {
        if (strv_push(v, add[i]) < 0) {
            /* Undo the partial append so the caller's vector is as it was. */
            for (size_t j = before; (*v)[j]; j++)
                free((*v)[j]);
            (*v)[before] = NULL;
            return -ENOMEM;
        }
    }
    if (!*v && !(*v = strv_new()))
        return -ENOMEM;
    return 0;
}

int strv_split_blanks(const char *s, char ***ret)
{
    char **v = strv_new();
    if (!v)
        return -ENOMEM;
    while (s && *s) {
        s += strspn(s, " \t\n");
        size_t len = strcspn(s, " \t\n");
        if (len == 0)
            break;
        char *w = strndup(s, len);
        if (!w || strv_consume(&v, w) < 0) {
            strv_free(v);
            return -ENOMEM;
        }
        s += len;
    }
    *ret = v;
    return 0;
}

bool strv_contains(char *const *v, const char *s)
{
    for (size_t i = 0; v && v[i]; i++)
        if (strcmp(v[i], s) == 0)
            return true;
    return false;
}

/* True if entry is an assignment of key ("key=..."). */
static bool env_matches(const char *entry, const char *key, size_t klen)
{
    return strncmp(entry, key, klen) == 0 && entry[klen] == '=';
}

const char *strv_env_get(char *const *env, const char *key)
{
    size_t klen = strlen(key);
    const char *found = NULL;
    for (size_t i = 0; env && env[i]; i++)
        if (env_matches(env[i], key, klen))
            found = env[i] + klen + 1;
    return found;
}

void strv_env_unset(char **env, const char *key)
{
    size_t klen = strlen(key), out = 0;
    for (size_t i = 0; env && env[i]; i++) {
        if (env_matches(env[i], key, klen))
            free(env[i]);
        else
            env[out++] = env[i];
    }
    if (env)
        env[out] = NULL;
}

int strv_env_put(char ***env, const char *assignment)
{
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment)
        return -EINVAL;
    char *copy = strdup(assignment);
    _cleanup_free_ char *key = strndup(assignment, (size_t)(eq - assignment));
    if (!copy || !key) {
        free(copy);
        return -ENOMEM;
    }
    /* Append first, so that a failure leaves the old value in place. */
    size_t n = strv_length(*env);
    int r = strv_consume(env, copy);
    if (r < 0)
        return r;
    (*env)[n] = NULL;
    strv_env_unset(*env, key);
    n = strv_length(*env);
    (*env)[n] = copy;
    (*env)[n + 1] = NULL;
    return 0;
}

int strv_env_set(char ***env, const char *key, const char *value)
{
    size_t len = strlen(key) + strlen(value) + 2;
    _cleanup_free_ char *a = malloc(len);
    if (!a)
        return -ENOMEM;
    snprintf(a, len, "%s=%s", key, value);
    return strv_env_put(env, a);
}

char *strv_join(char *const *v, const char *sep)
{
    size_t len = 1;
    for (size_t i = 0; v && v[i]; i++)
        len += strlen(v[i]) + (i ? strlen(sep) : 0);
    char *s = malloc(len), *p = s;
    if (!s)
        return NULL;
    *p = '\0';
    for (size_t i = 0; v && v[i]; i++)
        p = stpcpy(i ? stpcpy(p, sep) : p, v[i]);
    return s;
}
