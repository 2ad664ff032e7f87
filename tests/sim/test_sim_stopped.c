/* sim.stopped: the simulated driver's own test of three behaviours taken
 * from the real driver (see the header of sim.c): calls on a stopped target
 * wait until it runs again; a target's state slot (CUDACKPT_SIM_STATE) holds
 * its state inside the target, so that a process restored from an image
 * reads as it was dumped; a restore onto a GPU this machine lacks, with no
 * map, is refused and leaves the process checkpointed.  And one aid to the
 * daemon's tests: the step slot (CUDACKPT_SIM_STEP) shows when a call has
 * reached the sim and when it is past its wait for a stopped target.
 *
 * The library is loaded with dlopen, as the daemon loads a driver, and its
 * cuCheckpointProcess* functions are called directly on cudackpt-sim-target
 * children.  CUDACKPT_TEST_SIM and CUDACKPT_TEST_SIM_TARGET name the two
 * (ctest sets them).  Check forks every test; each one waits for conditions
 * with a polling deadline, and asserts that a call is still waiting only
 * after giving it a fair time to return. */

#include "cuda-api.h"

#include <check.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How long a waiting call is watched before it counts as waiting, and how
 * long a call that should return is given: generous for loaded machines. */
#define STOPPED_WATCH_MS 200
#define STOPPED_RETURN_MS 5000
#define STOPPED_MAX_TASKS 64

/* ------------------------------------------------------------ the driver */

static struct {
        cuda_cuInit_fn *init;
        cuda_cuCheckpointProcessGetState_fn *get_state;
        cuda_cuCheckpointProcessGetRestoreThreadId_fn *get_tid;
        cuda_cuCheckpointProcessLock_fn *lock;
        cuda_cuCheckpointProcessCheckpoint_fn *checkpoint;
        cuda_cuCheckpointProcessRestore_fn *restore;
        cuda_cuCheckpointProcessUnlock_fn *unlock;
} sim;

static const char *stopped_need_env(const char *name) {
        const char *v = getenv(name);

        if (!v || !*v)
                ck_abort_msg("set %s (ctest does)", name);
        return v;
}

static void *stopped_sym(void *lib, const char *name) {
        void *f = dlsym(lib, name);

        ck_assert_msg(f, "the sim lacks %s", name);
        return f;
}

static void stopped_load_sim(void) {
        void *lib;

        if (sim.init)
                return;
        lib = dlopen(stopped_need_env("CUDACKPT_TEST_SIM"), RTLD_NOW | RTLD_LOCAL);
        ck_assert_msg(lib, "dlopen: %s", dlerror());
        /* The POSIX way to store a dlsym result in a function pointer. */
        *(void **) &sim.init = stopped_sym(lib, "cuInit");
        *(void **) &sim.get_state = stopped_sym(lib, "cuCheckpointProcessGetState");
        *(void **) &sim.get_tid = stopped_sym(lib, "cuCheckpointProcessGetRestoreThreadId");
        *(void **) &sim.lock = stopped_sym(lib, "cuCheckpointProcessLock");
        *(void **) &sim.checkpoint = stopped_sym(lib, "cuCheckpointProcessCheckpoint");
        *(void **) &sim.restore = stopped_sym(lib, "cuCheckpointProcessRestore");
        *(void **) &sim.unlock = stopped_sym(lib, "cuCheckpointProcessUnlock");
        ck_assert_int_eq(sim.init(0), CUDA_SUCCESS);
}

/* -------------------------------------------------------------- polling */

static long long stopped_now_ms(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void stopped_nap(void) {
        struct timespec ts = { .tv_sec = 0, .tv_nsec = 1000000 };

        (void) nanosleep(&ts, NULL);
}

/* Polls cond(arg) until it holds (true) or ms pass (false). */
static bool stopped_await(bool (*cond)(void *arg), void *arg, int ms) {
        long long deadline = stopped_now_ms() + ms;

        for (;;) {
                if (cond(arg))
                        return true;
                if (stopped_now_ms() >= deadline)
                        return false;
                stopped_nap();
        }
}

/* ------------------------------------------------------------ a target */

struct stopped_target {
        pid_t pid;
};

/* Starts cudackpt-sim-target with threads extra threads and the environment
 * env (NULL-terminated), and waits for its "ready" line. */
static void stopped_spawn_envp(struct stopped_target *t, int threads, char *const *env) {
        const char *path = stopped_need_env("CUDACKPT_TEST_SIM_TARGET");
        char nthreads[16], line[64];
        size_t len = 0;
        int fds[2];
        pid_t pid;
        long long deadline;

        (void) snprintf(nthreads, sizeof(nthreads), "%d", threads);
        ck_assert_int_eq(pipe2(fds, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                char *argv[] = { (char *) path, nthreads, NULL };

                if (dup2(fds[1], STDOUT_FILENO) < 0)
                        _exit(127);
                execve(path, argv, env);
                _exit(127);
        }
        close(fds[1]);
        deadline = stopped_now_ms() + STOPPED_RETURN_MS;
        while (len < sizeof(line) - 1 && !memchr(line, '\n', len)) {
                struct pollfd pfd = { .fd = fds[0], .events = POLLIN };
                long long left = deadline - stopped_now_ms();
                ssize_t n;

                ck_assert_msg(left > 0, "the target did not say ready");
                if (poll(&pfd, 1, (int) left) <= 0)
                        continue;
                n = read(fds[0], line + len, sizeof(line) - 1 - len);
                ck_assert_msg(n > 0, "the target exited before it was ready");
                len += (size_t) n;
        }
        close(fds[0]);
        line[len] = '\0';
        ck_assert_msg(strncmp(line, "ready ", 6) == 0, "target said \"%s\"", line);
        t->pid = pid;
}

/* The same with CUDACKPT_SIM=1, 1 MiB of GPU memory and, unless NULL, the
 * state slot set to slot. */
static void stopped_spawn(struct stopped_target *t, int threads, const char *slot) {
        char slot_var[64];
        char *env[] = { "CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=1", slot_var, NULL };

        if (slot)
                (void) snprintf(slot_var, sizeof(slot_var), "CUDACKPT_SIM_STATE=%s", slot);
        else
                env[2] = NULL;
        stopped_spawn_envp(t, threads, env);
}

/* Kills and reaps the target.  Threads this process traces are reaped here
 * too: the kernel reaps the main thread only after them. */
static void stopped_kill(struct stopped_target *t) {
        if (t->pid > 0) {
                (void) kill(t->pid, SIGKILL);
                for (;;) {
                        pid_t r = waitpid(-1, NULL, __WALL);

                        if (r == t->pid || (r < 0 && errno != EINTR))
                                break;
                }
        }
        t->pid = 0;
}

/* The tids of pid, up to max. */
static int stopped_tasks(pid_t pid, int *tids, int max) {
        char path[64];
        struct dirent *de;
        int n = 0;
        DIR *d;

        (void) snprintf(path, sizeof(path), "/proc/%d/task", (int) pid);
        d = opendir(path);
        if (!d)
                return 0;
        while ((de = readdir(d)) && n < max)
                if (de->d_name[0] >= '0' && de->d_name[0] <= '9')
                        tids[n++] = atoi(de->d_name);
        closedir(d);
        return n;
}

/* The state letter of thread tid of pid, or '?'. */
static char stopped_task_state(pid_t pid, int tid) {
        char path[96], buf[512], *p;
        size_t n;
        FILE *f;

        (void) snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int) pid, tid);
        f = fopen(path, "re");
        if (!f)
                return '?';
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        p = strrchr(buf, ')');
        return p && p[1] == ' ' ? p[2] : '?';
}

/* Whether every thread of the target is stopped (T or t). */
static bool stopped_all_stopped(void *arg) {
        const struct stopped_target *t = arg;
        int tids[STOPPED_MAX_TASKS], n = stopped_tasks(t->pid, tids, STOPPED_MAX_TASKS);

        for (int i = 0; i < n; i++) {
                char s = stopped_task_state(t->pid, tids[i]);

                if (s != 'T' && s != 't')
                        return false;
        }
        return n > 0;
}

/* The first character of the value of the target's variable name (given
 * with its "="), as /proc/PID/environ shows it; '\0' if it has none. */
static char stopped_env_char(const struct stopped_target *t, const char *name) {
        size_t name_len = strlen(name);
        char path[64], buf[4096];
        size_t n;
        FILE *f;

        (void) snprintf(path, sizeof(path), "/proc/%d/environ", (int) t->pid);
        f = fopen(path, "re");
        ck_assert_msg(f, "open %s: %s", path, strerror(errno));
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        for (size_t off = 0; off < n; off += strlen(buf + off) + 1)
                if (strncmp(buf + off, name, name_len) == 0)
                        return buf[off + name_len];
        return '\0';
}

/* The letter of the target's state slot. */
static char stopped_slot(const struct stopped_target *t) {
        return stopped_env_char(t, "CUDACKPT_SIM_STATE=");
}

/* The character of the target's step slot. */
static char stopped_step(const struct stopped_target *t) {
        return stopped_env_char(t, "CUDACKPT_SIM_STEP=");
}

static bool stopped_step_is_lock(void *arg) {
        return stopped_step(arg) == 'l';
}

static CUprocessState stopped_state(const struct stopped_target *t) {
        CUprocessState s = (CUprocessState) -1;

        ck_assert_int_eq(sim.get_state(t->pid, &s), CUDA_SUCCESS);
        return s;
}

/* ------------------------------------------------------ a call in a thread */

enum stopped_op { OP_GETSTATE, OP_LOCK, OP_CHECKPOINT };

struct stopped_call {
        pthread_t thread;
        int pid;
        enum stopped_op op;
        unsigned timeout_ms;  /* lock's timeoutMs */
        CUprocessState state; /* what GetState answered */
        CUresult result;
        atomic_bool done;
};

static void *stopped_call_run(void *arg) {
        struct stopped_call *c = arg;
        CUcheckpointLockArgs la = { .timeoutMs = c->timeout_ms };

        switch (c->op) {
        case OP_GETSTATE:
                c->result = sim.get_state(c->pid, &c->state);
                break;
        case OP_LOCK:
                c->result = sim.lock(c->pid, &la);
                break;
        case OP_CHECKPOINT:
                c->result = sim.checkpoint(c->pid, NULL);
                break;
        }
        atomic_store(&c->done, true);
        return NULL;
}

static void stopped_call_start(struct stopped_call *c, const struct stopped_target *t, enum stopped_op op) {
        c->pid = t->pid;
        c->op = op;
        atomic_store(&c->done, false);
        ck_assert_int_eq(pthread_create(&c->thread, NULL, stopped_call_run, c), 0);
}

static bool stopped_call_done(void *arg) {
        struct stopped_call *c = arg;

        return atomic_load(&c->done);
}

/* Asserts that the call is still waiting after STOPPED_WATCH_MS. */
static void stopped_assert_waits(struct stopped_call *c) {
        ck_assert_msg(!stopped_await(stopped_call_done, c, STOPPED_WATCH_MS),
                      "the call returned %d on a stopped target", (int) c->result);
}

/* Asserts that the call returns within STOPPED_RETURN_MS, and joins it. */
static void stopped_assert_returns(struct stopped_call *c) {
        ck_assert_msg(stopped_await(stopped_call_done, c, STOPPED_RETURN_MS), "the call still waits");
        ck_assert_int_eq(pthread_join(c->thread, NULL), 0);
}

/* ----------------------------------------------------------- the tests */

/* GetRestoreThreadId answers at once, GetState waits until SIGCONT. */
START_TEST(test_stopped_getstate_waits) {
        struct stopped_target t;
        struct stopped_call c = { .timeout_ms = 0 };
        long long t0;
        int tid = 0;
        char path[64];

        stopped_load_sim();
        stopped_spawn(&t, 2, NULL);
        ck_assert_int_eq(kill(t.pid, SIGSTOP), 0);
        ck_assert(stopped_await(stopped_all_stopped, &t, STOPPED_RETURN_MS));

        t0 = stopped_now_ms();
        ck_assert_int_eq(sim.get_tid(t.pid, &tid), CUDA_SUCCESS);
        ck_assert_int_lt(stopped_now_ms() - t0, STOPPED_WATCH_MS);
        (void) snprintf(path, sizeof(path), "/proc/%d/task/%d", (int) t.pid, tid);
        ck_assert_msg(access(path, F_OK) == 0, "tid %d is no thread of %d", tid, (int) t.pid);

        stopped_call_start(&c, &t, OP_GETSTATE);
        stopped_assert_waits(&c);
        ck_assert_int_eq(kill(t.pid, SIGCONT), 0);
        stopped_assert_returns(&c);
        ck_assert_int_eq(c.result, CUDA_SUCCESS);
        ck_assert_int_eq(c.state, CU_PROCESS_STATE_RUNNING);
        stopped_kill(&t);
}
END_TEST

/* Lock waits past its timeoutMs, then locks. */
START_TEST(test_stopped_lock_ignores_timeout) {
        struct stopped_target t;
        struct stopped_call c = { .timeout_ms = 20 };

        stopped_load_sim();
        stopped_spawn(&t, 0, NULL);
        ck_assert_int_eq(kill(t.pid, SIGSTOP), 0);
        ck_assert(stopped_await(stopped_all_stopped, &t, STOPPED_RETURN_MS));
        stopped_call_start(&c, &t, OP_LOCK);
        stopped_assert_waits(&c);
        ck_assert_int_eq(kill(t.pid, SIGCONT), 0);
        stopped_assert_returns(&c);
        ck_assert_int_eq(c.result, CUDA_SUCCESS);
        ck_assert_int_eq(stopped_state(&t), CU_PROCESS_STATE_LOCKED);
        stopped_kill(&t);
}
END_TEST

/* A stopped target killed while waited for: OPERATING_SYSTEM. */
START_TEST(test_stopped_target_dies) {
        struct stopped_target t;
        struct stopped_call c = { .timeout_ms = 0 };

        stopped_load_sim();
        stopped_spawn(&t, 1, NULL);
        ck_assert_int_eq(kill(t.pid, SIGSTOP), 0);
        ck_assert(stopped_await(stopped_all_stopped, &t, STOPPED_RETURN_MS));
        stopped_call_start(&c, &t, OP_GETSTATE);
        stopped_assert_waits(&c);
        ck_assert_int_eq(kill(t.pid, SIGKILL), 0); /* a zombie now: not reaped */
        stopped_assert_returns(&c);
        ck_assert_int_eq(c.result, CUDA_ERROR_OPERATING_SYSTEM);
        stopped_kill(&t);
}
END_TEST

/* What CRIU does: every thread ptrace-stopped, then only the restore thread
 * let run; the checkpoint waits until then, and proceeds once it runs. */
START_TEST(test_stopped_restore_thread_ends_wait) {
        struct stopped_target t;
        struct stopped_call c = { .timeout_ms = 0 };
        int tids[STOPPED_MAX_TASKS], n, tid = 0;

        stopped_load_sim();
        stopped_spawn(&t, 2, NULL);
        ck_assert_int_eq(sim.lock(t.pid, NULL), CUDA_SUCCESS);
        n = stopped_tasks(t.pid, tids, STOPPED_MAX_TASKS);
        ck_assert_int_eq(n, 3);
        for (int i = 0; i < n; i++) {
                int status;

                ck_assert_msg(ptrace(PTRACE_SEIZE, tids[i], NULL, NULL) == 0, "seize %d: %s", tids[i],
                              strerror(errno));
                ck_assert_int_eq(ptrace(PTRACE_INTERRUPT, tids[i], NULL, NULL), 0);
                ck_assert_int_eq(waitpid(tids[i], &status, __WALL), tids[i]);
                ck_assert(WIFSTOPPED(status));
        }
        ck_assert(stopped_await(stopped_all_stopped, &t, STOPPED_RETURN_MS));
        ck_assert_int_eq(sim.get_tid(t.pid, &tid), CUDA_SUCCESS);

        stopped_call_start(&c, &t, OP_CHECKPOINT);
        stopped_assert_waits(&c);
        ck_assert_msg(ptrace(PTRACE_CONT, tid, NULL, NULL) == 0, "cont %d: %s", tid, strerror(errno));
        stopped_assert_returns(&c);
        ck_assert_int_eq(c.result, CUDA_SUCCESS);
        ck_assert_int_eq(stopped_state(&t), CU_PROCESS_STATE_CHECKPOINTED);
        stopped_kill(&t);
}
END_TEST

/* The slot follows every state change. */
START_TEST(test_slot_follows_state) {
        struct stopped_target t;

        stopped_load_sim();
        stopped_spawn(&t, 0, "r");
        ck_assert_int_eq(stopped_slot(&t), 'r');
        ck_assert_int_eq(sim.lock(t.pid, NULL), CUDA_SUCCESS);
        ck_assert_int_eq(stopped_slot(&t), 'l');
        ck_assert_int_eq(sim.checkpoint(t.pid, NULL), CUDA_SUCCESS);
        ck_assert_int_eq(stopped_slot(&t), 'c');
        ck_assert_int_eq(stopped_state(&t), CU_PROCESS_STATE_CHECKPOINTED);
        ck_assert_int_eq(sim.restore(t.pid, NULL), CUDA_SUCCESS);
        ck_assert_int_eq(stopped_slot(&t), 'l');
        ck_assert_int_eq(sim.unlock(t.pid, NULL), CUDA_SUCCESS);
        ck_assert_int_eq(stopped_slot(&t), 'r');
        stopped_kill(&t);
}
END_TEST

/* A dump and restore, as the sim sees one: a new process (new start time)
 * whose environment block is the checkpointed one's, letter included.  It
 * reads checkpointed, restores to locked and unlocks to running. */
START_TEST(test_slot_adopted_after_restore) {
        struct stopped_target dumped, restored;
        char path[64], buf[4096], *env[16];
        size_t n, k = 0;
        FILE *f;

        stopped_load_sim();
        stopped_spawn(&dumped, 1, "r");
        ck_assert_int_eq(sim.lock(dumped.pid, NULL), CUDA_SUCCESS);
        ck_assert_int_eq(sim.checkpoint(dumped.pid, NULL), CUDA_SUCCESS);
        (void) snprintf(path, sizeof(path), "/proc/%d/environ", (int) dumped.pid);
        f = fopen(path, "re");
        ck_assert_ptr_nonnull(f);
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        stopped_kill(&dumped);
        for (size_t off = 0; off < n && k < 15; off += strlen(buf + off) + 1)
                env[k++] = buf + off;
        env[k] = NULL;

        stopped_spawn_envp(&restored, 1, env);
        ck_assert_int_eq(stopped_slot(&restored), 'c');
        ck_assert_int_eq(stopped_state(&restored), CU_PROCESS_STATE_CHECKPOINTED);
        ck_assert_int_eq(sim.lock(restored.pid, NULL), CUDA_ERROR_ILLEGAL_STATE);
        ck_assert_int_eq(sim.restore(restored.pid, NULL), CUDA_SUCCESS);
        ck_assert_int_eq(stopped_slot(&restored), 'l');
        ck_assert_int_eq(sim.unlock(restored.pid, NULL), CUDA_SUCCESS);
        ck_assert_int_eq(stopped_slot(&restored), 'r');
        ck_assert_int_eq(stopped_state(&restored), CU_PROCESS_STATE_RUNNING);
        stopped_kill(&restored);
}
END_TEST

/* A value that is not one known letter is no slot: never adopted, never
 * written. */
START_TEST(test_slot_bad_value_ignored) {
        struct stopped_target t;

        stopped_load_sim();
        stopped_spawn(&t, 0, "cc");
        ck_assert_int_eq(stopped_state(&t), CU_PROCESS_STATE_RUNNING);
        ck_assert_int_eq(sim.lock(t.pid, NULL), CUDA_SUCCESS);
        ck_assert_int_eq(stopped_slot(&t), 'c');
        stopped_kill(&t);

        stopped_spawn(&t, 0, "x");
        ck_assert_int_eq(stopped_state(&t), CU_PROCESS_STATE_RUNNING);
        ck_assert_int_eq(sim.lock(t.pid, NULL), CUDA_SUCCESS);
        ck_assert_int_eq(stopped_slot(&t), 'x');
        stopped_kill(&t);
}
END_TEST

/* The step slot reads 'L' while a lock pauses (CUDACKPT_SIM_PRE_WAIT_MS)
 * and then waits for a target stopped meanwhile; 'l' once the target runs
 * again and the lock works (its kernel); '-' again when it has ended. */
START_TEST(test_step_slot_follows_the_call) {
        char *env[] = { "CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=1", "CUDACKPT_SIM_BUSY_MS=1000",
                        "CUDACKPT_SIM_PRE_WAIT_MS=300", "CUDACKPT_SIM_STEP=-", NULL };
        struct stopped_target t;
        struct stopped_call c = { .timeout_ms = 0 };

        stopped_load_sim();
        stopped_spawn_envp(&t, 1, env);
        stopped_call_start(&c, &t, OP_LOCK);
        ck_assert_int_eq(kill(t.pid, SIGSTOP), 0);
        ck_assert(stopped_await(stopped_all_stopped, &t, STOPPED_RETURN_MS));
        stopped_assert_waits(&c);
        ck_assert_int_eq(stopped_step(&t), 'L');
        ck_assert_int_eq(kill(t.pid, SIGCONT), 0);
        ck_assert_msg(stopped_await(stopped_step_is_lock, &t, STOPPED_RETURN_MS), "the step slot reads '%c'",
                      stopped_step(&t));
        ck_assert_msg(!atomic_load(&c.done), "the lock's 1 s kernel ended before its step showed");
        stopped_assert_returns(&c);
        ck_assert_int_eq(c.result, CUDA_SUCCESS);
        ck_assert_int_eq(stopped_step(&t), '-');
        ck_assert_int_eq(sim.unlock(t.pid, NULL), CUDA_SUCCESS);
        ck_assert_int_eq(stopped_step(&t), '-');
        stopped_kill(&t);
}
END_TEST

/* Checkpointed on a GPU this machine does not have (another node's): a
 * restore with no map is refused as the driver refuses a map onto a GPU
 * that is not there (CUDA_ERROR_INVALID_VALUE), the process left
 * checkpointed; a map onto one of this machine's GPUs then restores it. */
START_TEST(test_restore_onto_missing_gpu) {
        static const CUuuid here = { { 0, 0, 0, 0, 0x51, 0x57, 0x40, 0, (char) 0x80, 0, 0, 0, 0, 0, 0, 1 } };
        static const CUuuid gone = { { 0x11, 0x11, 0x11, 0x11, 0x51, 0x57, 0x40, 0, (char) 0x80, 0, 0, 0, 0, 0, 0,
                                       1 } };
        char *env[] = { "CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=1",
                        "CUDACKPT_SIM_GPUS=GPU-11111111-5157-4000-8000-000000000001", NULL };
        CUcheckpointGpuPair pair = { .oldUuid = gone, .newUuid = here };
        CUcheckpointRestoreArgs args = { .gpuPairs = &pair, .gpuPairsCount = 1 };
        struct stopped_target t;

        stopped_load_sim();
        stopped_spawn_envp(&t, 0, env);
        ck_assert_int_eq(sim.lock(t.pid, NULL), CUDA_SUCCESS);
        ck_assert_int_eq(sim.checkpoint(t.pid, NULL), CUDA_SUCCESS);
        ck_assert_int_eq(sim.restore(t.pid, NULL), CUDA_ERROR_INVALID_VALUE);
        ck_assert_int_eq(stopped_state(&t), CU_PROCESS_STATE_CHECKPOINTED);
        ck_assert_int_eq(sim.restore(t.pid, &args), CUDA_SUCCESS);
        ck_assert_int_eq(stopped_state(&t), CU_PROCESS_STATE_LOCKED);
        stopped_kill(&t);
}
END_TEST

int main(void) {
        Suite *s = suite_create("sim.stopped");
        TCase *tc = tcase_create("stopped");
        TCase *ts = tcase_create("slot");
        SRunner *sr;
        int failed;

        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_stopped_getstate_waits);
        tcase_add_test(tc, test_stopped_lock_ignores_timeout);
        tcase_add_test(tc, test_stopped_target_dies);
        tcase_add_test(tc, test_stopped_restore_thread_ends_wait);
        suite_add_tcase(s, tc);
        tcase_set_timeout(ts, 30);
        tcase_add_test(ts, test_slot_follows_state);
        tcase_add_test(ts, test_slot_adopted_after_restore);
        tcase_add_test(ts, test_slot_bad_value_ignored);
        tcase_add_test(ts, test_restore_onto_missing_gpu);
        tcase_add_test(ts, test_step_slot_follows_the_call);
        suite_add_tcase(s, ts);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_ENV);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
