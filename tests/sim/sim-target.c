/* cudackpt-sim-target: a target process for tests of the simulated driver.
 *
 * Run it with CUDACKPT_SIM=1 (and other CUDACKPT_SIM_* variables) in its
 * environment.  It starts THREADS extra idle threads (default 0), then writes
 * "ready PID\n" to stdout: once a test has read that line, the exec is over
 * and /proc/PID/environ holds the variables, so the first driver call cannot
 * race the exec (a target caught before that reads as NOT_INITIALIZED).  It
 * then waits until it is killed, or until its parent dies (so a crashed test
 * leaves no targets behind; note that "parent" is the THREAD that forked it,
 * so fork it from a thread that outlives it).  Test-only; never installed. */

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static void *target_idle(void *arg) {
        (void) arg;
        for (;;)
                pause();
        return NULL;
}

int main(int argc, char **argv) {
        unsigned long threads = 0;
        char *end;

        if (argc > 2 || (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))) {
                fprintf(stderr, "usage: %s [THREADS]\n", argv[0]);
                return 2;
        }
        if (argc == 2) {
                threads = strtoul(argv[1], &end, 10);
                if (argv[1][0] < '0' || argv[1][0] > '9' || *end != '\0' || threads > 1024) {
                        fprintf(stderr, "%s: bad thread count \"%s\"\n", argv[0], argv[1]);
                        return 2;
                }
        }
        /* The parent may already be gone when the death signal is armed. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() == 1)
                return 1;
        for (unsigned long i = 0; i < threads; i++) {
                pthread_t t;

                if (pthread_create(&t, NULL, target_idle, NULL) != 0) {
                        fprintf(stderr, "%s: cannot start thread\n", argv[0]);
                        return 1;
                }
        }
        if (printf("ready %d\n", (int) getpid()) < 0 || fflush(stdout) != 0)
                return 1;
        for (;;)
                pause();
}
