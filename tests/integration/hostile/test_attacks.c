/* test_attacks.c: the daemon attacked the way a security reviewer of a root
 * daemon would (docs/security.md, "Threat model"), covering what the other
 * suites do not: 1-byte writes interleaved between connections, acting on
 * the daemon itself or through thread ids, clients killed in the middle of
 * an operation, and SIGTERM while operations run.  Floods and idle or
 * unread connections are test_floods.c's, garbage test_garbage.c's,
 * operator groups and read-only access test_permissions.c's (helpers:
 * attacks_itest.h).  Each test checks that the rule holds, that
 * well-behaved clients go on being served, and that the daemon stays
 * alive.
 *
 * The binary doubles as a target (started through itest_target_exec(),
 * which waits for a byte on fd 3):
 *   --itest-threads          a process with a second thread, to be named
 *                            by that thread's id.
 *
 * Several tests here found bugs when they were written; the comment above
 * each says what it guards against. */
#include "attacks_itest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>


/* ---- 6: 1-byte writes interleaved ---------------------------------------- */

/* Three connections write one byte at a time in turn, two of them two
 * pipelined requests each (an operation among them), the third garbage;
 * meanwhile a Suspend runs.  Each gets exactly its own answers. */
START_TEST(bytewise_interleaved)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t a = itest_sim_target();
        pid_t b = itest_sim_target();
        pid_t busy = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=2048", NULL);
        struct itest_conn *w = itest_connect(d);
        atest_send_pid_call(w, CUDACKPT_METHOD_SUSPEND, busy);
        struct itest_conn *q = itest_connect(d);
        itest_await_in_flight(q, busy, "Suspend", 2000);

        struct itest_conn *ca = itest_connect(d), *cb = itest_connect(d), *cg = itest_connect(d);
        char ma[512], mb[512];
        int la = snprintf(ma, sizeof(ma),
                          "{\"method\":\"" CUDACKPT_METHOD_GET_STATE
                          "\",\"parameters\":{\"pid\":%d,\"start_time\":%llu}}%c"
                          "{\"method\":\"" CUDACKPT_METHOD_LOCK "\",\"parameters\":{\"pid\":%d}}%c",
                          (int)a, (unsigned long long)itest_start_time(a), '\0', (int)a, '\0');
        int lb = snprintf(mb, sizeof(mb),
                          "{ \"parameters\" : { \"timeout_ms\" : 5000 , \"pid\" : %d } , \"method\" : \""
                          CUDACKPT_METHOD_LOCK "\" }%c"
                          "{\"method\":\"" CUDACKPT_METHOD_GET_STATE "\",\"parameters\":{\"pid\":%d}}%c",
                          (int)b, '\0', (int)b, '\0');
        static const char mg[] = "{\"method\":\"" CUDACKPT_METHOD_GET_STATE "\",\"parameters\":{\"pid\":1}}}";
        ck_assert(la > 0 && (size_t)la < sizeof(ma) && lb > 0 && (size_t)lb < sizeof(mb));
        bool g_open = true;
        for (int i = 0; i < la || i < lb; i++) {
                if (i < la)
                        ck_assert_int_eq(itest_send_bytes(ca, ma + i, 1, false), 0);
                if (i < lb)
                        ck_assert_int_eq(itest_send_bytes(cb, mb + i, 1, false), 0);
                if (g_open && (size_t)i < sizeof(mg)) {
                        int rc = itest_send_bytes(cg, mg + i, 1, false);
                        ck_assert_msg(rc == 0 || rc == -EPIPE || rc == -ECONNRESET, "send: %s", strerror(-rc));
                        g_open = rc == 0;
                }
        }
        itest_assert_state(itest_recv(ca), a, "running");
        itest_assert_state(itest_recv(ca), a, "locked");
        itest_assert_state(itest_recv(cb), b, "locked");
        itest_assert_state(itest_recv(cb), b, "locked");
        itest_assert_error(itest_recv(cg), CUDACKPT_ERROR_INVALID_REQUEST);
        itest_assert_eof(cg, 5000);
        itest_assert_state(itest_recv(w), busy, "checkpointed");
        itest_assert_state(itest_call_pid(ca, CUDACKPT_METHOD_UNLOCK, a), a, "running");
        itest_assert_state(itest_call_pid(cb, CUDACKPT_METHOD_UNLOCK, b), b, "running");
}
END_TEST

/* ---- the daemon itself and thread ids ------------------------------------ */

/* No one, root included, may act on the daemon: not by its pid, and not
 * by the id of one of its threads, which the daemon otherwise takes for
 * its process.  (Once a bug: the check compared the number given with
 * getpid() before a thread id was turned into its process.) */
START_TEST(daemon_itself)
{
        /* The simulator takes the daemon for a CUDA process: whatever the
         * daemon lets through, it carries out. */
        static const char *const env[] = { "CUDACKPT_SIM=1", NULL };
        struct itest_daemon_opts o = { .env = env };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct itest_conn *c = itest_connect(d);
        static const char *const methods[] = { CUDACKPT_METHOD_LOCK, CUDACKPT_METHOD_SUSPEND,
                                               CUDACKPT_METHOD_GET_STATE, NULL };
        for (size_t i = 0; methods[i]; i++)
                itest_assert_error(itest_call_pid(c, methods[i], d->pid), CUDACKPT_ERROR_PERMISSION_DENIED);
        pid_t tid = atest_other_thread(d->pid);
        for (size_t i = 0; methods[i]; i++) {
                cJSON *j = itest_call_pid(c, methods[i], tid);
                ck_assert_msg(itest_error(j) && strcmp(itest_error(j), CUDACKPT_ERROR_PERMISSION_DENIED) == 0,
                              "%s on thread %d of the daemon (pid %d): expected PermissionDenied, got %s", methods[i],
                              (int)tid, (int)d->pid, itest_dump(j));
        }
        atest_assert_serving(d);
}
END_TEST

/* A target of threads whose checkpoint takes about 2 s and restore about
 * 0.5 s, with a step slot; *tid is a thread of it other than the main one. */
static pid_t threads_target_2s(pid_t *tid)
{
        const char *argv[] = { "itest-threads", "--itest-threads", NULL };
        static const char *const env[] = { "CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=2048",
                                           "CUDACKPT_SIM_CKPT_MIBPS=1024", "CUDACKPT_SIM_STEP=-", NULL };
        pid_t pid = itest_target_exec((uid_t)-1, itest_self_exe(), argv, env);

        *tid = atest_other_thread(pid);
        return pid;
}

/* Locks pid on op and sends its Checkpoint there, unanswered, and returns
 * once the checkpoint works in the driver (the simulator's step slot says
 * so; the daemon shows it in flight before it holds the process, when a
 * call by thread id could still go first). */
static void start_checkpoint(struct itest_conn *op, pid_t pid)
{
        itest_assert_state(itest_call_pid(op, CUDACKPT_METHOD_LOCK, pid), pid, "locked");
        atest_send_pid_call(op, CUDACKPT_METHOD_CHECKPOINT, pid);
        itest_await_sim_step(pid, 'c', 5000);
}

/* A thread id means its process, but has a queue of its own (protocol.md):
 * a GetState by thread id while a Checkpoint by pid runs is answered by the
 * driver, with the state the process is in and no in_flight, and the
 * Checkpoint goes on unharmed. */
START_TEST(thread_id_has_its_own_queue)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t tid;
        pid_t pid = threads_target_2s(&tid);
        struct itest_conn *op = itest_connect(d);
        struct itest_conn *q = itest_connect(d);
        cJSON *j = itest_call_pid(q, CUDACKPT_METHOD_GET_STATE, tid);
        itest_assert_ok(j);
        itest_assert_str(j, "state", "running");
        start_checkpoint(op, pid);
        j = itest_call_pid(q, CUDACKPT_METHOD_GET_STATE, tid);
        ck_assert_msg(!itest_conn_readable(op), "the 2 s checkpoint ended before the GetState");
        itest_assert_ok(j);
        itest_assert_int(j, "pid", tid);
        ck_assert_msg(!itest_has(j, "in_flight") && itest_str(j, "state") &&
                              (strcmp(itest_str(j, "state"), "locked") == 0 ||
                               strcmp(itest_str(j, "state"), "checkpointed") == 0),
                      "GetState by thread id %d while a Checkpoint by pid %d runs: %s", (int)tid, (int)pid,
                      itest_dump(j));
        itest_assert_state(itest_recv(op), pid, "checkpointed");
        itest_assert_state(itest_call_pid(q, CUDACKPT_METHOD_GET_STATE, tid), tid, "checkpointed");
}
END_TEST

/* A Restore named by thread id, sent while a Checkpoint named by pid runs
 * on the same process, waits for it outside the driver: it succeeds after
 * the Checkpoint, and its duration_ms (driver time, "excluding time
 * queued behind other operations") is the restore's alone, not the rest of
 * the checkpoint too, as it would be if both were in the driver at once. */
START_TEST(thread_id_and_pid_kept_apart)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t tid;
        pid_t pid = threads_target_2s(&tid);
        struct itest_conn *op = itest_connect(d);
        struct itest_conn *by_tid = itest_connect(d);
        struct itest_conn *q = itest_connect(d);
        start_checkpoint(op, pid);
        atest_send_pid_call(by_tid, CUDACKPT_METHOD_RESTORE, tid);
        itest_assert_state(itest_recv(op), pid, "checkpointed");
        cJSON *j = itest_recv(by_tid);
        itest_assert_ok(j);
        itest_assert_str(j, "state", "locked");
        const cJSON *dur = cJSON_GetObjectItemCaseSensitive(itest_params(j), "duration_ms");
        ck_assert_msg(cJSON_IsNumber(dur) && dur->valuedouble < 1500,
                      "a Restore by thread id queued behind a 2 s Checkpoint by pid spent %s ms in the driver "
                      "(a restore alone takes about 500)",
                      itest_dump(dur));
        itest_assert_state(itest_call_pid(q, CUDACKPT_METHOD_UNLOCK, pid), pid, "running");
}
END_TEST

/* A Lock by thread id that waits outside the driver for a Lock by pid on
 * the same process checks for a stop when its turn comes, not before: the
 * process stopped meanwhile, so it is refused with ProcessStopped instead
 * of made (the call would wait in the driver until the process ran again).
 * The stop must come while the Lock by pid works in the driver, past the
 * driver's own wait for a stopped target: the simulator's step slot says
 * when.  The daemon shows that Lock in flight before it reaches the driver;
 * a stop then would keep it, and the Lock by thread id queued behind it,
 * waiting until the process ran again.  The simulator pauses before that
 * wait so that a test going by in_flight stops the process there. */
START_TEST(stop_checked_after_waiting_for_the_process)
{
        struct itest_daemon *d = itest_daemon_start_default();
        const char *argv[] = { "itest-threads", "--itest-threads", NULL };
        /* The Lock by pid pauses 300 ms, then waits for a 2 s kernel. */
        static const char *const env[] = { "CUDACKPT_SIM=1", "CUDACKPT_SIM_BUSY_MS=2000",
                                           "CUDACKPT_SIM_PRE_WAIT_MS=300", "CUDACKPT_SIM_STEP=-", NULL };
        pid_t pid = itest_target_exec((uid_t)-1, itest_self_exe(), argv, env);
        pid_t tid = atest_other_thread(pid);
        struct itest_conn *op = itest_connect(d);
        struct itest_conn *by_tid = itest_connect(d);
        struct itest_conn *q = itest_connect(d);
        atest_send_pid_call(op, CUDACKPT_METHOD_LOCK, pid);
        itest_await_sim_step(pid, 'l', 5000);
        atest_send_pid_call(by_tid, CUDACKPT_METHOD_LOCK, tid);
        itest_await_in_flight(q, tid, "Lock", 2000);
        ck_assert_int_eq(kill(pid, SIGSTOP), 0);
        itest_await_proc_state(pid, 'T', true);
        ck_assert_msg(!itest_conn_readable(op), "the Lock by pid (a 2 s kernel) ended before the process was stopped");
        cJSON *j = itest_recv_within(by_tid, 6000);
        itest_assert_error(j, CUDACKPT_ERROR_PROCESS_STOPPED);
        /* The driver's lock, past its wait, ends with the process stopped. */
        itest_assert_state(itest_recv_within(op, 1000), pid, "locked");
        ck_assert_int_eq(kill(pid, SIGCONT), 0);
        itest_await_proc_state(pid, 'T', false);
}
END_TEST

/* ---- 8: a client killed mid-operation ------------------------------------ */

/* SIGKILL of a client while its Suspend is in the lock step and in the
 * checkpoint step, each working in the driver (the simulator's step slot
 * says when): the daemon carries the Suspend through (a Checkpoint queued
 * behind it finds the process checkpointed) and goes on serving. */
START_TEST(client_killed_mid_suspend)
{
        struct itest_daemon *d = itest_daemon_start_default();
        /* Lock waits for a 600 ms kernel, then a 0.25 s checkpoint; and a
         * fast lock, then a 1 s checkpoint. */
        pid_t targets[2] = {
                itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_BUSY_MS=600", "CUDACKPT_SIM_MEM_MIB=512",
                             "CUDACKPT_SIM_STEP=-", NULL),
                itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=2048", "CUDACKPT_SIM_STEP=-", NULL),
        };
        static const char step[2] = { 'l', 'c' };
        for (int i = 0; i < 2; i++) {
                pid_t pid = targets[i];
                char *msg = itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_SUSPEND "\",\"parameters\":{\"pid\":%d,"
                                          "\"timeout_ms\":0}}",
                                          (int)pid);
                pid_t client = atest_spawn_clients((uid_t)-1, d->sock, msg, 1, 0, NULL);
                struct itest_conn *q = itest_connect(d);
                itest_await_sim_step(pid, step[i], 5000);
                atest_kill_clients(client);

                struct itest_conn *after = itest_connect(d);
                cJSON *j = itest_call_pid(after, CUDACKPT_METHOD_CHECKPOINT, pid);
                itest_assert_error(j, CUDACKPT_ERROR_INVALID_STATE);
                itest_assert_str(j, "state", "checkpointed");
                itest_assert_state_now(q, pid, "checkpointed");
                itest_assert_state(itest_call_pid(after, CUDACKPT_METHOD_RESUME, pid), pid, "running");
        }
        atest_assert_serving(d);
}
END_TEST

/* ---- 9: SIGTERM ---------------------------------------------------------- */

/* SIGTERM while a Checkpoint runs: idle connections close at once and the
 * socket goes; a request queued behind the Checkpoint gets ShuttingDown;
 * the Checkpoint's own reply still comes, and a request pipelined behind
 * it is not carried out; then the daemon exits 0. */
START_TEST(sigterm_in_flight)
{
        struct itest_daemon *d = itest_daemon_start_default();
        /* A checkpoint of about 1 s. */
        pid_t pid = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=2048", NULL);
        struct itest_conn *idle = itest_connect(d);
        atest_assert_get_info(idle);
        struct itest_conn *op = itest_connect(d);
        struct itest_conn *q = itest_connect(d);
        struct itest_conn *queued = itest_connect(d);
        itest_assert_state(itest_call_pid(op, CUDACKPT_METHOD_LOCK, pid), pid, "locked");
        atest_send_pid_call(op, CUDACKPT_METHOD_CHECKPOINT, pid);
        atest_send_pid_call(op, CUDACKPT_METHOD_UNLOCK, pid);
        itest_await_in_flight(q, pid, "Checkpoint", 2000);
        atest_send_pid_call(queued, CUDACKPT_METHOD_UNLOCK, pid);
        /* The daemon reads queued's request before q's next one. */
        itest_assert_str(itest_call_pid(q, CUDACKPT_METHOD_GET_STATE, pid), "in_flight", "Checkpoint");

        ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
        itest_assert_eof(idle, 5000);
        itest_assert_eof(q, 5000);
        itest_assert_error(itest_recv_within(queued, 5000), CUDACKPT_ERROR_SHUTTING_DOWN);
        itest_assert_eof(queued, 5000);
        int fd = atest_raw_connect(d->sock);
        if (fd >= 0)
                close(fd);
        ck_assert_msg(fd == -ENOENT || fd == -ECONNREFUSED, "connecting after SIGTERM: %s",
                      fd >= 0 ? "accepted" : strerror(-fd));

        cJSON *j = itest_recv_within(op, 10000);
        itest_assert_state(j, pid, "checkpointed");
        j = NULL;
        int rc = itest_recv_raw(op, 10000, &j);
        ck_assert_msg(rc == -ENODATA || (rc == 0 && itest_error(j) &&
                                         strcmp(itest_error(j), CUDACKPT_ERROR_SHUTTING_DOWN) == 0),
                      "the Unlock pipelined behind the Checkpoint: expected ShuttingDown or EOF, got %s",
                      rc == 0 ? itest_dump(j) : strerror(-rc));
        if (rc == 0)
                itest_assert_eof(op, 5000);

        int status = itest_daemon_await_exit(d, 10000);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the daemon ended with %s after SIGTERM",
                      itest_describe_status(status));
}
END_TEST

/* A second SIGTERM while a long Suspend runs: the daemon exits at once,
 * with a non-zero status, without waiting for the driver, where the
 * Suspend's checkpoint works (the simulator's step slot says when). */
START_TEST(sigterm_twice)
{
        struct itest_daemon *d = itest_daemon_start_default();
        /* A checkpoint of about 4 s. */
        pid_t pid = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=4096", "CUDACKPT_SIM_CKPT_MIBPS=1024",
                                 "CUDACKPT_SIM_STEP=-", NULL);
        struct itest_conn *idle = itest_connect(d);
        atest_assert_get_info(idle);
        struct itest_conn *op = itest_connect(d);
        atest_send_pid_call(op, CUDACKPT_METHOD_SUSPEND, pid);
        itest_await_sim_step(pid, 'c', 5000);

        double t0 = itest_now_ms();
        ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
        itest_assert_eof(idle, 5000);
        ck_assert_msg(!itest_daemon_exited(d), "the daemon exited on the first SIGTERM with a Suspend running");
        ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
        int status = itest_daemon_await_exit(d, 2000);
        double took = itest_now_ms() - t0;
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) != 0,
                      "after a second SIGTERM expected a non-zero exit status, got %s", itest_describe_status(status));
        ck_assert_msg(took < 3000, "the daemon took %.0f ms to exit on the second SIGTERM", took);
        itest_assert_eof(op, 1000);
}
END_TEST

/* ---- main ---------------------------------------------------------------- */

static void *hold_thread(void *arg)
{
        (void)arg;
        for (;;)
                pause();
        return NULL;
}

/* --itest-threads: start a second thread, say so on fd 3, wait. */
static int hold_threads(void)
{
        pthread_t t;
        if (pthread_create(&t, NULL, hold_thread, NULL) != 0)
                return 1;
        return itest_ready_and_wait();
}

int main(int argc, char **argv)
{
        const TTest *tests[] = { bytewise_interleaved, daemon_itself, thread_id_has_its_own_queue,
                thread_id_and_pid_kept_apart, stop_checked_after_waiting_for_the_process,
                client_killed_mid_suspend, sigterm_in_flight, sigterm_twice, NULL };

        if (argc == 2 && strcmp(argv[1], "--itest-threads") == 0)
                return hold_threads();
        return itest_run("integration.attacks", "attacks", 30, tests);
}
