/* OCI distribution v2 client (libcurl through lib/http-client.h).
 *
 * One struct registry talks to one repository of one registry. It answers auth challenges
 * itself: on 401 it reads WWW-Authenticate, and for "Bearer realm=…,service=…,scope=…" fetches a
 * token from the realm (with Basic credentials when creds.h finds some, anonymously otherwise),
 * caches it until it expires and retries; for "Basic" it sends the credentials. Transient
 * failures (connection errors, timeouts, stalls, 429, 5xx) are retried with exponential backoff
 * (0.5 s doubling to 8 s, honouring Retry-After); 4xx other than 401/408/429 are not.
 *
 * Transport: HTTPS, with certificate checks. Plain HTTP only for loopback registries
 * (image_ref_is_loopback) and hosts listed in registry_opts.insecure; for those HTTPS is tried
 * first and HTTP used when the TLS handshake or connection fails (Docker's behaviour), and the
 * choice is remembered for the struct's lifetime.
 *
 * Thread-safe: after registry_open, any number of threads may fetch through one struct (the
 * token cache is locked). */
#pragma once

#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "capsule/image/digest.h"
#include "lib/errmsg.h"
#include "lib/macro.h"
#include "capsule/image/ref.h"

struct registry_opts {
    char *const *insecure; /* "host[:port]" allowed over HTTP; NULL-terminated or NULL */
    /* Plain HTTP only for the hosts in insecure, loopback ones too (the node cache's service:
     * whoever can answer on a plain-HTTP address can vouch for any layer there). */
    bool loopback_needs_listing;
    /* A flag of the caller's that cancels this client's requests as registry_cancel() does
     * (the node cache's service sets it to make way for a rekey). NULL: none. */
    const atomic_bool *cancel;
    /* The file that messages tell to change (insecure_registries, max_layer_size); NULL:
     * "capsule.conf". */
    const char *config_name;
    const char *netrc_path; /* credentials files (creds.h); NULL: none */
    const char *docker_config_path;
    unsigned retries;        /* extra attempts per request; 0 = default 4 */
    long connect_timeout_ms; /* 0 = 15 s */
    long stall_timeout_s;    /* abort a transfer under 1 KiB/s for this long; 0 = 60 */
    const char *ca_file;     /* extra CA bundle, NULL = system's */
    /* A mirror to talk to instead of the reference's registry (image/mirror.h): "http[s]://
     * host[:port]", used with the scheme given; credentials are those of the mirror's host.
     * NULL: the registry itself. */
    const char *mirror;
    /* The node cache's service (capsule/cached): the requester's own "Authorization: ..." header
     * line, sent with every request instead of credentials looked up here. A 401 is then a
     * refusal of the requester's credentials, never a new challenge answered with others':
     * -EKEYEXPIRED once the registry had accepted them (a token that expired), else -EACCES.
     * NULL: look credentials up as above. */
    const char *authorization;
};

struct registry;

/* Prepares a client for ref's registry and repository; no network traffic yet. The options are
 * copied. Returns 0, -EINVAL, -ENOMEM. */
int registry_open(const struct image_ref *ref, const struct registry_opts *o, struct registry **ret,
                  struct errmsg *e);
void registry_free(struct registry *r);
DEFINE_POINTER_CLEANUP(struct registry, registry_free)
/* Makes transfers in progress and every later request of r fail with -ECANCELED, so that a pull
 * can stop its other downloads when one layer fails. Thread-safe; cannot be undone. */
void registry_cancel(struct registry *r);

struct registry_manifest {
    char *data; /* the body, as received (NUL-terminated; len excludes it) */
    size_t len;
    char *content_type;             /* Content-Type without parameters, "" if none */
    char digest[DIGEST_STRING_MAX]; /* sha256 of data */
};
void registry_manifest_done(struct registry_manifest *m);

/* The "Authorization: ..." header line r sends now (after a request settled it: a Bearer token for
 * the repository's pull scope, or Basic credentials), malloc'd, for the node cache's service to
 * pull with the requester's own access; NULL when the registry asked for none. 0 or -ENOMEM. */
int registry_authorization(struct registry *r, char **ret);

/* HEAD /v2/<repo>/blobs/<digest>: 0 when the registry holds the blob in this repository and lets
 * r's credentials have it; -ENOENT, -EACCES and the other errors of registry_get_manifest. */
int registry_check_blob(struct registry *r, const char *digest, struct errmsg *e);

/* GET /v2/<repo>/manifests/<reference> (a tag or a digest) with Accept: MANIFEST_ACCEPT.
 * When reference is a digest the body must match it (-EBADMSG otherwise). Bodies over 4 MiB are
 * refused (-EFBIG). Errors: -ENOENT ("nvcr.io/nvidia/pytorch:99: manifest unknown"), -EACCES
 * ("127.0.0.1:5000/x: access denied (HTTP 401); credentials for 127.0.0.1:5000 were not found in
 * FILE, FILE" or "... rejected"), -ECONNREFUSED, -ETIMEDOUT, -EPROTO (TLS refused for a host
 * that is not allowed plain HTTP: the message names the config key insecure_registries),
 * -ENXIO (the registry's host name does not resolve at the first contact; later, a name that
 * does not resolve is retried as a transient failure),
 * -EIO for other HTTP statuses (message has the status and the registry's error code). */
int registry_get_manifest(struct registry *r, const char *reference, struct registry_manifest *ret,
                          struct errmsg *e);

/* Fetches a small blob (an image config) into memory, verified against digest. At most max
 * bytes. Same errors as above. */
int registry_get_blob_mem(struct registry *r, const char *digest, size_t max, char **ret_data,
                          size_t *ret_len, struct errmsg *e);

/* Called as a blob streams: bytes written so far (including a resumed offset) and the total
 * (the descriptor's size). Must be cheap and thread-safe. */
typedef void (*registry_progress_fn)(void *userdata, int64_t done, int64_t total);

/* Streams blob digest (size bytes, from the manifest) into fd, starting at offset: bytes
 * [0, offset) are already in fd and are hashed first (read back through pread), then the rest
 * is requested with a Range header. If the server answers 200 instead of 206 the file is
 * truncated and written from the start. The whole content is verified against digest; more
 * bytes than size is an error. Retries resume from what was written. Returns 0 (the file then
 * holds exactly the blob), -EBADMSG on a digest or size mismatch (the caller must discard the
 * file), or the errors above. */
int registry_get_blob(struct registry *r, const char *digest, int64_t size, int fd, off_t offset,
                      registry_progress_fn progress, void *userdata, struct errmsg *e);
