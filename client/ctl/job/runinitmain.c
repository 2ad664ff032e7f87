/* runinitmain.c: cudackpt-init, the init of a job's pid namespace, as its
 * own small program: `cudackptctl run` execs it as pid 1 of the job's
 * namespace, as the job's user, with the signals it forwards blocked.
 *
 *   cudackpt-init REPORT_FD -- COMMAND [ARG...]
 *
 * A program of its own, built without the sanitizers and linked with
 * nothing but libc, so that what CRIU dumps and restores with every job
 * is small and the same whatever build of cudackptctl started it
 * (runinit.c says what it does). */
#include "runinit.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
        char *end;
        long fd;

        if (argc < 4 || strcmp(argv[2], "--") != 0 || getpid() != 1) {
                fputs("cudackpt-init: the init of a job's pid namespace, started by cudackptctl run\n", stderr);
                return 2;
        }
        fd = strtol(argv[1], &end, 10);
        /* The report pipe is the run command's, not the job's. */
        if (*end != '\0' || fd < 0 || fd > 1024 || fcntl((int) fd, F_SETFD, FD_CLOEXEC) < 0)
                return 2;
        ctl_run_init(argv + 3, (int) fd);
}
