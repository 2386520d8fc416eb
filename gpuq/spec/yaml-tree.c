#include "gpuq/spec/yaml-tree.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define TAG_STR "tag:yaml.org,2002:str"
#define TAG_SEQ "tag:yaml.org,2002:seq"
#define TAG_MAP "tag:yaml.org,2002:map"

struct ybuild {
    yaml_parser_t parser;
    unsigned nodes;
    unsigned aliases;
    size_t n_anchors;
    struct {
        char *name;
        const struct ytree *node; /* in the tree being built; not owned */
    } anchors[YTREE_ANCHORS_MAX];
};

void ytree_free(struct ytree *t)
{
    if (!t)
        return;
    size_t n = t->kind == YTREE_MAP ? 2 * t->n : t->n;
    for (size_t i = 0; t->items && i < n; i++)
        ytree_free(t->items[i]);
    free(t->items);
    free(t->text);
    free(t);
}

bool ytree_is_null(const struct ytree *t)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
    if (t->kind != YTREE_SCALAR || !t->plain)
        return false;
    for (size_t i = 0; i < ELEMENTSOF(nulls); i++)
        if (strcmp(t->text, nulls[i]) == 0)
            return true;
    return false;
}

bool ytree_is_empty(const struct ytree *t)
{
    return ytree_is_null(t) || (t->kind != YTREE_SCALAR && t->n == 0);
}

static int parse_error(struct ybuild *b, struct errmsg *e)
{
    yaml_parser_t *p = &b->parser;
    if (p->error == YAML_MEMORY_ERROR)
        return -ENOMEM;
    if (p->context)
        return errmsg_set(e, -EINVAL, "line %zu: %s (%s)", p->problem_mark.line + 1,
                          p->problem ? p->problem : "not YAML", p->context);
    return errmsg_set(e, -EINVAL, "line %zu: %s", p->problem_mark.line + 1,
                      p->problem ? p->problem : "not YAML");
}

static int next_event(struct ybuild *b, yaml_event_t *ev, struct errmsg *e)
{
    return yaml_parser_parse(&b->parser, ev) ? 0 : parse_error(b, e);
}

static unsigned event_line(const yaml_event_t *ev)
{
    return ev->start_mark.line >= UINT32_MAX ? UINT32_MAX : (unsigned)ev->start_mark.line + 1;
}

static int node_new(struct ybuild *b, enum ytree_kind kind, unsigned line, unsigned depth,
                    struct ytree **ret, struct errmsg *e)
{
    if (depth > YTREE_DEPTH_MAX)
        return errmsg_set(e, -EINVAL, "line %u: nested deeper than %d levels", line,
                          YTREE_DEPTH_MAX);
    if (++b->nodes > YTREE_NODES_MAX)
        return errmsg_set(e, -E2BIG, "line %u: more than %d YAML nodes", line, YTREE_NODES_MAX);
    struct ytree *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->kind = kind;
    t->line = line;
    *ret = t;
    return 0;
}

static int check_tag(const yaml_char_t *tag, const char *allowed, unsigned line, struct errmsg *e)
{
    if (!tag || strcmp((const char *)tag, allowed) == 0)
        return 0;
    return errmsg_set(e, -EINVAL, "line %u: YAML tag '%.64s' is not supported", line,
                      (const char *)tag);
}

/* Appends per items (1, or 2 for a key and its value) to t, growing its array. */
static int items_add(struct ytree *t, size_t *cap, size_t per, struct ytree **add)
{
    size_t need = (t->n + 1) * per;
    if (need > *cap) {
        size_t c = *cap ? *cap * 2 : 8 * per;
        struct ytree **items = realloc(t->items, c * sizeof(*items));
        if (!items)
            return -ENOMEM;
        t->items = items;
        *cap = c;
    }
    memcpy(t->items + t->n * per, add, per * sizeof(*add));
    t->n++;
    return 0;
}

static int build_node(struct ybuild *b, const yaml_event_t *ev, unsigned depth, struct ytree **ret,
                      struct errmsg *e);

static int build_scalar(struct ybuild *b, const yaml_event_t *ev, unsigned depth,
                        struct ytree **ret, struct errmsg *e)
{
    unsigned line = event_line(ev);
    int r = check_tag(ev->data.scalar.tag, TAG_STR, line, e);
    if (r < 0)
        return r;
    const char *value = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    if (memchr(value, '\0', len))
        return errmsg_set(e, -EINVAL, "line %u: a string holds a NUL character", line);
    _cleanup_(ytree_freep) struct ytree *t = NULL;
    r = node_new(b, YTREE_SCALAR, line, depth, &t, e);
    if (r < 0)
        return r;
    t->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !ev->data.scalar.tag;
    t->text = strndup(value, len);
    if (!t->text)
        return -ENOMEM;
    *ret = TAKE_PTR(t);
    return 0;
}

static int build_seq(struct ybuild *b, const yaml_event_t *ev, unsigned depth, struct ytree **ret,
                     struct errmsg *e)
{
    unsigned line = event_line(ev);
    int r = check_tag(ev->data.sequence_start.tag, TAG_SEQ, line, e);
    if (r < 0)
        return r;
    _cleanup_(ytree_freep) struct ytree *t = NULL;
    r = node_new(b, YTREE_SEQ, line, depth, &t, e);
    if (r < 0)
        return r;
    size_t cap = 0;
    for (;;) {
        yaml_event_t next;
        r = next_event(b, &next, e);
        if (r < 0)
            return r;
        if (next.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&next);
            break;
        }
        struct ytree *item = NULL;
        r = build_node(b, &next, depth + 1, &item, e);
        yaml_event_delete(&next);
        if (r == 0 && (r = items_add(t, &cap, 1, &item)) < 0)
            ytree_free(item);
        if (r < 0)
            return r;
    }
    *ret = TAKE_PTR(t);
    return 0;
}

static int key_cmp(const void *a, const void *b)
{
    const struct ytree *const *x = a, *const *y = b;
    return strcmp((*x)->text, (*y)->text);
}

/* No key twice in a mapping (Kubernetes' strict decoding refuses that too): sorted, so that a
 * mapping of many keys costs n log n. */
static int check_duplicate_keys(const struct ytree *t, struct errmsg *e)
{
    if (t->n < 2)
        return 0;
    _cleanup_free_ const struct ytree **keys = malloc(t->n * sizeof(*keys));
    if (!keys)
        return -ENOMEM;
    for (size_t i = 0; i < t->n; i++)
        keys[i] = t->items[2 * i];
    qsort(keys, t->n, sizeof(*keys), key_cmp);
    for (size_t i = 1; i < t->n; i++)
        if (strcmp(keys[i - 1]->text, keys[i]->text) == 0) {
            unsigned line = keys[i]->line > keys[i - 1]->line ? keys[i]->line : keys[i - 1]->line;
            return errmsg_set(e, -EINVAL, "line %u: key '%.64s' given twice", line, keys[i]->text);
        }
    return 0;
}

/* A key and its value, after the key's event. */
static int build_pair(struct ybuild *b, const yaml_event_t *key_ev, unsigned depth,
                      struct ytree *pair[2], struct errmsg *e)
{
    _cleanup_(ytree_freep) struct ytree *key = NULL;
    int r = build_node(b, key_ev, depth, &key, e);
    if (r < 0)
        return r;
    if (key->kind != YTREE_SCALAR)
        return errmsg_set(e, -EINVAL, "line %u: a mapping key must be a string", key->line);
    yaml_event_t next;
    r = next_event(b, &next, e);
    if (r < 0)
        return r;
    r = build_node(b, &next, depth, &pair[1], e);
    yaml_event_delete(&next);
    if (r < 0)
        return r;
    pair[0] = TAKE_PTR(key);
    return 0;
}

static int build_map(struct ybuild *b, const yaml_event_t *ev, unsigned depth, struct ytree **ret,
                     struct errmsg *e)
{
    unsigned line = event_line(ev);
    int r = check_tag(ev->data.mapping_start.tag, TAG_MAP, line, e);
    if (r < 0)
        return r;
    _cleanup_(ytree_freep) struct ytree *t = NULL;
    r = node_new(b, YTREE_MAP, line, depth, &t, e);
    if (r < 0)
        return r;
    size_t cap = 0;
    for (;;) {
        yaml_event_t next;
        r = next_event(b, &next, e);
        if (r < 0)
            return r;
        if (next.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&next);
            break;
        }
        struct ytree *pair[2] = {NULL, NULL};
        r = build_pair(b, &next, depth + 1, pair, e);
        yaml_event_delete(&next);
        if (r == 0 && (r = items_add(t, &cap, 2, pair)) < 0) {
            ytree_free(pair[0]);
            ytree_free(pair[1]);
        }
        if (r < 0)
            return r;
    }
    r = check_duplicate_keys(t, e);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(t);
    return 0;
}

static int tree_copy(struct ybuild *b, const struct ytree *src, unsigned depth, struct ytree **ret,
                     struct errmsg *e)
{
    _cleanup_(ytree_freep) struct ytree *t = NULL;
    int r = node_new(b, src->kind, src->line, depth, &t, e);
    if (r < 0)
        return r;
    t->plain = src->plain;
    if (src->text && !(t->text = strdup(src->text)))
        return -ENOMEM;
    size_t n = src->kind == YTREE_MAP ? 2 * src->n : src->n;
    if (n) {
        t->items = calloc(n, sizeof(*t->items));
        if (!t->items)
            return -ENOMEM;
        t->n = src->n; /* ytree_free() skips the NULLs not copied yet */
    }
    for (size_t i = 0; i < n; i++) {
        r = tree_copy(b, src->items[i], depth + 1, &t->items[i], e);
        if (r < 0)
            return r;
    }
    *ret = TAKE_PTR(t);
    return 0;
}

/* An alias is a copy of its anchor's node, so that the tree stays a tree; the node budget
 * bounds what copies of copies can cost. */
static int alias_copy(struct ybuild *b, const yaml_event_t *ev, unsigned depth, struct ytree **ret,
                      struct errmsg *e)
{
    unsigned line = event_line(ev);
    const char *name = (const char *)ev->data.alias.anchor;
    if (++b->aliases > YTREE_ALIASES_MAX)
        return errmsg_set(e, -EINVAL, "line %u: more than %d YAML aliases", line,
                          YTREE_ALIASES_MAX);
    for (size_t i = b->n_anchors; i > 0; i--)
        if (strcmp(b->anchors[i - 1].name, name) == 0)
            return tree_copy(b, b->anchors[i - 1].node, depth, ret, e);
    return errmsg_set(e, -EINVAL, "line %u: unknown YAML anchor '%.64s'", line, name);
}

static int anchor_add(struct ybuild *b, const yaml_char_t *name, const struct ytree *node,
                      struct errmsg *e)
{
    if (b->n_anchors == YTREE_ANCHORS_MAX)
        return errmsg_set(e, -EINVAL, "line %u: more than %d YAML anchors", node->line,
                          YTREE_ANCHORS_MAX);
    char *copy = strdup((const char *)name);
    if (!copy)
        return -ENOMEM;
    b->anchors[b->n_anchors].name = copy;
    b->anchors[b->n_anchors].node = node;
    b->n_anchors++;
    return 0;
}

static int build_node(struct ybuild *b, const yaml_event_t *ev, unsigned depth, struct ytree **ret,
                      struct errmsg *e)
{
    const yaml_char_t *anchor;
    _cleanup_(ytree_freep) struct ytree *t = NULL;
    int r;
    switch (ev->type) {
    case YAML_ALIAS_EVENT:
        return alias_copy(b, ev, depth, ret, e);
    case YAML_SCALAR_EVENT:
        anchor = ev->data.scalar.anchor;
        r = build_scalar(b, ev, depth, &t, e);
        break;
    case YAML_SEQUENCE_START_EVENT:
        anchor = ev->data.sequence_start.anchor;
        r = build_seq(b, ev, depth, &t, e);
        break;
    case YAML_MAPPING_START_EVENT:
        anchor = ev->data.mapping_start.anchor;
        r = build_map(b, ev, depth, &t, e);
        break;
    default:
        return errmsg_set(e, -EINVAL, "line %u: unexpected YAML", event_line(ev));
    }
    if (r == 0 && anchor)
        r = anchor_add(b, anchor, t, e);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(t);
    return 0;
}

/* The next event, which must be of type; -EINVAL naming what was expected otherwise. */
static int expect_event(struct ybuild *b, yaml_event_type_t type, const char *what,
                        struct errmsg *e)
{
    yaml_event_t ev;
    int r = next_event(b, &ev, e);
    if (r < 0)
        return r;
    bool ok = ev.type == type;
    unsigned line = event_line(&ev);
    yaml_event_delete(&ev);
    return ok ? 0 : errmsg_set(e, -EINVAL, "line %u: expected %s", line, what);
}

static int parse_document(struct ybuild *b, struct ytree **ret, struct errmsg *e)
{
    int r = expect_event(b, YAML_STREAM_START_EVENT, "a YAML stream", e);
    if (r < 0)
        return r;
    yaml_event_t ev;
    if ((r = next_event(b, &ev, e)) < 0)
        return r;
    bool empty = ev.type == YAML_STREAM_END_EVENT;
    yaml_event_delete(&ev);
    if (empty)
        return errmsg_set(e, -EINVAL, "empty: no YAML document");
    if ((r = next_event(b, &ev, e)) < 0)
        return r;
    _cleanup_(ytree_freep) struct ytree *root = NULL;
    r = build_node(b, &ev, 0, &root, e);
    yaml_event_delete(&ev);
    if (r < 0)
        return r;
    if ((r = expect_event(b, YAML_DOCUMENT_END_EVENT, "the end of the document", e)) < 0)
        return r;
    if ((r = next_event(b, &ev, e)) < 0)
        return r;
    bool more = ev.type == YAML_DOCUMENT_START_EVENT;
    unsigned line = event_line(&ev);
    yaml_event_delete(&ev);
    if (more)
        return errmsg_set(e, -EINVAL, "line %u: a second YAML document; a file holds one Job",
                          line);
    *ret = TAKE_PTR(root);
    return 0;
}

int ytree_parse(const char *text, size_t len, struct ytree **ret, struct errmsg *e)
{
    struct ybuild b = {0};
    if (!yaml_parser_initialize(&b.parser))
        return -ENOMEM;
    yaml_parser_set_input_string(&b.parser, (const unsigned char *)text, len);
    struct ytree *root = NULL;
    int r = parse_document(&b, &root, e);
    yaml_parser_delete(&b.parser);
    for (size_t i = 0; i < b.n_anchors; i++)
        free(b.anchors[i].name);
    if (r < 0)
        return r;
    *ret = root;
    return 0;
}
