/* client.c: libcudackpt, the blocking Varlink client of cudackptd: the
 * connection and its calls.  Replies are decoded in reply.c, the typed
 * methods are in methods.c (libclient.h).
 *
 * One connection carries one call at a time: the request is written whole,
 * then the reply is read up to its NUL terminator.  Bytes that arrive after
 * the NUL stay in the client's buffer for the next reply.  The socket stays
 * blocking; when a timeout is set, poll() bounds each wait and the reads
 * and writes use MSG_DONTWAIT so that none of them can outlast it.  A
 * client set to spin (cudackpt_client_set_spin(), $CUDACKPT_SPIN_US)
 * first polls for the reply with recv(MSG_DONTWAIT) in a busy loop, so
 * that a quick reply does not pay for waking a sleeping thread.
 *
 * Everything the daemon sends is treated as hostile: replies are capped at
 * CUDACKPT_CLIENT_MAX_REPLY_BYTES, must be one JSON object, and typed
 * fields are range-checked before they are converted (reply.c). */
#include "libclient.h"

#include <cJSON.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "connect.h"
#include "cpu-relax.h"
#include "monotime.h"

/* First allocation of the receive buffer; it doubles up to the cap. */
#define CLIENT_BUF_INITIAL 4096u
/* An empty buffer bigger than this is freed, so that one huge reply does
 * not pin megabytes for the life of the client. */
#define CLIENT_BUF_KEEP (64u * 1024u)
/* The buffer never holds more than one maximal reply plus its NUL. */
#define CLIENT_BUF_MAX ((size_t)CUDACKPT_CLIENT_MAX_REPLY_BYTES + 1u)
/* A spinning client yields its core once every this many tries, so that a
 * thread that shares the core (the daemon's, on a small machine) runs. */
#define CLIENT_SPIN_YIELD_EVERY 64u

struct cudackpt_client {
        int fd;             /* the connected socket, owned */
        int timeout_ms;     /* limit of one call, 0 = none */
        int spin_us;        /* how long a call polls for its reply before it sleeps, 0 = never */
        int broken;         /* 0, or the -errno that made the stream untrustworthy */
        char *buf;          /* bytes received and not yet consumed */
        size_t buf_len;     /* bytes valid in buf */
        size_t buf_size;    /* bytes allocated for buf */
};

CUDACKPT_EXPORT int cudackpt_client_connect(const char *socket_path, cudackpt_client **ret_client) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        cudackpt_client *c;
        size_t len;
        int fd;

        if (!ret_client)
                return -EINVAL;
        if (!socket_path) {
                /* A privileged program linking us must not be steered by its caller's environment. */
                socket_path = secure_getenv(CUDACKPT_SOCKET_ENV);
                if (!socket_path || !*socket_path)
                        socket_path = CUDACKPT_DEFAULT_SOCKET;
        }
        len = strlen(socket_path);
        if (len == 0)
                return -EINVAL;
        if (len >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, socket_path, len + 1);

        fd = client_connect_retrying(&sa, len);
        if (fd < 0)
                return fd;

        c = calloc(1, sizeof(*c));
        if (!c) {
                close(fd);
                return -ENOMEM;
        }
        c->fd = fd;
        c->spin_us = (int) client_env_number(CUDACKPT_SPIN_ENV, CUDACKPT_CLIENT_SPIN_MAX_US, 0);
        *ret_client = c;
        return 0;
}

CUDACKPT_EXPORT void cudackpt_client_free(cudackpt_client *c) {
        if (!c)
                return;
        if (c->fd >= 0)
                close(c->fd);
        free(c->buf);
        free(c);
}

CUDACKPT_EXPORT int cudackpt_client_fd(const cudackpt_client *c) {
        return c ? c->fd : -EINVAL;
}

CUDACKPT_EXPORT int cudackpt_client_set_timeout(cudackpt_client *c, int timeout_ms) {
        if (!c || timeout_ms < 0)
                return -EINVAL;
        c->timeout_ms = timeout_ms;
        return 0;
}

CUDACKPT_EXPORT int cudackpt_client_set_spin(cudackpt_client *c, int spin_us) {
        if (!c || spin_us < 0)
                return -EINVAL;
        c->spin_us = spin_us > CUDACKPT_CLIENT_SPIN_MAX_US ? CUDACKPT_CLIENT_SPIN_MAX_US : spin_us;
        return 0;
}

/* ---- Transport ------------------------------------------------------------- */

/* Write all of buf (len bytes). */
static int client_send_all(cudackpt_client *c, const char *buf, size_t len, int64_t deadline_ms) {
        while (len > 0) {
                ssize_t n;
                int r;

                if (deadline_ms >= 0) {
                        r = client_wait(c->fd, POLLOUT, deadline_ms);
                        if (r < 0)
                                return r;
                }
                /* MSG_NOSIGNAL: a daemon that went away must not kill the caller with SIGPIPE. */
                n = send(c->fd, buf, len, MSG_NOSIGNAL | (deadline_ms >= 0 ? MSG_DONTWAIT : 0));
                if (n < 0) {
                        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                                continue;
                        return errno == EPIPE ? -ECONNRESET : -errno;
                }
                buf += n;
                len -= (size_t) n;
        }
        return 0;
}

/* Make room for at least one more byte in the receive buffer, within the cap. */
static int client_buf_grow(cudackpt_client *c) {
        size_t size;
        char *p;

        if (c->buf_len < c->buf_size)
                return 0;
        if (c->buf_size >= CLIENT_BUF_MAX)
                return -EMSGSIZE;
        size = c->buf_size ? c->buf_size * 2 : CLIENT_BUF_INITIAL;
        if (size > CLIENT_BUF_MAX)
                size = CLIENT_BUF_MAX;
        p = realloc(c->buf, size);
        if (!p)
                return -ENOMEM;
        c->buf = p;
        c->buf_size = size;
        return 0;
}

/* Try recv(MSG_DONTWAIT) until bytes come or spin_end_us (monotonic
 * microseconds) passes, never sleeping: a pause between tries and a
 * sched_yield() every CLIENT_SPIN_YIELD_EVERY tries.  Returns the bytes
 * read (0: end of file), -EAGAIN once the spin is over, else -errno. */
static ssize_t client_recv_spin(cudackpt_client *c, int64_t spin_end_us) {
        for (unsigned i = 1;; i++) {
                ssize_t n = recv(c->fd, c->buf + c->buf_len, c->buf_size - c->buf_len, MSG_DONTWAIT);

                if (n >= 0)
                        return n;
                if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)
                        return -errno;
                if (monotime_us() >= spin_end_us)
                        return -EAGAIN;
                cpu_relax();
                if (i % CLIENT_SPIN_YIELD_EVERY == 0)
                        (void) sched_yield();
        }
}

/* Read what the daemon sent into the free room of the buffer: spinning
 * until spin_end_us (0: no spin), then sleeping in poll() or recv() until
 * deadline_ms (-1: none).  Returns the bytes read (0: end of file), or
 * -errno (-ETIMEDOUT). */
static ssize_t client_recv_some(cudackpt_client *c, int64_t spin_end_us, int64_t deadline_ms) {
        ssize_t n;
        int r;

        /* A spin over (later reads of a long reply, or of a stream) goes
         * straight to the wait. */
        if (spin_end_us > 0 && monotime_us() < spin_end_us) {
                n = client_recv_spin(c, spin_end_us);
                if (n != -EAGAIN)
                        return n;
        }
        for (;;) {
                if (deadline_ms >= 0) {
                        r = client_wait(c->fd, POLLIN, deadline_ms);
                        if (r < 0)
                                return r;
                }
                n = recv(c->fd, c->buf + c->buf_len, c->buf_size - c->buf_len,
                         deadline_ms >= 0 ? MSG_DONTWAIT : 0);
                if (n >= 0)
                        return n;
                if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)
                        return -errno;
        }
}

/* Read until the buffer holds a NUL; return the message's length (NUL
 * excluded) in *ret_len.  The message starts at c->buf.  The waits spin
 * until spin_end_us, as client_recv_some() does. */
static int client_recv_message(cudackpt_client *c, int64_t spin_end_us, int64_t deadline_ms, size_t *ret_len) {
        size_t scanned = 0;

        for (;;) {
                /* buf is NULL until the first read: memchr() may not see it. */
                const char *nul = c->buf_len > scanned ? memchr(c->buf + scanned, '\0', c->buf_len - scanned) : NULL;
                ssize_t n;
                int r;

                if (nul) {
                        *ret_len = (size_t) (nul - c->buf);
                        return 0;
                }
                scanned = c->buf_len;

                r = client_buf_grow(c);
                if (r < 0)
                        return r;
                n = client_recv_some(c, spin_end_us, deadline_ms);
                if (n < 0)
                        return (int) n;
                if (n == 0)
                        return -ECONNRESET; /* closed before, or in the middle of, a reply */
                c->buf_len += (size_t) n;
        }
}

/* When a call that has just sent its request stops spinning for the reply:
 * spin_us from now, but never past the call's deadline; 0 for a client
 * that does not spin. */
static int64_t client_spin_end_us(const cudackpt_client *c, int64_t deadline_ms) {
        int64_t end;

        if (c->spin_us <= 0)
                return 0;
        end = monotime_us() + c->spin_us;
        if (deadline_ms >= 0 && end > deadline_ms * 1000)
                end = deadline_ms * 1000;
        return end;
}

/* Drop the first len bytes (a message and its NUL) from the buffer. */
static void client_buf_consume(cudackpt_client *c, size_t len) {
        if (c->buf_len > len)
                memmove(c->buf, c->buf + len, c->buf_len - len);
        c->buf_len -= len;
        if (c->buf_len == 0 && c->buf_size > CLIENT_BUF_KEEP) {
                free(c->buf);
                c->buf = NULL;
                c->buf_size = 0;
        }
}

/* Send one serialised request and read its reply.  more: the request
 * asked for "more", so replies with "continues": true may come first;
 * each is handed to fn (when not NULL) and dropped.  One deadline covers
 * the request and every reply. */
static int client_transact(cudackpt_client *c, const char *request, int more, cudackpt_progress_fn fn,
                           void *ctx, cudackpt_reply *ret_reply) {
        int64_t deadline_ms = c->timeout_ms > 0 ? monotime_ms() + c->timeout_ms : -1, spin_end_us;
        size_t len = 0;
        int r;

        if (c->broken)
                return -ENOTCONN;

        /* The NUL terminator is part of the message. */
        r = client_send_all(c, request, strlen(request) + 1, deadline_ms);
        if (r < 0)
                goto broken;
        spin_end_us = client_spin_end_us(c, deadline_ms);
        for (;;) {
                cudackpt_reply reply;
                int continues = 0;

                r = client_recv_message(c, spin_end_us, deadline_ms, &len);
                if (r < 0)
                        goto broken;
                cudackpt_reply_init(&reply);
                r = client_reply_decode(c->buf, len, &reply, more ? &continues : NULL);
                client_buf_consume(c, len + 1);
                if (r == -ENOMEM && !more)
                        return r; /* the stream itself is still in step */
                if (r < 0)
                        goto broken; /* with more, the rest of this call's replies would follow */
                if (!continues) {
                        *ret_reply = reply;
                        return 0;
                }
                r = fn ? fn(ctx, reply.parameters_json) : 0;
                cudackpt_reply_clear(&reply);
                if (r < 0)
                        goto broken; /* the replies still to come are never read */
        }

broken:
        /* A partial write, or a reply we could not read whole, leaves the
         * stream out of step with our calls: refuse to use it again. */
        c->broken = r;
        return r;
}

/* Serialise {"method": method, "parameters": params[, "more": true]}
 * (takes params) and transact. */
static int client_call_object_more(cudackpt_client *c, const char *method, cJSON *params, int more,
                                   cudackpt_progress_fn fn, void *ctx, cudackpt_reply *ret_reply) {
        cJSON *call;
        char *text;
        int r;

        if (!c || !method || !*method || !ret_reply) {
                cJSON_Delete(params);
                return -EINVAL;
        }
        call = cJSON_CreateObject();
        if (!call || !cJSON_AddStringToObject(call, "method", method)) {
                cJSON_Delete(call);
                cJSON_Delete(params);
                return -ENOMEM;
        }
        if (!params)
                params = cJSON_CreateObject();
        if (!params || !cJSON_AddItemToObject(call, "parameters", params)) {
                cJSON_Delete(params);
                cJSON_Delete(call);
                return -ENOMEM;
        }
        if (more && !cJSON_AddTrueToObject(call, "more")) {
                cJSON_Delete(call);
                return -ENOMEM;
        }
        text = cJSON_PrintUnformatted(call);
        cJSON_Delete(call);
        if (!text)
                return -ENOMEM;
        r = client_transact(c, text, more, fn, ctx, ret_reply);
        cJSON_free(text);
        return r;
}

int client_call_params(cudackpt_client *c, const char *method, cJSON *params, cudackpt_reply *ret_reply) {
        return client_call_object_more(c, method, params, 0, NULL, NULL, ret_reply);
}

/* parameters_json parsed: NULL stays NULL ({}); -EINVAL when it is not one
 * JSON object. */
static int client_parse_params(const char *parameters_json, cJSON **ret_params) {
        cJSON *params = NULL;

        if (parameters_json) {
                /* require_null_terminated: no trailing garbage after the object. */
                params = cJSON_ParseWithOpts(parameters_json, NULL, 1);
                if (!cJSON_IsObject(params)) {
                        cJSON_Delete(params);
                        return -EINVAL;
                }
        }
        *ret_params = params;
        return 0;
}

CUDACKPT_EXPORT int cudackpt_call(cudackpt_client *c, const char *method, const char *parameters_json,
                                  cudackpt_reply *ret_reply) {
        cJSON *params = NULL;
        int r;

        r = client_parse_params(parameters_json, &params);
        if (r < 0)
                return r;
        return client_call_params(c, method, params, ret_reply);
}

CUDACKPT_EXPORT int cudackpt_call_more(cudackpt_client *c, const char *method, const char *parameters_json,
                                       cudackpt_progress_fn fn, void *ctx, cudackpt_reply *ret_reply) {
        cJSON *params = NULL;
        int r;

        r = client_parse_params(parameters_json, &params);
        if (r < 0)
                return r;
        return client_call_object_more(c, method, params, 1, fn, ctx, ret_reply);
}

