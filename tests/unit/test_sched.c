/* Unit tests: per-pid queues on real worker threads, with a fake driver that
 * records which calls overlap. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runner.h"

#include "run/sched.h"

#define MAX_EVENTS 64

static pid_t pids[2];
static atomic_int busy[2], busy_total, max_busy[2], max_busy_total;
static uv_mutex_t log_lock;
static struct {
        int pid;
        char what;
} events[MAX_EVENTS];
static int n_events;

static int slot(int pid)
{
        return pid == pids[0] ? 0 : 1;
}

static void bump_max(atomic_int *max, int v)
{
        int m = atomic_load(max);
        while (v > m && !atomic_compare_exchange_weak(max, &m, v))
                ;
}

static CUresult fake_call(int pid, char what)
{
        int s = slot(pid);
        struct timespec ts = { 0, 40 * 1000 * 1000 };

        bump_max(&max_busy[s], atomic_fetch_add(&busy[s], 1) + 1);
        bump_max(&max_busy_total, atomic_fetch_add(&busy_total, 1) + 1);
        uv_mutex_lock(&log_lock);
        if (n_events < MAX_EVENTS) {
                events[n_events].pid = pid;
                events[n_events].what = what;
                n_events++;
        }
        uv_mutex_unlock(&log_lock);
        nanosleep(&ts, NULL);
        atomic_fetch_sub(&busy[s], 1);
        atomic_fetch_sub(&busy_total, 1);
        return CUDA_SUCCESS;
}

static CUresult f_lock(int pid, CUcheckpointLockArgs *a) { (void)a; return fake_call(pid, 'L'); }
static CUresult f_ckpt(int pid, CUcheckpointCheckpointArgs *a) { (void)a; return fake_call(pid, 'C'); }
static CUresult f_restore(int pid, CUcheckpointRestoreArgs *a) { (void)a; return fake_call(pid, 'R'); }
static CUresult f_unlock(int pid, CUcheckpointUnlockArgs *a) { (void)a; return fake_call(pid, 'U'); }
static pthread_t state_threads[MAX_EVENTS];
static atomic_int n_state_calls;
static CUresult f_state(int pid, CUprocessState *s)
{
        int i = atomic_fetch_add(&n_state_calls, 1);

        (void)pid;
        if (i < MAX_EVENTS)
                state_threads[i] = pthread_self();
        *s = CU_PROCESS_STATE_RUNNING;
        return CUDA_SUCCESS;
}

static struct driver drv;
static struct config cfg;
static struct policy_caller root_caller = { .uid = 0 };
static int n_done, n_cancelled;
static struct sched_op *done_order[MAX_EVENTS];

static void on_done(struct sched *s, struct sched_op *op)
{
        (void)s;
        done_order[n_done++] = op;
        if (op->cancelled)
                n_cancelled++;
}

static void setup(void)
{
        setenv("UV_THREADPOOL_SIZE", "8", 1);
        uv_mutex_init(&log_lock);
        for (int i = 0; i < 2; i++) {
                pids[i] = fork();
                ck_assert_int_ge(pids[i], 0);
                if (pids[i] == 0) {
                        pause();
                        _exit(0);
                }
        }
        memset(&drv, 0, sizeof(drv));
        drv.available = true;
        drv.cu_lock = f_lock;
        drv.cu_checkpoint = f_ckpt;
        drv.cu_restore = f_restore;
        drv.cu_unlock = f_unlock;
        drv.cu_get_state = f_state;
        config_init(&cfg);
        n_done = n_cancelled = n_events = 0;
        atomic_store(&n_state_calls, 0);
}

static void teardown(void)
{
        for (int i = 0; i < 2; i++) {
                kill(pids[i], SIGKILL);
                waitpid(pids[i], NULL, 0);
        }
        config_free(&cfg);
}

static struct sched_op *op_new(pid_t pid, enum proto_method m)
{
        struct sched_op *op = calloc(1, sizeof(*op));
        op->caller = &root_caller;
        op->method = m;
        op->req.pid = pid;
        return op;
}

/* A new op, submitted to s, which takes it. */
static struct sched_op *op_submit(struct sched *s, pid_t pid, enum proto_method m)
{
        struct share_refusal limit;
        struct sched_op *op = op_new(pid, m);

        ck_assert_int_eq(sched_submit(s, op, &limit), 0);
        return op;
}

/* A fresh loop and a scheduler on it, with the test's driver and config. */
static void sched_start(struct sched *s, uv_loop_t *loop)
{
        uv_loop_init(loop);
        ck_assert_int_eq(sched_init(s, loop, &cfg, &drv, on_done), 0);
}

/* Frees the scheduler, lets its handles close and closes the loop. */
static void sched_stop(struct sched *s, uv_loop_t *loop)
{
        sched_free(s);
        sched_close(s);
        uv_run(loop, UV_RUN_DEFAULT);
        ck_assert_int_eq(uv_loop_close(loop), 0);
}

START_TEST(test_serial_per_pid_parallel_across)
{
        static const enum proto_method seq[] = { PROTO_LOCK, PROTO_CHECKPOINT, PROTO_RESTORE, PROTO_UNLOCK };
        struct sched_op *ops[8];
        struct sched s;
        uv_loop_t loop;
        int k = 0;

        sched_start(&s, &loop);
        for (int i = 0; i < 4; i++)
                for (int p = 0; p < 2; p++)
                        ops[k++] = op_submit(&s, pids[p], seq[i]);
        ck_assert_uint_eq(s.n_ops, 8);
        ck_assert_uint_eq(s.n_running, 2);
        uv_run(&loop, UV_RUN_DEFAULT);
        ck_assert_int_eq(n_done, 8);
        ck_assert_uint_eq(s.n_ops, 0);
        /* Both targets stay pinned in the cache for the next requests. */
        ck_assert_uint_eq(s.table.n_targets, 2);
        ck_assert_uint_eq(s.table.n_cached, 2);
        /* One at a time per process, both processes at once. */
        ck_assert_int_eq(atomic_load(&max_busy[0]), 1);
        ck_assert_int_eq(atomic_load(&max_busy[1]), 1);
        ck_assert_int_eq(atomic_load(&max_busy_total), 2);
        /* Arrival order per process, for the driver and for the answers. */
        for (int p = 0; p < 2; p++) {
                char got[5] = { 0 };
                int n = 0;
                for (int e = 0; e < n_events; e++)
                        if (events[e].pid == pids[p])
                                got[n++] = events[e].what;
                ck_assert_str_eq(got, "LCRU");
                int last = -1;
                for (int d = 0; d < n_done; d++)
                        if (done_order[d]->req.pid == pids[p]) {
                                ck_assert_int_gt((int)done_order[d]->method, last);
                                last = (int)done_order[d]->method;
                                ck_assert_int_eq(done_order[d]->result.error, OPS_OK);
                        }
        }
        for (int i = 0; i < 8; i++)
                free(ops[i]);
        sched_stop(&s, &loop);
}
END_TEST

/* max_queue_per_pid refuses unprivileged callers; root (and the daemon's
 * own work) is bound by max_queue_total only, so that strangers filling a
 * process's queue keep no one privileged off it. */
START_TEST(test_limits)
{
        static const struct policy_caller user = { .uid = 1000 };
        struct sched_op *ops[5];
        struct sched s;
        uv_loop_t loop;
        struct share_refusal limit = { 0 };

        cfg.max_queue_per_pid = 2;
        cfg.max_queue_total = 4;
        cfg.max_queue_reserved = 1;
        sched_start(&s, &loop);
        ops[0] = op_new(pids[0], PROTO_LOCK);
        ops[1] = op_new(pids[0], PROTO_UNLOCK);
        ops[2] = op_new(pids[0], PROTO_LOCK);
        ops[3] = op_new(pids[1], PROTO_LOCK);
        ops[4] = op_new(pids[0], PROTO_LOCK);
        for (int i = 0; i < 4; i++)
                ops[i]->caller = &user;
        ck_assert_int_eq(sched_submit(&s, ops[0], &limit), 0);
        ck_assert_int_eq(sched_submit(&s, ops[1], &limit), 0);
        ck_assert_int_eq(sched_submit(&s, ops[2], &limit), -EAGAIN);
        ck_assert_uint_eq(limit.limit, 2);
        ck_assert_str_eq(limit.key, "max_queue_per_pid");
        ck_assert_int_eq(sched_submit(&s, ops[3], &limit), 0);
        ck_assert_int_eq(sched_submit(&s, ops[4], &limit), 0); /* root: past max_queue_per_pid */
        ops[2]->req.pid = pids[1];
        ck_assert_int_eq(sched_submit(&s, ops[2], &limit), -EAGAIN);
        ck_assert_uint_eq(limit.limit, 4);
        ck_assert_str_eq(limit.key, "max_queue_total");
        uv_run(&loop, UV_RUN_DEFAULT);
        ck_assert_int_eq(n_done, 4);
        for (int i = 0; i < 5; i++)
                free(ops[i]);
        sched_stop(&s, &loop);
}
END_TEST

/* A hold: the holder's second step comes after its first (submitted from
 * its done callback, as a group's next phase is), and root's Unlocks queued
 * in between wait until the hold ends.  The holder is unprivileged, and
 * the Unlocks it holds back fill max_queue_per_pid: its next step gets in
 * all the same. */
static const struct policy_caller hold_user = { .uid = 1000 };
static int hold_token, other_token;
static struct sched_op *hold_next, *hold_extra;

static void holder_done(struct sched *s, struct sched_op *op)
{
        struct share_refusal limit;

        on_done(s, op);
        if (op->method == PROTO_LOCK) {
                ck_assert_int_eq(sched_submit(s, hold_extra, &limit), 0);
                ck_assert_int_eq(sched_submit(s, hold_next, &limit), 0);
        } else {
                sched_unhold(s, op->req.pid, &hold_token);
        }
}

START_TEST(test_hold)
{
        struct sched_op *lock, *unlock;
        struct sched s;
        uv_loop_t loop;
        struct share_refusal limit;

        cfg.max_queue_per_pid = 2;
        sched_start(&s, &loop);
        ck_assert_int_eq(sched_hold(&s, pids[0], &hold_token, PROTO_SUSPEND_GROUP), 0);
        ck_assert_int_eq(sched_hold(&s, pids[0], &other_token, PROTO_SUSPEND_GROUP), -EBUSY);
        lock = op_new(pids[0], PROTO_LOCK);
        hold_next = op_new(pids[0], PROTO_CHECKPOINT);
        lock->holder = hold_next->holder = &hold_token;
        lock->caller = hold_next->caller = &hold_user;
        lock->done = hold_next->done = holder_done;
        unlock = op_new(pids[0], PROTO_UNLOCK);
        hold_extra = op_new(pids[0], PROTO_UNLOCK);
        ck_assert_int_eq(sched_submit(&s, lock, &limit), 0);
        ck_assert_int_eq(sched_submit(&s, unlock, &limit), 0);
        /* A hold with nothing queued keeps its target. */
        ck_assert_int_eq(sched_hold(&s, pids[1], &other_token, PROTO_LOCK_GROUP), 0);
        ck_assert_uint_eq(s.table.n_targets, 2);
        uv_run(&loop, UV_RUN_DEFAULT);
        ck_assert_int_eq(n_done, 4);
        ck_assert_ptr_eq(done_order[0], lock);
        ck_assert_ptr_eq(done_order[1], hold_next);
        ck_assert_ptr_eq(done_order[2], unlock);
        ck_assert_ptr_eq(done_order[3], hold_extra);
        ck_assert_int_eq(n_events, 2); /* the Unlocks; the holder may not act on root's process */
        ck_assert_ptr_nonnull(sched_table_find(&s.table, pids[1]));
        sched_unhold(&s, pids[1], &other_token);
        ck_assert_uint_eq(s.table.n_targets, 1); /* pids[1]: never pinned, dropped */
        free(lock);
        free(hold_next);
        free(unlock);
        free(hold_extra);
        sched_stop(&s, &loop);
}
END_TEST

START_TEST(test_cancel_queued)
{
        struct sched_op *ops[3];
        struct sched s;
        uv_loop_t loop;

        sched_start(&s, &loop);
        for (int i = 0; i < 3; i++)
                ops[i] = op_submit(&s, pids[0], PROTO_LOCK);
        /* The running one finishes; the two queued are answered at once. */
        ck_assert_uint_eq(sched_cancel_queued(&s), 1);
        ck_assert_int_eq(n_cancelled, 2);
        ck_assert_int_eq(ops[1]->result.error, OPS_SHUTTING_DOWN);
        uv_run(&loop, UV_RUN_DEFAULT);
        ck_assert_int_eq(n_done, 3);
        ck_assert(!ops[0]->cancelled);
        ck_assert_int_eq(ops[0]->result.error, OPS_OK);
        ck_assert_int_eq(n_events, 1);
        for (int i = 0; i < 3; i++)
                free(ops[i]);
        sched_stop(&s, &loop);
}
END_TEST

static void on_timer(uv_timer_t *t)
{
        (void)t; /* a one-shot timer stops by itself */
}

/* Runs the loop for about ms milliseconds, so unref'd timers can fire. */
static void run_for(uv_loop_t *loop, uint64_t ms)
{
        uv_timer_t t;

        uv_timer_init(loop, &t);
        uv_timer_start(&t, on_timer, ms, 0);
        uv_run(loop, UV_RUN_DEFAULT);
        uv_close((uv_handle_t *)&t, NULL);
        uv_run(loop, UV_RUN_DEFAULT);
}

/* Submits one op, runs it to its end, returns its error. */
static enum ops_error run_one(struct sched *s, uv_loop_t *loop, pid_t pid, enum proto_method m,
                              const struct policy_caller *caller, struct sched_target **ret_target)
{
        struct sched_op *op = op_new(pid, m);
        enum ops_error e;
        struct share_refusal limit;

        op->caller = caller;
        ck_assert_int_eq(sched_submit(s, op, &limit), 0);
        if (ret_target)
                *ret_target = op->target;
        uv_run(loop, UV_RUN_DEFAULT);
        ck_assert_ptr_eq(done_order[n_done - 1], op);
        e = op->result.error;
        free(op);
        return e;
}

START_TEST(test_cache)
{
        struct sched_target *t1, *t2;
        struct sched s;
        uv_loop_t loop;

        cfg.max_cached_targets = 1;
        cfg.cached_target_idle_ms = 200;
        sched_start(&s, &loop);

        /* The second request on a pid finds the first one's pinned target. */
        ck_assert_int_eq(run_one(&s, &loop, pids[0], PROTO_LOCK, &root_caller, &t1), OPS_OK);
        ck_assert_uint_eq(s.table.n_cached, 1);
        int pidfd = t1->identity.pidfd;
        ck_assert_int_ge(pidfd, 0);
        run_one(&s, &loop, pids[0], PROTO_UNLOCK, &root_caller, &t2);
        ck_assert_ptr_eq(t1, t2);
        ck_assert_int_eq(t2->identity.pidfd, pidfd);

        /* At most max_cached_targets: the least recently used goes. */
        run_one(&s, &loop, pids[1], PROTO_LOCK, &root_caller, &t2);
        ck_assert_uint_eq(s.table.n_cached, 1);
        ck_assert_uint_eq(s.table.n_targets, 1);
        ck_assert_ptr_eq(s.table.lru_head, t2);
        ck_assert_int_eq(t2->pid, pids[1]);

        /* A process that exits is forgotten by the sweep, within a period. */
        kill(pids[1], SIGKILL);
        waitpid(pids[1], NULL, 0);
        run_for(&loop, 150);
        ck_assert_uint_eq(s.table.n_cached, 0);
        ck_assert_uint_eq(s.table.n_targets, 0);

        /* An idle one is forgotten after cached_target_idle_ms. */
        run_one(&s, &loop, pids[0], PROTO_LOCK, &root_caller, &t1);
        ck_assert_uint_eq(s.table.n_cached, 1);
        run_for(&loop, 400);
        ck_assert_uint_eq(s.table.n_cached, 0);
        ck_assert_uint_eq(s.table.n_targets, 0);

        /* With the cache off, nothing stays. */
        cfg.max_cached_targets = 0;
        run_one(&s, &loop, pids[0], PROTO_UNLOCK, &root_caller, &t1);
        ck_assert_uint_eq(s.table.n_targets, 0);

        sched_stop(&s, &loop);
}
END_TEST

/* A pinned, cached process that changes its user ids is judged by its new
 * ones: the cache keeps the pidfd, not the verdict. */
START_TEST(test_cache_rereads_uids)
{
        static const struct policy_caller user = { .uid = 4242, .gid = 4242 };
        int go[2], ready[2];
        struct sched_target *t;
        struct sched s;
        uv_loop_t loop;
        char c;

        if (geteuid() != 0)
                return; /* switching uids needs root */
        ck_assert_int_eq(pipe(go), 0);
        ck_assert_int_eq(pipe(ready), 0);
        pid_t child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0) {
                /* Not wholly the user's yet: the saved uid is root. */
                if (setresgid(4242, 4242, 4242) < 0 || setresuid(4242, 4242, 0) < 0 ||
                    write(ready[1], "1", 1) != 1 || read(go[0], &c, 1) != 1 ||
                    setresuid(4242, 4242, 4242) < 0 || write(ready[1], "2", 1) != 1)
                        _exit(1);
                pause();
                _exit(0);
        }
        ck_assert_int_eq(read(ready[0], &c, 1), 1);
        sched_start(&s, &loop);

        ck_assert_int_eq(run_one(&s, &loop, child, PROTO_LOCK, &user, NULL), OPS_PERMISSION_DENIED);
        ck_assert_uint_eq(s.table.n_cached, 1);
        ck_assert_int_eq(write(go[1], "g", 1), 1);
        ck_assert_int_eq(read(ready[0], &c, 1), 1);
        ck_assert_int_eq(run_one(&s, &loop, child, PROTO_LOCK, &user, &t), OPS_OK);
        ck_assert_uint_eq(t->identity.suid, 4242);

        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        sched_stop(&s, &loop);
}
END_TEST

static int tid_pipe[2];

static void *report_tid(void *arg)
{
        pid_t tid = gettid();

        (void)arg;
        if (write(tid_pipe[1], &tid, sizeof(tid)) != sizeof(tid))
                _exit(1);
        for (;;)
                pause();
        return NULL;
}

/* A thread id and its process are two queues but one process: their
 * operations never reach the driver at the same time. */
START_TEST(test_thread_and_process_serialised)
{
        struct sched_op *ops[4];
        struct sched s;
        uv_loop_t loop;
        pid_t tid;

        ck_assert_int_eq(pipe(tid_pipe), 0);
        kill(pids[0], SIGKILL);
        waitpid(pids[0], NULL, 0);
        pids[0] = fork();
        ck_assert_int_ge(pids[0], 0);
        if (pids[0] == 0) {
                pthread_t th;
                if (pthread_create(&th, NULL, report_tid, NULL) != 0)
                        _exit(1);
                for (;;)
                        pause();
        }
        ck_assert_int_eq(read(tid_pipe[0], &tid, sizeof(tid)), (ssize_t)sizeof(tid));
        ck_assert_int_ne(tid, pids[0]);

        sched_start(&s, &loop);
        for (int i = 0; i < 4; i++)
                ops[i] = op_submit(&s, i % 2 ? tid : pids[0], i < 2 ? PROTO_LOCK : PROTO_UNLOCK);
        /* Two queues, both started at once. */
        ck_assert_uint_eq(s.n_running, 2);
        uv_run(&loop, UV_RUN_DEFAULT);
        ck_assert_int_eq(n_done, 4);
        for (int i = 0; i < 4; i++) {
                ck_assert_int_eq(ops[i]->result.error, OPS_OK);
                free(ops[i]);
        }
        ck_assert_int_eq(n_events, 4);
        ck_assert_int_eq(atomic_load(&max_busy[0]), 1);
        sched_stop(&s, &loop);
}
END_TEST

/* GetStates one after another all run on the one warm thread of the lane,
 * never on the pool's threads in turn; two at once still run side by side. */
START_TEST(test_read_only_lane)
{
        struct sched_op *ops[6];
        struct sched s;
        uv_loop_t loop;

        sched_start(&s, &loop);
        for (int i = 0; i < 4; i++) {
                ops[i] = op_submit(&s, pids[0], PROTO_GET_STATE);
                uv_run(&loop, UV_RUN_DEFAULT);
                ck_assert_int_eq(ops[i]->result.error, OPS_OK);
                ck_assert_int_eq(ops[i]->result.state, CU_PROCESS_STATE_RUNNING);
        }
        /* The first call of an op that is not GetState learns the state
         * too; here every call is a GetState's own. */
        ck_assert_int_eq(atomic_load(&n_state_calls), 4);
        for (int i = 1; i < 4; i++)
                ck_assert(pthread_equal(state_threads[i], state_threads[0]));
        ck_assert(s.lane.started);

        /* Two processes at once: the lane takes one, the pool the other. */
        ops[4] = op_submit(&s, pids[0], PROTO_GET_STATE);
        ck_assert(s.lane.busy);
        ops[5] = op_submit(&s, pids[1], PROTO_GET_STATE);
        ck_assert_uint_eq(s.n_running, 2);
        uv_run(&loop, UV_RUN_DEFAULT);
        ck_assert_int_eq(n_done, 6);
        ck_assert_int_eq(ops[4]->result.error, OPS_OK);
        ck_assert_int_eq(ops[5]->result.error, OPS_OK);
        ck_assert(!pthread_equal(state_threads[4], state_threads[5]));
        for (int i = 0; i < 6; i++)
                free(ops[i]);
        sched_stop(&s, &loop);
}
END_TEST

/* With lane_spin_us, calls that come back to back keep the loop polling
 * (the lane's idle handle) while one is on the lane and for the window
 * after its reply; a call after a quiet spell does not, and with 0 no call
 * does.  The polling never keeps the loop running. */
START_TEST(test_lane_spin)
{
        for (int spin = 0; spin < 2; spin++) {
                struct sched s;
                uv_loop_t loop;

                cfg.lane_spin_us = spin ? 100000 : 0;
                sched_start(&s, &loop);
                for (int i = 0; i < 4; i++) {
                        struct sched_op *op = op_submit(&s, pids[0], PROTO_GET_STATE);

                        ck_assert(s.lane.busy);
                        ck_assert_int_eq(uv_is_active((uv_handle_t *)&s.lane.poll), spin && i > 0);
                        uv_run(&loop, UV_RUN_DEFAULT);
                        ck_assert_int_eq(op->result.error, OPS_OK);
                        ck_assert_int_eq(uv_is_active((uv_handle_t *)&s.lane.poll), spin && i > 0);
                        free(op);
                }
                /* A quiet spell longer than the window, on a loop kept
                 * alive by a timer: the polling stops by itself. */
                run_for(&loop, 150);
                ck_assert(!uv_is_active((uv_handle_t *)&s.lane.poll));
                sched_stop(&s, &loop);
        }
}
END_TEST

const char unit_suite_name[] = "sched";

void unit_tests(TCase *tc)
{
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_serial_per_pid_parallel_across);
        tcase_add_test(tc, test_limits);
        tcase_add_test(tc, test_hold);
        tcase_add_test(tc, test_cancel_queued);
        tcase_add_test(tc, test_cache);
        tcase_add_test(tc, test_cache_rereads_uids);
        tcase_add_test(tc, test_thread_and_process_serialised);
        tcase_add_test(tc, test_read_only_lane);
        tcase_add_test(tc, test_lane_spin);
}
