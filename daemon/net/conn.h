/* conn.h: one client connection: bytes in, NUL framing, replies out.
 *
 * A connection serves one request at a time.  While a request is being
 * answered it goes on reading only until a whole further message waits in
 * its buffer (the kernel's buffer then pushes back on a client that
 * floods); a client's hang-up is thus seen at once, and the usual client,
 * which waits for each reply, costs no extra system calls.  A client that
 * shuts down its sending side still gets the replies to what it sent.
 * A client that sends without reading its replies is served only while
 * fewer than 64 KiB of them wait unwritten: its further requests wait, so
 * it costs the daemon that much at most.  Every limit (message size,
 * unread replies, idle time) is enforced here.
 *
 * Lifetime: the server creates a connection at accept; conn_close() starts
 * closing it; it is freed when its handles are closed and the last
 * reference is dropped, never deep in a call chain.
 *
 * The connection knows bytes and messages, not features: a feature that
 * cares about a connection's end subscribes to it (conn_hook_add), one
 * that must keep it open pins it (conn_pin), and a call answered with a
 * stream marks it streaming (conn_set_streaming). */
#ifndef CUDACKPT_CONN_H
#define CUDACKPT_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <cjson/cJSON.h>
#include <uv.h>

#include "base/config.h"
#include "base/life.h"
#include "base/metrics.h"
#include "auth/policy.h"

struct conn;
struct proto_call;

/* What the connections of one server share; it outlives them. */
struct conn_owner {
        uv_loop_t *loop;
        const struct config *cfg;       /* the limits: message size, unread replies, idle time */
        struct metrics *metrics;        /* counts the connections cut */
        struct life *life;              /* once stopping, a connection closes after its request */
        /* One whole message (without its NUL) to answer; may close c. */
        void (*message_cb)(struct conn *c, const char *msg, size_t len);
        /* c's last reference is gone: it is freed when this returns. */
        void (*free_cb)(struct conn *c);
        void *userdata;                 /* message_cb's: the method table */
};

/* A subscriber to a connection's closing, embedded in the subscriber's own
 * object. */
struct conn_hook {
        void (*closing_cb)(struct conn_hook *h, struct conn *c);
        /* Optional: every queued write has been written (a stream's writer
         * may send more); not called once c is closing. */
        void (*drained_cb)(struct conn_hook *h, struct conn *c);
        struct conn_hook *prev, *next;
};

struct conn {
        uv_pipe_t pipe;
        uv_timer_t idle;           /* closes the connection after idle_timeout_ms */
        uint64_t last_active;      /* uv_now() when the last request was answered */
        const struct conn_owner *owner;
        struct policy_caller caller; /* from SO_PEERCRED and SO_PEERGROUPS */
        struct conn *prev, *next;  /* the server's list of connections */
        unsigned refs;             /* the open handles (pipe, idle timer), each write
                                    * queued, and each holder that outlives a callback
                                    * (a request in flight, a watcher); freed at 0 */
        unsigned pins;             /* conn_pin()s: never closed for idleness */
        struct conn_hook *hooks, *hooks_tail; /* closing_cb, in the order added */
        bool closing;              /* conn_close() was called; callbacks return at once */
        bool busy;                 /* a request is being served */
        bool close_after_write;    /* close once queued replies are written */
        bool reading;
        bool read_eof;             /* the client sent all it will send */
        bool streaming;            /* answers one call with a stream: reads only for a hang-up */
        char *buf;                 /* received bytes not yet handled */
        size_t len, cap;
};

/* Takes over an accepted, initialised pipe (c->owner and c->caller set);
 * 0 or -errno (c is then closing). */
int conn_start(struct conn *c);
void conn_close(struct conn *c);
void conn_ref(struct conn *c);
void conn_unref(struct conn *c);

/* h->closing_cb (set by the caller) runs once, when conn_close() begins
 * closing c, in the order the hooks were added; a hook may remove itself
 * or others (a hook another one adds runs in its turn).  Added once c's
 * hooks have run, it never runs: check c->closing first. */
void conn_hook_add(struct conn *c, struct conn_hook *h);
/* Safe for a hook not added (zeroed) or already run. */
void conn_hook_remove(struct conn *c, struct conn_hook *h);
/* While pinned (a count), the idle timeout never closes c. */
void conn_pin(struct conn *c);
void conn_unpin(struct conn *c);
/* c answers its call with a stream (Watch): what the client sends after is
 * dropped, and reading goes on only to see it hang up. */
void conn_set_streaming(struct conn *c, bool on);

/* Queues msg (consumed) for writing.  Cuts the connection if the client
 * leaves more than max_write_queue_bytes unread. */
void conn_send(struct conn *c, cJSON *msg);
/* The same for a message already serialised: data (malloc'ed, taken over)
 * holds len bytes, each message with its NUL terminator. */
void conn_send_bytes(struct conn *c, char *data, size_t len);
/* Answers call with msg (consumed): sent unless the call was oneway. */
void conn_reply(struct conn *c, const struct proto_call *call, cJSON *msg);
/* Whether written bytes still wait in the queue (the socket is full). */
bool conn_write_pending(struct conn *c);
/* Closes the connection once the replies queued so far are written (at
 * once when none wait). */
void conn_close_after_write(struct conn *c);
/* The request in flight was answered: serve the next one. */
void conn_request_done(struct conn *c);
/* The request being handled is answered later, from a callback (an
 * operation, a group, a stream): until conn_request_done() the connection
 * reads no further request and is never idle. */
void conn_request_begin(struct conn *c);

#endif
