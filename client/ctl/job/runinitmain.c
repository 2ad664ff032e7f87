/* runinitmain.c: cudackpt-init, the init of a job's pid namespace, as its
 * own small program: `cudackptctl run` execs it as pid 1 of the job's
 * namespace, as root, with the signals it forwards blocked; it stays root
 * (runinit.h says why).
 *
 *   cudackpt-init REPORT_FD USER -- COMMAND [ARG...]
 *
 * USER is "-" (the job runs as root) or UID:GID:GROUPS (GROUPS the
 * supplementary gids, comma-separated, maybe none), resolved by the run
 * command: COMMAND takes them on for good (setgroups, setgid, setuid: no
 * capability left; no_new_privs) before its exec, and a failure is
 * reported on REPORT_FD (CTL_RUN_DROP).
 *
 * A program of its own, built without the sanitizers and linked with
 * nothing but libc, so that what CRIU dumps and restores with every job
 * is small and the same whatever build of cudackptctl started it
 * (runinit.c says what it does). */
#include "runinit.h"

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

int main(int argc, char **argv) {
        ctl_run_ids ids;
        char *end;
        long fd;
        int r;

        if (argc < 5 || strcmp(argv[3], "--") != 0 || getpid() != 1) {
                fputs("cudackpt-init: the init of a job's pid namespace, started by cudackptctl run\n", stderr);
                return 2;
        }
        fd = strtol(argv[1], &end, 10);
        /* The report pipe is the run command's, not the job's. */
        if (*end != '\0' || fd < 0 || fd > INT_MAX || fcntl((int) fd, F_SETFD, FD_CLOEXEC) < 0)
                return 2;
        r = init_user(argv[2], &ids);
        if (r < 0) {
                ctl_run_report_send((int) fd, CTL_RUN_DROP, -r);
                return 125;
        }
        ctl_run_init(argv + 4, (int) fd, r == 0 ? &ids : NULL);
}
