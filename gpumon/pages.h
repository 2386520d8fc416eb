/* Pages: each snapshot's exposition rendered once per format and encoding, and served as those
 * bytes to every scrape of it.
 *
 * A page is made by whoever needs it first: the sampler, just before it publishes a snapshot,
 * for the kinds scrapers asked for lately (pages_prepare), or a scrape that finds its kind
 * missing (pages_get). Either way it is made once: the snapshot keeps it until its last
 * reference goes. A scrape then costs a reference and a pointer, as a static reply does. */
#pragma once

#include <stdbool.h>

#include "expose.h"
#include "lib/macro.h"
#include "lib/prom.h"
#include "snapshot.h"

/* A kind asked for within this many seconds is rendered ahead, with each new snapshot. */
#define PAGES_RECENT_S 600.0

struct pages;

/* Keeps a copy of base (its format is ignored; version is borrowed and must outlive pages).
 * NULL on ENOMEM. */
struct pages *pages_new(const struct expose_opts *base);
void pages_free(struct pages *p);
DEFINE_POINTER_CLEANUP(struct pages, pages_free)

enum page_kind page_kind_of(enum prom_format format, bool gzip);
enum prom_format page_format(enum page_kind k);
bool page_gzipped(enum page_kind k);

/* The page of kind k of s, rendered now if nobody did yet, and marks k as asked for. Returns 0
 * and *ret (valid while the caller holds its reference to s), or -ENOMEM / -EIO. */
int pages_get(struct pages *p, struct snapshot *s, enum page_kind k, const struct page **ret);

/* Renders the kinds asked for within PAGES_RECENT_S into s, which is not published yet; a
 * failure only leaves that kind to the first scrape. userdata is the struct pages; the
 * signature is sampler_set_prepare()'s. */
void pages_prepare(struct snapshot *s, void *userdata);
