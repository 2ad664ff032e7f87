/* runinitmain.c: cudackpt-init, the init of a job's pid namespace, as its
 * own small program: `cudackptctl run` execs it as pid 1 of the job's
 * namespace, as root, with the signals it forwards blocked; it stays root
 * (runinit.h says why).
 *
 *   cudackpt-init REPORT_FD USER [--env-fd=FD] [--chdir=DIR] [--output=PATH]
 *                 -- COMMAND [ARG...]
 *
 * USER is "-" (the job runs as root) or UID:GID:GROUPS (GROUPS the
 * supplementary gids, comma-separated, maybe none), resolved by the run
 * command: COMMAND takes them on for good (setgroups, setgid, setuid: no
 * capability left; no_new_privs) before its exec, and a failure is
 * reported on REPORT_FD (CTL_RUN_DROP).  The options are what COMMAND is
 * given as that user (runuser.h): its environment (a memfd the run
 * command checked), its working directory, its output.
 *
 * A program of its own, built without the sanitizers and linked with
 * nothing but libc, so that what CRIU dumps and restores with every job
 * is small and the same whatever build of cudackptctl started it
 * (runinit.c says what it does). */
#include "runinit.h"
#include "runuser.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The most supplementary groups USER may name. */
#define INIT_MAX_GROUPS 65536

/* A whole number up to 2^32-2 at *s, followed by stop or the end; *s
 * moved past the number. */
static int init_id(const char **s, char stop, unsigned long *ret) {
        char *end;

        if (**s < '0' || **s > '9')
                return -EINVAL;
        errno = 0;
        *ret = strtoul(*s, &end, 10);
        if (errno || *ret > 4294967294UL || (*end != '\0' && *end != stop))
                return -EINVAL;
        *s = end;
        return 0;
}

/* USER (see above) into *ids; 0, 1 for "-" (root), or -EINVAL. */
static int init_user(const char *spec, ctl_run_ids *ids) {
        static gid_t groups[INIT_MAX_GROUPS];
        unsigned long uid, gid, g;
        size_t n = 0;

        if (strcmp(spec, "-") == 0)
                return 1;
        if (init_id(&spec, ':', &uid) < 0 || *spec++ != ':' || init_id(&spec, ':', &gid) < 0 || *spec++ != ':')
                return -EINVAL;
        while (*spec) {
                if (n == INIT_MAX_GROUPS || init_id(&spec, ',', &g) < 0)
                        return -EINVAL;
                groups[n++] = (gid_t) g;
                spec += *spec == ',';
        }
        *ids = (ctl_run_ids) { .uid = (uid_t) uid, .gid = (gid_t) gid, .groups = groups, .n_groups = n };
        return 0;
}

/* A descriptor number: 0 or -EINVAL. */
static int init_fd(const char *s, int *ret) {
        char *end;
        long v;

        errno = 0;
        v = strtol(s, &end, 10);
        if (errno || end == s || *end != '\0' || v < 0 || v > INT_MAX)
                return -EINVAL;
        *ret = (int) v;
        return 0;
}

/* The options from argv[i] to "--" into *u; the index of "--", or -1. */
static int init_options(int argc, char **argv, int i, ctl_run_user *u) {
        static const size_t env_len = sizeof(CTL_RUN_USER_ENV_FD) - 1, chdir_len = sizeof(CTL_RUN_USER_CHDIR) - 1,
                            output_len = sizeof(CTL_RUN_USER_OUTPUT) - 1;

        for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
                if (strncmp(argv[i], CTL_RUN_USER_ENV_FD, env_len) == 0) {
                        if (init_fd(argv[i] + env_len, &u->env_fd) < 0 || fcntl(u->env_fd, F_SETFD, FD_CLOEXEC) < 0)
                                return -1;
                } else if (strncmp(argv[i], CTL_RUN_USER_CHDIR, chdir_len) == 0)
                        u->chdir = argv[i] + chdir_len;
                else if (strncmp(argv[i], CTL_RUN_USER_OUTPUT, output_len) == 0)
                        u->output = argv[i] + output_len;
                else
                        return -1;
        }
        return i < argc - 1 ? i : -1;
}

int main(int argc, char **argv) {
        ctl_run_user user = { .env_fd = -1 };
        ctl_run_ids ids;
        int r, fd = -1, dashes = argc >= 5 ? init_options(argc, argv, 3, &user) : -1;

        if (dashes < 0 || getpid() != 1) {
                fputs("cudackpt-init: the init of a job's pid namespace, started by cudackptctl run\n", stderr);
                return 2;
        }
        /* The report pipe is the run command's, not the job's. */
        if (init_fd(argv[1], &fd) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
                return 2;
        r = init_user(argv[2], &ids);
        if (r < 0) {
                ctl_run_report_send(fd, CTL_RUN_DROP, -r);
                return 125;
        }
        ctl_run_init(argv + dashes + 1, fd, r == 0 ? &ids : NULL, dashes > 3 ? &user : NULL);
}
