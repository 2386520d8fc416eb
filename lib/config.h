/* Daemon configuration files (INI, parsed by inih).
 *
 * A file is loaded whole into a `struct config`; the program then asks for the keys it knows.
 * Every key asked for is marked as used, so that config_check_unused() can name a key nobody
 * asked for — usually a typo ("devcie") that would otherwise be silently ignored. Errors name
 * the file and line ("coold.conf:7: ..."), the section and the key.
 *
 * A config is not thread-safe: load and read it from one thread, at startup. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/errmsg.h"
#include "lib/macro.h"

struct config;

/* Loads the INI file at path. Keys before any [section] belong to the section "" (empty name).
 * Syntax: "[section]" lines, "key = value" lines, comments on lines starting with ';' or '#',
 * and inline comments after " ;". Leading blanks are ignored (no continuation lines). Names and
 * values are case-sensitive. Lines are limited to 198 bytes after leading blanks (the line
 * buffer of Debian's inih; longer lines are an error, never split), the file to 1 MiB (-EFBIG).
 * Returns 0 and a new config in *ret (free with config_free), or:
 *   -ENOENT (or another -errno) if the file cannot be opened, message names the path;
 *   -EINVAL on a syntax error ("coold.conf:7: syntax error") or a key given twice in one
 *           section ("coold.conf:9: duplicate key 'port' in [metrics], first set on line 4");
 *   -ENOMEM. */
int config_load(const char *path, struct config **ret, struct errmsg *e);

/* Same as config_load() but parses text held in memory; name is used in messages in place of a
 * file name. The text need not be NUL-terminated. */
int config_load_string(const char *name, const char *text, size_t len, struct config **ret,
                       struct errmsg *e);

/* Frees the config and every string handed out by its getters. NULL is allowed. */
void config_free(struct config *c);
DEFINE_POINTER_CLEANUP(struct config, config_free)

/* The file name the config was loaded from (as given to config_load), for messages. */
const char *config_path(const struct config *c);

/* True if the file sets at least one key in this section. Marks nothing as used. */
bool config_has_section(const struct config *c, const char *section);

/* Iterates over the section names that hold keys, in order of first appearance: pass NULL for
 * the first, then the previous result. Returns NULL at the end. Useful for repeated sections
 * such as [hook.checkpoint] and [hook.notify]. Strings are owned by the config. */
const char *config_next_section(const struct config *c, const char *prev);

/* Iterates over the keys set in section, in file order: pass NULL for the first, then the
 * previous result. Returns NULL at the end (or when prev is not a key of section). Marks nothing
 * as used. For sections whose key names carry data ("gpus.H100 = 2"); strings are owned by the
 * config. */
const char *config_next_key(const struct config *c, const char *section, const char *prev);

/* Returns the raw value of key in section, or NULL if absent, and marks the key as used.
 * The string is owned by the config and lives until config_free(). */
const char *config_get(struct config *c, const char *section, const char *key);

/* Line number where key in section was set, or 0 if absent. Does not mark the key as used. */
unsigned config_line(const struct config *c, const char *section, const char *key);

/* String getter: *ret = the value, or def if the key is absent (def may be NULL).
 * Returns 1 if the key was present, 0 if the default was used. Never fails. */
int config_get_string(struct config *c, const char *sec, const char *key, const char *def,
                      const char **ret);

/* Unsigned integer getter (decimal, or 0x hex). Absent key: *ret = def, returns 0. Present and
 * valid: returns 1. Not a number, or outside [min, max]: -EINVAL / -ERANGE with a message like
 * "coold.conf:5: [serial] baud: '96OO' is not a number"; *ret is untouched on failure. */
int config_get_uint(struct config *c, const char *sec, const char *key, unsigned long def,
                    unsigned long min, unsigned long max, unsigned long *ret, struct errmsg *e);

/* Boolean getter: yes/no, true/false, 1/0, on/off (case-insensitive). Absent: *ret = def,
 * returns 0; present: returns 1; anything else: -EINVAL naming file:line, section and key. */
int config_get_bool(struct config *c, const char *sec, const char *key, bool def, bool *ret,
                    struct errmsg *e);

/* Duration getter in seconds, syntax as parse_duration(). Absent: *ret_s = def_s, returns 0;
 * present: returns 1; invalid: -EINVAL / -ERANGE naming file:line, section and key. */
int config_get_duration(struct config *c, const char *sec, const char *key, double def_s,
                        double *ret_s, struct errmsg *e);

/* Size getter in bytes, syntax as parse_size(). Absent: *ret = def, returns 0; present: returns
 * 1; invalid: -EINVAL / -ERANGE naming file:line, section and key. */
int config_get_size(struct config *c, const char *sec, const char *key, uint64_t def, uint64_t *ret,
                    struct errmsg *e);

/* Returns 0 if every key of the file was asked for (by any getter above), else -EINVAL naming
 * the first such key in file order: "coold.conf:3: unknown key 'devcie' in [controller]". */
int config_check_unused(struct config *c, struct errmsg *e);

/* Parses a duration into seconds: a non-negative decimal number with an optional unit
 * "ms", "s", "m", "h" or "d" (no unit means seconds): "30", "30s", "1.5s", "2m", "500ms", "1h".
 * Surrounding blanks are allowed, nothing else. Returns 0, or -EINVAL for empty, negative,
 * junk, NaN/inf, -ERANGE if the result does not fit a double or exceeds 100 years. */
int parse_duration(const char *s, double *ret_s);

/* Parses a size in bytes: a decimal integer with an optional unit, K, M, G, T or P (powers of
 * 1024; also written KiB, KB, k, ...), or B: "4096", "512M", "64 GiB", "1T". Surrounding blanks
 * are allowed, nothing else. Returns 0, or -EINVAL for empty, signed, fractional or junk text,
 * -ERANGE if the result does not fit 64 bits. *ret is written only on success. */
int parse_size(const char *s, uint64_t *ret);

/* Parses "host:port" for listening: "127.0.0.1:9420", "[::1]:9420", "localhost:80" and ":9420"
 * (empty host: all addresses; host[0] is then '\0'). Port 0..65535 (0 = let the kernel pick).
 * IPv6 literals must be in brackets; host is written without the brackets.
 * Returns 0, -EINVAL (malformed; message says why) or -ENAMETOOLONG (host does not fit). */
int parse_listen_address(const char *s, char *host, size_t host_size, uint16_t *ret_port,
                         struct errmsg *e);
