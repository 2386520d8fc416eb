/* slurm-submit: submits batch jobs to Slurm through libslurm's slurm_submit_batch_job(), one
 * after the other from one client, as fast as slurmctld takes them: Slurm's counterpart of a
 * client calling gpuqd's POST /v1/jobs directly (sbatch does the same RPC, after loading its
 * plugins and options in a new process each time).
 *
 *   slurm-submit -n N [-H] [-g GRES] [-c COMMAND] [-o IDS_FILE]
 *
 * -H submits held (priority 0, as sbatch -H does), -g asks for GRES ("gpu:1" as --gres=gpu:1),
 * -c is the job's shell command (default "true"), -o writes the new job ids there, one a line.
 * The job runs in the current directory with stdout to /dev/null and a minimal PATH. Slurm's
 * configuration comes from $SLURM_CONF as for sbatch. Prints one line,
 * "submitted=N seconds=S first_id=A last_id=B", for bench/gpuq/gpuqbench.py. */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "lib/clock.h"
#include "lib/macro.h"

struct options {
    unsigned long n;
    bool held;
    const char *gres;
    const char *command;
    const char *ids_path;
};

static char path_env[] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/* Fills desc for one job of o; the strings point into script, tres, cwd and o. */
static void job_desc(const struct options *o, char *script, char *tres, char *cwd,
                     job_desc_msg_t *desc)
{
    static char *env[] = {path_env, NULL};
    static char name[] = "gpuqbench", out[] = "/dev/null";
    slurm_init_job_desc_msg(desc);
    desc->name = name;
    desc->script = script;
    desc->environment = env;
    desc->env_size = 1;
    desc->work_dir = cwd;
    desc->std_out = out;
    desc->user_id = getuid();
    desc->group_id = getgid();
    desc->min_nodes = 1;
    if (o->held)
        desc->priority = 0;
    if (tres[0])
        desc->tres_per_node = tres;
}

/* Submits o->n jobs, writing their ids to ids (may be NULL). Returns 0, or -EIO with the
 * failing job's number and Slurm's message printed. */
static int submit_all(const struct options *o, FILE *ids, uint32_t *ret_first, uint32_t *ret_last)
{
    char script[4096], tres[256] = "", cwd[4096];
    if (snprintf(script, sizeof(script), "#!/bin/sh\n%s\n", o->command) >= (int)sizeof(script) ||
        (o->gres && snprintf(tres, sizeof(tres), "gres:%s", o->gres) >= (int)sizeof(tres)) ||
        !getcwd(cwd, sizeof(cwd))) {
        fprintf(stderr, "slurm-submit: command, GRES or working directory too long\n");
        return -ENAMETOOLONG;
    }
    job_desc_msg_t desc;
    job_desc(o, script, tres, cwd, &desc);
    for (unsigned long k = 0; k < o->n; k++) {
        submit_response_msg_t *resp = NULL;
        if (slurm_submit_batch_job(&desc, &resp) != SLURM_SUCCESS) {
            fprintf(stderr, "slurm-submit: job %lu of %lu: %s\n", k + 1, o->n,
                    slurm_strerror(slurm_get_errno()));
            return -EIO;
        }
        if (k == 0)
            *ret_first = resp->job_id;
        *ret_last = resp->job_id;
        if (ids)
            fprintf(ids, "%u\n", resp->job_id);
        slurm_free_submit_response_response_msg(resp);
    }
    return 0;
}

static int parse_options(int argc, char *argv[], struct options *o)
{
    *o = (struct options){.command = "true"};
    int opt;
    while ((opt = getopt(argc, argv, "n:Hg:c:o:h")) != -1) {
        char *end;
        switch (opt) {
        case 'n':
            errno = 0;
            o->n = strtoul(optarg, &end, 10);
            if (errno || end == optarg || *end || o->n == 0 || o->n > 1000000)
                return -EINVAL;
            break;
        case 'H':
            o->held = true;
            break;
        case 'g':
            o->gres = optarg;
            break;
        case 'c':
            o->command = optarg;
            break;
        case 'o':
            o->ids_path = optarg;
            break;
        default:
            return -EINVAL;
        }
    }
    return o->n > 0 && optind == argc ? 0 : -EINVAL;
}

int main(int argc, char *argv[])
{
    struct options o;
    if (parse_options(argc, argv, &o) < 0) {
        fprintf(stderr, "Usage: slurm-submit -n N (1..1000000) [-H] [-g GRES] [-c COMMAND] "
                        "[-o IDS_FILE]\n");
        return 2;
    }
    _cleanup_fclose_ FILE *ids = NULL;
    if (o.ids_path && !(ids = fopen(o.ids_path, "we"))) {
        fprintf(stderr, "slurm-submit: cannot write %s: %s\n", o.ids_path, strerror(errno));
        return 1;
    }
    slurm_init(NULL);
    uint32_t first = 0, last = 0;
    double t0 = clock_now_sec();
    int r = submit_all(&o, ids, &first, &last);
    double t1 = clock_now_sec();
    slurm_fini();
    if (r < 0)
        return 1;
    printf("submitted=%lu seconds=%.6f first_id=%u last_id=%u\n", o.n, t1 - t0, first, last);
    return 0;
}
