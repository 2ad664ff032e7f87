/* fuzz_request.c: a fuzz target for cudackptd's whole request path.
 *
 * The daemon runs inside this process as cudackptd runs it (a struct config,
 * a uv loop and a struct server, server_init/server_run, here on a thread of
 * its own) with the simulated driver, libcudackpt-sim.so, from the
 * environment (CUDACKPT_TEST_SIM) or the path compiled in.  Every input is
 * written to the daemon's Unix socket in small pieces and the replies are
 * read back and checked, so framing, parsing, dispatch, policy, scheduling
 * and the driver calls all see it.  libFuzzer calls LLVMFuzzerTestOneInput;
 * replay.c runs the seed corpus through it as the ctest test fuzz.corpus.
 *
 * Input format:
 *   byte 0    low nibble + 1: the size of each write (1 to 16 bytes);
 *             high nibble modulo FUZZ_N_TARGETS: the target that $PID names
 *   the rest  sent as it is, except for these tokens:
 *     $PID    the selected target's pid       $START  its start time
 *     $Pn     target n's pid (n a digit)      $Sn     target n's start time
 *     $Tn     the id of a second thread of target n (its pid if it has none)
 *     $CONN   what follows goes on another connection (FUZZ_MAX_CONNS in
 *             all); the connections are written in turn, chunk by chunk
 * Targets (the simulated CUDA ones are cudackpt-sim-target processes with
 * a second thread): 0 a simulated CUDA process; 1 one whose lock waits 5 ms (a
 * shorter timeout_ms times out); 2 one whose checkpoint fails NOT_SUPPORTED
 * (Suspend rolls back); 3 one whose lock and GetRestoreThreadId fail and
 * whose GetState says 7; 4 one on two GPUs; 5 this process (the daemon
 * itself); 6 pid 1; 7 a zombie; 8 a reaped child (no such process); 9 a
 * thread of the daemon.  The daemon's limits are small (4096-byte messages,
 * 2 operations per pid, 3 in all, 4 GPU pairs) so that they are reached.
 *
 * Checked for every input, abort() on a violation (a finding):
 *  - every connection reaches EOF within FUZZ_DEADLINE_MS (no hang);
 *  - every reply is one NUL-terminated JSON object with "parameters" (an
 *    object) and/or "error" (a documented error name) and no other key,
 *    with a well-formed pid, state, duration_ms and the like where present;
 *  - no more replies than messages (plus one for an unterminated tail), no
 *    partial reply, nothing after InvalidRequest or MessageTooLarge;
 *  - no successful reply about this process or one of its threads (the
 *    daemon must not act on itself).
 * After every input Resume then Unlock go to each simulated CUDA target and
 * GetState must then say "running": each input starts from the same states,
 * and a target left locked or checkpointed for good is a finding too.
 * CUDACKPT_FUZZ_VERBOSE=1 prints every reply. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "base/config.h"
#include "cudackpt/protocol.h"
#include "fuzz.h"
#include "base/log.h"
#include "server.h"
#include "host/target.h"

#define FUZZ_MAX_CONNS 4
#define FUZZ_DEADLINE_MS 10000      /* per input; nothing legitimate takes 1 s */
#define FUZZ_MAX_REPLY_BYTES (16u << 20)
#define FUZZ_MAX_MESSAGE_BYTES 4096

enum {
        T_PLAIN,
        T_BUSY,
        T_CKPT_FAIL,
        T_LOCK_FAIL,
        T_TWO_GPUS,
        T_SELF,
        T_INIT,
        T_ZOMBIE,
        T_DEAD,
        T_DAEMON_THREAD,
        FUZZ_N_TARGETS,
        FUZZ_N_CUDA = T_SELF, /* targets below this are simulated CUDA processes */
};

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

struct fuzz_target {
        pid_t pid;
        pid_t tid;                     /* another thread of it, or pid */
        unsigned long long start_time; /* field 22 of /proc/PID/stat; 0 if unknown */
        bool child;                    /* ours to kill (if alive) and reap */
};

static struct {
        bool ready;
        bool torn_down;
        bool verbose;         /* CUDACKPT_FUZZ_VERBOSE=1: print every reply */
        char dir[64];
        char sock[96];
        struct config cfg;
        uv_loop_t loop;
        struct server srv;
        pthread_t thread;
        int exit_code;
        atomic_bool server_exited;
        atomic_int server_tid;
        struct fuzz_target t[FUZZ_N_TARGETS];
        const uint8_t *input; /* the input being run, for reports */
        size_t input_size;
} F;

/* One connection of an input. */
struct fconn {
        int fd;
        char *out;            /* what to send */
        size_t out_len, out_off;
        bool wr_done;         /* all sent (or the daemon closed): SHUT_WR done */
        bool eof;
        char *in;             /* what came back */
        size_t in_len, in_cap;
};

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

static FILE *report(void)
{
        return report_file ? report_file : stderr;
}

static void dump_input(void)
{
        size_t n = F.input_size < 2048 ? F.input_size : 2048;

        if (!F.input)
                return;
        fprintf(report(), "fuzz_request: input (%zu bytes%s): \"", F.input_size,
                n < F.input_size ? ", first 2048 shown" : "");
        for (size_t i = 0; i < n; i++) {
                unsigned char ch = F.input[i];
                if (ch == '\\' || ch == '"')
                        fprintf(report(), "\\%c", ch);
                else if (isprint(ch))
                        fputc(ch, report());
                else
                        fprintf(report(), "\\x%02x", ch);
        }
        fprintf(report(), "\"\n");
}

/* On the way out after a finding: the socket's directory goes; the targets
 * die with us (PR_SET_PDEATHSIG). */
static void remove_dir(void)
{
        if (!F.dir[0])
                return;
        unlink(F.sock);
        if (rmdir(F.dir) < 0)
                fprintf(report(), "fuzz_request: rmdir %s: %s\n", F.dir, strerror(errno));
        F.dir[0] = '\0';
}

/* A finding: the daemon broke one of the rules above. */
__attribute__((noreturn, format(printf, 1, 2))) static void finding(const char *fmt, ...)
{
        va_list ap;

        fprintf(report(), "fuzz_request: FINDING: ");
        va_start(ap, fmt);
        vfprintf(report(), fmt, ap);
        va_end(ap);
        fputc('\n', report());
        dump_input();
        remove_dir();
        abort();
}

/* Not a finding: the harness itself could not work. */
__attribute__((noreturn, format(printf, 1, 2))) static void harness_fail(const char *fmt, ...)
{
        va_list ap;

        fprintf(report(), "fuzz_request: harness error: ");
        va_start(ap, fmt);
        vfprintf(report(), fmt, ap);
        va_end(ap);
        fputc('\n', report());
        remove_dir();
        abort();
}

static void *xmalloc(size_t n)
{
        void *p = malloc(n ? n : 1);

        if (!p)
                harness_fail("out of memory");
        return p;
}

static long long now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
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
                harness_fail("set CUDACKPT_TEST_SIM_TARGET to the path of cudackpt-sim-target");
        if (pipe2(fds, O_CLOEXEC) < 0)
                harness_fail("pipe2: %s", strerror(errno));
        pid = fork();
        if (pid < 0)
                harness_fail("fork: %s", strerror(errno));
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
                        harness_fail("target %s (pid %d) did not start", path, (int)pid);
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
                harness_fail("fork: %s", strerror(errno));
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
                finding("the daemon's loop still has open handles after its shutdown");
        atomic_store(&F.server_exited, true);
        return NULL;
}

static int connect_daemon(void)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd, r;

        memcpy(sa.sun_path, F.sock, strlen(F.sock) + 1);
        for (int tries = 0;; tries++) {
                fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (fd < 0)
                        harness_fail("socket: %s", strerror(errno));
                if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
                        break;
                r = -errno;
                close(fd);
                if (r != -EAGAIN || tries >= 1000)
                        return r;
                sleep_ms(1);
        }
        if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
                harness_fail("fcntl: %s", strerror(errno));
        return fd;
}

static void setup(void)
{
        const char *sim = getenv("CUDACKPT_TEST_SIM");
        struct sigaction old_int;
        int fd = -1;

#ifdef CUDACKPT_FUZZ_SIM_PATH
        if (!sim || !*sim)
                sim = CUDACKPT_FUZZ_SIM_PATH;
#endif
        if (!sim || !*sim)
                harness_fail("set CUDACKPT_TEST_SIM to the path of libcudackpt-sim.so");

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

        /* Targets first, while this process has no threads of ours. */
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

        snprintf(F.dir, sizeof(F.dir), "/tmp/cudackpt-fuzz-XXXXXX");
        if (!mkdtemp(F.dir))
                harness_fail("mkdtemp: %s", strerror(errno));
        snprintf(F.sock, sizeof(F.sock), "%s/sock", F.dir);

        config_init(&F.cfg);
        if (config_set_string(&F.cfg.socket_path, F.sock) < 0 ||
            config_set_string(&F.cfg.driver_path, sim) < 0)
                harness_fail("out of memory");
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

        if (uv_loop_init(&F.loop) < 0)
                harness_fail("uv_loop_init failed");
        /* The server takes SIGTERM (fuzz_request_teardown() uses it) and
         * SIGINT; Ctrl-C stays with libFuzzer, or with the default. */
        sigaction(SIGINT, NULL, &old_int);
        server_init(&F.srv, &F.loop, &F.cfg);
        sigaction(SIGINT, &old_int, NULL);
        if (pthread_create(&F.thread, NULL, server_thread, NULL) != 0)
                harness_fail("pthread_create failed");
        F.ready = true;
        atexit(fuzz_request_teardown);

        /* The socket is bound once the driver is loaded. */
        for (int i = 0; (fd = connect_daemon()) < 0; i++) {
                if (atomic_load(&F.server_exited) || i >= 10000)
                        harness_fail("the daemon did not start listening on %s", F.sock);
                sleep_ms(1);
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
                finding("the daemon did not stop within 20 s of SIGTERM (%s)", strerror(r));
        if (F.exit_code != 0)
                finding("the daemon's loop exited with %d", F.exit_code);
        config_free(&F.cfg);
        kill_targets();
        remove_dir(); /* the daemon removed its socket; in case it did not */
}

/* --------------------------------------------------------- the replies */

static bool known_error(const char *name)
{
        static const char *const names[] = {
                CUDACKPT_ERROR_NO_SUCH_PROCESS,       CUDACKPT_ERROR_NOT_CUDA_PROCESS,
                CUDACKPT_ERROR_PERMISSION_DENIED,     CUDACKPT_ERROR_INVALID_STATE,
                CUDACKPT_ERROR_TIMEOUT,               CUDACKPT_ERROR_INVALID_GPU_MAPPING,
                CUDACKPT_ERROR_NOT_SUPPORTED,         CUDACKPT_ERROR_PROCESS_GONE,
                CUDACKPT_ERROR_PROCESS_CHANGED,       CUDACKPT_ERROR_DRIVER_UNAVAILABLE,
                CUDACKPT_ERROR_DRIVER_ERROR,          CUDACKPT_ERROR_QUEUE_FULL,
                CUDACKPT_ERROR_SHUTTING_DOWN,         CUDACKPT_ERROR_INVALID_REQUEST,
                CUDACKPT_ERROR_MESSAGE_TOO_LARGE,     CUDACKPT_VARLINK_INTERFACE_NOT_FOUND,
                CUDACKPT_VARLINK_METHOD_NOT_FOUND,    CUDACKPT_VARLINK_INVALID_PARAMETER,
                CUDACKPT_VARLINK_PERMISSION_DENIED,
        };
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                if (strcmp(name, names[i]) == 0)
                        return true;
        return false;
}

static bool valid_state(const char *s)
{
        static const char *const states[] = { CUDACKPT_STATE_RUNNING, CUDACKPT_STATE_LOCKED,
                                              CUDACKPT_STATE_CHECKPOINTED, CUDACKPT_STATE_FAILED };
        for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++)
                if (strcmp(s, states[i]) == 0)
                        return true;
        if (strncmp(s, "unknown-", 8) != 0)
                return false;
        s += 8;
        if (*s == '-')
                s++;
        if (!*s)
                return false;
        for (; *s; s++)
                if (!isdigit((unsigned char)*s))
                        return false;
        return true;
}

static bool valid_method_name(const char *s)
{
        static const char *const names[] = { "GetState", "GetRestoreThreadId", "Lock",    "Checkpoint",
                                             "Restore",  "Unlock",             "Suspend", "Resume" };
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                if (strcmp(s, names[i]) == 0)
                        return true;
        return false;
}

/* Whether pid names this process or one of its threads. */
static bool is_daemon_thread(pid_t pid)
{
        char path[64];

        if (pid == getpid())
                return true;
        snprintf(path, sizeof(path), "/proc/self/task/%d", (int)pid);
        return access(path, F_OK) == 0;
}

static bool is_int_in(const cJSON *j, double min, double max)
{
        return cJSON_IsNumber(j) && isfinite(j->valuedouble) && j->valuedouble == floor(j->valuedouble) &&
               j->valuedouble >= min && j->valuedouble <= max;
}

static void check_params(const cJSON *params, const char *err, const char *text)
{
        /* org.varlink.service errors name full methods ("method") of their own. */
        bool ours = !err || strncmp(err, CUDACKPT_INTERFACE ".", strlen(CUDACKPT_INTERFACE) + 1) == 0;
        const cJSON *it;

        cJSON_ArrayForEach(it, params) {
                const char *k = it->string;

                if (strcmp(k, "pid") == 0 || strcmp(k, "restore_thread_id") == 0) {
                        if (!is_int_in(it, 1, 2147483647.0))
                                finding("bad \"%s\" in reply %s", k, text);
                } else if (strcmp(k, "state") == 0) {
                        if (!cJSON_IsString(it) || !valid_state(it->valuestring))
                                finding("bad \"state\" in reply %s", text);
                } else if (strcmp(k, "duration_ms") == 0) {
                        if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || it->valuedouble < 0)
                                finding("bad \"duration_ms\" in reply %s", text);
                } else if (strcmp(k, "in_flight") == 0 || (ours && strcmp(k, "method") == 0)) {
                        if (!cJSON_IsString(it) || !valid_method_name(it->valuestring))
                                finding("bad \"%s\" in reply %s", k, text);
                }
        }
        if (!err) {
                /* "No one may act on the daemon itself", by pid or thread id. */
                it = cJSON_GetObjectItemCaseSensitive(params, "pid");
                if (it && is_daemon_thread((pid_t)it->valuedouble))
                        finding("the daemon acted on itself: %s", text);
                return;
        }
        if (strcmp(err, CUDACKPT_ERROR_INVALID_REQUEST) == 0) {
                it = cJSON_GetObjectItemCaseSensitive(params, "reason");
                if (!cJSON_IsString(it) || !*it->valuestring)
                        finding("InvalidRequest without a reason: %s", text);
        } else if (strcmp(err, CUDACKPT_ERROR_MESSAGE_TOO_LARGE) == 0) {
                it = cJSON_GetObjectItemCaseSensitive(params, "max_bytes");
                if (!is_int_in(it, FUZZ_MAX_MESSAGE_BYTES, FUZZ_MAX_MESSAGE_BYTES))
                        finding("MessageTooLarge without max_bytes %d: %s", FUZZ_MAX_MESSAGE_BYTES, text);
        } else if (strcmp(err, CUDACKPT_VARLINK_INVALID_PARAMETER) == 0) {
                it = cJSON_GetObjectItemCaseSensitive(params, "parameter");
                if (!cJSON_IsString(it))
                        finding("InvalidParameter without a parameter name: %s", text);
        }
}

/* Checks one reply (s is NUL-terminated, len bytes before the NUL); returns
 * it parsed.  *closing: the error closes the connection. */
static cJSON *check_reply(const char *s, size_t len, bool *closing)
{
        const char *text = s, *end = NULL, *err_name = NULL; /* s is NUL-terminated */
        const cJSON *params = NULL, *err = NULL, *it;
        cJSON *j;

        *closing = false;
        if (len == 0)
                finding("empty reply (a lone NUL)");
        j = cJSON_ParseWithOpts(s, &end, true);
        if (!j)
                finding("reply is not one JSON value: %s", text);
        if (!cJSON_IsObject(j))
                finding("reply is not a JSON object: %s", text);
        cJSON_ArrayForEach(it, j) {
                if (strcmp(it->string, "parameters") == 0 && !params)
                        params = it;
                else if (strcmp(it->string, "error") == 0 && !err)
                        err = it;
                else
                        finding("unexpected or repeated key \"%s\" in reply %s", it->string, text);
        }
        if (!params && !err)
                finding("reply with neither \"parameters\" nor \"error\": %s", text);
        if (params && !cJSON_IsObject(params))
                finding("\"parameters\" is not an object: %s", text);
        if (err) {
                if (!cJSON_IsString(err) || !known_error(err->valuestring))
                        finding("undocumented error in reply %s", text);
                err_name = err->valuestring;
                *closing = strcmp(err_name, CUDACKPT_ERROR_INVALID_REQUEST) == 0 ||
                           strcmp(err_name, CUDACKPT_ERROR_MESSAGE_TOO_LARGE) == 0;
        }
        if (params)
                check_params(params, err_name, text);
        return j;
}

/* Checks all replies of c; returns how many.  With keep, the parsed replies
 * are stored there (up to max_keep, the caller frees them). */
static unsigned check_replies(const struct fconn *c, cJSON **keep, unsigned max_keep)
{
        unsigned msgs = 0, replies = 0;
        bool closed = false, tail;
        size_t off = 0;

        for (size_t i = 0; i < c->out_len; i++)
                msgs += c->out[i] == '\0';
        tail = c->out_len > 0 && c->out[c->out_len - 1] != '\0';
        while (off < c->in_len) {
                char *s = c->in + off, *nul = memchr(s, '\0', c->in_len - off);
                bool closing;
                cJSON *j;

                if (!nul)
                        finding("the connection ended inside a reply: %.*s", (int)(c->in_len - off), s);
                if (closed)
                        finding("a reply after an error that closes the connection: %s", s);
                j = check_reply(s, (size_t)(nul - s), &closing);
                closed = closing;
                if (keep && replies < max_keep)
                        keep[replies] = j;
                else
                        cJSON_Delete(j);
                replies++;
                off = (size_t)(nul - c->in) + 1;
        }
        if (replies > msgs + (tail ? 1u : 0u))
                finding("%u replies to %u messages%s", replies, msgs, tail ? " and a tail" : "");
        return replies;
}

/* ------------------------------------------------------------ the I/O */

static void conn_read(struct fconn *c)
{
        char buf[65536];
        ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);

        if (n > 0) {
                if (c->in_len + (size_t)n + 1 > c->in_cap) {
                        size_t cap = c->in_cap ? c->in_cap * 2 : 65536;
                        while (cap < c->in_len + (size_t)n + 1)
                                cap *= 2;
                        if (cap > FUZZ_MAX_REPLY_BYTES)
                                finding("over %u bytes of replies on one connection", FUZZ_MAX_REPLY_BYTES);
                        c->in = realloc(c->in, cap);
                        if (!c->in)
                                harness_fail("out of memory");
                        c->in_cap = cap;
                }
                memcpy(c->in + c->in_len, buf, (size_t)n);
                c->in_len += (size_t)n;
                c->in[c->in_len] = '\0'; /* for reports of a partial reply */
                return;
        }
        if (n == 0 || errno == ECONNRESET) {
                c->eof = true;
                c->wr_done = true; /* nothing more will be read */
                return;
        }
        if (errno != EAGAIN && errno != EINTR)
                harness_fail("recv: %s", strerror(errno));
}

static void conn_write(struct fconn *c, size_t chunk)
{
        size_t n = c->out_len - c->out_off;
        ssize_t w;

        if (n > chunk)
                n = chunk;
        if (n > 0) {
                w = send(c->fd, c->out + c->out_off, n, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (w > 0) {
                        c->out_off += (size_t)w;
                } else if (errno == EPIPE || errno == ECONNRESET) {
                        c->out_off = c->out_len; /* the daemon closed; read what it said */
                } else if (errno != EAGAIN && errno != EINTR) {
                        harness_fail("send: %s", strerror(errno));
                }
        }
        if (c->out_off == c->out_len) {
                (void)shutdown(c->fd, SHUT_WR);
                c->wr_done = true;
        }
}

/* Writes every connection's bytes in turn, chunk bytes at a time, reading
 * replies meanwhile, until the daemon has closed them all. */
static void run_conns(struct fconn *c, unsigned n, size_t chunk)
{
        long long deadline = now_ms() + FUZZ_DEADLINE_MS;
        struct pollfd p[FUZZ_MAX_CONNS + 1];
        unsigned open = n;

        for (unsigned i = 0; i < n; i++)
                if (c[i].out_len == 0)
                        conn_write(&c[i], chunk);
        while (open > 0) {
                long long left = deadline - now_ms();
                int r;

                for (unsigned i = 0; i < n; i++) {
                        p[i].fd = c[i].eof ? -1 : c[i].fd;
                        p[i].events = (short)(POLLIN | (c[i].wr_done ? 0 : POLLOUT));
                        p[i].revents = 0;
                }
                r = left > 0 ? poll(p, n, (int)left) : 0;
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        harness_fail("poll: %s", strerror(errno));
                if (r == 0) {
                        for (unsigned i = 0; i < n; i++)
                                if (!c[i].eof)
                                        fprintf(report(),
                                                "fuzz_request: connection %u: sent %zu of %zu bytes, %zu bytes of replies:\n%s\n",
                                                i, c[i].out_off, c[i].out_len, c[i].in_len, c[i].in ? c[i].in : "");
                        finding("the daemon did not close the connection(s) within %d ms", FUZZ_DEADLINE_MS);
                }
                for (unsigned i = 0; i < n; i++) {
                        if (c[i].eof)
                                continue;
                        if (!c[i].wr_done && (p[i].revents & (POLLOUT | POLLERR | POLLHUP)))
                                conn_write(&c[i], chunk);
                        if (p[i].revents & (POLLIN | POLLERR | POLLHUP)) {
                                conn_read(&c[i]);
                                if (c[i].eof)
                                        open--;
                        }
                }
        }
}

/* With CUDACKPT_FUZZ_VERBOSE=1: what the daemon said, one reply a line. */
static void print_replies(const struct fconn *c, unsigned i)
{
        for (size_t off = 0; off < c->in_len; off += strlen(c->in + off) + 1)
                fprintf(report(), "fuzz_request: conn %u <- %s\n", i, c->in + off);
        fprintf(report(), "fuzz_request: conn %u: EOF after %zu of %zu bytes sent\n", i, c->out_off, c->out_len);
}

static int open_conn(struct fconn *c)
{
        c->fd = connect_daemon();
        if (c->fd >= 0)
                return 0;
        if (atomic_load(&F.server_exited)) {
                /* Stopped by a signal (SIGTERM) from outside: nothing left to fuzz. */
                fprintf(report(), "fuzz_request: the daemon has stopped; exiting\n");
                _exit(1);
        }
        finding("cannot connect to the daemon: %s", strerror(-c->fd));
}

static void close_conn(struct fconn *c)
{
        if (c->fd >= 0)
                close(c->fd);
        free(c->out);
        free(c->in);
        memset(c, 0, sizeof(*c));
        c->fd = -1;
}

/* ------------------------------------------------------------ the input */

static void put_num(struct fconn *c, unsigned long long v)
{
        c->out_len += (size_t)sprintf(c->out + c->out_len, "%llu", v);
}

/* Splits and expands d into connections; returns how many. */
static unsigned expand(const uint8_t *d, size_t n, unsigned sel, struct fconn *c)
{
        size_t cap = n * 8 + 32; /* a token of 3 bytes or more gives 20 digits at most */
        unsigned nc = 1;

        c[0].out = xmalloc(cap);
        for (size_t i = 0; i < n;) {
                struct fconn *cur = &c[nc - 1];
                size_t rest = n - i;

                if (d[i] == '$') {
                        if (rest >= 5 && memcmp(d + i, "$CONN", 5) == 0) {
                                if (nc < FUZZ_MAX_CONNS)
                                        c[nc++].out = xmalloc(cap);
                                i += 5;
                                continue;
                        }
                        if (rest >= 4 && memcmp(d + i, "$PID", 4) == 0) {
                                put_num(cur, (unsigned long long)F.t[sel].pid);
                                i += 4;
                                continue;
                        }
                        if (rest >= 6 && memcmp(d + i, "$START", 6) == 0) {
                                put_num(cur, F.t[sel].start_time);
                                i += 6;
                                continue;
                        }
                        if (rest >= 3 && d[i + 1] && strchr("PST", d[i + 1]) && isdigit(d[i + 2])) {
                                const struct fuzz_target *t = &F.t[(d[i + 2] - '0') % FUZZ_N_TARGETS];
                                put_num(cur, d[i + 1] == 'P'   ? (unsigned long long)t->pid
                                             : d[i + 1] == 'T' ? (unsigned long long)t->tid
                                                               : t->start_time);
                                i += 3;
                                continue;
                        }
                }
                cur->out[cur->out_len++] = (char)d[i++];
        }
        return nc;
}

static void append_call(char *buf, size_t cap, size_t *len, const char *method, pid_t pid)
{
        int n = snprintf(buf + *len, cap - *len, "{\"method\":\"%s\",\"parameters\":{\"pid\":%d}}", method,
                         (int)pid);

        if (n < 0 || (size_t)n + 1 >= cap - *len)
                harness_fail("reset message too long");
        *len += (size_t)n + 1; /* with snprintf's NUL: the Varlink terminator */
}

/* Resume then Unlock on every simulated CUDA target, then GetState, which
 * must say "running" (target 3 reports a fixed unknown state instead). */
static void reset_targets(void)
{
        enum { N_CALLS = FUZZ_N_CUDA * 3 };
        cJSON *replies[N_CALLS];
        struct fconn c;
        char buf[4096];
        size_t len = 0;
        unsigned got = 0;

        for (int i = 0; i < FUZZ_N_CUDA; i++) {
                append_call(buf, sizeof(buf), &len, CUDACKPT_METHOD_RESUME, F.t[i].pid);
                append_call(buf, sizeof(buf), &len, CUDACKPT_METHOD_UNLOCK, F.t[i].pid);
        }
        for (int i = 0; i < FUZZ_N_CUDA; i++)
                append_call(buf, sizeof(buf), &len, CUDACKPT_METHOD_GET_STATE, F.t[i].pid);

        /* A connection may be refused while the input's ones are still being
         * closed (per-uid limit): that one ends at once, without a reply. */
        for (int tries = 0; got == 0; tries++) {
                memset(&c, 0, sizeof(c));
                if (open_conn(&c) < 0)
                        return;
                c.out = xmalloc(len);
                memcpy(c.out, buf, len);
                c.out_len = len;
                run_conns(&c, 1, len);
                memset(replies, 0, sizeof(replies));
                got = check_replies(&c, replies, N_CALLS);
                close_conn(&c);
                if (got == 0 && tries >= 100)
                        finding("the daemon answers nothing to the reset calls");
                if (got == 0)
                        sleep_ms(2);
        }
        if (got != N_CALLS)
                finding("%u replies to the %d reset calls", got, N_CALLS);
        for (int i = 0; i < FUZZ_N_CUDA; i++) {
                const cJSON *r = replies[FUZZ_N_CUDA * 2 + i];
                const cJSON *p = cJSON_GetObjectItemCaseSensitive(r, "parameters");
                const cJSON *st = cJSON_GetObjectItemCaseSensitive(p, "state");
                const char *want = i == T_LOCK_FAIL ? "unknown-7" : CUDACKPT_STATE_RUNNING;
                char *text;

                if (!cJSON_GetObjectItemCaseSensitive(r, "error") && cJSON_IsString(st) &&
                    strcmp(st->valuestring, want) == 0)
                        continue;
                text = cJSON_PrintUnformatted(r);
                finding("target %d (pid %d) is not %s after Resume and Unlock: %s", i, (int)F.t[i].pid, want,
                        text ? text : "?");
        }
        for (unsigned i = 0; i < N_CALLS; i++)
                cJSON_Delete(replies[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct fconn c[FUZZ_MAX_CONNS];
        unsigned hdr = size > 0 ? data[0] : 0, n;

        if (!F.ready)
                setup();
        if (F.torn_down)
                return 0;
        F.input = data;
        F.input_size = size;
        memset(c, 0, sizeof(c));
        for (unsigned i = 0; i < FUZZ_MAX_CONNS; i++)
                c[i].fd = -1;
        n = expand(size > 0 ? data + 1 : data, size > 0 ? size - 1 : 0, (hdr >> 4) % FUZZ_N_TARGETS, c);
        for (unsigned i = 0; i < n; i++)
                (void)open_conn(&c[i]);
        run_conns(c, n, (hdr & 15) + 1);
        for (unsigned i = 0; i < n; i++) {
                (void)check_replies(&c[i], NULL, 0);
                if (F.verbose)
                        print_replies(&c[i], i);
                close_conn(&c[i]);
        }
        reset_targets();
        F.input = NULL;
        return 0;
}
