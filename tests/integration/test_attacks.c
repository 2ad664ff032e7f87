/* test_attacks.c: the daemon attacked the way a security reviewer of a root
 * daemon would (docs/security.md, "Threat model"), covering what the other
 * suites do not: floods past max_connections and max_connections_per_uid,
 * idle and half-sent connections, clients that pipeline and never read,
 * garbage and parser edge cases, 1-byte writes interleaved between
 * connections, operator groups and read-only access, clients killed in the
 * middle of an operation, acting on the daemon itself or through thread
 * ids, and SIGTERM while operations run.  Each test checks that the limit
 * or rule holds, that well-behaved clients go on being served, and that the
 * daemon stays alive.
 *
 * The tests that switch uids need root and skip themselves otherwise.  The
 * binary doubles as two kinds of target (started through
 * itest_target_exec(), which waits for a byte on fd 3):
 *   --itest-hold-uids R E S  a process whose real, effective and saved uids
 *                            are R, E, S (as in test_permissions.c);
 *   --itest-threads          a process with a second thread, to be named
 *                            by that thread's id.
 *
 * Several tests here found bugs when they were written; the comment above
 * each says what it guards against. */
#include "harness.h"

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

#define OTHER ITEST_OTHER_UID
/* A group that configures operators, and one that does not. */
#define OPERATOR_GID 4343
#define NOT_OPERATOR_GID 4344

#define GET_INFO "org.varlink.service.GetInfo"
static const char get_info_msg[] = "{\"method\":\"" GET_INFO "\"}";

/* ---- helpers of the test process (asserting) ----------------------------- */

static void assert_get_info(struct itest_conn *c)
{
        cJSON *j = itest_call(c, GET_INFO, NULL);
        itest_assert_ok(j);
        ck_assert_msg(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(itest_params(j), "interfaces")),
                      "GetInfo without interfaces: %s", itest_dump(j));
}

/* The daemon is alive and a fresh connection gets GetInfo answered. */
static void assert_serving(struct itest_daemon *d)
{
        ck_assert_msg(!itest_daemon_exited(d), "the daemon died");
        struct itest_conn *c = itest_connect(d);
        assert_get_info(c);
        itest_conn_close(c);
        ck_assert_msg(!itest_daemon_exited(d), "the daemon died");
}

static void assert_running(struct itest_conn *c, pid_t pid)
{
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, pid), pid, "running");
}

static void send_pid_call(struct itest_conn *c, const char *method, pid_t pid)
{
        itest_sendf(c, "{\"method\":\"%s\",\"parameters\":{\"pid\":%d}}", method, (int)pid);
}

/* The daemon closes c (accepted only to be refused): a request sent on it
 * gets no answer, the connection ends. */
static void assert_refused(struct itest_conn *c)
{
        int rc = itest_send_bytes(c, get_info_msg, sizeof(get_info_msg), false);
        ck_assert_msg(rc == 0 || rc == -EPIPE || rc == -ECONNRESET, "send: %s", strerror(-rc));
        itest_assert_eof(c, 5000);
        itest_conn_close(c);
}

/* Connects until the daemon serves the connection, awaiting the close of
 * each refused attempt; asserts one is served within timeout_ms.  For
 * slots that free up when the daemon has processed other clients' hang-ups,
 * which it does asynchronously. */
static struct itest_conn *connect_served(struct itest_daemon *d, int timeout_ms)
{
        double deadline = itest_now_ms() + timeout_ms;
        int attempts = 0;
        for (;;) {
                struct itest_conn *c = itest_connect(d);
                int rc = itest_send_bytes(c, get_info_msg, sizeof(get_info_msg), false);
                cJSON *j = NULL;
                double left = deadline - itest_now_ms();
                if (rc == 0)
                        rc = itest_recv_raw(c, left > 0 ? (int)left + 1 : 1, &j);
                attempts++;
                if (rc == 0) {
                        itest_assert_ok(j);
                        return c;
                }
                ck_assert_msg(rc == -ENODATA || rc == -EPIPE || rc == -ECONNRESET,
                              "connection attempt %d: %s", attempts, strerror(-rc));
                itest_conn_close(c);
                ck_assert_msg(itest_now_ms() < deadline, "no connection slot became free within %d ms (%d attempts)",
                              timeout_ms, attempts);
        }
}

/* Calls GetState until it shows `method` in flight with `state`. */
static void await_in_flight_state(struct itest_conn *c, pid_t pid, const char *method, const char *state,
                                  int timeout_ms)
{
        double deadline = itest_now_ms() + timeout_ms;
        for (;;) {
                cJSON *j = itest_await_in_flight(c, pid, method, timeout_ms);
                const char *s = itest_str(j, "state");
                if (s && strcmp(s, state) == 0)
                        return;
                ck_assert_msg(itest_now_ms() < deadline, "%s of %d not in state %s within %d ms: %s", method,
                              (int)pid, state, timeout_ms, itest_dump(j));
        }
}

/* A thread of process pid other than its main thread. */
static pid_t other_thread(pid_t pid)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
        DIR *dir = opendir(path);
        ck_assert_msg(dir, "opendir %s: %s", path, strerror(errno));
        pid_t tid = 0;
        struct dirent *de;
        while (!tid && (de = readdir(dir))) {
                char *end;
                long v = strtol(de->d_name, &end, 10);
                if (*end == '\0' && v > 0 && v != pid)
                        tid = (pid_t)v;
        }
        closedir(dir);
        ck_assert_msg(tid > 0, "process %d has no second thread", (int)pid);
        return tid;
}

/* Every key and string in j is valid UTF-8 (RFC 8259 8.1: JSON exchanged
 * between systems MUST be UTF-8; sd-json, behind varlinkctl, refuses
 * anything else). */
static bool utf8_valid(const char *s)
{
        const unsigned char *p = (const unsigned char *)s;
        while (*p) {
                unsigned cp;
                int n;
                if (*p < 0x80) {
                        p++;
                        continue;
                }
                if ((*p & 0xe0) == 0xc0) {
                        n = 1;
                        cp = *p & 0x1fu;
                } else if ((*p & 0xf0) == 0xe0) {
                        n = 2;
                        cp = *p & 0x0fu;
                } else if ((*p & 0xf8) == 0xf0) {
                        n = 3;
                        cp = *p & 0x07u;
                } else {
                        return false;
                }
                for (int i = 1; i <= n; i++) {
                        if ((p[i] & 0xc0) != 0x80)
                                return false;
                        cp = cp << 6 | (p[i] & 0x3fu);
                }
                if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
                    (cp >= 0xd800 && cp <= 0xdfff))
                        return false;
                p += n + 1;
        }
        return true;
}

static bool json_utf8_valid(const cJSON *j)
{
        for (; j; j = j->next) {
                if (j->string && !utf8_valid(j->string))
                        return false;
                if (cJSON_IsString(j) && !utf8_valid(j->valuestring))
                        return false;
                if (j->child && !json_utf8_valid(j->child))
                        return false;
        }
        return true;
}

/* ---- helpers of other processes (never assert: they report) -------------- */

static int raw_connect(const char *path)
{
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int e = -errno;
                close(fd);
                return e;
        }
        return fd;
}

static int raw_send(int fd, const char *buf, size_t len)
{
        while (len > 0) {
                ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                buf += n;
                len -= (size_t)n;
        }
        return 0;
}

/* Sends msg with its NUL, reads one reply into buf.  1: a reply; 0: the
 * daemon closed the connection; <0: -errno (-ETIMEDOUT). */
static int raw_call(int fd, const char *msg, char *buf, size_t size, int timeout_ms)
{
        int rc = raw_send(fd, msg, strlen(msg) + 1);
        if (rc < 0 && rc != -EPIPE && rc != -ECONNRESET)
                return rc;
        double deadline = itest_now_ms() + timeout_ms;
        size_t len = 0;
        for (;;) {
                double left = deadline - itest_now_ms();
                if (left <= 0)
                        return -ETIMEDOUT;
                struct pollfd p = { .fd = fd, .events = POLLIN };
                int r = poll(&p, 1, (int)left + 1);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return -errno;
                if (r == 0)
                        return -ETIMEDOUT;
                if (len + 1 >= size)
                        return -EMSGSIZE;
                ssize_t n = recv(fd, buf + len, size - 1 - len, 0);
                if (n == 0 || (n < 0 && errno == ECONNRESET))
                        return 0;
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (memchr(buf + len, '\0', (size_t)n))
                        return 1;
                len += (size_t)n;
                buf[len] = '\0';
        }
}

/* One call of a script run by another user, and what it must get. */
struct step {
        const char *method;
        pid_t pid;
        const char *error;     /* the error expected; NULL: success */
        const char *state;     /* on success, the state expected; NULL: not checked */
        const char *in_flight; /* on success, in_flight expected; NULL: must be absent */
};

struct script {
        const char *sock;
        const struct step *steps;
        size_t n_steps;
};

static int as_script(void *p, char *msg, size_t n)
{
        const struct script *x = p;
        cudackpt_client *c = NULL;
        int rc = cudackpt_client_connect(x->sock, &c);
        if (rc < 0) {
                snprintf(msg, n, "connect %s: %s", x->sock, strerror(-rc));
                return 1;
        }
        cudackpt_client_set_timeout(c, ITEST_REPLY_TIMEOUT_MS);
        int ret = 0;
        for (size_t i = 0; i < x->n_steps && ret == 0; i++) {
                const struct step *s = &x->steps[i];
                char params[64];
                snprintf(params, sizeof(params), "{\"pid\":%d}", (int)s->pid);
                cudackpt_reply r;
                cudackpt_reply_init(&r);
                rc = cudackpt_call(c, s->method, params, &r);
                const char *why = NULL;
                if (rc < 0)
                        why = strerror(-rc);
                else if (s->error && (!r.error || strcmp(r.error, s->error) != 0))
                        why = "wrong result";
                else if (s->error && strcmp(s->error, CUDACKPT_ERROR_PERMISSION_DENIED) == 0) {
                        cJSON *j = cJSON_Parse(r.parameters_json);
                        const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "caller_uid");
                        if (!cJSON_IsNumber(u) || u->valuedouble != (double)getuid() || r.pid != s->pid)
                                why = "PermissionDenied without the right pid and caller_uid";
                        cJSON_Delete(j);
                } else if (!s->error && r.error)
                        why = "wrong result";
                else if (!s->error && s->state && (!r.state || strcmp(r.state, s->state) != 0))
                        why = "wrong state";
                else if (!s->error && (s->in_flight ? !r.in_flight || strcmp(r.in_flight, s->in_flight) != 0
                                                    : r.in_flight != NULL))
                        why = "wrong in_flight";
                if (why) {
                        snprintf(msg, n, "step %zu, %s on pid %d as uid %d: %s: expected %s%s%s, got %s %s", i,
                                 s->method, (int)s->pid, (int)getuid(), why, s->error ? s->error : "success",
                                 s->state ? " " : "", s->state ? s->state : "", r.error ? r.error : "success",
                                 r.parameters_json ? r.parameters_json : "");
                        ret = 1;
                }
                cudackpt_reply_clear(&r);
        }
        cudackpt_client_free(c);
        return ret;
}

static void run_script(uid_t uid, const gid_t *groups, size_t n_groups, struct itest_daemon *d,
                       const struct step *steps, size_t n_steps)
{
        struct script x = { .sock = d->sock, .steps = steps, .n_steps = n_steps };
        char msg[1024];
        int rc = itest_run_as_groups(uid, groups, n_groups, as_script, &x, msg, sizeof(msg));
        ck_assert_msg(rc == 0, "as uid %d with %zu groups (first %d): %s", (int)uid, n_groups,
                      n_groups ? (int)groups[0] : -1, msg);
}

/* What a client process saw of the replies to its requests. */
struct client_seen {
        int replies, queue_full, denied, other;
};

/* Clients in a process of their own, as uid (unchanged for (uid_t)-1):
 * n_conns connections each send msg; once at least min_replies replies
 * have come (within 10 s), the process reports what it saw and waits to be
 * killed, its connections open.  Returns its pid. */
static pid_t spawn_clients(uid_t uid, const char *sock, const char *msg, int n_conns, int min_replies,
                           struct client_seen *ret_seen)
{
        int p[2];
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        ck_assert(n_conns <= 256);
        pid_t parent = getpid();
        pid_t pid = fork();
        ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
                close(p[0]);
                struct client_seen seen = { .replies = -1 };
                if (uid != (uid_t)-1 &&
                    (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0))
                        goto report;
                /* After the uid change, which clears it. */
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(1);
                struct pollfd fds[256];
                for (int i = 0; i < n_conns; i++) {
                        fds[i] = (struct pollfd){ .fd = raw_connect(sock), .events = POLLIN };
                        if (fds[i].fd < 0 || raw_send(fds[i].fd, msg, strlen(msg) + 1) < 0)
                                goto report;
                }
                seen.replies = 0;
                double deadline = itest_now_ms() + 10000;
                while (seen.replies < min_replies && itest_now_ms() < deadline) {
                        if (poll(fds, (nfds_t)n_conns, 100) <= 0)
                                continue;
                        for (int i = 0; i < n_conns; i++) {
                                char buf[4096];
                                if (!(fds[i].revents & (POLLIN | POLLHUP)))
                                        continue;
                                ssize_t k = recv(fds[i].fd, buf, sizeof(buf) - 1, 0);
                                fds[i].fd = -fds[i].fd - 1; /* one reply per connection */
                                if (k <= 0)
                                        continue;
                                buf[k] = '\0';
                                seen.replies++;
                                if (strstr(buf, CUDACKPT_ERROR_QUEUE_FULL))
                                        seen.queue_full++;
                                else if (strstr(buf, CUDACKPT_ERROR_PERMISSION_DENIED))
                                        seen.denied++;
                                else
                                        seen.other++;
                        }
                }
report:
                if (write(p[1], &seen, sizeof(seen)) != (ssize_t)sizeof(seen))
                        _exit(1);
                for (;;)
                        pause();
        }
        close(p[1]);
        struct pollfd pf = { .fd = p[0], .events = POLLIN };
        struct client_seen seen;
        ck_assert_msg(poll(&pf, 1, 15000) == 1 && read(p[0], &seen, sizeof(seen)) == (ssize_t)sizeof(seen),
                      "the client process did not report");
        close(p[0]);
        ck_assert_msg(seen.replies >= 0, "the client process could not connect and send its requests");
        if (ret_seen)
                *ret_seen = seen;
        return pid;
}

static void kill_clients(pid_t pid)
{
        ck_assert_int_eq(kill(pid, SIGKILL), 0);
        ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
}

#define N_STEPS(a) (sizeof(a) / sizeof((a)[0]))

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
        assert_running(good, pid);
        struct itest_conn *fill[LIMIT - 1];
        for (int i = 0; i < LIMIT - 1; i++) {
                fill[i] = itest_connect(d);
                assert_get_info(fill[i]);
        }

        /* The flood: all connect at once (the kernel queues them), each
         * sends a request; the well-behaved client is served meanwhile. */
        struct itest_conn *ex[FLOOD];
        for (int i = 0; i < FLOOD; i++) {
                ex[i] = itest_connect(d);
                (void)itest_send_bytes(ex[i], get_info_msg, sizeof(get_info_msg), false);
                if (i % 8 == 7)
                        assert_running(good, pid);
        }
        for (int i = 0; i < FLOOD; i++) {
                itest_assert_eof(ex[i], 5000);
                itest_conn_close(ex[i]);
        }
        assert_running(good, pid);
        for (int i = 0; i < LIMIT - 1; i++)
                assert_get_info(fill[i]);

        /* The flood goes away, and a churn of short-lived clients below the
         * limit hang up: idle, mid-message, before reading a reply, or with
         * a GetState (a worker's job) still in flight. */
        for (int i = 0; i < LIMIT - 1; i++)
                itest_conn_close(fill[i]);
        char *get_state = itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_GET_STATE "\",\"parameters\":{\"pid\":%d}}",
                                        (int)pid);
        for (int i = 0; i < CHURN; i++) {
                struct itest_conn *c = connect_served(d, 5000);
                switch (i % 4) {
                case 0: break;
                case 1: (void)itest_send_bytes(c, get_info_msg, 10, false); break;
                case 2: (void)itest_send_bytes(c, get_info_msg, sizeof(get_info_msg), false); break;
                case 3: (void)itest_send_bytes(c, get_state, strlen(get_state) + 1, false); break;
                }
                itest_conn_close(c);
        }
        assert_running(good, pid);
        /* Exactly LIMIT - 1 slots besides good's are free again... */
        for (int i = 0; i < LIMIT - 1; i++)
                fill[i] = connect_served(d, 5000);
        /* ...and no more. */
        assert_refused(itest_connect(d));
        assert_running(good, pid);
        for (int i = 0; i < LIMIT - 1; i++)
                assert_get_info(fill[i]);
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
                fds[k] = raw_connect(x->sock);
                if (fds[k] < 0) {
                        snprintf(msg, n, "connect %s: %s", x->sock, strerror(-fds[k]));
                        ret = 1;
                        break;
                }
                int rc = raw_call(fds[k], get_info_msg, buf, sizeof(buf), ITEST_REPLY_TIMEOUT_MS);
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
                assert_running(mine[i], pid);
        }
        for (int i = 0; i < 16; i++)
                assert_refused(itest_connect(d));

        struct uid_flood x = { .sock = d->sock, .limit = LIMIT };
        char msg[1024];
        ck_assert_msg(itest_run_as(OTHER, as_uid_flood, &x, msg, sizeof(msg)) == 0, "as uid %d: %s", OTHER, msg);

        for (int i = 0; i < LIMIT; i++)
                assert_running(mine[i], pid);
        /* One goes: its slot comes back, one slot only. */
        itest_conn_close(mine[0]);
        mine[0] = connect_served(d, 5000);
        assert_refused(itest_connect(d));
        for (int i = 0; i < LIMIT; i++)
                assert_running(mine[i], pid);
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
        assert_get_info(c);
        t0 = itest_now_ms();
        itest_assert_eof(c, 5000);
        took = itest_now_ms() - t0;
        ck_assert_msg(took >= IDLE_MS - 50, "closed %.0f ms after its last reply", took);

        /* A request every 150 ms keeps it open well past the timeout. */
        c = itest_connect(d);
        t0 = itest_now_ms();
        for (int k = 0; k < 6; k++) {
                assert_get_info(c);
                cJSON *j = NULL;
                int rc = itest_recv_raw(c, IDLE_MS / 2, &j);
                ck_assert_msg(rc == -ETIMEDOUT, "an active connection: %s after %.0f ms",
                              rc == -ENODATA ? "closed" : rc == 0 ? itest_dump(j) : strerror(-rc),
                              itest_now_ms() - t0);
        }
        assert_get_info(c);
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
        assert_serving(d);
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
        send_pid_call(op, CUDACKPT_METHOD_CHECKPOINT, pid);
        itest_await_in_flight(q, pid, "Checkpoint", 2000);
        /* Queued behind the Checkpoint on another connection. */
        send_pid_call(waiter, CUDACKPT_METHOD_UNLOCK, pid);

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
        assert_serving(d);
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
                assert_running(other, pid);
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
        send_pid_call(worker, CUDACKPT_METHOD_SUSPEND, big);
        hog_until_full(d, other, get_info_msg, N, check_info, pid, "GetInfo");
        itest_assert_state(itest_recv(worker), big, "checkpointed");
        send_pid_call(worker, CUDACKPT_METHOD_RESUME, big);
        hog_until_full(d, other, get_state, N, check_running, pid, "GetState");
        itest_assert_state(itest_recv(worker), big, "running");
        assert_running(other, pid);
        assert_serving(d);
}
END_TEST

/* ---- 5: garbage ---------------------------------------------------------- */

enum garbage_expect {
        GARBAGE_CLOSE, /* InvalidRequest, then the connection is closed */
        GARBAGE_ERROR, /* the given error; the connection stays usable */
        GARBAGE_ANY,   /* some error; closed after InvalidRequest, else usable */
};

struct garbage {
        const char *what;
        const char *bytes;
        size_t len; /* the NUL terminator(s) included */
        enum garbage_expect expect;
        const char *error;     /* GARBAGE_ERROR */
        const char *parameter; /* InvalidParameter: the name expected */
};

static void throw_garbage(struct itest_daemon *d, pid_t pid, const struct garbage *g)
{
        struct itest_conn *c = itest_connect(d);
        int rc = itest_send_bytes(c, g->bytes, g->len, false);
        ck_assert_msg(rc == 0 || rc == -EPIPE || rc == -ECONNRESET, "%s: send: %s", g->what, strerror(-rc));
        cJSON *j = NULL;
        rc = itest_recv_raw(c, ITEST_REPLY_TIMEOUT_MS, &j);
        ck_assert_msg(!itest_daemon_exited(d), "%s: the daemon died", g->what);
        ck_assert_msg(rc == 0, "%s: no error reply: %s", g->what, rc == -ENODATA ? "closed" : strerror(-rc));
        const char *e = itest_error(j);
        ck_assert_msg(e, "%s: expected an error, got %s", g->what, itest_dump(j));
        bool close = g->expect == GARBAGE_CLOSE ||
                     (g->expect == GARBAGE_ANY && strcmp(e, CUDACKPT_ERROR_INVALID_REQUEST) == 0);
        if (g->expect == GARBAGE_CLOSE)
                ck_assert_msg(strcmp(e, CUDACKPT_ERROR_INVALID_REQUEST) == 0, "%s: expected InvalidRequest, got %s",
                              g->what, itest_dump(j));
        if (g->expect == GARBAGE_ERROR)
                ck_assert_msg(strcmp(e, g->error) == 0, "%s: expected %s, got %s", g->what, g->error, itest_dump(j));
        if (g->parameter) {
                const char *p = itest_str(j, "parameter");
                ck_assert_msg(p && strcmp(p, g->parameter) == 0, "%s: expected parameter %s in %s", g->what,
                              g->parameter, itest_dump(j));
        }
        if (close) {
                /* One reply only, however many messages followed. */
                rc = itest_recv_raw(c, 5000, &j);
                ck_assert_msg(rc == -ENODATA, "%s: after InvalidRequest expected the connection closed, got %s",
                              g->what, rc == 0 ? itest_dump(j) : strerror(-rc));
        } else {
                assert_running(c, pid);
        }
        itest_conn_close(c);
        assert_serving(d);
}

static uint32_t xorshift(uint32_t *s)
{
        uint32_t x = *s;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        return *s = x;
}

/* n copies of s, then tail, NUL-terminated (owned by the harness). */
static char *repeat(const char *head, const char *s, size_t n, const char *tail)
{
        size_t hl = strlen(head), sl = strlen(s), tl = strlen(tail);
        char *b = itest_keep(malloc(hl + sl * n + tl + 1));
        ck_assert(b);
        memcpy(b, head, hl);
        for (size_t i = 0; i < n; i++)
                memcpy(b + hl + sl * i, s, sl);
        memcpy(b + hl + sl * n, tail, tl + 1);
        return b;
}

#define MAX_GARBAGE 128

struct garbage_list {
        struct garbage g[MAX_GARBAGE];
        size_t n;
};

static void add(struct garbage_list *l, const char *what, const char *bytes, size_t len, enum garbage_expect expect,
                const char *error, const char *parameter)
{
        ck_assert(l->n < MAX_GARBAGE);
        l->g[l->n++] = (struct garbage){ what, bytes, len, expect, error, parameter };
}

/* A text message (its NUL counted). */
static void add_text(struct garbage_list *l, const char *what, const char *text, enum garbage_expect expect,
                     const char *error, const char *parameter)
{
        add(l, what, text, strlen(text) + 1, expect, error, parameter);
}

/* A call of method with parameters params (a JSON text), expected to fail
 * with InvalidParameter naming `parameter`. */
static void add_bad_param(struct garbage_list *l, const char *method, const char *params, const char *parameter)
{
        add_text(l, itest_strdupf("%s %.200s", method, params),
                 itest_strdupf("{\"method\":\"%s\",\"parameters\":%s}", method, params), GARBAGE_ERROR,
                 CUDACKPT_VARLINK_INVALID_PARAMETER, parameter);
}

/* Random bytes with NULs, a lone NUL, invalid UTF-8, deep nesting, extreme
 * numbers, duplicated keys, 10 KiB names: each gets an error reply (and
 * the connection closed where protocol.md says so), never a crash; after
 * each, a fresh connection is served. */
START_TEST(garbage)
{
        /* Room for nesting deeper than any parser limit. */
        struct itest_daemon_opts o = { .config_json = "{\"max_message_bytes\":1048576}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        pid_t pid = itest_sim_target();
        struct garbage_list *l = itest_keep(calloc(1, sizeof(*l)));
        ck_assert(l);
        const char *gs = CUDACKPT_METHOD_GET_STATE;

        /* Random binary, NULs in it: the first message is refused, the
         * connection closed, the rest never read. */
        for (uint32_t seed = 1; seed <= 8; seed++) {
                uint32_t s = seed * 2654435761u;
                size_t len = 4096;
                char *b = itest_keep(malloc(len));
                ck_assert(b);
                for (size_t i = 0; i < len; i++)
                        b[i] = (char)(xorshift(&s) >> 24);
                b[len - 1] = '\0';
                add(l, itest_strdupf("random bytes, seed %u", seed), b, len, GARBAGE_CLOSE, NULL, NULL);
        }
        /* Random text over the JSON alphabet. */
        static const char alphabet[] = "{}[]\":,0123456789.eE+-tfnrul \\/uabc";
        for (uint32_t seed = 1; seed <= 24; seed++) {
                uint32_t s = seed * 40503u + 7;
                size_t len = 1 + xorshift(&s) % 200;
                char *b = itest_keep(malloc(len + 1));
                ck_assert(b);
                for (size_t i = 0; i < len; i++)
                        b[i] = alphabet[xorshift(&s) % (sizeof(alphabet) - 1)];
                b[len] = '\0';
                add(l, itest_strdupf("JSON-alphabet soup, seed %u: %s", seed, b), b, len + 1, GARBAGE_ANY, NULL, NULL);
        }
        add(l, "a lone NUL", "", 1, GARBAGE_CLOSE, NULL, NULL);
        char *nuls = itest_keep(calloc(1, 1000));
        ck_assert(nuls);
        add(l, "1000 NULs", nuls, 1000, GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "white space only", " \t\r\n ", GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "garbage after the object", "{\"method\":\"" GET_INFO "\"}}", GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "a comment", "/**/{\"method\":\"" GET_INFO "\"}", GARBAGE_CLOSE, NULL, NULL);

        /* Invalid UTF-8 in every place a string goes: not a Varlink message. */
        add_text(l, "invalid UTF-8 in the method name",
                 itest_strdupf("{\"method\":\"%s\xff\",\"parameters\":{\"pid\":%d}}", gs, (int)pid), GARBAGE_CLOSE,
                 NULL, NULL);
        add_text(l, "a UTF-8 sequence cut at the end of the method name",
                 itest_strdupf("{\"method\":\"%s\xe2\x82\",\"parameters\":{\"pid\":%d}}", gs, (int)pid),
                 GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "invalid UTF-8 in the interface name",
                 "{\"method\":\"io.cudackpt.Proc\xc3\x28ss.GetState\",\"parameters\":{\"pid\":1}}", GARBAGE_CLOSE,
                 NULL, NULL);
        add_text(l, "an overlong encoding in a parameter name",
                 itest_strdupf("{\"method\":\"%s\",\"parameters\":{\"pid\":%d,\"\xc0\xaf\":1}}", gs, (int)pid),
                 GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "a UTF-8-encoded surrogate as a key of the call",
                 "{\"method\":\"" GET_INFO "\",\"\xed\xa0\x80\":1}", GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "invalid UTF-8 as the pid",
                 itest_strdupf("{\"method\":\"%s\",\"parameters\":{\"pid\":\"\xff\"}}", gs), GARBAGE_CLOSE,
                 NULL, NULL);
        add_text(l, "invalid UTF-8 in a GPU UUID",
                 itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_RESTORE "\",\"parameters\":{\"pid\":%d,\"gpu_mapping\":"
                               "{\"GPU-\xff\xfe\":\"" ITEST_GPU0 "\"}}}",
                               (int)pid),
                 GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "a lone surrogate escape",
                 itest_strdupf("{\"method\":\"%s\\ud800\",\"parameters\":{\"pid\":%d}}", gs, (int)pid),
                 GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "a lone low surrogate escape",
                 itest_strdupf("{\"method\":\"%s\",\"parameters\":{\"pid\":%d,\"\\udfff\":1}}", gs, (int)pid),
                 GARBAGE_CLOSE, NULL, NULL);

        /* Nesting far deeper than any parser allows, and deep but allowed. */
        add_text(l, "100000 [", repeat("", "[", 100000, ""), GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "100000 [ closed again", repeat(repeat("", "[", 100000, ""), "]", 100000, ""), GARBAGE_CLOSE,
                 NULL, NULL);
        add_text(l, "100000 nested objects", repeat("", "{\"a\":", 100000, "1"), GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "100000 [ as the parameters",
                 repeat("{\"method\":\"" CUDACKPT_METHOD_GET_STATE "\",\"parameters\":", "[", 100000, ""),
                 GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "100000 [ as the method", repeat("{\"method\":", "[", 100000, ""), GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "the pid nested 500 deep",
                 repeat(repeat("{\"method\":\"" CUDACKPT_METHOD_GET_STATE "\",\"parameters\":{\"pid\":", "[", 500, "1"),
                        "]", 500, "}}"),
                 GARBAGE_ERROR, CUDACKPT_VARLINK_INVALID_PARAMETER, "pid");
        add_text(l, "an unknown parameter nested 900 deep",
                 repeat(repeat(itest_strdupf("{\"method\":\"%s\",\"parameters\":{\"pid\":%d,\"x\":", gs, (int)pid),
                               "{\"x\":", 900, "1"),
                        "}", 900, "}}"),
                 GARBAGE_ERROR, CUDACKPT_VARLINK_INVALID_PARAMETER, "x");

        /* Numbers at and past every edge. */
        static const char *const bad_pids[] = {
                "1e309", "-1e309", "-0", "-0.0", "0.5", "1.5", "2147483648", "2147483647.5", "1e-400", "4.9e-324",
                "99999999999999999999999999", "-2147483649", "1E400", NULL,
        };
        for (size_t i = 0; bad_pids[i]; i++)
                add_bad_param(l, gs, itest_strdupf("{\"pid\":%s}", bad_pids[i]), "pid");
        add_bad_param(l, gs, repeat("{\"pid\":1", "0", 5000, "}"), "pid");
        add_bad_param(l, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"timeout_ms\":1e309}", (int)pid),
                      "timeout_ms");
        add_bad_param(l, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"timeout_ms\":-1e309}", (int)pid),
                      "timeout_ms");
        add_bad_param(l, gs, itest_strdupf("{\"pid\":%d,\"start_time\":1e309}", (int)pid), "start_time");
        add_bad_param(l, gs, itest_strdupf("{\"pid\":%d,\"start_time\":18446744073709551616}", (int)pid), "start_time");

        /* Duplicated keys: in the call object the connection closes, in
         * the parameters it is an InvalidParameter. */
        add_text(l, "method twice", "{\"method\":\"" GET_INFO "\",\"method\":\"" GET_INFO "\"}", GARBAGE_CLOSE,
                 NULL, NULL);
        add_text(l, "method twice, the second one different",
                 itest_strdupf("{\"method\":\"%s\",\"method\":\"" CUDACKPT_METHOD_LOCK
                               "\",\"parameters\":{\"pid\":%d}}",
                               gs, (int)pid),
                 GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "parameters twice",
                 itest_strdupf("{\"method\":\"%s\",\"parameters\":{\"pid\":%d},\"parameters\":{\"pid\":1}}", gs,
                               (int)pid),
                 GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "oneway twice", "{\"method\":\"" GET_INFO "\",\"oneway\":false,\"oneway\":true}", GARBAGE_CLOSE,
                 NULL, NULL);
        add_text(l, "Method in another case", "{\"Method\":\"" GET_INFO "\"}", GARBAGE_CLOSE, NULL, NULL);
        add_bad_param(l, gs, itest_strdupf("{\"pid\":%d,\"pid\":1}", (int)pid), "pid");
        add_bad_param(l, gs, itest_strdupf("{\"pid\":%d,\"pid\":null}", (int)pid), "pid");
        add_bad_param(l, CUDACKPT_METHOD_LOCK,
                      itest_strdupf("{\"pid\":%d,\"timeout_ms\":1,\"timeout_ms\":2}", (int)pid), "timeout_ms");

        /* Names of 10 KiB. */
        add_text(l, "a method name of 10 KiB", repeat("{\"method\":\"io.cudackpt.Process.", "A", 10240, "\"}"),
                 GARBAGE_ERROR, CUDACKPT_VARLINK_METHOD_NOT_FOUND, NULL);
        add_text(l, "an interface name of 10 KiB", repeat("{\"method\":\"", "x", 10240, ".GetState\"}"), GARBAGE_ERROR,
                 CUDACKPT_VARLINK_INTERFACE_NOT_FOUND, NULL);
        add_text(l, "a method name of 10 KiB of dots", repeat("{\"method\":\"", ".", 10240, "\"}"), GARBAGE_CLOSE, NULL,
                 NULL);
        add_text(l, "a method name of 10 KiB of multibyte characters",
                 repeat("{\"method\":\"io.cudackpt.Process.", "\xc3\xa9", 5120, "\"}"), GARBAGE_ERROR,
                 CUDACKPT_VARLINK_METHOD_NOT_FOUND, NULL);
        add_text(l, "a parameter name of 10 KiB",
                 repeat(itest_strdupf("{\"method\":\"%s\",\"parameters\":{\"pid\":%d,\"", gs, (int)pid), "k", 10240,
                        "\":1}}"),
                 GARBAGE_ERROR, CUDACKPT_VARLINK_INVALID_PARAMETER, NULL);
        add_text(l, "an empty method name", "{\"method\":\"io.cudackpt.Process.\"}", GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "an empty interface name", "{\"method\":\".GetState\"}", GARBAGE_CLOSE, NULL, NULL);

        for (size_t i = 0; i < l->n; i++)
                throw_garbage(d, pid, &l->g[i]);
        /* None of it acted on the process. */
        assert_running(itest_connect(d), pid);
}
END_TEST

/* Error replies that name what the client sent (MethodNotFound,
 * InterfaceNotFound, InvalidParameter, InvalidGpuMapping) are valid UTF-8
 * even when the client's names were not.  Refusing such a message
 * (InvalidRequest) or escaping the echo both pass.  (Until proto_parse_call()
 * refused messages that are not UTF-8, the client's bytes were copied into
 * the reply: no JSON (RFC 8259 8.1), and a strict client such as varlinkctl
 * could not read it.) */
START_TEST(replies_are_utf8)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_sim_target();
        const char *const msgs[] = {
                itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_GET_STATE "\xff\",\"parameters\":{\"pid\":%d}}",
                              (int)pid),
                "{\"method\":\"io.cudackpt.Proc\xc3\x28ss.GetState\",\"parameters\":{\"pid\":1}}",
                itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_GET_STATE
                              "\",\"parameters\":{\"pid\":%d,\"\xc0\xaf\":1}}",
                              (int)pid),
                itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_RESTORE "\",\"parameters\":{\"pid\":%d,\"gpu_mapping\":"
                              "{\"GPU-\xff\xfe\":\"" ITEST_GPU0 "\"}}}",
                              (int)pid),
                "{\"method\":\"org.varlink.service.GetInterfaceDescription\","
                "\"parameters\":{\"interface\":\"a.\xf8\"}}",
                NULL,
        };
        for (size_t i = 0; msgs[i]; i++) {
                struct itest_conn *c = itest_connect(d);
                itest_send(c, msgs[i]);
                cJSON *j = NULL;
                int rc = itest_recv_raw(c, ITEST_REPLY_TIMEOUT_MS, &j);
                ck_assert_msg(rc == 0 || rc == -ENODATA, "message %zu: %s", i, strerror(-rc));
                if (rc == 0) {
                        ck_assert_msg(itest_error(j), "message %zu: expected an error, got %s", i, itest_dump(j));
                        ck_assert_msg(json_utf8_valid(j), "message %zu: the %s reply is not valid UTF-8: %s", i,
                                      itest_error(j), itest_dump(j));
                }
                itest_conn_close(c);
        }
        assert_serving(d);
}
END_TEST

/* "\u0000" in any string of a message is InvalidRequest and closes the
 * connection (protocol.md): cJSON's C strings would end at the NUL, so
 * "io.cudackpt.Process.Lock\u0000.GetState" (which ends in .GetState for
 * anyone who filters or logs calls by name) would lock the process, a
 * parameter name "pid\u0000x" would be "pid".  An escaped backslash
 * followed by the text u0000 is no NUL and is not refused.  (Once a bug:
 * proto_parse_call() now refuses such messages.) */
START_TEST(nul_escape)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_sim_target();
        const char *const msgs[] = {
                itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_LOCK "\\u0000.GetState\",\"parameters\":{\"pid\":%d}}",
                              (int)pid),
                itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_LOCK "\",\"parameters\":{\"pid\":%d,\"pid\\u0000x\":1}}",
                              (int)pid),
                itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_RESUME "\",\"parameters\":{\"pid\":%d,\"gpu_mapping\":"
                              "{\"" ITEST_GPU0 "\\u0000\":\"" ITEST_GPU0 "\"}}}",
                              (int)pid),
                "{\"method\":\"org.varlink.service.GetInterfaceDescription\","
                "\"parameters\":{\"interface\":\"" CUDACKPT_INTERFACE "\\u0000x\"}}",
                "{\"method\":\"" GET_INFO "\\u0000\"}",
                NULL,
        };
        for (size_t i = 0; msgs[i]; i++) {
                struct itest_conn *c = itest_connect(d);
                itest_send(c, msgs[i]);
                cJSON *j = itest_recv(c);
                ck_assert_msg(itest_error(j) && strcmp(itest_error(j), CUDACKPT_ERROR_INVALID_REQUEST) == 0,
                              "%s: expected InvalidRequest, got %s", msgs[i], itest_dump(j));
                itest_assert_eof(c, 5000);
        }
        /* Not a NUL: a backslash, then the text u0000. */
        struct itest_conn *c = itest_connect(d);
        cJSON *j = itest_call(c, CUDACKPT_METHOD_GET_STATE,
                              itest_strdupf("{\"pid\":%d,\"x\\\\u0000\":1}", (int)pid));
        itest_assert_error(j, CUDACKPT_VARLINK_INVALID_PARAMETER);
        itest_assert_str(j, "parameter", "x\\u0000");
        assert_running(c, pid);
}
END_TEST

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
        send_pid_call(w, CUDACKPT_METHOD_SUSPEND, busy);
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

/* ---- 7: operator groups and read-only access ----------------------------- */

/* A member of an operator group may act on another user's process, not
 * on root's (any of its three uids 0) nor on the daemon; without the group
 * (another group, or none) the same calls are refused. */
START_TEST(operator_group)
{
        if (itest_need_root())
                return;
        struct itest_daemon_opts o = { .config_json = itest_strdupf("{\"operator_groups\":[%d]}", OPERATOR_GID) };
        struct itest_daemon *d = itest_daemon_start(&o);
        pid_t user = itest_target_as(OTHER + 1, "CUDACKPT_SIM=1", NULL);
        pid_t root = itest_sim_target();
        pid_t setuid_root = itest_target_uids(OTHER + 1, OTHER + 1, 0);
        const char *denied = CUDACKPT_ERROR_PERMISSION_DENIED;

        const struct step member[] = {
                { CUDACKPT_METHOD_GET_STATE, user, NULL, "running", NULL },
                { CUDACKPT_METHOD_LOCK, user, NULL, "locked", NULL },
                { CUDACKPT_METHOD_UNLOCK, user, NULL, "running", NULL },
                { CUDACKPT_METHOD_SUSPEND, user, NULL, "checkpointed", NULL },
                { CUDACKPT_METHOD_RESUME, user, NULL, "running", NULL },
                { CUDACKPT_METHOD_LOCK, root, denied, NULL, NULL },
                { CUDACKPT_METHOD_GET_STATE, root, denied, NULL, NULL },
                { CUDACKPT_METHOD_SUSPEND, root, denied, NULL, NULL },
                { CUDACKPT_METHOD_LOCK, setuid_root, denied, NULL, NULL },
                { CUDACKPT_METHOD_LOCK, d->pid, denied, NULL, NULL },
        };
        const gid_t op_groups[] = { NOT_OPERATOR_GID, OPERATOR_GID };
        run_script(OTHER, op_groups, 2, d, member, N_STEPS(member));

        const struct step stranger[] = {
                { CUDACKPT_METHOD_LOCK, user, denied, NULL, NULL },
                { CUDACKPT_METHOD_GET_STATE, user, denied, NULL, NULL },
                { CUDACKPT_METHOD_SUSPEND, user, denied, NULL, NULL },
                { CUDACKPT_METHOD_LOCK, root, denied, NULL, NULL },
        };
        const gid_t other_group[] = { NOT_OPERATOR_GID };
        run_script(OTHER, other_group, 1, d, stranger, N_STEPS(stranger));
        run_script(OTHER, NULL, 0, d, stranger, N_STEPS(stranger));

        struct itest_conn *c = itest_connect(d);
        assert_running(c, user);
        assert_running(c, root);
        assert_running(c, setuid_root);
}
END_TEST

/* operators_may_act_on_root: operators act on root's processes too, still
 * never on the daemon; others still may not. */
START_TEST(operator_may_act_on_root)
{
        if (itest_need_root())
                return;
        /* With CUDACKPT_SIM=1 the simulator would lock the daemon itself if
         * asked to: the refusal must come from the daemon. */
        static const char *const env[] = { "CUDACKPT_SIM=1", NULL };
        struct itest_daemon_opts o = {
                .config_json = itest_strdupf("{\"operator_groups\":[%d],\"operators_may_act_on_root\":true}",
                                             OPERATOR_GID),
                .env = env,
        };
        struct itest_daemon *d = itest_daemon_start(&o);
        pid_t root = itest_sim_target();
        pid_t setuid_root = itest_target_uids(OTHER + 1, OTHER + 1, 0);
        const char *denied = CUDACKPT_ERROR_PERMISSION_DENIED;
        const struct step member[] = {
                { CUDACKPT_METHOD_LOCK, root, NULL, "locked", NULL },
                { CUDACKPT_METHOD_UNLOCK, root, NULL, "running", NULL },
                { CUDACKPT_METHOD_LOCK, setuid_root, NULL, "locked", NULL },
                { CUDACKPT_METHOD_UNLOCK, setuid_root, NULL, "running", NULL },
                { CUDACKPT_METHOD_LOCK, d->pid, denied, NULL, NULL },
                { CUDACKPT_METHOD_SUSPEND, d->pid, denied, NULL, NULL },
        };
        const gid_t op_groups[] = { OPERATOR_GID };
        run_script(OTHER, op_groups, 1, d, member, N_STEPS(member));
        const struct step stranger[] = {
                { CUDACKPT_METHOD_LOCK, root, denied, NULL, NULL },
                { CUDACKPT_METHOD_GET_STATE, root, denied, NULL, NULL },
        };
        run_script(OTHER, NULL, 0, d, stranger, N_STEPS(stranger));
        struct itest_conn *c = itest_connect(d);
        assert_running(c, root);
        assert_running(c, setuid_root);
}
END_TEST

/* read_only_unrestricted: anyone may GetState and GetRestoreThreadId any
 * process, also while an operation runs on it (answered from the running
 * operation), but no operation. */
START_TEST(read_only_unrestricted)
{
        if (itest_need_root())
                return;
        struct itest_daemon_opts o = { .config_json = "{\"read_only_unrestricted\":true}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        /* A checkpoint of about 2 s. */
        pid_t root = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=2048", "CUDACKPT_SIM_CKPT_MIBPS=1024", NULL);
        const char *denied = CUDACKPT_ERROR_PERMISSION_DENIED;
        const struct step stranger[] = {
                { CUDACKPT_METHOD_GET_STATE, root, NULL, "running", NULL },
                { CUDACKPT_METHOD_GET_RESTORE_THREAD_ID, root, NULL, NULL, NULL },
                { CUDACKPT_METHOD_LOCK, root, denied, NULL, NULL },
                { CUDACKPT_METHOD_SUSPEND, root, denied, NULL, NULL },
                { CUDACKPT_METHOD_CHECKPOINT, root, denied, NULL, NULL },
                { CUDACKPT_METHOD_UNLOCK, root, denied, NULL, NULL },
                { CUDACKPT_METHOD_RESTORE, root, denied, NULL, NULL },
                { CUDACKPT_METHOD_RESUME, root, denied, NULL, NULL },
        };
        run_script(OTHER, NULL, 0, d, stranger, N_STEPS(stranger));

        struct itest_conn *c = itest_connect(d);
        struct itest_conn *q = itest_connect(d);
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_LOCK, root), root, "locked");
        send_pid_call(c, CUDACKPT_METHOD_CHECKPOINT, root);
        itest_await_in_flight(q, root, "Checkpoint", 2000);
        const struct step during[] = {
                { CUDACKPT_METHOD_GET_STATE, root, NULL, "locked", "Checkpoint" },
        };
        run_script(OTHER, NULL, 0, d, during, N_STEPS(during));
        ck_assert_msg(!itest_conn_readable(c), "the 2 s checkpoint ended before the stranger's calls");
        itest_assert_state(itest_recv(c), root, "checkpointed");
}
END_TEST

/* Without read_only_unrestricted, GetState on another user's process
 * while an operation runs on it (answered from the running operation,
 * without the driver) is refused too, and leaks neither state nor
 * in_flight. */
START_TEST(stranger_get_state_during_operation)
{
        if (itest_need_root())
                return;
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t root = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=2048", "CUDACKPT_SIM_CKPT_MIBPS=1024", NULL);
        struct itest_conn *c = itest_connect(d);
        struct itest_conn *q = itest_connect(d);
        send_pid_call(c, CUDACKPT_METHOD_SUSPEND, root);
        await_in_flight_state(q, root, "Suspend", "locked", 2000);
        const struct step during[] = {
                { CUDACKPT_METHOD_GET_STATE, root, CUDACKPT_ERROR_PERMISSION_DENIED, NULL, NULL },
        };
        run_script(OTHER, NULL, 0, d, during, N_STEPS(during));
        ck_assert_msg(!itest_conn_readable(c), "the 2 s checkpoint ended before the stranger's calls");
        itest_assert_state(itest_recv(c), root, "checkpointed");
}
END_TEST

/* A user with no right to a process cannot fill its queue: while a long
 * Checkpoint runs, a stranger sends more requests for the process than
 * max_queue_per_pid (64) from as many connections; the requests of those
 * who may act on it are still taken.  (Until the dispatcher refused callers
 * at once from what the running operation learnt of the process, doomed
 * requests were queued against max_queue_per_pid and judged only when they
 * ran, so the process's owner got QueueFull.) */
START_TEST(stranger_cannot_fill_the_queue)
{
        if (itest_need_root())
                return;
        enum { FLOOD = 70, PER_PID = 64 };
        struct itest_daemon *d = itest_daemon_start_default();
        /* Another user's process, with a checkpoint of about 4 s. */
        pid_t pid = itest_target_as(OTHER + 1, "CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=4096",
                                    "CUDACKPT_SIM_CKPT_MIBPS=1024", NULL);
        struct itest_conn *op = itest_connect(d);
        struct itest_conn *q = itest_connect(d);
        itest_assert_state(itest_call_pid(op, CUDACKPT_METHOD_LOCK, pid), pid, "locked");
        send_pid_call(op, CUDACKPT_METHOD_CHECKPOINT, pid);
        itest_await_in_flight(q, pid, "Checkpoint", 2000);

        /* The stranger's flood: at least FLOOD - (PER_PID - 1) answers come
         * at once, refusals of one kind or the other. */
        char *msg = itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_UNLOCK "\",\"parameters\":{\"pid\":%d}}", (int)pid);
        struct client_seen seen;
        pid_t stranger = spawn_clients(OTHER, d->sock, msg, FLOOD, FLOOD - (PER_PID - 1), &seen);
        ck_assert_msg(seen.replies >= FLOOD - (PER_PID - 1) && seen.other == 0,
                      "the stranger's %d Unlocks: %d answered at once (%d QueueFull, %d PermissionDenied, %d other)",
                      FLOOD, seen.replies, seen.queue_full, seen.denied, seen.other);

        /* Root's request is taken (and answered once the Checkpoint is done). */
        cJSON *j = itest_call_pid(q, CUDACKPT_METHOD_UNLOCK, pid);
        ck_assert_msg(!itest_error(j) || strcmp(itest_error(j), CUDACKPT_ERROR_QUEUE_FULL) != 0,
                      "root's Unlock of pid %d got %s: uid %d, who may not act on it, filled its queue (%d of %d "
                      "Unlocks answered at once: %d QueueFull, %d PermissionDenied)",
                      (int)pid, itest_dump(j), OTHER, seen.replies, FLOOD, seen.queue_full, seen.denied);
        itest_assert_error(j, CUDACKPT_ERROR_INVALID_STATE);
        itest_assert_str(j, "state", "checkpointed");
        kill_clients(stranger);
        itest_assert_state(itest_recv(op), pid, "checkpointed");
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
        pid_t tid = other_thread(d->pid);
        for (size_t i = 0; methods[i]; i++) {
                cJSON *j = itest_call_pid(c, methods[i], tid);
                ck_assert_msg(itest_error(j) && strcmp(itest_error(j), CUDACKPT_ERROR_PERMISSION_DENIED) == 0,
                              "%s on thread %d of the daemon (pid %d): expected PermissionDenied, got %s", methods[i],
                              (int)tid, (int)d->pid, itest_dump(j));
        }
        assert_serving(d);
}
END_TEST

/* A thread id means its process, but has a queue of its own (protocol.md):
 * a GetState by thread id while a Checkpoint by pid runs is answered by the
 * driver, with the state the process is in and no in_flight, and the
 * Checkpoint goes on unharmed. */
START_TEST(thread_id_has_its_own_queue)
{
        struct itest_daemon *d = itest_daemon_start_default();
        const char *argv[] = { "itest-threads", "--itest-threads", NULL };
        static const char *const env[] = { "CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=2048",
                                           "CUDACKPT_SIM_CKPT_MIBPS=1024", NULL };
        pid_t pid = itest_target_exec((uid_t)-1, itest_self_exe(), argv, env);
        pid_t tid = other_thread(pid);
        struct itest_conn *op = itest_connect(d);
        struct itest_conn *q = itest_connect(d);
        cJSON *j = itest_call_pid(q, CUDACKPT_METHOD_GET_STATE, tid);
        itest_assert_ok(j);
        itest_assert_str(j, "state", "running");
        itest_assert_state(itest_call_pid(op, CUDACKPT_METHOD_LOCK, pid), pid, "locked");
        send_pid_call(op, CUDACKPT_METHOD_CHECKPOINT, pid);
        itest_await_in_flight(q, pid, "Checkpoint", 2000);
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
        const char *argv[] = { "itest-threads", "--itest-threads", NULL };
        /* A checkpoint of about 2 s, a restore of about 0.5 s. */
        static const char *const env[] = { "CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=2048",
                                           "CUDACKPT_SIM_CKPT_MIBPS=1024", NULL };
        pid_t pid = itest_target_exec((uid_t)-1, itest_self_exe(), argv, env);
        pid_t tid = other_thread(pid);
        struct itest_conn *op = itest_connect(d);
        struct itest_conn *by_tid = itest_connect(d);
        struct itest_conn *q = itest_connect(d);
        itest_assert_state(itest_call_pid(op, CUDACKPT_METHOD_LOCK, pid), pid, "locked");
        send_pid_call(op, CUDACKPT_METHOD_CHECKPOINT, pid);
        itest_await_in_flight(q, pid, "Checkpoint", 2000);
        send_pid_call(by_tid, CUDACKPT_METHOD_RESTORE, tid);
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

/* ---- 8: a client killed mid-operation ------------------------------------ */

/* SIGKILL of a client while its Suspend is in the lock step and in the
 * checkpoint step: the daemon carries the Suspend through (a Checkpoint
 * queued behind it finds the process checkpointed) and goes on serving. */
START_TEST(client_killed_mid_suspend)
{
        struct itest_daemon *d = itest_daemon_start_default();
        /* Lock waits for a 600 ms kernel, then a 0.25 s checkpoint; and a
         * fast lock, then a 1 s checkpoint. */
        pid_t targets[2] = {
                itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_BUSY_MS=600", "CUDACKPT_SIM_MEM_MIB=512", NULL),
                itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=2048", NULL),
        };
        static const char *const step_state[2] = { "running", "locked" };
        for (int i = 0; i < 2; i++) {
                pid_t pid = targets[i];
                char *msg = itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_SUSPEND "\",\"parameters\":{\"pid\":%d,"
                                          "\"timeout_ms\":0}}",
                                          (int)pid);
                pid_t client = spawn_clients((uid_t)-1, d->sock, msg, 1, 0, NULL);
                struct itest_conn *q = itest_connect(d);
                await_in_flight_state(q, pid, "Suspend", step_state[i], 2000);
                kill_clients(client);

                struct itest_conn *after = itest_connect(d);
                cJSON *j = itest_call_pid(after, CUDACKPT_METHOD_CHECKPOINT, pid);
                itest_assert_error(j, CUDACKPT_ERROR_INVALID_STATE);
                itest_assert_str(j, "state", "checkpointed");
                j = itest_call_pid(q, CUDACKPT_METHOD_GET_STATE, pid);
                itest_assert_state(j, pid, "checkpointed");
                itest_assert_absent(j, "in_flight");
                itest_assert_state(itest_call_pid(after, CUDACKPT_METHOD_RESUME, pid), pid, "running");
        }
        assert_serving(d);
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
        assert_get_info(idle);
        struct itest_conn *op = itest_connect(d);
        struct itest_conn *q = itest_connect(d);
        struct itest_conn *queued = itest_connect(d);
        itest_assert_state(itest_call_pid(op, CUDACKPT_METHOD_LOCK, pid), pid, "locked");
        send_pid_call(op, CUDACKPT_METHOD_CHECKPOINT, pid);
        send_pid_call(op, CUDACKPT_METHOD_UNLOCK, pid);
        itest_await_in_flight(q, pid, "Checkpoint", 2000);
        send_pid_call(queued, CUDACKPT_METHOD_UNLOCK, pid);
        /* The daemon reads queued's request before q's next one. */
        itest_assert_str(itest_call_pid(q, CUDACKPT_METHOD_GET_STATE, pid), "in_flight", "Checkpoint");

        ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
        itest_assert_eof(idle, 5000);
        itest_assert_eof(q, 5000);
        itest_assert_error(itest_recv_within(queued, 5000), CUDACKPT_ERROR_SHUTTING_DOWN);
        itest_assert_eof(queued, 5000);
        int fd = raw_connect(d->sock);
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
 * with a non-zero status, without waiting for the driver. */
START_TEST(sigterm_twice)
{
        struct itest_daemon *d = itest_daemon_start_default();
        /* A checkpoint of about 4 s. */
        pid_t pid = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=4096", "CUDACKPT_SIM_CKPT_MIBPS=1024", NULL);
        struct itest_conn *idle = itest_connect(d);
        assert_get_info(idle);
        struct itest_conn *op = itest_connect(d);
        struct itest_conn *q = itest_connect(d);
        send_pid_call(op, CUDACKPT_METHOD_SUSPEND, pid);
        await_in_flight_state(q, pid, "Suspend", "locked", 2000);

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

static Suite *attacks_suite(void)
{
        Suite *s = suite_create("integration.attacks");
        TCase *tc = itest_tcase(s, "attacks", 30);
        tcase_add_test(tc, flood_max_connections);
        tcase_add_test(tc, flood_max_connections_per_uid);
        tcase_add_test(tc, idle_connections_closed);
        tcase_add_test(tc, idle_timeout_spares_requests_in_flight);
        tcase_add_test(tc, unread_replies_disconnect);
        tcase_add_test(tc, garbage);
        tcase_add_test(tc, replies_are_utf8);
        tcase_add_test(tc, nul_escape);
        tcase_add_test(tc, bytewise_interleaved);
        tcase_add_test(tc, operator_group);
        tcase_add_test(tc, operator_may_act_on_root);
        tcase_add_test(tc, read_only_unrestricted);
        tcase_add_test(tc, stranger_get_state_during_operation);
        tcase_add_test(tc, stranger_cannot_fill_the_queue);
        tcase_add_test(tc, daemon_itself);
        tcase_add_test(tc, thread_id_has_its_own_queue);
        tcase_add_test(tc, thread_id_and_pid_kept_apart);
        tcase_add_test(tc, client_killed_mid_suspend);
        tcase_add_test(tc, sigterm_in_flight);
        tcase_add_test(tc, sigterm_twice);
        return s;
}

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
        if (argc == 5 && strcmp(argv[1], "--itest-hold-uids") == 0)
                return itest_hold_uids(argv);
        if (argc == 2 && strcmp(argv[1], "--itest-threads") == 0)
                return hold_threads();
        return itest_main(attacks_suite());
}
