/* fuzz_harness.c: the request fuzz target's harness: reports, the targets
 * it spawns, and the daemon it runs in-process (set up once, torn down at
 * exit). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "fuzz.h"
#include "fuzz_harness.h"
#include "host/target.h"

/* The environments of the simulated CUDA targets (see tests/sim/sim.c).
 * Every injected failure leaves the state as it was, so Resume and Unlock
 * always bring a target back to running. */
static char *const target_env[FUZZ_N_CUDA][5] = {
        [T_PLAIN] = { "CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=1", NULL },
        [T_BUSY] = { "CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=1", "CUDACKPT_SIM_BUSY_MS=5", NULL },
        [T_CKPT_FAIL] = { "CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=1",
                          "CUDACKPT_SIM_FAIL=checkpoint:CUDA_ERROR_NOT_SUPPORTED", NULL },
        [T_LOCK_FAIL] = { "CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=1",
                          "CUDACKPT_SIM_FAIL=lock:CUDA_ERROR_OUT_OF_MEMORY,tid:CUDA_ERROR_UNKNOWN",
                          "CUDACKPT_SIM_STATE_VALUE=7", NULL },
        [T_TWO_GPUS] = { "CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=1", "CUDACKPT_SIM_GPUS=0,1", NULL },
};

struct fuzz_state F;

/* ------------------------------------------------------------ reporting */

/* Where findings are reported: stderr, or the copy of it taken before
 * libFuzzer's -close_fd_mask=2 closes it (the daemon's audit trail, which no
 * log level silences, goes to stderr: 2 keeps a long run readable). */
static FILE *report_file;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        int fd = dup(STDERR_FILENO);

        (void)argc;
        (void)argv;
        if (fd >= 0) {
                (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
                report_file = fdopen(fd, "w");
                if (report_file)
                        setvbuf(report_file, NULL, _IONBF, 0);
                else
                        close(fd);
        }
        return 0;
}

FILE *fuzz_report(void)
{
        return report_file ? report_file : stderr;
}

static void dump_input(void)
{
        size_t n = F.input_size < 2048 ? F.input_size : 2048;

        if (!F.input)
                return;
        fprintf(fuzz_report(), "fuzz_request: input (%zu bytes%s): \"", F.input_size,
                n < F.input_size ? ", first 2048 shown" : "");
        for (size_t i = 0; i < n; i++) {
                unsigned char ch = F.input[i];
                if (ch == '\\' || ch == '"')
                        fprintf(fuzz_report(), "\\%c", ch);
                else if (isprint(ch))
                        fputc(ch, fuzz_report());
                else
                        fprintf(fuzz_report(), "\\x%02x", ch);
        }
        fprintf(fuzz_report(), "\"\n");
}

/* On the way out after a finding: the socket's directory goes; the targets
 * die with us (PR_SET_PDEATHSIG). */
static void remove_dir(void)
{
        if (!F.dir[0])
                return;
        unlink(F.sock);
        if (rmdir(F.dir) < 0)
                fprintf(fuzz_report(), "fuzz_request: rmdir %s: %s\n", F.dir, strerror(errno));
        F.dir[0] = '\0';
}

/* A finding: the daemon broke one of the rules above. */
__attribute__((noreturn, format(printf, 1, 2))) void fuzz_finding(const char *fmt, ...)
{
        va_list ap;

        fprintf(fuzz_report(), "fuzz_request: FINDING: ");
        va_start(ap, fmt);
        vfprintf(fuzz_report(), fmt, ap);
        va_end(ap);
        fputc('\n', fuzz_report());
        dump_input();
        remove_dir();
        abort();
}

/* Not a finding: the harness itself could not work. */
__attribute__((noreturn, format(printf, 1, 2))) void fuzz_harness_fail(const char *fmt, ...)
{
        va_list ap;

        fprintf(fuzz_report(), "fuzz_request: harness error: ");
        va_start(ap, fmt);
        vfprintf(fuzz_report(), fmt, ap);
        va_end(ap);
        fputc('\n', fuzz_report());
        remove_dir();
        abort();
}

void *fuzz_xmalloc(size_t n)
{
        void *p = malloc(n ? n : 1);

        if (!p)
                fuzz_harness_fail("out of memory");
        return p;
}

long long fuzz_now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void fuzz_sleep_ms(unsigned ms)
{
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/* -------------------------------------------------------------- targets */

static unsigned long long read_start_time(pid_t pid)
{
        uint64_t start_time;

        return target_read_stat(pid, &start_time, NULL) == 0 ? start_time : 0;
}

/* A thread of pid other than its main one, or pid. */
static pid_t other_thread(pid_t pid)
{
        char path[64];
        struct dirent *e;
        pid_t tid = pid;
        DIR *d;

        snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
        d = opendir(path);
        if (!d)
                return pid;
        while ((e = readdir(d))) {
                long v = strtol(e->d_name, NULL, 10);
                if (v > 0 && v != pid) {
                        tid = (pid_t)v;
                        break;
                }
        }
        closedir(d);
        return tid;
}

/* cudackpt-sim-target with one extra thread and env, dying with us; returns
 * once it has said "ready" (its exec is over: the simulator sees env). */
static pid_t spawn_target(char *const env[])
{
        static char *const argv[] = { "cudackpt-sim-target", "1", NULL };
        const char *path = getenv("CUDACKPT_TEST_SIM_TARGET");
        pid_t parent = getpid(), pid;
        struct pollfd p;
        char line[64];
        size_t len = 0;
        int fds[2];

#ifdef CUDACKPT_FUZZ_SIM_TARGET_PATH
        if (!path || !*path)
                path = CUDACKPT_FUZZ_SIM_TARGET_PATH;
#endif
        if (!path || !*path)
                fuzz_harness_fail("set CUDACKPT_TEST_SIM_TARGET to the path of cudackpt-sim-target");
        if (pipe2(fds, O_CLOEXEC) < 0)
                fuzz_harness_fail("pipe2: %s", strerror(errno));
        pid = fork();
        if (pid < 0)
                fuzz_harness_fail("fork: %s", strerror(errno));
        if (pid == 0) {
                (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent || dup2(fds[1], STDOUT_FILENO) < 0)
                        _exit(127);
                execve(path, argv, env);
                _exit(127);
        }
        close(fds[1]);
        p = (struct pollfd){ .fd = fds[0], .events = POLLIN };
        while (!memchr(line, '\n', len)) {
                ssize_t n;

                if (len == sizeof(line) - 1 || poll(&p, 1, 10000) <= 0 ||
                    (n = read(fds[0], line + len, sizeof(line) - 1 - len)) <= 0)
                        fuzz_harness_fail("target %s (pid %d) did not start", path, (int)pid);
                len += (size_t)n;
        }
        close(fds[0]);
        return pid;
}

/* A child that has exited; reaped (a free pid) or left a zombie. */
static pid_t spawn_exited(bool reap)
{
        siginfo_t si;
        pid_t pid = fork();

        if (pid < 0)
                fuzz_harness_fail("fork: %s", strerror(errno));
        if (pid == 0)
                _exit(0);
        if (reap) {
                while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        } else {
                while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR)
                        ;
        }
        return pid;
}

static void kill_targets(void)
{
        for (int i = 0; i < FUZZ_N_TARGETS; i++) {
                struct fuzz_target *t = &F.t[i];

                if (!t->child || t->pid <= 0)
                        continue;
                if (i != T_DEAD) {
                        if (i != T_ZOMBIE)
                                (void)kill(t->pid, SIGKILL);
                        while (waitpid(t->pid, NULL, 0) < 0 && errno == EINTR)
                                ;
                }
                t->child = false;
        }
}

/* --------------------------------------------------------------- daemon */

static void *server_thread(void *arg)
{
        (void)arg;
        atomic_store(&F.server_tid, (int)syscall(SYS_gettid));
        F.exit_code = server_run(&F.srv);
        server_free(&F.srv);
        if (uv_loop_close(&F.loop) < 0)
                fuzz_finding("the daemon's loop still has open handles after its shutdown");
        atomic_store(&F.server_exited, true);
        return NULL;
}

int fuzz_connect_daemon(void)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd, r;

        memcpy(sa.sun_path, F.sock, strlen(F.sock) + 1);
        for (int tries = 0;; tries++) {
                fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (fd < 0)
                        fuzz_harness_fail("socket: %s", strerror(errno));
                if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
                        break;
                r = -errno;
                close(fd);
                if (r != -EAGAIN || tries >= 1000)
                        return r;
                fuzz_sleep_ms(1);
        }
        if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
                fuzz_harness_fail("fcntl: %s", strerror(errno));
        return fd;
}

/* The process's environment as the daemon and the simulator read it. */
static void setup_env(void)
{
        F.verbose = getenv("CUDACKPT_FUZZ_VERBOSE") && strcmp(getenv("CUDACKPT_FUZZ_VERBOSE"), "1") == 0;
        signal(SIGPIPE, SIG_IGN); /* as cudackptd does: libuv writes with write() */
        /* The daemon's side of the simulator: two GPUs, the default driver. */
        setenv("CUDACKPT_SIM_DEVICE_COUNT", "2", 1);
        unsetenv("CUDACKPT_SIM_DEVICES");
        unsetenv("CUDACKPT_SIM_DRIVER_VERSION");
        unsetenv("CUDACKPT_SIM_INIT_ERROR");
        /* Bind our own socket, talk to no systemd, log to stderr. */
        unsetenv("LISTEN_FDS");
        unsetenv("LISTEN_PID");
        unsetenv("LISTEN_FDNAMES");
        unsetenv("NOTIFY_SOCKET");
        unsetenv("WATCHDOG_USEC");
        unsetenv("WATCHDOG_PID");
        unsetenv("JOURNAL_STREAM");
        setenv("UV_THREADPOOL_SIZE", "8", 1); /* read when the pool first starts */
}

/* Every target but the daemon's thread, which is not there yet. */
static void setup_targets(void)
{
        for (int i = 0; i < FUZZ_N_CUDA; i++) {
                F.t[i].pid = spawn_target(target_env[i]);
                F.t[i].start_time = read_start_time(F.t[i].pid);
                F.t[i].child = true;
        }
        F.t[T_SELF].pid = getpid();
        F.t[T_SELF].start_time = read_start_time(getpid());
        F.t[T_INIT].pid = 1;
        F.t[T_INIT].start_time = read_start_time(1);
        F.t[T_ZOMBIE].pid = spawn_exited(false);
        F.t[T_ZOMBIE].start_time = read_start_time(F.t[T_ZOMBIE].pid);
        F.t[T_ZOMBIE].child = true;
        F.t[T_DEAD].pid = spawn_exited(true);
        F.t[T_DEAD].child = true;
        for (int i = 0; i < FUZZ_N_TARGETS; i++)
                F.t[i].tid = i < FUZZ_N_CUDA ? other_thread(F.t[i].pid) : F.t[i].pid;
}

/* The daemon's configuration: small limits, so that inputs reach them. */
static void setup_config(const char *sim)
{
        config_init(&F.cfg);
        if (config_set_string(&F.cfg.socket_path, F.sock) < 0 ||
            config_set_string(&F.cfg.driver_path, sim) < 0)
                fuzz_harness_fail("out of memory");
        F.cfg.workers = 8;
        F.cfg.max_message_bytes = FUZZ_MAX_MESSAGE_BYTES;
        F.cfg.max_write_queue_bytes = 65536;
        F.cfg.max_connections = 32;
        F.cfg.max_connections_per_uid = 16;
        F.cfg.idle_timeout_ms = 60000;
        F.cfg.max_queue_per_pid = 2;
        F.cfg.max_queue_total = 3;
        F.cfg.default_lock_timeout_ms = 1000;
        F.cfg.max_gpu_pairs = 4;
        F.cfg.log_level = LOG_ERR;
        log_setup(F.cfg.log_level);
}

void fuzz_setup(void)
{
        const char *sim = getenv("CUDACKPT_TEST_SIM");
        struct sigaction old_int;
        int fd = -1;

#ifdef CUDACKPT_FUZZ_SIM_PATH
        if (!sim || !*sim)
                sim = CUDACKPT_FUZZ_SIM_PATH;
#endif
        if (!sim || !*sim)
                fuzz_harness_fail("set CUDACKPT_TEST_SIM to the path of libcudackpt-sim.so");
        setup_env();
        /* Targets first, while this process has no threads of ours. */
        setup_targets();
        snprintf(F.dir, sizeof(F.dir), "/tmp/cudackpt-fuzz-XXXXXX");
        if (!mkdtemp(F.dir))
                fuzz_harness_fail("mkdtemp: %s", strerror(errno));
        snprintf(F.sock, sizeof(F.sock), "%s/sock", F.dir);
        setup_config(sim);

        if (uv_loop_init(&F.loop) < 0)
                fuzz_harness_fail("uv_loop_init failed");
        /* The server takes SIGTERM (fuzz_request_teardown() uses it) and
         * SIGINT; Ctrl-C stays with libFuzzer, or with the default. */
        sigaction(SIGINT, NULL, &old_int);
        server_init(&F.srv, &F.loop, &F.cfg);
        sigaction(SIGINT, &old_int, NULL);
        if (pthread_create(&F.thread, NULL, server_thread, NULL) != 0)
                fuzz_harness_fail("pthread_create failed");
        F.ready = true;
        atexit(fuzz_request_teardown);

        /* The socket is bound once the driver is loaded. */
        for (int i = 0; (fd = fuzz_connect_daemon()) < 0; i++) {
                if (atomic_load(&F.server_exited) || i >= 10000)
                        fuzz_harness_fail("the daemon did not start listening on %s", F.sock);
                fuzz_sleep_ms(1);
        }
        close(fd);
        F.t[T_DAEMON_THREAD].pid = F.t[T_DAEMON_THREAD].tid = atomic_load(&F.server_tid);
        F.t[T_DAEMON_THREAD].start_time = read_start_time(F.t[T_DAEMON_THREAD].pid);
}

void fuzz_request_teardown(void)
{
        struct timespec ts;
        int r;

        if (!F.ready || F.torn_down)
                return;
        F.torn_down = true;
        F.input = NULL;
        /* The daemon's own shutdown path: stop listening, finish, exit 0. */
        if (!atomic_load(&F.server_exited))
                kill(getpid(), SIGTERM);
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 20;
        r = pthread_timedjoin_np(F.thread, NULL, &ts);
        if (r != 0)
                fuzz_finding("the daemon did not stop within 20 s of SIGTERM (%s)", strerror(r));
        if (F.exit_code != 0)
                fuzz_finding("the daemon's loop exited with %d", F.exit_code);
        config_free(&F.cfg);
        kill_targets();
        remove_dir(); /* the daemon removed its socket; in case it did not */
}
