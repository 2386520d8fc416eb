/* Registry credentials from files users already have.
 *
 * Two formats, looked up in order, first match wins:
 *   1. netrc style (enroot's ~/.config/enroot/.credentials uses it too):
 *        machine nvcr.io login $oauthtoken password nvapi-XXXX
 *      tokens separated by blanks or newlines; "default" matches any host; '#' starts a comment
 *      line; "macdef" is refused (not a credentials file).
 *   2. Docker's config.json: {"auths": {"HOST": {"auth": base64("user:password")}}} or
 *      {"username": …, "password": …}; keys may be "https://HOST/…" (Docker Hub's
 *      "https://index.docker.io/v1/" matches docker.io and registry-1.docker.io).
 *      Credential helpers ("credsStore", "credHelpers") are not run; a host that only has one
 *      is reported as such so the user knows why no credentials were found. */
#pragma once

#include <stddef.h>

#include "lib/errmsg.h"

struct creds {
    char *user;
    char *password;
};

/* Finds credentials for host (a registry's "host[:port]"; Docker Hub is "docker.io") in the
 * netrc-style file (NULL or missing: skipped) and then the Docker config (NULL or missing:
 * skipped). user, when not NULL, must match the login too (enroot's USER@ in the reference).
 * Returns 1 and fills *ret (free with creds_done), 0 if none match, or -EINVAL naming the file
 * (and line for netrc) that is malformed, -EACCES/-EIO if a file exists but cannot be read,
 * -ENOMEM. Files larger than 1 MiB are refused (-EFBIG). On 0, e holds "" or a note to show if
 * the registry then asks for credentials: the host's credentials are kept by a Docker credential
 * helper (credsStore/credHelpers), which is not run.
 * netrc has no quoting: a '"' is part of the word, and values cannot contain blanks. A "machine"
 * without a port also matches the host with any port (curl does the same); an exact name wins,
 * then the first. Docker Hub's names (docker.io, index.docker.io, registry-1.docker.io,
 * auth.docker.io as enroot's documentation writes it, registry.hub.docker.com) match each other.
 * Secrets are wiped from the file buffer; jansson's internal copies are freed without wiping. */
int creds_lookup(const char *netrc_path, const char *docker_config_path, const char *host,
                 const char *user, struct creds *ret, struct errmsg *e);

/* The parsers behind creds_lookup, on text in memory (for tests and fuzzing); name is used in
 * messages. Same returns; on 0, e is left as it was or gets the credential-helper note. */
int creds_from_netrc(const char *name, const char *text, size_t len, const char *host,
                     const char *user, struct creds *ret, struct errmsg *e);
int creds_from_docker_config(const char *name, const char *text, size_t len, const char *host,
                             const char *user, struct creds *ret, struct errmsg *e);

/* Wipes and frees the strings; safe on a zeroed struct. */
void creds_done(struct creds *c);
/* Wipes a secret string (a password, a token, an Authorization header) and frees it; NULL is
 * fine. */
void creds_wipe_free(char *s);
