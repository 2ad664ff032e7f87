/* test_floods.c: the daemon's limits under attack (docs/security.md,
 * "Threat model"): floods past max_connections and
 * max_connections_per_uid, idle and half-sent connections, clients that
 * pipeline and never read (helpers: attacks_itest.h).  Each test checks
 * that the limit holds, that well-behaved clients go on being served, and
 * that the daemon stays alive.  The other-uid flood needs root and skips
 * itself otherwise. */
#include "attacks_itest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>


#define OTHER ITEST_OTHER_UID

/* ---- 1, 2: connection floods --------------------------------------------- */

/* max_connections: at the limit every further connection is accepted and
 * closed at once, while those already connected go on being served;
 * connections that come and go (with requests half sent, unanswered, or in
 * flight when they hang up) leak no slot: once they have gone exactly the
 * limit is admitted again. */
START_TEST(flood_max_connections)
{
        enum { LIMIT = 8, FLOOD = 64, CHURN = 200 };
        struct itest_daemon_opts o = { .config_json = "{\"max_connections\":8}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        pid_t pid = itest_sim_target();
        struct itest_conn *good = itest_connect(d);
        atest_assert_running(good, pid);
        struct itest_conn *fill[LIMIT - 1];
        for (int i = 0; i < LIMIT - 1; i++) {
                fill[i] = itest_connect(d);
                atest_assert_get_info(fill[i]);
        }

        /* The flood: all connect at once (the kernel queues them), each
         * sends a request; the well-behaved client is served meanwhile. */
        struct itest_conn *ex[FLOOD];
        for (int i = 0; i < FLOOD; i++) {
                ex[i] = itest_connect(d);
                (void)itest_send_bytes(ex[i], GET_INFO_MSG, sizeof(GET_INFO_MSG), false);
                if (i % 8 == 7)
                        atest_assert_running(good, pid);
        }
        for (int i = 0; i < FLOOD; i++) {
                itest_assert_eof(ex[i], 5000);
                itest_conn_close(ex[i]);
        }
        atest_assert_running(good, pid);
        for (int i = 0; i < LIMIT - 1; i++)
                atest_assert_get_info(fill[i]);

        /* The flood goes away, and a churn of short-lived clients below the
         * limit hang up: idle, mid-message, before reading a reply, or with
         * a GetState (a worker's job) still in flight. */
        for (int i = 0; i < LIMIT - 1; i++)
                itest_conn_close(fill[i]);
        char *get_state = itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_GET_STATE "\",\"parameters\":{\"pid\":%d}}",
                                        (int)pid);
        for (int i = 0; i < CHURN; i++) {
                struct itest_conn *c = atest_connect_served(d, 5000);
                switch (i % 4) {
                case 0: break;
                case 1: (void)itest_send_bytes(c, GET_INFO_MSG, 10, false); break;
                case 2: (void)itest_send_bytes(c, GET_INFO_MSG, sizeof(GET_INFO_MSG), false); break;
                case 3: (void)itest_send_bytes(c, get_state, strlen(get_state) + 1, false); break;
                }
                itest_conn_close(c);
        }
        atest_assert_running(good, pid);
        /* Exactly LIMIT - 1 slots besides good's are free again... */
        for (int i = 0; i < LIMIT - 1; i++)
                fill[i] = atest_connect_served(d, 5000);
        /* ...and no more. */
        atest_assert_refused(itest_connect(d));
        atest_assert_running(good, pid);
        for (int i = 0; i < LIMIT - 1; i++)
                atest_assert_get_info(fill[i]);
        ck_assert_msg(!itest_daemon_exited(d), "the daemon died");
}
END_TEST

struct uid_flood {
        const char *sock;
        int limit;
};

/* As another uid: `limit` connections are served, one more is closed. */
static int as_uid_flood(void *p, char *msg, size_t n)
{
        const struct uid_flood *x = p;
        int fds[64];
        int ret = 0, k = 0;
        char buf[4096];
        for (; k <= x->limit && ret == 0; k++) {
                fds[k] = atest_raw_connect(x->sock);
                if (fds[k] < 0) {
                        snprintf(msg, n, "connect %s: %s", x->sock, strerror(-fds[k]));
                        ret = 1;
                        break;
                }
                int rc = atest_raw_call(fds[k], GET_INFO_MSG, buf, sizeof(buf), ITEST_REPLY_TIMEOUT_MS);
                bool served = rc == 1 && strstr(buf, "\"interfaces\"") && !strstr(buf, "\"error\"");
                if (k < x->limit && !served) {
                        snprintf(msg, n, "connection %d of uid %d (limit %d) not served: %s %s", k + 1, (int)getuid(),
                                 x->limit, rc < 0 ? strerror(-rc) : rc == 0 ? "closed" : "reply", rc == 1 ? buf : "");
                        ret = 1;
                } else if (k == x->limit && rc != 0) {
                        snprintf(msg, n, "connection %d of uid %d (limit %d) not closed: %s %s", k + 1, (int)getuid(),
                                 x->limit, rc < 0 ? strerror(-rc) : "reply", rc == 1 ? buf : "");
                        ret = 1;
                }
        }
        for (int i = 0; i < k; i++)
                if (fds[i] >= 0)
                        close(fds[i]);
        return ret;
}

/* max_connections_per_uid: one uid at its limit is refused, another uid is
 * still served (up to its own limit), and the first uid's connections are
 * unaffected. */
START_TEST(flood_max_connections_per_uid)
{
        if (itest_need_root())
                return;
        enum { LIMIT = 4 };
        struct itest_daemon_opts o = { .config_json = "{\"max_connections_per_uid\":4}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        pid_t pid = itest_sim_target();
        struct itest_conn *mine[LIMIT];
        for (int i = 0; i < LIMIT; i++) {
                mine[i] = itest_connect(d);
                atest_assert_running(mine[i], pid);
        }
        for (int i = 0; i < 16; i++)
                atest_assert_refused(itest_connect(d));

        struct uid_flood x = { .sock = d->sock, .limit = LIMIT };
        char msg[1024];
        ck_assert_msg(itest_run_as(OTHER, as_uid_flood, &x, msg, sizeof(msg)) == 0, "as uid %d: %s", OTHER, msg);

        for (int i = 0; i < LIMIT; i++)
                atest_assert_running(mine[i], pid);
        /* One goes: its slot comes back, one slot only. */
        itest_conn_close(mine[0]);
        mine[0] = atest_connect_served(d, 5000);
        atest_assert_refused(itest_connect(d));
        for (int i = 0; i < LIMIT; i++)
                atest_assert_running(mine[i], pid);
}
END_TEST

/* ---- 3: idle timeout ----------------------------------------------------- */

#define IDLE_MS 300

/* Idle connections are closed after idle_timeout_ms, not before; requests
 * keep a connection open; bytes of a message that never ends do not. */
START_TEST(idle_connections_closed)
{
        struct itest_daemon_opts o = { .config_json = "{\"idle_timeout_ms\":300}" };
        struct itest_daemon *d = itest_daemon_start(&o);

        /* Never a request. */
        double t0 = itest_now_ms();
        struct itest_conn *c = itest_connect(d);
        itest_assert_eof(c, 5000);
        double took = itest_now_ms() - t0;
        ck_assert_msg(took >= IDLE_MS - 50, "an idle connection was closed after %.0f ms, before the %d ms timeout",
                      took, IDLE_MS);

        /* Idle after a request: timed from the reply. */
        c = itest_connect(d);
        atest_assert_get_info(c);
        t0 = itest_now_ms();
        itest_assert_eof(c, 5000);
        took = itest_now_ms() - t0;
        ck_assert_msg(took >= IDLE_MS - 50, "closed %.0f ms after its last reply", took);

        /* A request every 150 ms keeps it open well past the timeout. */
        c = itest_connect(d);
        t0 = itest_now_ms();
        for (int k = 0; k < 6; k++) {
                atest_assert_get_info(c);
                cJSON *j = NULL;
                int rc = itest_recv_raw(c, IDLE_MS / 2, &j);
                ck_assert_msg(rc == -ETIMEDOUT, "an active connection: %s after %.0f ms",
                              rc == -ENODATA ? "closed" : rc == 0 ? itest_dump(j) : strerror(-rc),
                              itest_now_ms() - t0);
        }
        atest_assert_get_info(c);
        itest_conn_close(c);

        /* Slowloris: a byte every 50 ms of a message never ended.  The
         * timeout counts from the last request ("no request for this
         * long", configuration.md), so the trickle does not hold it open. */
        c = itest_connect(d);
        t0 = itest_now_ms();
        static const char part[] = "{\"method\":\"" GET_INFO "\",\"parameters\":{ ";
        bool closed = false;
        for (size_t i = 0; i < sizeof(part) - 1 && !closed; i++) {
                int rc = itest_send_bytes(c, part + i, 1, false);
                if (rc == -EPIPE || rc == -ECONNRESET) {
                        closed = true;
                        break;
                }
                ck_assert_msg(rc == 0, "send: %s", strerror(-rc));
                cJSON *j = NULL;
                rc = itest_recv_raw(c, 50, &j);
                ck_assert_msg(rc == -ETIMEDOUT || rc == -ENODATA, "a reply to half a message: %s",
                              rc == 0 ? itest_dump(j) : strerror(-rc));
                closed = rc == -ENODATA;
        }
        took = itest_now_ms() - t0;
        ck_assert_msg(closed, "a connection trickling one byte every 50 ms was still open after %.0f ms "
                              "(idle_timeout_ms %d)", took, IDLE_MS);
        ck_assert_msg(took >= IDLE_MS - 50 && took < 4 * IDLE_MS, "the trickling connection was closed after %.0f ms",
                      took);
        atest_assert_serving(d);
}
END_TEST

/* A connection whose request runs (or waits behind another) longer than
 * idle_timeout_ms is not closed under it: the reply comes.  Once answered,
 * the connection idles and is closed. */
START_TEST(idle_timeout_spares_requests_in_flight)
{
        struct itest_daemon_opts o = { .config_json = "{\"idle_timeout_ms\":300}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        /* A checkpoint of about 1 s. */
        pid_t pid = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=1024", "CUDACKPT_SIM_CKPT_MIBPS=1024", NULL);
        struct itest_conn *op = itest_connect(d);
        struct itest_conn *waiter = itest_connect(d);
        struct itest_conn *q = itest_connect(d);
        itest_assert_state(itest_call_pid(op, CUDACKPT_METHOD_LOCK, pid), pid, "locked");
        double t0 = itest_now_ms();
        atest_send_pid_call(op, CUDACKPT_METHOD_CHECKPOINT, pid);
        itest_await_in_flight(q, pid, "Checkpoint", 2000);
        /* Queued behind the Checkpoint on another connection. */
        atest_send_pid_call(waiter, CUDACKPT_METHOD_UNLOCK, pid);

        cJSON *j = itest_recv_within(op, 10000);
        double took = itest_now_ms() - t0;
        itest_assert_state(j, pid, "checkpointed");
        ck_assert_msg(took >= 2 * IDLE_MS, "the checkpoint took only %.0f ms; the test needs it to outlast the "
                                           "%d ms idle timeout", took, IDLE_MS);
        j = itest_recv_within(waiter, 5000);
        itest_assert_error(j, CUDACKPT_ERROR_INVALID_STATE);
        itest_assert_str(j, "state", "checkpointed");

        t0 = itest_now_ms();
        itest_assert_eof(op, 5000);
        itest_assert_eof(waiter, 5000);
        took = itest_now_ms() - t0;
        ck_assert_msg(took >= IDLE_MS - 100, "closed %.0f ms after its reply, before the idle timeout", took);
        atest_assert_serving(d);
}
END_TEST

/* ---- 4: clients that never read ------------------------------------------ */

static void check_info(const cJSON *j, pid_t pid)
{
        (void)pid;
        itest_assert_ok(j);
}

static void check_running(const cJSON *j, pid_t pid)
{
        itest_assert_state(j, pid, "running");
}

/* A client (the hog) sends n pipelined copies of msg, far more than the
 * socket buffers hold, and reads nothing until the daemon has cut it off:
 * its send must end with EPIPE, for if it read meanwhile it would take the
 * replies off the daemon's hands.  Whenever the hog's socket is full,
 * another client's GetState on pid is answered within 1 s.  Then the hog
 * reads what came: well-formed replies (check(j)), fewer than n, and EOF. */
static int hog(struct itest_daemon *d, struct itest_conn *other, const char *msg, int n,
               void (*check)(const cJSON *j, pid_t pid), pid_t pid, const char *what)
{
        size_t one = strlen(msg) + 1, len = one * (size_t)n, off = 0;
        char *buf = itest_keep(malloc(len));
        ck_assert(buf);
        for (int i = 0; i < n; i++)
                memcpy(buf + one * (size_t)i, msg, one);
        struct itest_conn *h = itest_connect(d);
        /* A small send buffer fills at once whatever the daemon's pace: with
         * the default one (over 200 KiB) a fast daemon could read enough to
         * hit max_write_queue_bytes before the hog's send ever blocked. */
        int sndbuf = 4096;
        ck_assert(setsockopt(h->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)) == 0);
        int served = 0, rc = 0;
        double deadline = itest_now_ms() + 10000;
        while (off < len) {
                ssize_t k = send(h->fd, buf + off, len - off < 65536 ? len - off : 65536, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (k > 0) {
                        off += (size_t)k;
                        continue;
                }
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0 && (errno == EPIPE || errno == ECONNRESET)) {
                        rc = -errno;
                        break;
                }
                ck_assert_msg(k < 0 && errno == EAGAIN, "the hog's send: %s", strerror(errno));
                double t0 = itest_now_ms();
                atest_assert_running(other, pid);
                double took = itest_now_ms() - t0;
                ck_assert_msg(took < 1000, "GetState next to a hog sending %s took %.0f ms", what, took);
                served++;
                struct pollfd p = { .fd = h->fd, .events = POLLOUT };
                double left = deadline - itest_now_ms();
                ck_assert_msg(left > 0 && poll(&p, 1, (int)left + 1) > 0,
                              "the daemon neither read the hog's %s nor cut it off within 10 s (%zu of %zu bytes sent)",
                              what, off, len);
        }
        ck_assert_msg(rc != 0, "the hog sent all %d %s requests (%zu bytes) without reading and was not cut off", n,
                      what, len);
        int got = 0;
        for (;;) {
                cJSON *j = NULL;
                rc = itest_recv_raw(h, 10000, &j);
                if (rc == -ENODATA)
                        break;
                ck_assert_msg(rc == 0, "reply %d to the hog's %s: %s", got + 1, what, strerror(-rc));
                check(j, pid);
                got++;
        }
        itest_conn_close(h);
        ck_assert_msg(got > 0 && got < n, "the hog got %d replies to %d %s requests", got, n, what);
        return served;
}

/* hog() until its socket has filled at least once: on a loaded machine a
 * daemon may keep pace with the hog's sends until it cuts it off, and that
 * round shows nothing about others being served meanwhile. */
static void hog_until_full(struct itest_daemon *d, struct itest_conn *other, const char *msg, int n,
                           void (*check)(const cJSON *j, pid_t pid), pid_t pid, const char *what)
{
        for (int round = 0; round < 10; round++)
                if (hog(d, other, msg, n, check, pid, what) > 0)
                        return;
        ck_abort_msg("the hog's socket never filled in 10 rounds: no GetState was made next to it");
}

/* A client that pipelines tens of thousands of requests and never reads is
 * cut off once max_write_queue_bytes of replies wait, both for replies
 * made on the loop (GetInfo) and for replies of worker jobs (GetState).
 * Meanwhile others are served, operations included.  (test_concurrency.c's
 * slow_reader checks that a non-reading client does not stall others, under
 * the default 1 MiB limit; this checks that the limit cuts the hog off.) */
START_TEST(unread_replies_disconnect)
{
        enum { N = 40000 };
        struct itest_daemon_opts o = { .config_json = "{\"max_write_queue_bytes\":4096}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        pid_t pid = itest_sim_target();
        /* A Suspend, then a Resume, of about 0.5 s each run meanwhile. */
        pid_t big = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=1024", NULL);
        struct itest_conn *other = itest_connect(d);
        struct itest_conn *worker = itest_connect(d);
        char *get_state = itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_GET_STATE "\",\"parameters\":{\"pid\":%d}}",
                                        (int)pid);
        atest_send_pid_call(worker, CUDACKPT_METHOD_SUSPEND, big);
        hog_until_full(d, other, GET_INFO_MSG, N, check_info, pid, "GetInfo");
        itest_assert_state(itest_recv(worker), big, "checkpointed");
        atest_send_pid_call(worker, CUDACKPT_METHOD_RESUME, big);
        hog_until_full(d, other, get_state, N, check_running, pid, "GetState");
        itest_assert_state(itest_recv(worker), big, "running");
        atest_assert_running(other, pid);
        atest_assert_serving(d);
}
END_TEST

int main(void)
{
        const TTest *tests[] = { flood_max_connections, flood_max_connections_per_uid,
                idle_connections_closed, idle_timeout_spares_requests_in_flight, unread_replies_disconnect,
                NULL };

        return itest_run("integration.floods", "floods", 30, tests);
}
