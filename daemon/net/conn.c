/* conn.c: reading, framing and writing for one connection, its limits,
 * and the hooks, pins and streaming mode features use (conn.h). */
#include "net/conn.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cudackpt/protocol.h"
#include "base/log.h"
#include "varlink/proto.h"

#define READ_CHUNK 65536
/* A client that sends requests without reading the replies: past this many
 * unwritten bytes its requests wait (and, once one waits whole, reading
 * stops), so its replies cost the daemon at most this much. */
#define WRITE_HIGH_WATER 65536

struct write_req {
        uv_write_t req;
        struct conn *conn;
        char *data; /* owned, from cJSON */
};

void conn_ref(struct conn *c)
{
        c->refs++;
}

void conn_unref(struct conn *c)
{
        if (--c->refs > 0)
                return;
        c->owner->free_cb(c);
        if (c->caller.has_pidfd)
                close(c->caller.pidfd);
        pidns_free(&c->caller.pidns);
        free(c->buf);
        free(c);
}

static void handle_close_cb(uv_handle_t *h)
{
        conn_unref(h->data);
}

void conn_close(struct conn *c)
{
        if (c->closing)
                return;
        c->closing = true;
        /* Each hook leaves the list before it runs: it may remove itself
         * or others, and runs once. */
        while (c->hooks) {
                struct conn_hook *h = c->hooks;
                conn_hook_remove(c, h);
                h->closing_cb(h, c);
        }
        uv_close((uv_handle_t *)&c->pipe, handle_close_cb);
        if (c->owner->cfg->idle_timeout_ms > 0)
                uv_close((uv_handle_t *)&c->idle, handle_close_cb);
}

void conn_hook_add(struct conn *c, struct conn_hook *h)
{
        h->next = NULL;
        h->prev = c->hooks_tail;
        if (c->hooks_tail)
                c->hooks_tail->next = h;
        else
                c->hooks = h;
        c->hooks_tail = h;
}

void conn_hook_remove(struct conn *c, struct conn_hook *h)
{
        if (h->prev)
                h->prev->next = h->next;
        else if (c->hooks == h)
                c->hooks = h->next;
        else
                return; /* not in the list */
        if (h->next)
                h->next->prev = h->prev;
        else
                c->hooks_tail = h->prev;
        h->prev = h->next = NULL;
}

void conn_pin(struct conn *c)
{
        c->pins++;
}

void conn_unpin(struct conn *c)
{
        c->pins--;
}

/* The timer runs once per idle period, not once per request: it checks
 * when the connection was last active and waits out the rest. */
static void idle_cb(uv_timer_t *t)
{
        struct conn *c = t->data;
        uint64_t timeout = c->owner->cfg->idle_timeout_ms;
        uint64_t idle = uv_now(c->owner->loop) - c->last_active;

        if (c->closing)
                return;
        /* A pinned connection (its closing would undo leases) is never idle. */
        if (c->busy || c->pins > 0 || idle < timeout) {
                uv_timer_start(&c->idle, idle_cb, c->busy || c->pins > 0 ? timeout : timeout - idle, 0);
                return;
        }
        metrics_count(c->owner->metrics, METRICS_CUT_IDLE);
        log_debug("Closing connection of uid %u idle for %llu ms", (unsigned)c->caller.uid,
                  (unsigned long long)timeout);
        conn_close(c);
}

static void process(struct conn *c);

static bool backlogged(struct conn *c)
{
        return uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) >= WRITE_HIGH_WATER;
}

/* Tells the hooks that want it that every queued write is written; true
 * when one did (the connection is a stream's then, not a request's). */
static bool drained(struct conn *c)
{
        bool any = false;

        for (struct conn_hook *h = c->hooks, *next; h && !c->closing; h = next) {
                next = h->next;
                if (h->drained_cb) {
                        h->drained_cb(h, c);
                        any = true;
                }
        }
        return any;
}

static void write_cb(uv_write_t *req, int status)
{
        struct write_req *w = (struct write_req *)req;
        struct conn *c = w->conn;

        free(w->data);
        free(w);
        if (status < 0 && status != UV_ECANCELED && !c->closing)
                conn_close(c);
        else if (c->close_after_write && !c->closing &&
                 uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) == 0)
                conn_close(c);
        else if (c->closing || conn_write_pending(c) || !drained(c)) {
                /* Not a stream's: requests that waited for their replies to be read. */
                if (!c->closing && !c->busy && c->len > 0 && !backlogged(c))
                        process(c);
        }
        conn_unref(c);
}

void conn_send(struct conn *c, cJSON *msg)
{
        size_t len;
        char *data;

        if (!msg) {
                /* Out of memory building the reply: the client cannot be told. */
                conn_close(c);
                return;
        }
        if (c->closing) {
                cJSON_Delete(msg);
                return;
        }
        data = proto_serialize(msg, &len);
        cJSON_Delete(msg);
        if (!data) {
                conn_close(c);
                return;
        }
        conn_send_bytes(c, data, len);
}

void conn_send_bytes(struct conn *c, char *data, size_t len)
{
        struct write_req *w;
        uv_buf_t b;
        int n;

        if (c->closing) {
                free(data);
                return;
        }
        b = uv_buf_init(data, (unsigned)len);
        /* A reply usually fits in the socket buffer at once: written now it
         * needs no request, no callback and no change to the poll set (a
         * finished uv_write() costs an epoll_ctl). */
        if (uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) == 0) {
                n = uv_try_write((uv_stream_t *)&c->pipe, &b, 1);
                if (n == (int)len) {
                        free(data);
                        return;
                }
                if (n < 0 && n != UV_EAGAIN) {
                        free(data);
                        conn_close(c);
                        return;
                }
                if (n > 0) {
                        b.base += n;
                        b.len -= (size_t)n;
                }
        }
        w = calloc(1, sizeof(*w));
        if (!w) {
                free(data);
                conn_close(c);
                return;
        }
        w->data = data;
        w->conn = c;
        conn_ref(c);
        if (uv_write(&w->req, (uv_stream_t *)&c->pipe, &b, 1, write_cb) < 0) {
                free(w->data);
                free(w);
                conn_unref(c);
                conn_close(c);
                return;
        }
        if (uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) >
            c->owner->cfg->max_write_queue_bytes) {
                metrics_count(c->owner->metrics, METRICS_CUT_SLOW_READER);
                log_warning("Disconnecting uid %u pid %d: %zu bytes of replies unread (limit %zu)",
                            (unsigned)c->caller.uid, (int)c->caller.pid,
                            uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe),
                            c->owner->cfg->max_write_queue_bytes);
                conn_close(c);
        }
}

void conn_reply(struct conn *c, const struct proto_call *call, cJSON *msg)
{
        if (call->oneway) {
                cJSON_Delete(msg);
                return;
        }
        conn_send(c, msg);
}

bool conn_write_pending(struct conn *c)
{
        return uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) > 0;
}

void conn_close_after_write(struct conn *c)
{
        c->close_after_write = true;
        if (!c->closing && uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) == 0)
                conn_close(c);
}

static void send_too_large(struct conn *c)
{
        cJSON *p = cJSON_CreateObject();

        if (p)
                cJSON_AddNumberToObject(p, "max_bytes", (double)c->owner->cfg->max_message_bytes);
        metrics_count(c->owner->metrics, METRICS_CUT_MESSAGE_TOO_LARGE);
        log_notice("Disconnecting uid %u pid %d: message over %zu bytes", (unsigned)c->caller.uid,
                   (int)c->caller.pid, c->owner->cfg->max_message_bytes);
        conn_send(c, proto_error_new(CUDACKPT_ERROR_MESSAGE_TOO_LARGE, p));
        c->len = 0;
        conn_close_after_write(c);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
        /* One buffer serves every connection: read callbacks run one at a time on
         * the loop thread and copy out what they keep. */
        static char chunk[READ_CHUNK];

        (void)h;
        (void)suggested;
        *buf = uv_buf_init(chunk, sizeof(chunk));
}

static void update_reading(struct conn *c);

/* Whether reading must pause: a whole message (or a cap's worth of one)
 * waits in the buffer. */
static bool holds_message(const struct conn *c)
{
        return c->len >= c->owner->cfg->max_message_bytes ||
               (c->len > 0 && memchr(c->buf, '\0', c->len) != NULL);
}

/* Handles complete messages while no request is in flight. */
static void process(struct conn *c)
{
        size_t max = c->owner->cfg->max_message_bytes;

        conn_ref(c); /* message_cb may close c */
        while (!c->closing && !c->busy && !c->close_after_write && c->len > 0 && !backlogged(c)) {
                char *nul = memchr(c->buf, '\0', c->len);
                size_t n;

                if (!nul) {
                        if (c->len >= max)
                                send_too_large(c);
                        break;
                }
                n = (size_t)(nul - c->buf);
                if (n + 1 > max) {
                        send_too_large(c);
                        break;
                }
                c->owner->message_cb(c, c->buf, n);
                /* Only whole requests count as activity: a client trickling
                 * bytes of a message it never ends is idle. */
                c->last_active = uv_now(c->owner->loop);
                c->len -= n + 1;
                memmove(c->buf, c->buf + n + 1, c->len);
        }
        /* All that a client that hung up sent has been answered. */
        if (!c->closing && !c->busy && c->read_eof && !c->close_after_write && !(c->len > 0 && backlogged(c)))
                conn_close_after_write(c);
        if (!c->closing)
                update_reading(c);
        conn_unref(c);
}

static void read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
        struct conn *c = stream->data;
        size_t need;

        if (c->closing)
                return;
        /* A stream is its connection's only call: what the client sends
         * after is dropped, and its hang-up ends the stream. */
        if (c->streaming && nread != 0) {
                if (nread < 0)
                        conn_close(c);
                return;
        }
        if (nread == UV_EOF) {
                /* The replies to what was sent are still owed: a request in
                 * flight completes, buffered ones are served, then it closes. */
                c->read_eof = true;
                process(c);
                return;
        }
        if (nread < 0) {
                /* A reset: a request in flight still completes and is logged. */
                conn_close(c);
                return;
        }
        if (nread == 0)
                return;
        /* Bounded: reading stops once a whole message or the cap is buffered,
         * so the buffer holds at most the cap plus one read. */
        need = c->len + (size_t)nread;
        if (need > c->cap) {
                size_t cap = c->cap ? c->cap : 4096;
                char *nb;
                while (cap < need)
                        cap *= 2;
                nb = realloc(c->buf, cap);
                if (!nb) {
                        conn_close(c);
                        return;
                }
                c->buf = nb;
                c->cap = cap;
        }
        memcpy(c->buf + c->len, buf->base, (size_t)nread);
        c->len += (size_t)nread;
        process(c);
}

void conn_set_streaming(struct conn *c, bool on)
{
        c->streaming = on;
        if (!c->closing)
                update_reading(c);
}

static void update_reading(struct conn *c)
{
        bool want = !c->close_after_write && !c->read_eof && (c->streaming || !holds_message(c));

        if (want == c->reading)
                return;
        if (want)
                want = uv_read_start((uv_stream_t *)&c->pipe, alloc_cb, read_cb) == 0;
        else
                uv_read_stop((uv_stream_t *)&c->pipe);
        c->reading = want;
}

void conn_request_begin(struct conn *c)
{
        c->busy = true;
}

void conn_request_done(struct conn *c)
{
        c->busy = false;
        if (c->closing)
                return;
        c->last_active = uv_now(c->owner->loop);
        if (life_stopping(c->owner->life)) {
                conn_close_after_write(c);
                return;
        }
        process(c);
        /* Free buffers kept from a large message once idle. */
        if (!c->busy && c->len == 0 && c->cap > 65536) {
                free(c->buf);
                c->buf = NULL;
                c->cap = 0;
        }
}

int conn_start(struct conn *c)
{
        c->pipe.data = c;
        c->refs = 1;
        c->last_active = uv_now(c->owner->loop);
        if (c->owner->cfg->idle_timeout_ms > 0) {
                uv_timer_init(c->owner->loop, &c->idle);
                c->idle.data = c;
                c->refs++;
                uv_timer_start(&c->idle, idle_cb, c->owner->cfg->idle_timeout_ms, 0);
        }
        c->reading = false;
        update_reading(c);
        if (!c->reading) {
                conn_close(c);
                return -EIO;
        }
        return 0;
}
