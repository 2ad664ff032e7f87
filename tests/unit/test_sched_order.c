/* Unit tests: the order in which a process's queue hands its calls to
 * worker threads when callers' worker shares are taken (docs/security.md,
 * "Shared resources"): the oldest waiting call whose uid has room goes
 * first, a call waiting for its uid's share holds up no other caller's
 * calls on the same process, and the calls of one uid keep their order.
 *
 * A fake driver on real worker threads; workers_per_uid 1.  Every call is
 * submitted before the loop runs, so the queues are as the test builds
 * them; the order in which the done callback sees the calls is the order
 * in which they ran (calls on one process run one at a time). */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runner.h"

#include "run/sched.h"

#define MAX_OPS 16

/* P, Q and R: three idle processes, Q and R of uid A. */
enum { P, Q, R, N_PROCS };
static pid_t procs[N_PROCS];

static struct driver drv;
static struct config cfg;
static struct policy_caller root = { .uid = 0 }, a, b;

/* The ops in the order they were done; the done callback may open the gate. */
static struct sched_op *done[MAX_OPS];
static int n_done;
static struct sched_op *open_gate_after;

/* Q's Lock waits at the gate until the test opens it (5 s at most, so
 * that a wrong order fails the test instead of hanging it). */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static bool gate_open, gate_used;

static void open_gate(void)
{
        pthread_mutex_lock(&gate_lock);
        gate_open = true;
        pthread_cond_broadcast(&gate_cond);
        pthread_mutex_unlock(&gate_lock);
}

static CUresult f_lock(int pid, CUcheckpointLockArgs *args)
{
        struct timespec until;

        (void)args;
        if (pid != procs[Q] || !gate_used)
                return CUDA_SUCCESS;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 5;
        pthread_mutex_lock(&gate_lock);
        while (!gate_open && pthread_cond_timedwait(&gate_cond, &gate_lock, &until) == 0)
                ;
        pthread_mutex_unlock(&gate_lock);
        return CUDA_SUCCESS;
}

static CUresult f_checkpoint(int pid, CUcheckpointCheckpointArgs *args)
{
        (void)pid;
        (void)args;
        return CUDA_SUCCESS;
}

static CUresult f_unlock(int pid, CUcheckpointUnlockArgs *args)
{
        (void)pid;
        (void)args;
        return CUDA_SUCCESS;
}

static void on_done(struct sched *s, struct sched_op *op)
{
        (void)s;
        ck_assert_int_lt(n_done, MAX_OPS);
        done[n_done++] = op;
        if (op == open_gate_after)
                open_gate();
}

/* An idle child; as uid when not (uid_t)-1 (the test runs as root). */
static pid_t idle_child(uid_t uid)
{
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                if (uid != (uid_t)-1 && (setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0))
                        _exit(1);
                for (;;)
                        pause();
        }
        return pid;
}

static void setup(void)
{
        setenv("UV_THREADPOOL_SIZE", "8", 1);
        /* A is an unprivileged uid that owns Q and R: the test's own when
         * it is not root; B another. */
        a.uid = geteuid() == 0 ? 1000 : geteuid();
        b.uid = a.uid + 1;
        procs[P] = idle_child((uid_t)-1);
        procs[Q] = idle_child(geteuid() == 0 ? a.uid : (uid_t)-1);
        procs[R] = idle_child(geteuid() == 0 ? a.uid : (uid_t)-1);
        memset(&drv, 0, sizeof(drv));
        drv.available = true;
        drv.cu_lock = f_lock;
        drv.cu_checkpoint = f_checkpoint;
        drv.cu_unlock = f_unlock;
        config_init(&cfg);
        cfg.workers = 8;
        cfg.workers_per_uid = 1;
        cfg.workers_reserved = 2;
        n_done = 0;
        open_gate_after = NULL;
        gate_open = gate_used = false;
}

static void teardown(void)
{
        open_gate();
        for (int i = 0; i < N_PROCS; i++) {
                kill(procs[i], SIGKILL);
                waitpid(procs[i], NULL, 0);
        }
        config_free(&cfg);
}

static struct sched_op *submit(struct sched *s, const struct policy_caller *caller, int proc, enum proto_method m)
{
        struct sched_op *op = calloc(1, sizeof(*op));
        struct share_refusal limit;

        ck_assert_ptr_nonnull(op);
        op->caller = caller;
        op->method = m;
        op->req.pid = procs[proc];
        ck_assert_int_eq(sched_submit(s, op, &limit), 0);
        return op;
}

/* Runs the loop until every op is done, asserts they were done in the
 * order given, frees them and the scheduler. */
static void run_and_assert_order(struct sched *s, uv_loop_t *loop, struct sched_op *const *want,
                                 const char *const *names, int n)
{
        uv_run(loop, UV_RUN_DEFAULT);
        ck_assert_int_eq(n_done, n);
        for (int i = 0; i < n; i++) {
                int got = 0;
                while (got < n && want[got] != done[i])
                        got++;
                ck_assert_msg(done[i] == want[i], "call %d to end was %s, not %s", i + 1,
                              got < n ? names[got] : "?", names[i]);
        }
        for (int i = 0; i < n; i++)
                free(want[i]);
        sched_free(s);
        sched_close(s);
        uv_run(loop, UV_RUN_DEFAULT);
        ck_assert_int_eq(uv_loop_close(loop), 0);
}

/* On P, behind root's Lock: A1 B1 A2 B2 A3, while A's one worker is held
 * by a Lock on Q.  B's calls go first, in their order, without waiting
 * for A's; then A's, in theirs, once the Lock on Q has given A's worker
 * back (it ends only after B2). */
START_TEST(test_one_process_per_uid_order)
{
        static const char *const names[] = { "root's Lock on P", "B1", "B2", "A's Lock on Q", "A1", "A2", "A3" };
        struct sched s;
        uv_loop_t loop;
        struct sched_op *want[7];

        uv_loop_init(&loop);
        ck_assert_int_eq(sched_init(&s, &loop, &cfg, &drv, on_done), 0);
        gate_used = true;
        want[3] = submit(&s, &a, Q, PROTO_LOCK);
        want[0] = submit(&s, &root, P, PROTO_LOCK);
        want[4] = submit(&s, &a, P, PROTO_LOCK);
        want[1] = submit(&s, &b, P, PROTO_LOCK);
        want[5] = submit(&s, &a, P, PROTO_CHECKPOINT);
        want[2] = submit(&s, &b, P, PROTO_CHECKPOINT);
        want[6] = submit(&s, &a, P, PROTO_UNLOCK);
        open_gate_after = want[2];
        run_and_assert_order(&s, &loop, want, names, 7);
}
END_TEST

/* A's calls on P, R and Q (behind A's first, on Q) all wait for A's one
 * worker: when it is given back, the oldest waiting call has it, whatever
 * its process; a call of the process that gave it back waits its turn. */
START_TEST(test_oldest_waiting_call_first)
{
        static const char *const names[] = { "A's Lock on Q", "A's Lock on P", "A's Lock on R", "A's Unlock on Q" };
        struct sched s;
        uv_loop_t loop;
        struct sched_op *want[4];

        uv_loop_init(&loop);
        ck_assert_int_eq(sched_init(&s, &loop, &cfg, &drv, on_done), 0);
        want[0] = submit(&s, &a, Q, PROTO_LOCK);
        want[1] = submit(&s, &a, P, PROTO_LOCK);
        want[2] = submit(&s, &a, R, PROTO_LOCK);
        want[3] = submit(&s, &a, Q, PROTO_UNLOCK);
        ck_assert_uint_eq(s.n_running, 1);
        run_and_assert_order(&s, &loop, want, names, 4);
}
END_TEST

const char unit_suite_name[] = "sched_order";

void unit_tests(TCase *tc)
{
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_one_process_per_uid_order);
        tcase_add_test(tc, test_oldest_waiting_call_first);
}
