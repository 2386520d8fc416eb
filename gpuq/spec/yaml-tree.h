/* YAML text to a small tree of mappings, sequences and scalars, for the Job reader
 * (spec-yaml.c). libyaml parses; this only builds the tree, with the limits that make hostile
 * input cheap: one document, YTREE_DEPTH_MAX levels, few anchors and aliases, a node budget
 * that alias copies count against (no "billion laughs"), no NUL in strings, no custom tags. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "lib/errmsg.h"
#include "lib/macro.h"

#define YTREE_DEPTH_MAX   64
#define YTREE_NODES_MAX   100000
#define YTREE_ANCHORS_MAX 32
#define YTREE_ALIASES_MAX 32

enum ytree_kind {
    YTREE_SCALAR,
    YTREE_SEQ,
    YTREE_MAP,
};

struct ytree {
    enum ytree_kind kind;
    unsigned line;        /* 1-based, where the node starts */
    bool plain;           /* a scalar written without quotes or tag: may be a number, bool, null */
    char *text;           /* a scalar's text, NUL-free */
    size_t n;             /* a sequence's items, a mapping's pairs */
    struct ytree **items; /* sequence: n items; mapping: 2n, key then value (keys are scalars,
                             none twice) */
};

/* Parses text[0..len) (UTF-8 or UTF-16 with a BOM, as libyaml reads). Returns 0 and the root
 * in *ret (free with ytree_free), or -EINVAL with "line N: why", -E2BIG past the node budget,
 * -ENOMEM. */
int ytree_parse(const char *text, size_t len, struct ytree **ret, struct errmsg *e);

void ytree_free(struct ytree *t);
DEFINE_POINTER_CLEANUP(struct ytree, ytree_free)

/* A plain null: empty, "~", "null", "Null" or "NULL" (YAML 1.2's core schema). */
bool ytree_is_null(const struct ytree *t);
/* Null, an empty mapping or an empty sequence: a value that says nothing. */
bool ytree_is_empty(const struct ytree *t);
