/* libFuzzer target: what crosses the node cache's socket (node-protocol.h). The service parses
 * any user's POST /v1/pull body; capsule parses the service's answer. A request is either
 * refused with a message or yields a digest reference and a header line that cannot end the
 * header; an answer either fits the manifest or is refused. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "capsule/image/digest.h"
#include "capsule/node/node-protocol.h"
#include "lib/fuzz-check.h"
#include "lib/strv.h"

/* A manifest with two layers, for the answers. */
static const char manifest_text[] =
    "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
    "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":"
    "\"sha256:1111111111111111111111111111111111111111111111111111111111111111\",\"size\":2},"
    "\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":"
    "\"sha256:2222222222222222222222222222222222222222222222222222222222222222\",\"size\":3},"
    "{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":"
    "\"sha256:3333333333333333333333333333333333333333333333333333333333333333\",\"size\":4}]}";

static void check_request(const uint8_t *data, size_t size)
{
    struct image_ref ref = {0};
    char *auth = NULL;
    struct errmsg e = {""};
    int r = node_pull_request_parse((const char *)data, size, &ref, &auth, &e);
    CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
    if (r < 0) {
        CHECK(r == -ENOMEM || e.text[0]);
        CHECK(!auth && !ref.registry);
        return;
    }
    CHECK(ref.digest && digest_valid(ref.digest) && !ref.tag && ref.registry);
    if (auth) {
        CHECK(strncmp(auth, "Authorization: ", 15) == 0 && node_authorization_valid(auth + 15));
        CHECK(!strpbrk(auth, "\r\n"));
    }
    free(auth);
    image_ref_done(&ref);
}

static void check_answer(const uint8_t *data, size_t size)
{
    static struct manifest m;
    static bool parsed;
    if (!parsed) {
        struct errmsg e = {""};
        CHECK(manifest_parse(manifest_text, sizeof(manifest_text) - 1, NULL, &m, &e) == 0);
        parsed = true;
    }
    json_t *answer = json_loadb((const char *)data, size, 0, NULL);
    if (!answer)
        return;
    char **paths = NULL;
    struct errmsg e = {""};
    int r = node_pull_answer_paths(answer, &m, &paths, &e);
    CHECK(r == 0 || r == -EPROTO || r == -ENOMEM);
    if (r == 0) {
        CHECK(strv_length(paths) == m.n_layers);
        for (size_t i = 0; paths[i]; i++)
            CHECK(node_layer_path_valid(paths[i]));
    }
    strv_free(paths);
    json_decref(answer);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_request(data, size);
    check_answer(data, size);
    return 0;
}
