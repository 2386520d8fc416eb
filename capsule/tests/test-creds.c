/* Tests for capsule/image/creds.c: netrc-style files, Docker's config.json, lookup order. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-main.h"

#include "capsule/image/creds.h"
#include "lib/macro.h"

static const char enroot_file[] = "# enroot credentials\n"
                                  "# machine nvcr.io login commented password out\n"
                                  "machine nvcr.io login $oauthtoken password nvapi-0123#456\n"
                                  "\n"
                                  "machine auth.docker.io login alice password dckr_pat_1\n"
                                  "machine localhost\n"
                                  "    login any-port\n"
                                  "    password p1\n"
                                  "machine localhost:5000\n"
                                  "\tlogin\ttest\r\n"
                                  "\tpassword\ts3cret\r\n"
                                  "machine ghcr.io login bob password ghp_1 account ignored\n"
                                  "machine ghcr.io login carol password ghp_2\n"
                                  "default login anonymous password guest\n";

/* Looks host up in text as netrc; returns r and, on 1, "user password" in out. */
static int netrc(const char *text, const char *host, const char *user, char out[256],
                 struct errmsg *e)
{
    struct creds c = {};
    int r = creds_from_netrc("creds", text, strlen(text), host, user, &c, e);
    if (r == 1) {
        snprintf(out, 256, "%s %s", c.user, c.password);
        creds_done(&c);
        assert_null(c.user);
        assert_null(c.password);
    } else
        assert_null(c.user);
    return r;
}

static void test_netrc_lookup(void **state)
{
    char got[256];
    struct errmsg e = {""};

    assert_int_equal(netrc(enroot_file, "nvcr.io", NULL, got, &e), 1);
    /* '#' inside a word is not a comment. */
    assert_string_equal(got, "$oauthtoken nvapi-0123#456");
    assert_int_equal(netrc(enroot_file, "NVCR.IO", NULL, got, &e), 1);
    assert_string_equal(got, "$oauthtoken nvapi-0123#456");
    /* enroot's documentation writes Docker Hub as auth.docker.io. */
    assert_int_equal(netrc(enroot_file, "docker.io", NULL, got, &e), 1);
    assert_string_equal(got, "alice dckr_pat_1");
    assert_int_equal(netrc(enroot_file, "registry-1.docker.io", NULL, got, &e), 1);
    assert_string_equal(got, "alice dckr_pat_1");
    /* Tokens across lines, tabs and CRLF; the exact host:port beats the earlier host. */
    assert_int_equal(netrc(enroot_file, "localhost:5000", NULL, got, &e), 1);
    assert_string_equal(got, "test s3cret");
    assert_int_equal(netrc(enroot_file, "localhost:6000", NULL, got, &e), 1);
    assert_string_equal(got, "any-port p1");
    /* The first of equal entries wins; a user from the reference picks its own. */
    assert_int_equal(netrc(enroot_file, "ghcr.io", NULL, got, &e), 1);
    assert_string_equal(got, "bob ghp_1");
    assert_int_equal(netrc(enroot_file, "ghcr.io", "carol", got, &e), 1);
    assert_string_equal(got, "carol ghp_2");
    /* Anything else gets "default", unless the user does not match it. */
    assert_int_equal(netrc(enroot_file, "quay.io", NULL, got, &e), 1);
    assert_string_equal(got, "anonymous guest");
    assert_int_equal(netrc(enroot_file, "quay.io", "dave", got, &e), 0);
    assert_int_equal(netrc(enroot_file, "ghcr.io", "anonymous", got, &e), 1);
    assert_string_equal(got, "anonymous guest");
    /* Commented-out entries do not exist. */
    assert_int_equal(netrc(enroot_file, "nvcr.io", "commented", got, &e), 0);

    assert_int_equal(netrc("", "nvcr.io", NULL, got, &e), 0);
    assert_int_equal(netrc("# only a comment", "nvcr.io", NULL, got, &e), 0);
}

static void expect_netrc_error(const char *text, const char *want)
{
    char got[256];
    struct errmsg e = {""};
    assert_int_equal(netrc(text, "nvcr.io", NULL, got, &e), -EINVAL);
    if (!strstr(e.text, want))
        fail_msg("message '%s' lacks '%s'", e.text, want);
}

static void test_netrc_errors(void **state)
{
    expect_netrc_error("machine a login b password c\nmacdef init\ncd /pub\n\n",
                       "creds:2: 'macdef' (FTP macros) has no place");
    expect_netrc_error("login a password b\n", "creds:1: 'login' before any 'machine'");
    expect_netrc_error("machine nvcr.io login a\npassword", "creds:2: 'password' without a value");
    expect_netrc_error("machine", "creds:1: 'machine' without a value");
    /* No quoting: the second half of a quoted password is a stray word. The word itself is not
     * shown, as it may be a secret. */
    expect_netrc_error("machine x login a password \"two words\"\n",
                       "creds:1: unexpected word; expected machine, default, login, password or "
                       "account (netrc has no quoting");
    char got[256];
    struct errmsg e = {""};
    assert_int_equal(netrc("machine x login a password \"two words\"\n", "x", NULL, got, &e),
                     -EINVAL);
    assert_null(strstr(e.text, "words"));
    /* A matching entry must be complete; one for another host need not be. */
    expect_netrc_error("machine nvcr.io login a\n", "creds:1: 'nvcr.io' has no password");
    expect_netrc_error("default password a\n", "creds:1: 'default' has no login");
    assert_int_equal(netrc("machine other login a\nmachine nvcr.io login b password c", "nvcr.io",
                           NULL, got, &e),
                     1);
    /* A quote is just a character. */
    assert_int_equal(netrc("machine nvcr.io login \"a\" password \"b\"", "nvcr.io", NULL, got, &e),
                     1);
    assert_string_equal(got, "\"a\" \"b\"");
    /* A NUL byte ends nothing silently. */
    const char nul[] = "machine nvcr.io login a password b\0c\n";
    struct creds c = {};
    assert_int_equal(creds_from_netrc("creds", nul, sizeof(nul) - 1, "nvcr.io", NULL, &c, &e),
                     -EINVAL);
    assert_non_null(strstr(e.text, "NUL byte"));
}

/* base64("alice:pat:with:colons"), base64("$oauthtoken:nvapi-x") */
static const char docker_config[] =
    "{\"auths\": {\n"
    "  \"https://index.docker.io/v1/\": {\"auth\": \"YWxpY2U6cGF0OndpdGg6Y29sb25z\"},\n"
    "  \"https://nvcr.io/v2/\": {\"auth\": \"JG9hdXRodG9rZW46bnZhcGkteA==\"},\n"
    "  \"localhost:5000\": {\"username\": \"test\", \"password\": \"s3cret\", \"auth\": \"\"},\n"
    "  \"ghcr.io\": {}\n"
    "}, \"HttpHeaders\": {\"User-Agent\": \"Docker-Client/24.0.7 (linux)\"}}";

static int docker(const char *text, const char *host, const char *user, char out[256],
                  struct errmsg *e)
{
    struct creds c = {};
    int r = creds_from_docker_config("config.json", text, strlen(text), host, user, &c, e);
    if (r == 1) {
        snprintf(out, 256, "%s %s", c.user, c.password);
        creds_done(&c);
    }
    return r;
}

static void test_docker_config(void **state)
{
    char got[256];
    struct errmsg e = {""};

    /* Passwords may contain ':'; the split is at the first one. */
    assert_int_equal(docker(docker_config, "docker.io", NULL, got, &e), 1);
    assert_string_equal(got, "alice pat:with:colons");
    assert_int_equal(docker(docker_config, "registry-1.docker.io", NULL, got, &e), 1);
    assert_int_equal(docker(docker_config, "nvcr.io", NULL, got, &e), 1);
    assert_string_equal(got, "$oauthtoken nvapi-x");
    assert_int_equal(docker(docker_config, "nvcr.io", "$oauthtoken", got, &e), 1);
    assert_int_equal(docker(docker_config, "nvcr.io", "someone", got, &e), 0);
    assert_int_equal(docker(docker_config, "localhost:5000", NULL, got, &e), 1);
    assert_string_equal(got, "test s3cret");
    /* Docker matches ports exactly. */
    assert_int_equal(docker(docker_config, "localhost", NULL, got, &e), 0);
    /* An empty entry (left behind by a credential store) has nothing. */
    e.text[0] = '\0';
    assert_int_equal(docker(docker_config, "ghcr.io", NULL, got, &e), 0);
    assert_string_equal(e.text, "");
    assert_int_equal(docker("{}", "ghcr.io", NULL, got, &e), 0);
}

static void expect_docker_error(const char *text, const char *want)
{
    char got[256];
    struct errmsg e = {""};
    assert_int_equal(docker(text, "nvcr.io", NULL, got, &e), -EINVAL);
    if (!strstr(e.text, want))
        fail_msg("message '%s' lacks '%s'", e.text, want);
}

static void test_docker_config_errors(void **state)
{
    /* "abc" has no ':'; "YWJ" lacks padding; '=' inside; a character outside the alphabet. */
    expect_docker_error("{\"auths\": {\"nvcr.io\": {\"auth\": \"YWJj\"}}}",
                        "config.json: auths.\"nvcr.io\".auth: the decoded value is not "
                        "\"user:password\"");
    expect_docker_error("{\"auths\": {\"nvcr.io\": {\"auth\": \"YWJ\"}}}",
                        "auths.\"nvcr.io\".auth: not valid base64");
    expect_docker_error("{\"auths\": {\"nvcr.io\": {\"auth\": \"YW=j\"}}}", "not valid base64");
    expect_docker_error("{\"auths\": {\"nvcr.io\": {\"auth\": \"YWJj!mFy\"}}}", "not valid base64");
    expect_docker_error("{\"auths\": {\"nvcr.io\": {\"auth\": \"====\"}}}", "not valid base64");
    /* base64("a\0:b"): a NUL byte cannot be part of a user name. */
    expect_docker_error("{\"auths\": {\"nvcr.io\": {\"auth\": \"YQA6Yg==\"}}}",
                        "is not \"user:password\"");
    expect_docker_error("{\"auths\": {\"nvcr.io\": {\"auth\": 5}}}",
                        "auths.\"nvcr.io\".auth: expected a string");
    expect_docker_error("{\"auths\": {\"nvcr.io\": []}}", "auths.\"nvcr.io\": expected an object");
    expect_docker_error("{\"auths\": []}", "config.json: auths: expected an object");
    expect_docker_error("[]", "config.json: expected a JSON object");
    expect_docker_error("{\"auths\": {}, \"auths\": {}}", "duplicate object key");
    expect_docker_error("{\"auths\": {", "config.json: not valid JSON");
    /* A syntax error next to a secret: the message says where, never what the secret is. */
    struct errmsg e = {""};
    char leaked[256];
    assert_int_equal(docker("{\"auths\": {\"nvcr.io\": {\"identitytoken\" \"hunter2\"}}}",
                            "nvcr.io", NULL, leaked, &e),
                     -EINVAL);
    assert_non_null(strstr(e.text, "not valid JSON"));
    assert_non_null(strstr(e.text, "line 1"));
    assert_null(strstr(e.text, "hunter2"));

    /* Padding: one and two '=' decode to the right lengths. */
    char got[256];
    assert_int_equal(
        docker("{\"auths\": {\"nvcr.io\": {\"auth\": \"YTpiYw==\"}}}", "nvcr.io", NULL, got, NULL),
        1);
    assert_string_equal(got, "a bc");
    assert_int_equal(
        docker("{\"auths\": {\"nvcr.io\": {\"auth\": \"YTpiY2Q=\"}}}", "nvcr.io", NULL, got, NULL),
        1);
    assert_string_equal(got, "a bcd");
    /* A malformed entry for another host does not stand in the way. */
    assert_int_equal(docker("{\"auths\": {\"quay.io\": {\"auth\": 5}, \"nvcr.io\": {\"auth\": "
                            "\"YTpiY2Q=\"}}}",
                            "nvcr.io", NULL, got, NULL),
                     1);
}

static void test_credential_helpers(void **state)
{
    const char *desktop = "{\"auths\": {\"https://index.docker.io/v1/\": {}}, \"credsStore\": "
                          "\"desktop\"}";
    const char *helpers = "{\"auths\": {\"quay.io\": {\"auth\": \"YTpi\"}}, \"credHelpers\": "
                          "{\"gcr.io\": \"gcloud\", \"https://nvcr.io\": \"pass\"}, "
                          "\"credsStore\": \"osxkeychain\"}";
    char got[256];
    struct errmsg e = {""};

    assert_int_equal(docker(desktop, "docker.io", NULL, got, &e), 0);
    assert_string_equal(e.text, "config.json: credentials for docker.io are kept by "
                                "docker-credential-desktop (credsStore), which capsule does not "
                                "run; put them in a netrc-style file such as "
                                "~/.config/capsule/credentials: machine docker.io login USER "
                                "password SECRET");
    /* credHelpers names the helper for this host; the store is the fallback. */
    assert_int_equal(docker(helpers, "nvcr.io", NULL, got, &e), 0);
    assert_non_null(strstr(e.text, "docker-credential-pass (credHelpers)"));
    assert_int_equal(docker(helpers, "ghcr.io", NULL, got, &e), 0);
    assert_non_null(strstr(e.text, "docker-credential-osxkeychain (credsStore)"));
    /* Credentials in the file still win. */
    e.text[0] = '\0';
    assert_int_equal(docker(helpers, "quay.io", NULL, got, &e), 1);
    assert_string_equal(e.text, "");
}

static char *write_temp(const char *dir, const char *name, const char *text, size_t len)
{
    char *path = NULL;
    assert_true(asprintf(&path, "%s/%s", dir, name) > 0);
    FILE *f = fopen(path, "we");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    fclose(f);
    return path;
}

static void test_lookup_files(void **state)
{
    char dir[] = "/tmp/test-creds-XXXXXX";
    struct creds c = {};
    struct errmsg e = {""};
    assert_non_null(mkdtemp(dir));

    _cleanup_free_ char *nrc =
        write_temp(dir, "credentials", "machine nvcr.io login n password from-netrc\n", 44);
    _cleanup_free_ char *cfg = write_temp(dir, "config.json", docker_config, strlen(docker_config));
    _cleanup_free_ char *missing = NULL, *big = NULL, *store = NULL;
    assert_true(asprintf(&missing, "%s/none", dir) > 0);

    /* The netrc file comes first; the Docker config fills in what it lacks. */
    assert_int_equal(creds_lookup(nrc, cfg, "nvcr.io", NULL, &c, &e), 1);
    assert_string_equal(c.password, "from-netrc");
    creds_done(&c);
    assert_int_equal(creds_lookup(nrc, cfg, "docker.io", NULL, &c, &e), 1);
    assert_string_equal(c.user, "alice");
    creds_done(&c);
    /* Missing files and NULL paths are skipped. */
    assert_int_equal(creds_lookup(missing, cfg, "localhost:5000", NULL, &c, &e), 1);
    creds_done(&c);
    assert_int_equal(creds_lookup(NULL, NULL, "nvcr.io", NULL, &c, &e), 0);
    assert_string_equal(e.text, "");
    assert_int_equal(creds_lookup(missing, missing, "nvcr.io", NULL, &c, &e), 0);

    /* The note about a credential store survives an unsuccessful netrc lookup. */
    const char *desktop = "{\"credsStore\": \"desktop\"}";
    store = write_temp(dir, "store.json", desktop, strlen(desktop));
    assert_int_equal(creds_lookup(nrc, store, "ghcr.io", NULL, &c, &e), 0);
    assert_non_null(strstr(e.text, "store.json: credentials for ghcr.io are kept by "
                                   "docker-credential-desktop"));

    /* Errors name the file (and the line). */
    assert_int_equal(creds_lookup(dir, NULL, "nvcr.io", NULL, &c, &e), -EINVAL);
    assert_non_null(strstr(e.text, "is not a regular file"));
    _cleanup_free_ char *bad = write_temp(dir, "bad", "machine nvcr.io\nmacdef x\n", 25);
    assert_int_equal(creds_lookup(bad, cfg, "nvcr.io", NULL, &c, &e), -EINVAL);
    assert_non_null(strstr(e.text, "/bad:2: 'macdef'"));
    char *huge = calloc(1, (1 << 20) + 1);
    assert_non_null(huge);
    memset(huge, '\n', (1 << 20) + 1);
    big = write_temp(dir, "big", huge, (1 << 20) + 1);
    free(huge);
    assert_int_equal(creds_lookup(big, NULL, "nvcr.io", NULL, &c, &e), -EFBIG);
    assert_non_null(strstr(e.text, "too large"));

    unlink(nrc);
    unlink(cfg);
    unlink(store);
    unlink(bad);
    unlink(big);
    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_netrc_lookup),       cmocka_unit_test(test_netrc_errors),
        cmocka_unit_test(test_docker_config),      cmocka_unit_test(test_docker_config_errors),
        cmocka_unit_test(test_credential_helpers), cmocka_unit_test(test_lookup_files),
    };
    return test_run_cases(tests);
}
