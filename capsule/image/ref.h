/* Image references as users type them.
 *
 * Two syntaxes are accepted, so that nobody has to know which one a tool wanted:
 *   - Docker's: [REGISTRY/]REPOSITORY[:TAG][@DIGEST]. The first component is a registry when it
 *     contains '.' or ':' or is "localhost" (Docker's rule); otherwise the image is on Docker Hub
 *     and a one-component name gets "library/" ("ubuntu" -> docker.io/library/ubuntu:latest).
 *   - enroot's: docker://[USER@][REGISTRY#]IMAGE[:TAG][@DIGEST]. '#' separates the registry.
 *     Without '#', the rest is read with Docker's rule, so
 *     "docker://nvcr.io/nvidia/pytorch:24.01-py3" and "docker://nvcr.io#nvidia/pytorch:24.01-py3"
 *     name the same image. A reference with a '#' but no scheme ("nvcr.io#nvidia/pytorch", as
 *     Pyxis' --container-image takes it) is read the same way. USER may itself contain '@'; a
 *     digest's '@' is told apart by what follows it ("sha256:…").
 * Repository components are lower case [a-z0-9] with single '.', '_', '__' or one or more '-'
 * between alphanumerics (the distribution spec's grammar), at most 255 characters in all; tags
 * are [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}; digests are "sha256:" + 64 lower-case hex digits (or
 * "sha512:" + 128). */
#pragma once

#include <stdbool.h>

#include "lib/errmsg.h"

#define REF_DOCKER_HUB "docker.io"

struct image_ref {
    char *user;       /* enroot's "USER@" (credentials hint), else NULL */
    char *registry;   /* "docker.io", "nvcr.io", "127.0.0.1:5000", "[::1]:5000" */
    char *repository; /* "library/ubuntu", "nvidia/pytorch" */
    char *tag;        /* "latest" when neither tag nor digest was given; NULL with a digest only */
    char *digest;     /* "sha256:…" or NULL */
};

/* Parses s into *ret (every field malloc'd; free with image_ref_done). Returns 0, or -EINVAL
 * with a message that quotes the input and says which part is wrong ("'Ubuntu': repository
 * names must be lower case"), or -ENOMEM. *ret is untouched on failure. */
int image_ref_parse(const char *s, struct image_ref *ret, struct errmsg *e);

/* Frees the fields and zeroes the struct; safe on a zeroed struct and twice. */
void image_ref_done(struct image_ref *r);

/* The canonical name "registry/repository[:tag][@digest]" (Docker Hub images keep "docker.io/"),
 * malloc'd into *ret. This is the name capsule stores images under and prints. Registry names
 * are lower case, and Docker Hub's aliases (index.docker.io, registry-1.docker.io) become
 * "docker.io". A registry that Docker's rule would not take for one ("myhost", reachable only
 * with enroot's '#') is written "docker://myhost#repository[:tag][@digest]", so that every
 * canonical name parses back to the same fields (but the user, which is not part of the name).
 * Returns 0 or -ENOMEM. */
int image_ref_format(const struct image_ref *r, char **ret);

/* The host[:port] to talk to for r's registry: "registry-1.docker.io" for Docker Hub, else the
 * registry itself. Never NULL; owned by r (or a constant). */
const char *image_ref_api_host(const struct image_ref *r);

/* True if the registry host is loopback: "localhost", 127.0.0.0/8 or [::1], any port. Such
 * registries may be used over plain HTTP without being configured as insecure (Docker does the
 * same). */
bool image_ref_is_loopback(const char *registry);

/* Whether the names (canonical or not) are one reference in Docker's sense, which `rmi ID`
 * removes without -f: at most one name without a digest, and every name with a digest of that
 * one's repository (ubuntu:22.04 and ubuntu@sha256:…), or of one repository when all have
 * digests. A single name is one reference; none, or a name that does not parse, is not. */
bool image_refs_single(char *const *names);
