/* A Kubernetes batch/v1 Job, in YAML, made into the API's job request (job-spec.h), so that a
 * Job written for Kueue runs on gpuq as it would there (`gpuq submit -f job.yaml`).
 *
 * What is read (every other field, anywhere, is an error naming its full path, e.g.
 * "spec.template.spec.containers[0].volumeMounts: not supported by gpuq", since a Job that
 * silently ran without its volume or its security context would do something else than its
 * author meant; a field whose value is null or an empty mapping or list says nothing and is
 * let through, as `kubectl create --dry-run -o yaml` writes "creationTimestamp: null"):
 *
 *   apiVersion batch/v1, kind Job (both required)
 *   metadata: name or generateName (the prefix, cut to 58 bytes as Kubernetes does, plus 5
 *     random characters of Kubernetes' alphabet); labels (kueue.x-k8s.io/queue-name -> queue,
 *     kueue.x-k8s.io/priority-class -> priority_class, others ignored); annotations (ignored);
 *     namespace (absent or "default": gpuq has no namespaces)
 *   spec: backoffLimit (0..100), activeDeadlineSeconds, suspend (-> held), parallelism and
 *     completions (1), completionMode (NonIndexed), template
 *   spec.template.metadata: labels, annotations (ignored)
 *   spec.template.spec: restartPolicy (OnFailure or Never, required), containers (exactly
 *     one), terminationGracePeriodSeconds (-> grace), priorityClassName (-> priority_class
 *     unless the Kueue label names one: the label wins, as in Kueue), nodeSelector (only
 *     nvidia.com/gpu.product, GPU feature discovery's label -> gpu_model)
 *   the container: name and image (required), command, args (appended to command; args alone
 *     are refused: the image's entrypoint is not known here), env (name and value; Kubernetes'
 *     $(VAR) references are expanded as it does), workingDir (-> cwd), imagePullPolicy
 *     (IfNotPresent only: capsule pulls an image once), resources.requests and .limits:
 *     nvidia.com/gpu (requests and limits equal when both are given), nvidia.com/mig-<profile>,
 *     cpu and memory (limits win over requests)
 *
 * YAML: one document; at most 64 levels deep; at most 32 anchors and 32 aliases (an alias is a
 * copy, and every node, copies included, counts against a budget of 100000), tags only !!str and
 * the standard collection tags; keys are strings, none twice in a mapping. Numbers and booleans
 * must be written plain (backoffLimit: "3" is a string, as Kubernetes reads it).
 *
 * No I/O but getrandom() for generateName. Messages start with the line: "line 14:
 * spec.template.spec.containers[0].volumeMounts: not supported by gpuq". */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "lib/errmsg.h"

#define SPEC_YAML_MAX (1024 * 1024) /* bytes of a Job file */

/* Parses text[0..len) (need not be NUL-terminated). Returns 0 and *ret_request, a new JSON
 * object that job_spec_from_json() accepts (checked before it is returned); or -EINVAL with a
 * message naming the line and the field's path, -E2BIG (past SPEC_YAML_MAX, the node budget or
 * the request's limits), -ENOMEM, or a getrandom() error. *ret_request is written only on
 * success. */
int spec_yaml_parse(const char *text, size_t len, json_t **ret_request, struct errmsg *e);
