/* standin_target.c: cudackpt-gpu-standin, a stand-in for cudackpt-gpu-target
 * on the simulator, so that the group tests (group_tests.py) and the group
 * and ListProcesses benchmarks (cudackpt-bench-gpu group|list --sim=...) can
 * be dry-run on a machine without a GPU.
 *
 * It takes gpu_target's options and writes the same status line (after each
 * INTERVAL_MS, to stdout unless --quiet and atomically to --status), the
 * same "ready ..." line on --ready-fd, and forks --children the same way
 * (STATUS.childK, seed SEED+K).  It holds no GPU memory and verifies
 * nothing: mismatches are always 0, and it keeps counting while the
 * simulator says it is locked or checkpointed (a real target freezes).
 * Whoever starts it gives it the simulator's environment: CUDACKPT_SIM=1,
 * CUDACKPT_SIM_MEM_MIB, CUDACKPT_SIM_MANAGED=1 for --managed, and
 * LD_PRELOAD=libcudackpt-sim.so so that it maps "the driver" as a CUDA
 * process does.  Test-only; never installed. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STANDIN_UUID "GPU-00000000-5157-4000-8000-000000000001"
#define STANDIN_MAX_CHILDREN 64

static volatile sig_atomic_t standin_stop;

static void standin_on_signal(int sig)
{
        (void)sig;
        standin_stop = 1;
}

struct standin_opts {
        unsigned long long mib;
        int managed;
        long interval_ms;
        long long iterations;
        const char *status_path;
        int ready_fd;
        int device;
        unsigned long long seed;
        int quiet;
        unsigned children;
};

static int standin_ull(const char *s, unsigned long long *ret)
{
        char *end = NULL;
        if (*s == '-' || *s == '\0')
                return -1;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 0);
        if (errno != 0 || *end != '\0')
                return -1;
        *ret = v;
        return 0;
}

static int standin_parse(int argc, char **argv, struct standin_opts *o)
{
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i];
                unsigned long long v = 0;
                if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
                        printf("usage: cudackpt-gpu-standin [cudackpt-gpu-target's options]\n");
                        exit(0);
                } else if (strcmp(a, "--managed") == 0) {
                        o->managed = 1;
                } else if (strcmp(a, "--quiet") == 0) {
                        o->quiet = 1;
                } else if (strncmp(a, "--mib=", 6) == 0 && standin_ull(a + 6, &v) == 0 && v > 0) {
                        o->mib = v;
                } else if (strncmp(a, "--interval-ms=", 14) == 0 && standin_ull(a + 14, &v) == 0 &&
                           v <= 3600000) {
                        o->interval_ms = (long)v;
                } else if (strncmp(a, "--iterations=", 13) == 0 && standin_ull(a + 13, &v) == 0 && v > 0 &&
                           v < (1ULL << 62)) {
                        o->iterations = (long long)v;
                } else if (strncmp(a, "--status=", 9) == 0 && a[9] != '\0') {
                        o->status_path = a + 9;
                } else if (strncmp(a, "--ready-fd=", 11) == 0 && standin_ull(a + 11, &v) == 0 && v <= 65535) {
                        o->ready_fd = (int)v;
                } else if (strncmp(a, "--device=", 9) == 0 && standin_ull(a + 9, &v) == 0 && v < 1024) {
                        o->device = (int)v;
                } else if (strncmp(a, "--seed=", 7) == 0 && standin_ull(a + 7, &v) == 0) {
                        o->seed = v;
                } else if (strncmp(a, "--children=", 11) == 0 && standin_ull(a + 11, &v) == 0 &&
                           v <= STANDIN_MAX_CHILDREN) {
                        o->children = (unsigned)v;
                } else {
                        fprintf(stderr, "cudackpt-gpu-standin: bad argument: %s\n", a);
                        return -1;
                }
        }
        return 0;
}

static void standin_write_status(const char *path, const char *line)
{
        char tmp[4096];
        if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
                return;
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
                return;
        size_t len = strlen(line);
        ssize_t n = write(fd, line, len);
        close(fd);
        if (n != (ssize_t)len || rename(tmp, path) != 0)
                fprintf(stderr, "cudackpt-gpu-standin: cannot write %s: %s\n", path, strerror(errno));
}

int main(int argc, char **argv)
{
        struct standin_opts o = {.mib = 1024, .interval_ms = 200, .iterations = -1, .ready_fd = -1, .seed = 0x5eed};
        static char child_status[4096];
        pid_t kids[STANDIN_MAX_CHILDREN];
        unsigned n_kids = 0;

        if (standin_parse(argc, argv, &o) < 0)
                return 2;
        for (unsigned k = 1; k <= o.children; k++) {
                fflush(stdout);
                pid_t pid = fork();
                if (pid < 0)
                        break;
                if (pid == 0) {
                        if (o.status_path &&
                            snprintf(child_status, sizeof(child_status), "%s.child%u", o.status_path, k) <
                                    (int)sizeof(child_status))
                                o.status_path = child_status;
                        if (o.ready_fd >= 0) {
                                close(o.ready_fd);
                                o.ready_fd = -1;
                        }
                        o.seed += k;
                        o.children = 0;
                        n_kids = 0;
                        /* A parent killed with SIGKILL takes its children along. */
                        prctl(PR_SET_PDEATHSIG, SIGKILL);
                        break;
                }
                kids[n_kids++] = pid;
        }

        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = standin_on_signal;
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        signal(SIGPIPE, SIG_IGN);
        setvbuf(stdout, NULL, _IOLBF, 0);

        for (long long iter = 1; !standin_stop; iter++) {
                char line[512];
                snprintf(line, sizeof(line),
                         "verify iter=%lld mismatches=0 total_mismatches=0 first_bad=-1 ms=0.000 pid=%d uuid=%s "
                         "device=%d bytes=%llu managed=%d error=none\n",
                         iter, (int)getpid(), STANDIN_UUID, o.device, o.mib << 20, o.managed);
                if (!o.quiet)
                        fputs(line, stdout);
                if (o.status_path)
                        standin_write_status(o.status_path, line);
                if (iter == 1 && o.ready_fd >= 0) {
                        char ready[256];
                        int len = snprintf(ready, sizeof(ready), "ready pid=%d uuid=%s bytes=%llu\n",
                                           (int)getpid(), STANDIN_UUID, o.mib << 20);
                        if (write(o.ready_fd, ready, (size_t)len) != len)
                                fprintf(stderr, "cudackpt-gpu-standin: ready fd: %s\n", strerror(errno));
                        close(o.ready_fd);
                        o.ready_fd = -1;
                }
                if (o.iterations > 0 && iter >= o.iterations)
                        break;
                struct timespec ts = {o.interval_ms / 1000, (o.interval_ms % 1000) * 1000000L};
                nanosleep(&ts, NULL);
        }
        for (unsigned i = 0; i < n_kids; i++)
                kill(kids[i], SIGTERM);
        for (unsigned i = 0; i < n_kids; i++)
                while (waitpid(kids[i], NULL, 0) < 0 && errno == EINTR) {
                }
        return 0;
}
