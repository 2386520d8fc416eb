/* Tests for Kubernetes Job YAML: the project's seed job and the examples in deploy/gpuq/examples
 * are accepted as Kubernetes would run them, every field gpuq does not read is refused by its
 * path and line, and hostile YAML (alias bombs, deep nesting, several documents) is cheap to
 * refuse. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "gpuq/spec/job-spec.h"
#include "gpuq/spec/spec-yaml.h"
#include "lib/fileio.h"
#include "lib/macro.h"
#include "lib/strv.h"

/* The seed job from the project, verbatim in content. */
static const char seed_job[] = "apiVersion: batch/v1\n"
                               "kind: Job\n"
                               "metadata:\n"
                               "  generateName: physics-simulation-\n"
                               "  labels:\n"
                               "    kueue.x-k8s.io/queue-name: nightly-compute\n"
                               "spec:\n"
                               "  template:\n"
                               "    spec:\n"
                               "      containers:\n"
                               "      - name: simulation\n"
                               "        image: registry.infn.it/physics/sim:v1.2\n"
                               "        resources:\n"
                               "          requests:\n"
                               "            cpu: 8\n"
                               "            memory: 32Gi\n"
                               "            nvidia.com/gpu: 1\n"
                               "      restartPolicy: Never\n"
                               "  backoffLimit: 3\n";

static json_t *yaml_ok(const char *text)
{
    json_t *req = NULL;
    struct errmsg e = {""};
    int r = spec_yaml_parse(text, strlen(text), &req, &e);
    if (r != 0)
        print_error("%s\n---\n%s\n", e.text, text);
    assert_int_equal(r, 0);
    assert_non_null(req);
    return req;
}

static void yaml_fails(const char *text, int code, const char *why)
{
    json_t *req = (json_t *)0x1;
    struct errmsg e = {""};
    int r = spec_yaml_parse(text, strlen(text), &req, &e);
    if (r != code || !strstr(e.text, why))
        print_error("%d '%s', expected %d '%s'\n---\n%s\n", r, e.text, code, why, text);
    assert_int_equal(r, code);
    assert_non_null(strstr(e.text, why));
    assert_ptr_equal(req, (json_t *)0x1);
}

/* A small valid Job with lines added: after metadata's name (line 5 on), in spec (before the
 * template), in the pod's spec and in the container (each with its own indentation). */
static char *job_with(const char *metadata, const char *spec, const char *pod,
                      const char *container)
{
    char *s = NULL;
    assert_true(asprintf(&s,
                         "apiVersion: batch/v1\n"
                         "kind: Job\n"
                         "metadata:\n"
                         "  name: t\n"
                         "%s"
                         "spec:\n"
                         "%s"
                         "  template:\n"
                         "    spec:\n"
                         "      restartPolicy: Never\n"
                         "%s"
                         "      containers:\n"
                         "      - name: c\n"
                         "        image: busybox\n"
                         "%s",
                         metadata, spec, pod, container) > 0);
    return s;
}

static const char *str(json_t *req, const char *key)
{
    return json_string_value(json_object_get(req, key));
}

static json_int_t num(json_t *req, const char *key)
{
    json_t *v = json_object_get(req, key);
    assert_true(json_is_integer(v));
    return json_integer_value(v);
}

static void assert_generated(const char *name, const char *prefix)
{
    assert_non_null(name);
    assert_int_equal(strlen(name), strlen(prefix) + 5);
    assert_memory_equal(name, prefix, strlen(prefix));
    for (const char *p = name + strlen(prefix); *p; p++)
        assert_non_null(strchr("bcdfghjklmnpqrstvwxz2456789", *p));
}

static void check_seed(json_t *req)
{
    assert_generated(str(req, "name"), "physics-simulation-");
    assert_string_equal(str(req, "queue"), "nightly-compute");
    assert_string_equal(str(req, "image"), "registry.infn.it/physics/sim:v1.2");
    assert_int_equal(num(req, "cpu_milli"), 8000);
    assert_int_equal(num(req, "mem_bytes"), INT64_C(34359738368));
    assert_int_equal(num(req, "gpus"), 1);
    assert_null(json_object_get(req, "gpu_model"));
    assert_string_equal(str(req, "restart_policy"), "Never");
    assert_int_equal(num(req, "backoff_limit"), 3);
    assert_null(json_object_get(req, "command"));
    struct job_spec s;
    bool held = true;
    assert_int_equal(job_spec_from_json(req, &s, &held, NULL), 0);
    assert_false(held);
    assert_null(s.argv); /* the image's own command */
    assert_int_equal(s.res.gpu_kind, JOB_GPU_WHOLE);
    assert_int_equal(s.restart, JOB_RESTART_NEVER);
    job_spec_done(&s);
}

static void test_seed_job(void **state)
{
    json_auto_t *req = yaml_ok(seed_job);
    check_seed(req);
}

static char *read_example(const char *name, size_t *len)
{
    const char *dir = getenv("GPUQ_SPEC_EXAMPLES");
    assert_non_null(dir);
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    char *text = NULL;
    assert_int_equal(fd_read_all(fd, SPEC_YAML_MAX, &text, len), 0);
    return text;
}

static void test_examples(void **state)
{
    size_t len;
    _cleanup_free_ char *seed = read_example("physics-simulation.yaml", &len);
    /* the file is the seed, verbatim */
    assert_int_equal(len, strlen(seed_job));
    assert_memory_equal(seed, seed_job, len);

    _cleanup_free_ char *mig = read_example("mig-inference.yaml", &len);
    json_auto_t *req = NULL;
    struct errmsg e = {""};
    assert_int_equal(spec_yaml_parse(mig, len, &req, &e), 0);
    assert_string_equal(str(req, "name"), "mig-inference");
    assert_string_equal(str(req, "queue"), "interactive");
    assert_string_equal(str(req, "priority_class"), "urgent");
    assert_string_equal(str(req, "mig_profile"), "1g.10gb");
    assert_int_equal(num(req, "gpus"), 1);
    assert_int_equal(num(req, "cpu_milli"), 2000); /* the limit, not the request */
    assert_int_equal(num(req, "mem_bytes"), INT64_C(17179869184));
    assert_int_equal(num(req, "backoff_limit"), 1);
    assert_int_equal(num(req, "active_deadline"), 14400);
    assert_int_equal(num(req, "grace"), 60);
    assert_string_equal(str(req, "cwd"), "/workspace");
    assert_string_equal(str(req, "restart_policy"), "OnFailure");
    json_t *cmd = json_object_get(req, "command");
    static const char *const want[] = {"python",           "-m",     "serve", "--model",
                                       "/models/resnet50", "--port", "8080"};
    assert_int_equal(json_array_size(cmd), ELEMENTSOF(want));
    for (size_t i = 0; i < ELEMENTSOF(want); i++)
        assert_string_equal(json_string_value(json_array_get(cmd, i)), want[i]);
    assert_string_equal(json_string_value(json_array_get(json_object_get(req, "env"), 0)),
                        "MODEL=resnet50");
}

static void test_accepted_forms(void **state)
{
    /* limits alone, and requests equal to limits */
    _cleanup_free_ char *a = job_with("", "", "",
                                      "        resources:\n"
                                      "          limits: {nvidia.com/gpu: 2, cpu: 1500m}\n");
    json_auto_t *ra = yaml_ok(a);
    assert_int_equal(num(ra, "gpus"), 2);
    assert_int_equal(num(ra, "cpu_milli"), 1500);
    _cleanup_free_ char *b = job_with("", "", "",
                                      "        resources:\n"
                                      "          requests: {nvidia.com/gpu: \"2\"}\n"
                                      "          limits: {nvidia.com/gpu: 2}\n");
    json_auto_t *rb = yaml_ok(b);
    assert_int_equal(num(rb, "gpus"), 2);

    /* GPU feature discovery's product label picks the model */
    _cleanup_free_ char *c = job_with("", "",
                                      "      nodeSelector:\n"
                                      "        nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3\n",
                                      "        resources: {limits: {nvidia.com/gpu: 1}}\n");
    json_auto_t *rc = yaml_ok(c);
    assert_string_equal(str(rc, "gpu_model"), "NVIDIA-H100-80GB-HBM3");

    /* suspend, deadlines, the pod's priority class, parallelism 1, a default namespace */
    _cleanup_free_ char *d = job_with("  namespace: default\n",
                                      "  suspend: true\n"
                                      "  parallelism: 1\n"
                                      "  completions: 1\n"
                                      "  completionMode: NonIndexed\n"
                                      "  activeDeadlineSeconds: 600\n",
                                      "      priorityClassName: low\n"
                                      "      terminationGracePeriodSeconds: 0\n",
                                      "        imagePullPolicy: IfNotPresent\n");
    json_auto_t *rd = yaml_ok(d);
    assert_true(json_is_true(json_object_get(rd, "held")));
    assert_int_equal(num(rd, "active_deadline"), 600);
    assert_string_equal(str(rd, "priority_class"), "low");
    assert_int_equal(num(rd, "grace"), 0);

    /* Kueue's label wins over the pod's priorityClassName */
    _cleanup_free_ char *e = job_with("  labels:\n"
                                      "    kueue.x-k8s.io/priority-class: urgent\n"
                                      "    app: sim\n",
                                      "", "      priorityClassName: low\n", "");
    json_auto_t *re = yaml_ok(e);
    assert_string_equal(str(re, "priority_class"), "urgent");

    /* A Job written for Kueue is created suspended for Kueue to admit: gpuq admits it */
    _cleanup_free_ char *f = job_with("  labels:\n"
                                      "    kueue.x-k8s.io/queue-name: batch\n",
                                      "  suspend: true\n", "", "");
    json_auto_t *rf = yaml_ok(f);
    assert_null(json_object_get(rf, "held"));
    assert_string_equal(str(rf, "queue"), "batch");
}

static void test_names(void **state)
{
    /* name wins over generateName, whichever comes first */
    json_auto_t *a = yaml_ok("apiVersion: batch/v1\nkind: Job\n"
                             "metadata: {generateName: gen-, name: given}\n"
                             "spec:\n  template:\n    spec:\n      restartPolicy: Never\n"
                             "      containers: [{name: c, image: busybox}]\n");
    assert_string_equal(str(a, "name"), "given");
    /* a long prefix is cut to 58 bytes, as Kubernetes does */
    json_auto_t *b = yaml_ok("apiVersion: batch/v1\nkind: Job\n"
                             "metadata:\n  generateName: "
                             "a123456789b123456789c123456789d123456789e123456789f123456789g123\n"
                             "spec:\n  template:\n    spec:\n      restartPolicy: Never\n"
                             "      containers: [{name: c, image: busybox}]\n");
    assert_generated(str(b, "name"), "a123456789b123456789c123456789d123456789e123456789f1234567");
    yaml_fails("apiVersion: batch/v1\nkind: Job\n"
               "metadata: {labels: {a: b}}\n"
               "spec:\n  template:\n    spec:\n      restartPolicy: Never\n"
               "      containers: [{name: c, image: busybox}]\n",
               -EINVAL, "metadata: name or generateName is required");
    yaml_fails("apiVersion: batch/v1\nkind: Job\n"
               "metadata: {generateName: \"bad name-\"}\n"
               "spec:\n  template:\n    spec:\n      restartPolicy: Never\n"
               "      containers: [{name: c, image: busybox}]\n",
               -EINVAL, "line 3: metadata.generateName: 'bad name-");
}

static void test_env_expansion(void **state)
{
    _cleanup_free_ char *y =
        job_with("", "", "",
                 "        command: [echo, \"$(B)\", \"$$(A)\", \"$(UNDEFINED)\", \"$(\", \"$x\", "
                 "\"a$\"]\n"
                 "        args: [\"$(A)$(A)\"]\n"
                 "        env:\n"
                 "        - {name: A, value: x}\n"
                 "        - {name: B, value: \"$(A)-y-$(C)\"}\n"
                 "        - {name: C, value: late}\n"
                 "        - {name: EMPTY}\n");
    json_auto_t *req = yaml_ok(y);
    json_t *cmd = json_object_get(req, "command");
    /* B was set before C existed: $(C) stays as written, as in Kubernetes */
    static const char *const want[] = {"echo", "x-y-$(C)", "$(A)", "$(UNDEFINED)",
                                       "$(",   "$x",       "a$",   "xx"};
    assert_int_equal(json_array_size(cmd), ELEMENTSOF(want));
    for (size_t i = 0; i < ELEMENTSOF(want); i++)
        assert_string_equal(json_string_value(json_array_get(cmd, i)), want[i]);
    json_t *env = json_object_get(req, "env");
    assert_string_equal(json_string_value(json_array_get(env, 1)), "B=x-y-$(C)");
    assert_string_equal(json_string_value(json_array_get(env, 3)), "EMPTY=");
}

static void test_kubectl_dry_run_output(void **state)
{
    /* what `kubectl create job x --image=busybox --dry-run=client -o yaml` writes */
    json_auto_t *req = yaml_ok("apiVersion: batch/v1\n"
                               "kind: Job\n"
                               "metadata:\n"
                               "  creationTimestamp: null\n"
                               "  name: x\n"
                               "spec:\n"
                               "  template:\n"
                               "    metadata:\n"
                               "      creationTimestamp: null\n"
                               "    spec:\n"
                               "      containers:\n"
                               "      - image: busybox\n"
                               "        name: x\n"
                               "        resources: {}\n"
                               "      restartPolicy: Never\n"
                               "status: {}\n");
    assert_string_equal(str(req, "name"), "x");
}

static void test_anchors(void **state)
{
    _cleanup_free_ char *y = job_with("", "", "",
                                      "        resources:\n"
                                      "          requests: &r {cpu: 2, memory: 1Gi}\n"
                                      "          limits: *r\n");
    json_auto_t *req = yaml_ok(y);
    assert_int_equal(num(req, "cpu_milli"), 2000);
}

static void test_unsupported_fields_named_by_path(void **state)
{
    static const struct {
        const char *metadata, *spec, *pod, *container;
        const char *why;
    } bad[] = {
        {"", "", "", "        volumeMounts:\n        - {name: data, mountPath: /data}\n",
         "line 12: spec.template.spec.containers[0].volumeMounts: not supported by gpuq"},
        {"", "", "", "        ports: [{containerPort: 80}]\n",
         "spec.template.spec.containers[0].ports: not supported by gpuq"},
        {"", "", "", "        securityContext: {privileged: true}\n",
         "spec.template.spec.containers[0].securityContext: not supported by gpuq"},
        {"", "", "      volumes: [{name: data}]\n", "",
         "spec.template.spec.volumes: not supported by gpuq"},
        {"", "", "      initContainers: [{name: i, image: x}]\n", "",
         "spec.template.spec.initContainers: not supported by gpuq"},
        {"", "", "      affinity: {nodeAffinity: {}}\n", "",
         "spec.template.spec.affinity: not supported by gpuq"},
        {"", "", "      tolerations: [{key: a}]\n", "",
         "spec.template.spec.tolerations: not supported by gpuq"},
        {"", "", "      securityContext: {runAsUser: 0}\n", "",
         "spec.template.spec.securityContext: not supported by gpuq"},
        {"", "  ttlSecondsAfterFinished: 100\n", "", "",
         "line 6: spec.ttlSecondsAfterFinished: not supported by gpuq"},
        {"", "  podFailurePolicy: {rules: [{action: Ignore}]}\n", "", "",
         "spec.podFailurePolicy: not supported by gpuq"},
        {"  uid: 1234\n", "", "", "", "line 5: metadata.uid: not supported by gpuq"},
        {"", "", "", "        env: [{name: A, valueFrom: {fieldRef: {fieldPath: x}}}]\n",
         "spec.template.spec.containers[0].env[0].valueFrom: not supported by gpuq"},
        {"", "", "", "        resources: {requests: {ephemeral-storage: 1Gi}}\n",
         "spec.template.spec.containers[0].resources.requests.ephemeral-storage: not supported"},
        {"", "", "", "        resources: {limits: {hugepages-2Mi: 1Gi}}\n",
         "spec.template.spec.containers[0].resources.limits.hugepages-2Mi: not supported"},
        {"", "", "", "        resources: {claims: [{name: gpu}]}\n",
         "spec.template.spec.containers[0].resources.claims: not supported by gpuq"},
        {"", "", "      nodeSelector: {kubernetes.io/hostname: n1}\n", "",
         "spec.template.spec.nodeSelector.kubernetes.io/hostname: not supported by gpuq"},
        {"", "", "      activeDeadlineSeconds: 5\n", "",
         "spec.template.spec.activeDeadlineSeconds: not supported by gpuq"},
    };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        _cleanup_free_ char *y =
            job_with(bad[i].metadata, bad[i].spec, bad[i].pod, bad[i].container);
        yaml_fails(y, -EINVAL, bad[i].why);
    }
}

static void test_refused_values(void **state)
{
    static const struct {
        const char *metadata, *spec, *pod, *container;
        const char *why;
    } bad[] = {
        {"  namespace: research\n", "", "", "",
         "metadata.namespace: 'research': gpuq has no namespaces"},
        {"", "  parallelism: 2\n", "", "", "spec.parallelism: 2: gpuq runs a Job as one pod"},
        {"", "  completions: 3\n", "", "", "spec.completions: 3: "},
        {"", "  completionMode: Indexed\n", "", "", "spec.completionMode: 'Indexed'"},
        {"", "  backoffLimit: 101\n", "", "", "spec.backoffLimit: 101 is out of range 0..100"},
        {"", "  backoffLimit: \"3\"\n", "", "", "spec.backoffLimit: must be a number"},
        {"", "  backoffLimit: -1\n", "", "", "spec.backoffLimit: -1 is out of range"},
        {"", "  activeDeadlineSeconds: 0\n", "", "", "spec.activeDeadlineSeconds: 0 is out"},
        {"", "  suspend: yes\n", "", "", "spec.suspend: must be true or false"},
        {"", "", "      terminationGracePeriodSeconds: -1\n", "",
         "spec.template.spec.terminationGracePeriodSeconds: -1 is out of range"},
        {"", "", "      priorityClassName: \"a b\"\n", "",
         "spec.template.spec.priorityClassName: 'a b' may hold only"},
        {"  labels: {kueue.x-k8s.io/queue-name: \"\"}\n", "", "", "",
         "metadata.labels.kueue.x-k8s.io/queue-name: must not be empty"},
        {"  labels: {a: [b]}\n", "", "", "", "metadata.labels.a: must be a string"},
        {"", "", "", "        imagePullPolicy: Always\n",
         "spec.template.spec.containers[0].imagePullPolicy: Always is not supported"},
        {"", "", "", "        imagePullPolicy: Never\n", "imagePullPolicy: Never is not supported"},
        {"", "", "", "        args: [--fast]\n",
         "spec.template.spec.containers[0]: args without command is not supported: give command"},
        {"", "", "", "        env: [{name: 1A, value: x}]\n",
         "spec.template.spec.containers[0].env[0]: '1A' is not a variable name"},
        {"", "", "", "        env: [{value: x}]\n", "env[0]: name is required"},
        {"", "", "", "        workingDir: rel\n",
         "spec.template.spec.containers[0].workingDir: 'rel' is not an absolute path"},
        {"", "", "",
         "        resources: {requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 2}}\n",
         "nvidia.com/gpu: requests (1) and limits (2) must be equal"},
        {"", "", "", "        resources: {limits: {nvidia.com/gpu: 1.5}}\n",
         "limits.nvidia.com/gpu: must be a whole number of devices"},
        {"", "", "",
         "        resources: {limits: {nvidia.com/gpu: 1, nvidia.com/mig-1g.10gb: 1}}\n",
         "nvidia.com/gpu and nvidia.com/mig-* cannot be combined"},
        {"", "", "", "        resources: {limits: {nvidia.com/mig-big: 1}}\n",
         "limits.nvidia.com/mig-big: 'big' is not a MIG profile"},
        {"", "", "", "        resources: {requests: {memory: 512m}}\n",
         "requests.memory: '512m' is a fraction of a byte ('m' is milli)"},
        {"", "", "", "        resources: {requests: {cpu: 0.0001}}\n",
         "requests.cpu: '0.0001' is finer than 1m"},
        {"", "", "      nodeSelector: {nvidia.com/gpu.product: NVIDIA-A100}\n", "",
         "nodeSelector.nvidia.com/gpu.product: needs nvidia.com/gpu"},
        {"", "", "      nodeSelector: {nvidia.com/gpu.product: NVIDIA-A100}\n",
         "        resources: {limits: {nvidia.com/mig-1g.5gb: 1}}\n",
         "nvidia.com/gpu.product: cannot be combined with MIG"},
        {"", "", "", "        image: other\n", "key 'image' given twice"},
    };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        _cleanup_free_ char *y =
            job_with(bad[i].metadata, bad[i].spec, bad[i].pod, bad[i].container);
        yaml_fails(y, -EINVAL, bad[i].why);
    }
}

static void test_refused_jobs(void **state)
{
    static const struct {
        const char *yaml;
        const char *why;
    } bad[] = {
        {"apiVersion: batch/v2\nkind: Job\n",
         "line 1: apiVersion: 'batch/v2': gpuq reads batch/v1"},
        {"apiVersion: batch/v1\nkind: Pod\n", "line 2: kind: 'Pod': gpuq reads Jobs"},
        {"kind: Job\nmetadata: {name: x}\n", "apiVersion: required"},
        {"apiVersion: batch/v1\nmetadata: {name: x}\n", "kind: required"},
        {"apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\n", "spec: required"},
        {"apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\nspec: {backoffLimit: 1}\n",
         "spec: template is required"},
        {"apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\nspec:\n  template: {}\n",
         "line 5: spec.template: spec is required"},
        {"apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\nspec:\n  template:\n"
         "    spec: {containers: [{name: c, image: x}]}\n",
         "spec.template.spec: restartPolicy is required"},
        {"apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\nspec:\n  template:\n"
         "    spec: {restartPolicy: Always, containers: [{name: c, image: x}]}\n",
         "spec.template.spec.restartPolicy: Always is not allowed for a Job"},
        {"apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\nspec:\n  template:\n"
         "    spec: {restartPolicy: Never, containers: [{name: c, image: x}, {name: d, image: "
         "y}]}\n",
         "spec.template.spec.containers: gpuq runs exactly one container, not 2"},
        {"apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\nspec:\n  template:\n"
         "    spec: {restartPolicy: Never, containers: [{image: x}]}\n",
         "spec.template.spec.containers[0]: name is required"},
        {"apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\nspec:\n  template:\n"
         "    spec: {restartPolicy: Never, containers: [{name: c}]}\n",
         "spec.template.spec.containers[0]: image is required"},
        {"apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\nspec:\n  template:\n"
         "    spec: {restartPolicy: Never}\n",
         "spec.template.spec: containers is required"},
        {"- a\n- b\n", "the Job: must be a mapping"},
        {"", "empty: no YAML document"},
        {"a: [\n", "line 2: "},
        {"a: 1\n---\nb: 2\n", "line 2: a second YAML document"},
        {"a: !custom x\n", "line 1: YAML tag '!custom' is not supported"},
        {"? [a]\n: b\n", "a mapping key must be a string"},
        {"a: \"x\\0y\"\n", "line 1: a string holds a NUL character"},
        {"a: *nowhere\n", "unknown YAML anchor 'nowhere'"},
        {"a: b\na: c\n", "line 2: key 'a' given twice"},
    };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++)
        yaml_fails(bad[i].yaml, -EINVAL, bad[i].why);
}

static void test_hostile_yaml(void **state)
{
    /* a "billion laughs": each level doubles; the node budget ends it early */
    char *bomb = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&bomb, &len);
    fprintf(f, "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for (int i = 1; i < 20; i++)
        fprintf(f, "a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i - 1,
                i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1);
    fclose(f);
    json_t *req = NULL;
    struct errmsg e = {""};
    int r = spec_yaml_parse(bomb, len, &req, &e);
    assert_true(r == -E2BIG || r == -EINVAL);
    assert_true(strstr(e.text, "YAML nodes") || strstr(e.text, "YAML aliases"));
    free(bomb);

    /* copies count too: 30 aliases of a 5000-node list pass the alias count, not the budget */
    f = open_memstream(&bomb, &len);
    fprintf(f, "a: &a [");
    for (int i = 0; i < 5000; i++)
        fprintf(f, "%sx", i ? "," : "");
    fprintf(f, "]\nb: [");
    for (int i = 0; i < 30; i++)
        fprintf(f, "%s*a", i ? "," : "");
    fprintf(f, "]\n");
    fclose(f);
    assert_int_equal(spec_yaml_parse(bomb, len, &req, &e), -E2BIG);
    assert_non_null(strstr(e.text, "more than 100000 YAML nodes"));
    free(bomb);

    /* 65 levels of nesting */
    char deep[512] = "";
    for (int i = 0; i < 70; i++)
        strcat(deep, "[");
    for (int i = 0; i < 70; i++)
        strcat(deep, "]");
    yaml_fails(deep, -EINVAL, "nested deeper than 64 levels");

    /* too many anchors */
    f = open_memstream(&bomb, &len);
    for (int i = 0; i < 40; i++)
        fprintf(f, "k%d: &n%d v\n", i, i);
    fclose(f);
    assert_int_equal(spec_yaml_parse(bomb, len, &req, &e), -EINVAL);
    assert_non_null(strstr(e.text, "more than 32 YAML anchors"));
    free(bomb);

    /* past the size limit, before any parsing */
    assert_int_equal(spec_yaml_parse("", SPEC_YAML_MAX + 1, &req, &e), -E2BIG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_job),
        cmocka_unit_test(test_examples),
        cmocka_unit_test(test_accepted_forms),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_env_expansion),
        cmocka_unit_test(test_kubectl_dry_run_output),
        cmocka_unit_test(test_anchors),
        cmocka_unit_test(test_unsupported_fields_named_by_path),
        cmocka_unit_test(test_refused_values),
        cmocka_unit_test(test_refused_jobs),
        cmocka_unit_test(test_hostile_yaml),
    };
    return test_run_cases(tests);
}
