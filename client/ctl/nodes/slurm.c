/* slurm.c: the Slurm transport (slurm.h): the job's node count from
 * squeue, then the srun step's command line. */
#include "slurm.h"

#include "host.h"

#include <cudackpt/protocol.h>

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pwd.h>
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

int nodes_slurm_job_nodes(const char *job, unsigned *ret_nodes, unsigned *ret_uid) {
        char path[PATH_MAX], out[64], jarg[64], *end;
        unsigned long n, uid;
        int r;

        if (!nodes_slurm_job_valid(job))
                return -EINVAL;
        if ((r = slurm_program(NODES_SLURM_SQUEUE_ENV, "squeue", path, sizeof(path))) < 0)
                return r;
        snprintf(jarg, sizeof(jarg), "--jobs=%s", job);
        char *argv[] = { path, "--noheader", jarg, "--states=RUNNING", "--format=%D %U", NULL };
        r = ctl_host_run_program(path, argv, out, sizeof(out), NODES_SLURM_QUERY_TIMEOUT_MS);
        if (r < 0)
                return r;
        /* squeue fails on a job id it does not know (any more). */
        if (!WIFEXITED(r) || WEXITSTATUS(r) != 0 || !out[strspn(out, " \n")])
                return -ESRCH;
        errno = 0;
        n = strtoul(out, &end, 10);
        if (errno || end == out || n == 0 || n > NODES_SLURM_MAX_NODES || *end != ' ' ||
            !isdigit((unsigned char)end[1]))
                return -EPROTO;
        uid = strtoul(end + 1, &end, 10);
        if (errno || uid >= UINT_MAX || end[strspn(end, " \n")])
                return -EPROTO;
        *ret_nodes = (unsigned)n;
        *ret_uid = (unsigned)uid;
        return 0;
}

int nodes_slurm_requeue(const char *job) {
        char path[PATH_MAX], out[256], *argv[] = { path, "requeue", (char *)job, NULL };
        int r;

        if (!nodes_slurm_job_valid(job))
                return -EINVAL;
        if ((r = slurm_program(NODES_SLURM_SCONTROL_ENV, "scontrol", path, sizeof(path))) < 0 ||
            (r = ctl_host_run_program(path, argv, out, sizeof(out), NODES_SLURM_QUERY_TIMEOUT_MS)) < 0)
                return r;
        return WIFEXITED(r) && WEXITSTATUS(r) == 0 ? 0 : -EPERM;
}

int nodes_slurm_pin(const char *job, const char *nodes) {
        char path[PATH_MAX], out[256], jarg[64], narg[1100], *argv[] = { path, "update", jarg, narg, NULL };
        size_t n = nodes ? strlen(nodes) : 0;
        int r;

        /* A host list: names, ranges and commas, nothing scontrol would
         * take as another key. */
        if (!nodes_slurm_job_valid(job) || n == 0 || n >= sizeof(narg) - 16 ||
            strspn(nodes, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.,-[]") != n)
                return -EINVAL;
        snprintf(jarg, sizeof(jarg), "JobId=%s", job);
        snprintf(narg, sizeof(narg), "ReqNodeList=%s", nodes);
        if ((r = slurm_program(NODES_SLURM_SCONTROL_ENV, "scontrol", path, sizeof(path))) < 0 ||
            (r = ctl_host_run_program(path, argv, out, sizeof(out), NODES_SLURM_QUERY_TIMEOUT_MS)) < 0)
                return r;
        return WIFEXITED(r) && WEXITSTATUS(r) == 0 ? 0 : -EPERM;
}

void nodes_slurm_argv_free(char **argv) {
        if (!argv)
                return;
        for (char **a = argv; *a; a++)
                free(*a);
        free(argv);
}

/* The setpriv prefix that makes root's srun the job owner's, into
 * pre[0..3]; none (pre[0] NULL) when this is not root or owner is. */
static int slurm_as_owner(unsigned owner, char *setpriv, size_t size, char (*ids)[48], const char **pre) {
        struct passwd *pw;
        int r;

        pre[0] = NULL;
        if (geteuid() != 0 || owner == 0)
                return 0;
        errno = 0;
        if (!(pw = getpwuid((uid_t)owner)))
                return errno ? -errno : -EPERM;
        if ((r = ctl_host_find_program("setpriv", setpriv, size)) < 0)
                return r;
        snprintf(ids[0], sizeof(ids[0]), "--reuid=%u", owner);
        snprintf(ids[1], sizeof(ids[1]), "--regid=%u", (unsigned)pw->pw_gid);
        pre[0] = setpriv;
        pre[1] = ids[0];
        pre[2] = ids[1];
        pre[3] = "--init-groups";
        return 0;
}

int nodes_slurm_step_argv(const char *job, unsigned n_nodes, unsigned owner, char *const *node_argv,
                          char ***ret_argv) {
        char path[PATH_MAX], setpriv[PATH_MAX], ids[2][48], jarg[64], narg[32];
        const char *pre[4];
        size_t n_node = 0, n_pre, i = 0;
        char **argv;
        int r;

        if (!nodes_slurm_job_valid(job) || n_nodes == 0 || n_nodes > NODES_SLURM_MAX_NODES || !node_argv ||
            !node_argv[0])
                return -EINVAL;
        if ((r = slurm_program(NODES_SLURM_SRUN_ENV, "srun", path, sizeof(path))) < 0 ||
            (r = slurm_as_owner(owner, setpriv, sizeof(setpriv), ids, pre)) < 0)
                return r;
        n_pre = pre[0] ? 4 : 0;
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
        if (!(argv = calloc(n_pre + n_head + n_node + 1, sizeof(*argv))))
                return -ENOMEM;
        for (size_t k = 0; k < n_pre + n_head + n_node; k++, i++)
                if (!(argv[i] = strdup(k < n_pre             ? pre[k]
                                       : k < n_pre + n_head ? head[k - n_pre]
                                                            : node_argv[k - n_pre - n_head]))) {
                        nodes_slurm_argv_free(argv);
                        return -ENOMEM;
                }
        *ret_argv = argv;
        return 0;
}

/* Whether e ("NAME=VALUE") of root's environment may go to the owner. */
static bool slurm_env_for_owner(const char *e) {
        static const char *const keep[] = { "PATH=",          "LANG=",         "LC_",           "TZ=",
                                            "SLURM_",         "CUDACKPT_",     "ASAN_OPTIONS=", "UBSAN_OPTIONS=",
                                            "LSAN_OPTIONS=", "TSAN_OPTIONS=" };

        for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
                if (strncmp(e, keep[i], strlen(keep[i])) == 0)
                        return true;
        return false;
}

int nodes_slurm_step_env(unsigned owner, char ***ret_env) {
        static const char drop[] = CUDACKPT_SOCKET_ENV "=";
        bool as_owner = geteuid() == 0 && owner != 0;
        size_t n = 0, k = 0;
        char **env;

        while (environ[n])
                n++;
        if (!(env = calloc(n + 1, sizeof(*env))))
                return -ENOMEM;
        /* srun's --export=ALL,NAME=VALUE does not replace a NAME srun has
         * (Slurm 22.05): the variable is left out of srun's own. */
        for (size_t i = 0; i < n; i++)
                if (strncmp(environ[i], drop, sizeof(drop) - 1) != 0 &&
                    (!as_owner || slurm_env_for_owner(environ[i])))
                        env[k++] = environ[i];
        *ret_env = env;
        return 0;
}
