/* test_concurrency.c: operations on different processes run in parallel,
 * GetState never waits behind a running operation, operations on one
 * process run one at a time in arrival order, and clients that vanish or
 * do not read do not disturb the daemon or other clients.
 *
 * The simulated checkpoint of CUDACKPT_SIM_MEM_MIB=2048 at the default
 * 2048 MiB/s takes about 1 s, which is what the timings below rely on. */
#include "harness.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#define ONE_SECOND_CKPT "CUDACKPT_SIM_MEM_MIB=2048"

static pid_t big_target(void)
{
        return itest_target("CUDACKPT_SIM=1", ONE_SECOND_CKPT, NULL);
}

static void send_pid_call(struct itest_conn *c, const char *method, pid_t pid)
{
        itest_sendf(c, "{\"method\":\"%s\",\"parameters\":{\"pid\":%d}}", method, (int)pid);
}

/* Locks pid on op and sends its Checkpoint there, unanswered: q sees it in
 * flight within a second. */
static void start_checkpoint(struct itest_conn *op, struct itest_conn *q, pid_t pid)
{
        itest_assert_state(itest_call_pid(op, CUDACKPT_METHOD_LOCK, pid), pid, "locked");
        send_pid_call(op, CUDACKPT_METHOD_CHECKPOINT, pid);
        itest_await_in_flight(q, pid, "Checkpoint", 1000);
}

/* A GetState that must answer within 50 ms: far above what it costs (a
 * GetState is well under a millisecond), so this never flakes, yet it
 * would fail if it waited behind a 1 s checkpoint. */
static cJSON *fast_get_state(struct itest_conn *c, pid_t pid)
{
        double t0 = itest_now_ms();
        cJSON *j = itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, pid);
        double took = itest_now_ms() - t0;
        ck_assert_msg(took < 50, "GetState of %d took %.1f ms: %s", (int)pid, took, itest_dump(j));
        itest_assert_ok(j);
        itest_assert_int(j, "pid", pid);
        return j;
}

START_TEST(parallel_suspends)
{
        struct itest_daemon_opts o = { .config_json = "{\"workers\":8}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        enum { N = 4 };
        pid_t single = big_target();
        pid_t busy[N];
        for (int i = 0; i < N; i++)
                busy[i] = big_target();
        pid_t idle = big_target();

        /* One alone first: the serial cost. */
        struct itest_conn *c1 = itest_connect(d);
        double t0 = itest_now_ms();
        cJSON *j = itest_call_pid(c1, CUDACKPT_METHOD_SUSPEND, single);
        double one = itest_now_ms() - t0;
        itest_assert_state(j, single, "checkpointed");
        ck_assert_msg(one >= 500, "a Suspend of 2048 MiB took %.0f ms, expected about 1000", one);

        /* Four at once, from four connections. */
        struct itest_conn *c[N];
        for (int i = 0; i < N; i++)
                c[i] = itest_connect(d);
        t0 = itest_now_ms();
        for (int i = 0; i < N; i++)
                send_pid_call(c[i], CUDACKPT_METHOD_SUSPEND, busy[i]);

        /* While they run: a busy process answers at once, naming the
         * operation, and an idle one answers fast. */
        struct itest_conn *q = itest_connect(d);
        itest_await_in_flight(q, busy[0], "Suspend", 1000);
        for (int i = 0; i < N; i++) {
                j = fast_get_state(q, busy[i]);
                itest_assert_str(j, "in_flight", "Suspend");
                const char *st = itest_str(j, "state");
                ck_assert_msg(st && (strcmp(st, "running") == 0 || strcmp(st, "locked") == 0),
                              "state of a process being suspended: %s", itest_dump(j));
        }
        for (int k = 0; k < 10; k++) {
                j = fast_get_state(q, idle);
                itest_assert_str(j, "state", "running");
                itest_assert_absent(j, "in_flight");
        }
        /* The above really happened while the four ran. */
        for (int i = 0; i < N; i++)
                itest_assert_str(fast_get_state(q, busy[i]), "in_flight", "Suspend");

        double last = 0;
        for (int i = 0; i < N; i++) {
                j = itest_recv(c[i]);
                itest_assert_state(j, busy[i], "checkpointed");
                last = itest_now_ms() - t0;
        }
        ck_assert_msg(last < 2.5 * one, "four Suspends at once took %.0f ms, one alone %.0f ms", last, one);
        for (int i = 0; i < N; i++) {
                j = fast_get_state(q, busy[i]);
                itest_assert_str(j, "state", "checkpointed");
                itest_assert_absent(j, "in_flight");
        }
}
END_TEST

/* GetState on a process whose checkpoint runs: at once, with the last
 * state the daemon saw (locked, from the Lock before) and in_flight. */
START_TEST(get_state_while_busy)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_target("CUDACKPT_SIM=1", ONE_SECOND_CKPT, "CUDACKPT_SIM_CKPT_MIBPS=1024", NULL);
        struct itest_conn *op = itest_connect(d);
        struct itest_conn *q = itest_connect(d);
        start_checkpoint(op, q, pid);
        for (int k = 0; k < 20; k++) {
                cJSON *j = fast_get_state(q, pid);
                itest_assert_str(j, "state", "locked");
                itest_assert_str(j, "in_flight", "Checkpoint");
        }
        /* The library decodes in_flight too. */
        cudackpt_client *cl = itest_client(d);
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        itest_assert_reply_state(cudackpt_get_state(cl, pid, &r), &r, pid, "locked");
        ck_assert_msg(r.in_flight && strcmp(r.in_flight, "Checkpoint") == 0, "in_flight %s", r.parameters_json);
        cudackpt_reply_clear(&r);
        ck_assert_msg(!itest_conn_readable(op), "the Checkpoint of 2 s answered within the GetStates");
        itest_assert_state(itest_recv(op), pid, "checkpointed");
}
END_TEST

/* Pipelined on one connection: each runs after the one before. */
START_TEST(serialised_pipelined)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=256", NULL);
        struct itest_conn *c = itest_connect(d);
        static const char *const methods[] = {
                CUDACKPT_METHOD_LOCK, CUDACKPT_METHOD_CHECKPOINT, CUDACKPT_METHOD_GET_STATE,
                CUDACKPT_METHOD_RESTORE, CUDACKPT_METHOD_UNLOCK, CUDACKPT_METHOD_GET_STATE,
        };
        static const char *const states[] = { "locked", "checkpointed", "checkpointed",
                                              "locked", "running", "running" };
        enum { N = sizeof(methods) / sizeof(methods[0]) };
        char buf[2048];
        size_t len = 0;
        for (size_t i = 0; i < N; i++)
                len += (size_t)snprintf(buf + len, sizeof(buf) - len,
                                        "{\"method\":\"%s\",\"parameters\":{\"pid\":%d}}", methods[i], (int)pid) + 1;
        ck_assert_int_eq(itest_send_bytes(c, buf, len, false), 0);
        for (size_t i = 0; i < N; i++) {
                cJSON *j = itest_recv(c);
                ck_assert_msg(itest_error(j) == NULL, "reply %zu (%s): %s", i, methods[i], itest_dump(j));
                itest_assert_state(j, pid, states[i]);
        }
}
END_TEST

/* Two connections: a Checkpoint sent while a slow Lock runs waits for it. */
START_TEST(serialised_across_connections)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_BUSY_MS=500", NULL);
        struct itest_conn *a = itest_connect(d);
        struct itest_conn *b = itest_connect(d);
        struct itest_conn *q = itest_connect(d);
        itest_sendf(a, "{\"method\":\"" CUDACKPT_METHOD_LOCK "\",\"parameters\":{\"pid\":%d,\"timeout_ms\":0}}",
                    (int)pid);
        itest_await_in_flight(q, pid, "Lock", 1000);
        send_pid_call(b, CUDACKPT_METHOD_CHECKPOINT, pid);
        /* In order: had the Checkpoint run first it would meet a running
         * process and fail with InvalidState. */
        cJSON *ja = itest_recv(a);
        itest_assert_state(ja, pid, "locked");
        cJSON *jb = itest_recv(b);
        itest_assert_state(jb, pid, "checkpointed");
        itest_assert_state(itest_call_pid(q, CUDACKPT_METHOD_RESUME, pid), pid, "running");
}
END_TEST

/* A client that goes away during a long Checkpoint: the operation still
 * completes.  Unlock queues behind it and finds the process checkpointed. */
START_TEST(client_vanishes_during_checkpoint)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_target("CUDACKPT_SIM=1", ONE_SECOND_CKPT, "CUDACKPT_SIM_CKPT_MIBPS=1024", NULL);
        struct itest_conn *a = itest_connect(d);
        struct itest_conn *b = itest_connect(d);
        start_checkpoint(a, b, pid);
        itest_conn_close(a);

        cJSON *j = itest_call_pid(b, CUDACKPT_METHOD_UNLOCK, pid);
        itest_assert_error(j, CUDACKPT_ERROR_INVALID_STATE);
        itest_assert_str(j, "state", "checkpointed");
        itest_assert_state_now(b, pid, "checkpointed");
        itest_assert_state(itest_call_pid(b, CUDACKPT_METHOD_RESUME, pid), pid, "running");
}
END_TEST

/* The same through the library: the handle is freed mid-Suspend. */
START_TEST(client_library_vanishes_during_suspend)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_target("CUDACKPT_SIM=1", ONE_SECOND_CKPT, "CUDACKPT_SIM_CKPT_MIBPS=1024", NULL);
        cudackpt_client *cl = NULL;
        ck_assert_int_eq(cudackpt_client_connect(d->sock, &cl), 0);
        ck_assert_int_eq(cudackpt_client_set_timeout(cl, 100), 0);
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        ck_assert_int_eq(cudackpt_suspend(cl, pid, -1, &r), -ETIMEDOUT);
        cudackpt_client_free(cl);

        struct itest_conn *b = itest_connect(d);
        cJSON *j = itest_call_pid(b, CUDACKPT_METHOD_UNLOCK, pid);
        itest_assert_error(j, CUDACKPT_ERROR_INVALID_STATE);
        itest_assert_str(j, "state", "checkpointed");
}
END_TEST

/* Many connections at once, all answered. */
START_TEST(many_connections)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_sim_target();
        enum { N = 20 };
        struct itest_conn *c[N];
        for (int i = 0; i < N; i++)
                c[i] = itest_connect(d);
        for (int i = 0; i < N; i++)
                send_pid_call(c[i], CUDACKPT_METHOD_GET_STATE, pid);
        for (int i = 0; i < N; i++)
                itest_assert_state(itest_recv(c[i]), pid, "running");
}
END_TEST

/* A client that pipelines requests and never reads its replies must not
 * stall the daemon for anybody else. */
START_TEST(slow_reader)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_sim_target();
        struct itest_conn *hog = itest_connect(d);
        static const char req[] = "{\"method\":\"org.varlink.service.GetInfo\"}";
        /* Write until the socket is full (the daemon stopped reading) or
         * 20000 requests (~4 MB of replies) went out. */
        int sent = 0;
        for (; sent < 20000; sent++) {
                ssize_t n = send(hog->fd, req, sizeof(req), MSG_DONTWAIT | MSG_NOSIGNAL);
                if (n != (ssize_t)sizeof(req))
                        break;
        }
        ck_assert_int_gt(sent, 0);
        struct itest_conn *other = itest_connect(d);
        double t0 = itest_now_ms();
        itest_assert_state(itest_call_pid(other, CUDACKPT_METHOD_GET_STATE, pid), pid, "running");
        double took = itest_now_ms() - t0;
        ck_assert_msg(took < 1000, "GetState next to a client that does not read took %.0f ms", took);
        /* The hog still gets well-formed replies (or is cut off). */
        cJSON *j = NULL;
        int rc = itest_recv_raw(hog, 5000, &j);
        ck_assert_msg(rc == 0 || rc == -ENODATA, "the hog's first reply: %s", strerror(-rc));
        if (rc == 0)
                itest_assert_ok(j);
}
END_TEST

int main(void)
{
        const TTest *tests[] = { parallel_suspends, get_state_while_busy, serialised_pipelined,
                serialised_across_connections, client_vanishes_during_checkpoint,
                client_library_vanishes_during_suspend, many_connections, slow_reader, NULL };

        return itest_run("integration.concurrency", "concurrency", 60, tests);
}
