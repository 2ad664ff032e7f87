/* slurm.c: the Slurm transport (slurm.h): the job's node count from
 * squeue, then the srun step's command line. */
#include "slurm.h"

#include "host.h"

#include <cudackpt/protocol.h>

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The most nodes a step may span here (Slurm's own limit is higher; a
 * count above this is refused, not tried). */
#define NODES_SLURM_MAX_NODES 4096u

static bool slurm_digits(const char *s, size_t n) {
        if (n == 0 || n > 10)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isdigit((unsigned char)s[i]))
                        return false;
        return true;
}

bool nodes_slurm_job_valid(const char *job) {
        const char *u = job ? strchr(job, '_') : NULL;

        if (!job)
                return false;
        if (!u)
                return slurm_digits(job, strlen(job));
        return slurm_digits(job, (size_t)(u - job)) && slurm_digits(u + 1, strlen(u + 1));
}

/* The program env names, else name on $PATH, into buf. */
static int slurm_program(const char *env, const char *name, char *buf, size_t size) {
        const char *e = secure_getenv(env);

        if (e && *e) {
                if ((size_t)snprintf(buf, size, "%s", e) >= size)
                        return -ENAMETOOLONG;
                return 0;
        }
        return ctl_host_find_program(name, buf, size);
}

int nodes_slurm_job_nodes(const char *job, unsigned *ret_nodes) {
        char path[PATH_MAX], out[64], jarg[64], *end;
        unsigned long n;
        int r;

        if (!nodes_slurm_job_valid(job))
                return -EINVAL;
        if ((r = slurm_program(NODES_SLURM_SQUEUE_ENV, "squeue", path, sizeof(path))) < 0)
                return r;
        snprintf(jarg, sizeof(jarg), "--jobs=%s", job);
        char *argv[] = { path, "--noheader", jarg, "--states=RUNNING", "--format=%D", NULL };
        r = ctl_host_run_program(path, argv, out, sizeof(out), NODES_SLURM_QUERY_TIMEOUT_MS);
        if (r < 0)
                return r;
        /* squeue fails on a job id it does not know (any more). */
        if (!WIFEXITED(r) || WEXITSTATUS(r) != 0 || !out[strspn(out, " \n")])
                return -ESRCH;
        errno = 0;
        n = strtoul(out, &end, 10);
        if (errno || end == out || n == 0 || n > NODES_SLURM_MAX_NODES || end[strspn(end, " \n")])
                return -EPROTO;
        *ret_nodes = (unsigned)n;
        return 0;
}

void nodes_slurm_argv_free(char **argv) {
        if (!argv)
                return;
        for (char **a = argv; *a; a++)
                free(*a);
        free(argv);
}

int nodes_slurm_step_argv(const char *job, unsigned n_nodes, char *const *node_argv, char ***ret_argv) {
        char path[PATH_MAX], jarg[64], narg[32];
        size_t n_node = 0, i = 0;
        char **argv;
        int r;

        if (!nodes_slurm_job_valid(job) || n_nodes == 0 || n_nodes > NODES_SLURM_MAX_NODES || !node_argv ||
            !node_argv[0])
                return -EINVAL;
        if ((r = slurm_program(NODES_SLURM_SRUN_ENV, "srun", path, sizeof(path))) < 0)
                return r;
        snprintf(jarg, sizeof(jarg), "--jobid=%s", job);
        snprintf(narg, sizeof(narg), "--nodes=%u", n_nodes);
        while (node_argv[n_node])
                n_node++;
        /* --quiet: srun's progress notes are no concern of the user's;
         * its errors still reach stderr.  --input=all: every task reads
         * the coordinator's lines. */
        const char *const head[] = { path, jarg, "--overlap", narg, "--ntasks-per-node=1", "--kill-on-bad-exit=1",
                                     "--input=all", "--quiet", "--" };
        size_t n_head = sizeof(head) / sizeof(head[0]);
        if (!(argv = calloc(n_head + n_node + 1, sizeof(*argv))))
                return -ENOMEM;
        for (size_t k = 0; k < n_head + n_node; k++, i++)
                if (!(argv[i] = strdup(k < n_head ? head[k] : node_argv[k - n_head]))) {
                        nodes_slurm_argv_free(argv);
                        return -ENOMEM;
                }
        *ret_argv = argv;
        return 0;
}

int nodes_slurm_step_env(char ***ret_env) {
        static const char drop[] = CUDACKPT_SOCKET_ENV "=";
        size_t n = 0, k = 0;
        char **env;

        while (environ[n])
                n++;
        if (!(env = calloc(n + 1, sizeof(*env))))
                return -ENOMEM;
        /* srun's --export=ALL,NAME=VALUE does not replace a NAME srun has
         * (Slurm 22.05): the variable is left out of srun's own. */
        for (size_t i = 0; i < n; i++)
                if (strncmp(environ[i], drop, sizeof(drop) - 1) != 0)
                        env[k++] = environ[i];
        *ret_env = env;
        return 0;
}
