/* Content digests ("sha256:<hex>"), computed while data streams (OpenSSL's EVP interface). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "lib/errmsg.h"
#include "lib/macro.h"

/* "sha512:" + 128 hex digits + NUL. */
#define DIGEST_STRING_MAX 136

struct digest_ctx;

/* True if s is a well-formed digest this program can verify: "sha256:" + 64 or "sha512:" + 128
 * lower-case hex digits, nothing else. */
bool digest_valid(const char *s);

/* Starts hashing with the algorithm named by the expected digest's prefix. Returns 0 and a new
 * context, -EINVAL (message quotes the digest) if it is not digest_valid(), or -ENOMEM. */
int digest_begin(const char *expected, struct digest_ctx **ret, struct errmsg *e);
/* Starts a sha256 context (for computing a digest that is not known in advance). */
int digest_begin_sha256(struct digest_ctx **ret);
void digest_update(struct digest_ctx *c, const void *data, size_t len);
/* Writes the "algo:hex" of everything hashed so far into out (DIGEST_STRING_MAX bytes). The
 * context stays usable only for digest_free. */
void digest_final(struct digest_ctx *c, char out[DIGEST_STRING_MAX]);
/* Finishes and compares with the digest given to digest_begin. Returns 0 if equal, else
 * -EBADMSG with "digest mismatch: expected sha256:…, got sha256:…". */
int digest_verify(struct digest_ctx *c, struct errmsg *e);
void digest_free(struct digest_ctx *c);
DEFINE_POINTER_CLEANUP(struct digest_ctx, digest_free)

/* One-shot check of a buffer against an expected digest: 0, -EBADMSG with the mismatch message,
 * -EINVAL for a malformed digest, -ENOMEM. */
int digest_check(const char *expected, const void *data, size_t len, struct errmsg *e);

/* One-shot: the sha256 digest of a buffer into out. */
void digest_sha256(const void *data, size_t len, char out[DIGEST_STRING_MAX]);

/* The hex part of a valid digest (after the ':'), for file names. */
const char *digest_hex(const char *digest);
