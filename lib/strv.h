/* NULL-terminated string vectors (argv, environments, lists from config files).
 *
 * A strv owns its strings and its array; every function that grows one may move the array, so
 * pass its address. All return 0 or -ENOMEM unless said otherwise; on -ENOMEM the vector is
 * unchanged. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "lib/macro.h"

size_t strv_length(char *const *v);
/* Frees each string and the array; NULL is allowed. */
void strv_free(char **v);
DEFINE_POINTER_CLEANUP(char *, strv_free)
#define _cleanup_strv_free_ _cleanup_(strv_freep)

/* An empty vector (a lone NULL), or NULL on ENOMEM. */
char **strv_new(void);
/* A deep copy of v (NULL gives an empty vector); NULL on ENOMEM. */
char **strv_copy(char *const *v);
/* Appends a copy of s (*v may be NULL: it becomes a one-element vector). */
int strv_push(char ***v, const char *s);
/* Appends s itself, taking ownership (freed on failure). */
int strv_consume(char ***v, char *s);
/* Appends copies of every string of add. */
int strv_extend(char ***v, char *const *add);
/* Splits s at runs of blanks (space, tab, newline) into a new vector; empty parts are dropped.
 * Returns 0 and *ret, or -ENOMEM. */
int strv_split_blanks(const char *s, char ***ret);
bool strv_contains(char *const *v, const char *s);
/* The strings of v with sep between them, malloc'd; NULL on ENOMEM. */
char *strv_join(char *const *v, const char *sep);

/* Environment vectors ("K=V"). */
/* The value of key, or NULL. The last assignment wins, as getenv does with duplicates. */
const char *strv_env_get(char *const *env, const char *key);
/* Sets key to value: replaces every existing assignment of key, else appends. */
int strv_env_set(char ***env, const char *key, const char *value);
/* Applies an assignment "K=V" (replacing K's); -EINVAL if it has no '=' or an empty key. */
int strv_env_put(char ***env, const char *assignment);
/* Removes every assignment of key. */
void strv_env_unset(char **env, const char *key);
