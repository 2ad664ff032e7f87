/* harness_varlink.c: Varlink for the integration tests: raw connections
 * (also as other uids), calls and reply accessors, the client library
 * (see harness.h); the fake servers are harness_fake.c's. */
#include "harness_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- raw Varlink --------------------------------------------------------- */

struct itest_conn *itest_connect(struct itest_daemon *d)
{
        struct itest_conn *c = calloc(1, sizeof(*c));
        ck_assert(c);
        c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ck_assert_msg(c->fd >= 0, "socket: %s", strerror(errno));
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        strcpy(sa.sun_path, d->sock);
        ck_assert_msg(connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect %s: %s", d->sock,
                      strerror(errno));
        itest_keep_with(c, itest_free_conn);
        return c;
}

/* The child that connects as uid: it stays alive (its pid is the peer's)
 * until the test ends, and hands the socket over through fds[1]. */
static void itest_connect_child(struct itest_daemon *d, uid_t uid, int fd_out)
{
        char byte = 0;
        int fd = -1;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } u = { 0 };
        struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

        prctl(PR_SET_PDEATHSIG, SIGKILL);
        strcpy(sa.sun_path, d->sock);
        if (itest_become_with(uid, NULL, 0) == 0 &&
            (fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0 &&
            connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
                mh.msg_control = u.buf;
                mh.msg_controllen = sizeof(u.buf);
                struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(cm), &fd, sizeof(int));
        }
        if (sendmsg(fd_out, &mh, 0) < 0)
                _exit(1);
        while (read(fd_out, &byte, 1) < 0 && errno == EINTR)
                ;
        _exit(0);
}

struct itest_conn *itest_connect_unprivileged(struct itest_daemon *d, uid_t u)
{
        return u == (uid_t)-1 ? itest_connect(d) : itest_connect_as(d, u);
}

struct itest_conn *itest_connect_as(struct itest_daemon *d, uid_t uid)
{
        int sp[2], fd = -1;
        char byte;
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } u;
        struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };

        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
        pid_t pid = fork();
        ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
                close(sp[0]);
                itest_connect_child(d, uid, sp[1]);
        }
        close(sp[1]);
        ck_assert_msg(recvmsg(sp[0], &mh, MSG_CMSG_CLOEXEC) == 1, "no word from the uid %d child", (int)uid);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        if (cm && cm->cmsg_type == SCM_RIGHTS)
                memcpy(&fd, CMSG_DATA(cm), sizeof(int));
        ck_assert_msg(fd >= 0, "uid %d could not connect to %s", (int)uid, d->sock);
        /* sp[0] stays open: the child lives until the test's process ends. */
        ck_assert_int_eq(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
        struct itest_conn *c = calloc(1, sizeof(*c));
        ck_assert(c);
        c->fd = fd;
        itest_keep_with(c, itest_free_conn);
        return c;
}

void itest_conn_close(struct itest_conn *c)
{
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
}

int itest_send_bytes(struct itest_conn *c, const void *buf, size_t len, bool bytewise)
{
        const char *p = buf;
        double deadline = itest_now_ms() + ITEST_REPLY_TIMEOUT_MS;
        while (len > 0) {
                ssize_t n = send(c->fd, p, bytewise ? 1 : len, MSG_NOSIGNAL);
                if (n > 0) {
                        p += n;
                        len -= (size_t)n;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno != EAGAIN)
                        return -errno;
                struct pollfd pf = { .fd = c->fd, .events = POLLOUT };
                int r = poll(&pf, 1, itest_left_ms(deadline));
                if (r == 0)
                        return -ETIMEDOUT;
        }
        return 0;
}

void itest_send(struct itest_conn *c, const char *json)
{
        int r = itest_send_bytes(c, json, strlen(json) + 1, false);
        ck_assert_msg(r == 0, "sending %s: %s", json, strerror(-r));
}

static void itest_vsendf(struct itest_conn *c, const char *fmt, va_list ap)
{
        char *s = NULL;
        int r = vasprintf(&s, fmt, ap);
        ck_assert(r >= 0);
        itest_send(c, s);
        free(s);
}

void itest_sendf(struct itest_conn *c, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        itest_vsendf(c, fmt, ap);
        va_end(ap);
}

int itest_recv_raw(struct itest_conn *c, int timeout_ms, cJSON **ret_reply)
{
        double deadline = itest_now_ms() + timeout_ms;
        for (;;) {
                char *nul = c->len ? memchr(c->buf, '\0', c->len) : NULL;
                if (nul) {
                        size_t mlen = (size_t)(nul - c->buf);
                        cJSON *j = cJSON_ParseWithLength(c->buf, mlen);
                        if (!j || !cJSON_IsObject(j)) {
                                cJSON_Delete(j);
                                fprintf(stderr, "itest: not a JSON object: %.*s\n", (int)mlen, c->buf);
                                memmove(c->buf, nul + 1, c->len - mlen - 1);
                                c->len -= mlen + 1;
                                return -EPROTO;
                        }
                        memmove(c->buf, nul + 1, c->len - mlen - 1);
                        c->len -= mlen + 1;
                        itest_keep_with(j, itest_free_json);
                        *ret_reply = j;
                        return 0;
                }
                if (c->fd < 0)
                        return -EBADF;
                int r = itest_wait_readable(c->fd, deadline);
                if (r < 0)
                        return r;
                if (c->cap - c->len < 65536) {
                        size_t cap = c->cap ? c->cap * 2 : 131072;
                        char *b = realloc(c->buf, cap);
                        if (!b)
                                return -ENOMEM;
                        c->buf = b;
                        c->cap = cap;
                }
                ssize_t n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
                if (n == 0 || (n < 0 && errno == ECONNRESET)) {
                        if (c->len)
                                fprintf(stderr, "itest: EOF after a partial message: %.*s\n", (int)c->len,
                                        c->buf);
                        return -ENODATA;
                }
                if (n < 0 && (errno == EINTR || errno == EAGAIN))
                        continue;
                if (n < 0)
                        return -errno;
                c->len += (size_t)n;
        }
}

cJSON *itest_recv_within(struct itest_conn *c, int timeout_ms)
{
        cJSON *j = NULL;
        int r = itest_recv_raw(c, timeout_ms, &j);
        ck_assert_msg(r != -ETIMEDOUT, "no reply within %d ms", timeout_ms);
        ck_assert_msg(r != -ENODATA, "the daemon closed the connection instead of replying");
        ck_assert_msg(r == 0, "reading a reply: %s", strerror(-r));
        return j;
}

cJSON *itest_recv(struct itest_conn *c)
{
        return itest_recv_within(c, ITEST_REPLY_TIMEOUT_MS);
}

cJSON *itest_callf(struct itest_conn *c, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        itest_vsendf(c, fmt, ap);
        va_end(ap);
        return itest_recv(c);
}

void itest_send_call(struct itest_conn *c, const char *method, const char *params)
{
        if (params)
                itest_sendf(c, "{\"method\":\"%s\",\"parameters\":%s}", method, params);
        else
                itest_sendf(c, "{\"method\":\"%s\"}", method);
}

cJSON *itest_call(struct itest_conn *c, const char *method, const char *params)
{
        itest_send_call(c, method, params);
        return itest_recv(c);
}

cJSON *itest_call_pid(struct itest_conn *c, const char *method, int pid)
{
        char params[64];
        snprintf(params, sizeof(params), "{\"pid\":%d}", pid);
        return itest_call(c, method, params);
}

cJSON *itest_await_in_flight(struct itest_conn *c, pid_t pid, const char *method, int timeout_ms)
{
        double deadline = itest_now_ms() + timeout_ms;
        cJSON *j = NULL;
        int n = 0;
        do {
                j = itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, (int)pid);
                itest_assert_ok(j);
                const char *f = itest_str(j, "in_flight");
                if (f && strcmp(f, method) == 0)
                        return j;
                /* Replies pile up in the kept list; drop the ones we pass. */
                itest_unkeep_last(j);
                n++;
        } while (itest_now_ms() < deadline);
        ck_abort_msg("GetState did not show %s in flight within %d ms (%d calls)", method, timeout_ms, n);
}

void itest_assert_eof(struct itest_conn *c, int timeout_ms)
{
        cJSON *j = NULL;
        int r = itest_recv_raw(c, timeout_ms, &j);
        ck_assert_msg(r != 0, "expected the connection to be closed, got %s", itest_dump(j));
        ck_assert_msg(r != -ETIMEDOUT, "the connection was not closed within %d ms", timeout_ms);
        ck_assert_msg(r == -ENODATA, "expected EOF, got %s", strerror(-r));
}

bool itest_conn_readable(struct itest_conn *c)
{
        if (c->len && memchr(c->buf, '\0', c->len))
                return true;
        struct pollfd p = { .fd = c->fd, .events = POLLIN };
        return poll(&p, 1, 0) > 0;
}

const char *itest_error(const cJSON *reply)
{
        const cJSON *e = reply ? cJSON_GetObjectItemCaseSensitive(reply, "error") : NULL;
        return cJSON_IsString(e) ? e->valuestring : NULL;
}

const cJSON *itest_params(const cJSON *reply)
{
        return reply ? cJSON_GetObjectItemCaseSensitive(reply, "parameters") : NULL;
}

const char *itest_str(const cJSON *reply, const char *key)
{
        const cJSON *p = itest_params(reply);
        const cJSON *v = cJSON_IsObject(p) ? cJSON_GetObjectItemCaseSensitive(p, key) : NULL;
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

bool itest_has(const cJSON *reply, const char *key)
{
        const cJSON *p = itest_params(reply);
        return cJSON_IsObject(p) && cJSON_GetObjectItemCaseSensitive(p, key) != NULL;
}

bool itest_int(const cJSON *reply, const char *key, long long *ret)
{
        const cJSON *p = itest_params(reply);
        const cJSON *v = cJSON_IsObject(p) ? cJSON_GetObjectItemCaseSensitive(p, key) : NULL;
        if (!cJSON_IsNumber(v))
                return false;
        double d = v->valuedouble;
        if (d != (double)(long long)d)
                return false;
        *ret = (long long)d;
        return true;
}

const char *itest_dump(const cJSON *reply)
{
        if (!reply)
                return "(no reply)";
        char *s = cJSON_PrintUnformatted(reply);
        return s ? itest_keep(s) : "(unprintable)";
}

const char *itest_uuid_norm(const char *uuid)
{
        if (!uuid)
                return "(null)";
        if (strncasecmp(uuid, "GPU-", 4) == 0)
                uuid += 4;
        char *out = itest_keep(calloc(1, strlen(uuid) + 1));
        ck_assert(out);
        size_t n = 0;
        for (const char *p = uuid; *p; p++)
                if (*p != '-')
                        out[n++] = (char)((*p >= 'A' && *p <= 'Z') ? *p - 'A' + 'a' : *p);
        return out;
}

const char *const itest_process_methods[] = {
        CUDACKPT_METHOD_GET_STATE, CUDACKPT_METHOD_GET_RESTORE_THREAD_ID, CUDACKPT_METHOD_LOCK,
        CUDACKPT_METHOD_CHECKPOINT, CUDACKPT_METHOD_RESTORE, CUDACKPT_METHOD_UNLOCK,
        CUDACKPT_METHOD_SUSPEND, CUDACKPT_METHOD_RESUME, NULL,
};

void itest_assert_state_now(struct itest_conn *c, pid_t pid, const char *state)
{
        cJSON *j = itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, (int)pid);
        itest_assert_state(j, pid, state);
        itest_assert_absent(j, "in_flight");
}

void itest_assert_lists_interface(const cJSON *j)
{
        const cJSON *ifs = cJSON_GetObjectItemCaseSensitive(itest_params(j), "interfaces");
        ck_assert_msg(cJSON_IsArray(ifs), "interfaces in %s", itest_dump(j));
        bool found = false;
        const cJSON *i;
        cJSON_ArrayForEach(i, ifs)
                if (cJSON_IsString(i) && strcmp(i->valuestring, CUDACKPT_INTERFACE) == 0)
                        found = true;
        ck_assert_msg(found, "%s not in %s", CUDACKPT_INTERFACE, itest_dump(j));
}

/* ---- client library ------------------------------------------------------ */

cudackpt_client *itest_client(struct itest_daemon *d)
{
        cudackpt_client *c = NULL;
        int r = cudackpt_client_connect(d->sock, &c);
        ck_assert_msg(r == 0 && c, "cudackpt_client_connect %s: %s", d->sock, strerror(-r));
        ck_assert_int_eq(cudackpt_client_set_timeout(c, ITEST_REPLY_TIMEOUT_MS), 0);
        itest_keep_with(c, itest_free_client);
        return c;
}

void itest_assert_suspend_times_out(cudackpt_client *c, pid_t pid, int timeout_ms, double max_ms)
{
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        ck_assert_int_eq(cudackpt_client_set_timeout(c, timeout_ms), 0);
        double t0 = itest_now_ms();
        ck_assert_int_eq(cudackpt_suspend(c, pid, -1, &r), -ETIMEDOUT);
        double took = itest_now_ms() - t0;
        /* The library's clock counts whole milliseconds: 1 ms early at most. */
        printf("the %d ms client timeout fired after %.0f ms\n", timeout_ms, took);
        ck_assert_msg(took >= timeout_ms - 1 && took < max_ms, "the %d ms client timeout fired after %.0f ms",
                      timeout_ms, took);
        /* The handle cannot be trusted after a timeout. */
        ck_assert_int_eq(cudackpt_get_state(c, pid, &r), -ENOTCONN);
}

cJSON *itest_reply_json(const cudackpt_reply *r)
{
        ck_assert_msg(r->parameters_json, "reply without parameters_json");
        cJSON *j = cJSON_Parse(r->parameters_json);
        ck_assert_msg(cJSON_IsObject(j), "parameters_json is not an object: %s", r->parameters_json);
        /* Wrapped like a raw reply, so the raw accessors apply. */
        cJSON *w = cJSON_CreateObject();
        ck_assert(w);
        if (r->error)
                cJSON_AddStringToObject(w, "error", r->error);
        cJSON_AddItemToObject(w, "parameters", j);
        itest_keep_with(w, itest_free_json);
        return w;
}

cJSON *itest_await_state(struct itest_conn *c, pid_t pid, const char *state, int timeout_ms)
{
        double deadline = itest_now_ms() + timeout_ms;
        cJSON *j = NULL;
        do {
                j = itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, (int)pid);
                itest_assert_ok(j);
                const char *s = itest_str(j, "state");
                if (s && strcmp(s, state) == 0 && !itest_has(j, "in_flight"))
                        return j;
                if (itest_now_ms() >= deadline)
                        break;
                itest_unkeep_last(j);
                /* The state changes at the end of a driver call: look often,
                 * not in a tight loop. */
                usleep(2000);
        } while (true);
        ck_abort_msg("pid %d did not reach state %s with nothing in flight within %d ms; last %s", (int)pid,
                     state, timeout_ms, itest_dump(j));
}

const cJSON *itest_get(const cJSON *reply, const char *key)
{
        const cJSON *p = itest_params(reply);
        return cJSON_IsObject(p) ? cJSON_GetObjectItemCaseSensitive(p, key) : NULL;
}

int itest_raw_call(const char *sock, const char *json, int timeout_ms, cJSON **ret_reply, char *msg,
                   size_t msg_size)
{
        *ret_reply = NULL;
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (fd < 0 || strlen(sock) >= sizeof(sa.sun_path)) {
                snprintf(msg, msg_size, "socket: %s", strerror(errno));
                if (fd >= 0)
                        close(fd);
                return -1;
        }
        strcpy(sa.sun_path, sock);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                snprintf(msg, msg_size, "connect %s: %s", sock, strerror(errno));
                close(fd);
                return -1;
        }
        size_t len = strlen(json) + 1;
        for (size_t done = 0; done < len;) {
                ssize_t w = send(fd, json + done, len - done, MSG_NOSIGNAL);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0) {
                        snprintf(msg, msg_size, "send: %s", strerror(errno));
                        close(fd);
                        return -1;
                }
                done += (size_t)w;
        }
        char *buf = NULL;
        size_t n = 0, cap = 0;
        double deadline = itest_now_ms() + timeout_ms;
        for (;;) {
                if (n && memchr(buf, '\0', n))
                        break;
                if (itest_wait_readable(fd, deadline) < 0) {
                        snprintf(msg, msg_size, "no reply to %s within %d ms", json, timeout_ms);
                        goto fail;
                }
                if (cap - n < 65536) {
                        char *b = realloc(buf, cap + 131072);
                        if (!b) {
                                snprintf(msg, msg_size, "out of memory");
                                goto fail;
                        }
                        buf = b;
                        cap += 131072;
                }
                ssize_t k = recv(fd, buf + n, cap - n, 0);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        snprintf(msg, msg_size, "connection closed before the reply to %s", json);
                        goto fail;
                }
                n += (size_t)k;
        }
        close(fd);
        *ret_reply = cJSON_Parse(buf);
        free(buf);
        if (!cJSON_IsObject(*ret_reply)) {
                cJSON_Delete(*ret_reply);
                *ret_reply = NULL;
                snprintf(msg, msg_size, "the reply to %s is not a JSON object", json);
                return -1;
        }
        return 0;
fail:
        free(buf);
        close(fd);
        return -1;
}

/* The daemon and the target of itest_sim_conn() and itest_sim_client(). */
static struct itest_daemon *sim_start(struct itest_daemon **ret_d, pid_t *ret_pid)
{
        struct itest_daemon *d = itest_daemon_start_default();

        *ret_pid = itest_sim_target();
        if (ret_d)
                *ret_d = d;
        return d;
}

pid_t itest_sim_conn(struct itest_daemon **ret_d, struct itest_conn **ret_c)
{
        pid_t pid;

        *ret_c = itest_connect(sim_start(ret_d, &pid));
        return pid;
}

pid_t itest_sim_client(struct itest_daemon **ret_d, cudackpt_client **ret_c)
{
        pid_t pid;

        *ret_c = itest_client(sim_start(ret_d, &pid));
        return pid;
}
