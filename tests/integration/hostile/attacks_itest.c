/* attacks_itest.c: the helpers of the attack suites (see attacks_itest.h). */
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

/* ---- helpers of the test process (asserting) ----------------------------- */

void atest_assert_get_info(struct itest_conn *c)
{
        cJSON *j = itest_call(c, GET_INFO, NULL);
        itest_assert_ok(j);
        ck_assert_msg(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(itest_params(j), "interfaces")),
                      "GetInfo without interfaces: %s", itest_dump(j));
}

/* The daemon is alive and a fresh connection gets GetInfo answered. */
void atest_assert_serving(struct itest_daemon *d)
{
        ck_assert_msg(!itest_daemon_exited(d), "the daemon died");
        struct itest_conn *c = itest_connect(d);
        atest_assert_get_info(c);
        itest_conn_close(c);
        ck_assert_msg(!itest_daemon_exited(d), "the daemon died");
}

void atest_assert_running(struct itest_conn *c, pid_t pid)
{
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, pid), pid, "running");
}

void atest_send_pid_call(struct itest_conn *c, const char *method, pid_t pid)
{
        itest_sendf(c, "{\"method\":\"%s\",\"parameters\":{\"pid\":%d}}", method, (int)pid);
}

/* The daemon closes c (accepted only to be refused): a request sent on it
 * gets no answer, the connection ends. */
void atest_assert_refused(struct itest_conn *c)
{
        int rc = itest_send_bytes(c, GET_INFO_MSG, sizeof(GET_INFO_MSG), false);
        ck_assert_msg(rc == 0 || rc == -EPIPE || rc == -ECONNRESET, "send: %s", strerror(-rc));
        itest_assert_eof(c, 5000);
        itest_conn_close(c);
}

/* Connects until the daemon serves the connection, awaiting the close of
 * each refused attempt; asserts one is served within timeout_ms.  For
 * slots that free up when the daemon has processed other clients' hang-ups,
 * which it does asynchronously. */
struct itest_conn *atest_connect_served(struct itest_daemon *d, int timeout_ms)
{
        double deadline = itest_now_ms() + timeout_ms;
        int attempts = 0;
        for (;;) {
                struct itest_conn *c = itest_connect(d);
                int rc = itest_send_bytes(c, GET_INFO_MSG, sizeof(GET_INFO_MSG), false);
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
void atest_await_in_flight_state(struct itest_conn *c, pid_t pid, const char *method, const char *state,
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
pid_t atest_other_thread(pid_t pid)
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

bool atest_json_utf8_valid(const cJSON *j)
{
        for (; j; j = j->next) {
                if (j->string && !utf8_valid(j->string))
                        return false;
                if (cJSON_IsString(j) && !utf8_valid(j->valuestring))
                        return false;
                if (j->child && !atest_json_utf8_valid(j->child))
                        return false;
        }
        return true;
}

/* ---- helpers of other processes (never assert: they report) -------------- */

int atest_raw_connect(const char *path)
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
int atest_raw_call(int fd, const char *msg, char *buf, size_t size, int timeout_ms)
{
        int rc = raw_send(fd, msg, strlen(msg) + 1);
        if (rc < 0 && rc != -EPIPE && rc != -ECONNRESET)
                return rc;
        double deadline = itest_now_ms() + timeout_ms;
        size_t len = 0;
        for (;;) {
                if (deadline - itest_now_ms() <= 0)
                        return -ETIMEDOUT;
                int r = itest_wait_readable(fd, deadline);
                if (r < 0)
                        return r;
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

struct script {
        const char *sock;
        const struct atest_step *steps;
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
                const struct atest_step *s = &x->steps[i];
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

void atest_run_script(uid_t uid, const gid_t *groups, size_t n_groups, struct itest_daemon *d,
                       const struct atest_step *steps, size_t n_steps)
{
        struct script x = { .sock = d->sock, .steps = steps, .n_steps = n_steps };
        char msg[1024];
        int rc = itest_run_as_groups(uid, groups, n_groups, as_script, &x, msg, sizeof(msg));
        ck_assert_msg(rc == 0, "as uid %d with %zu groups (first %d): %s", (int)uid, n_groups,
                      n_groups ? (int)groups[0] : -1, msg);
}

/* Clients in a process of their own, as uid (unchanged for (uid_t)-1):
 * n_conns connections each send msg; once at least min_replies replies
 * have come (within 10 s), the process reports what it saw and waits to be
 * killed, its connections open.  Returns its pid. */
pid_t atest_spawn_clients(uid_t uid, const char *sock, const char *msg, int n_conns, int min_replies,
                           struct atest_client_seen *ret_seen)
{
        int p[2];
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        ck_assert(n_conns <= 256);
        pid_t parent = getpid();
        pid_t pid = fork();
        ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
                close(p[0]);
                struct atest_client_seen seen = { .replies = -1 };
                if (uid != (uid_t)-1 &&
                    (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0))
                        goto report;
                /* After the uid change, which clears it. */
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(1);
                struct pollfd fds[256];
                for (int i = 0; i < n_conns; i++) {
                        fds[i] = (struct pollfd){ .fd = atest_raw_connect(sock), .events = POLLIN };
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
        struct atest_client_seen seen;
        ck_assert_msg(poll(&pf, 1, 15000) == 1 && read(p[0], &seen, sizeof(seen)) == (ssize_t)sizeof(seen),
                      "the client process did not report");
        close(p[0]);
        ck_assert_msg(seen.replies >= 0, "the client process could not connect and send its requests");
        if (ret_seen)
                *ret_seen = seen;
        return pid;
}

void atest_kill_clients(pid_t pid)
{
        ck_assert_int_eq(kill(pid, SIGKILL), 0);
        ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
}


