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
 * reference (one per request in flight) is dropped, never deep in a call
 * chain. */
#ifndef CUDACKPT_CONN_H
#define CUDACKPT_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <cjson/cJSON.h>
#include <uv.h>

#include "policy.h"

struct server;

struct conn {
        uv_pipe_t pipe;
        uv_timer_t idle;           /* closes the connection after idle_timeout_ms */
        uint64_t last_active;      /* uv_now() when the last request was answered */
        struct server *server;
        struct policy_caller caller; /* from SO_PEERCRED and SO_PEERGROUPS */
        struct conn *prev, *next;  /* server's list of connections */
        unsigned refs;             /* open handles + requests in flight */
        bool closing;              /* conn_close() was called; callbacks return at once */
        bool busy;                 /* a request is being served */
        bool close_after_write;    /* close once queued replies are written */
        bool reading;
        bool read_eof;             /* the client sent all it will send */
        unsigned leases;           /* on-close leases it holds: never idle */
        struct watcher *watcher;   /* Watch made it a watcher (watch.h) */
        void (*drain_cb)(struct conn *c); /* called when queued writes are all written */
        char *buf;                 /* received bytes not yet handled */
        size_t len, cap;
};

/* Takes over an accepted, initialised pipe; 0 or -errno. */
int conn_start(struct conn *c);
void conn_close(struct conn *c);
void conn_ref(struct conn *c);
void conn_unref(struct conn *c);

/* Queues msg (consumed) for writing.  Cuts the connection if the client
 * leaves more than max_write_queue_bytes unread. */
void conn_send(struct conn *c, cJSON *msg);
/* The same for a message already serialised: data (malloc'ed, taken over)
 * holds len bytes, each message with its NUL terminator. */
void conn_send_bytes(struct conn *c, char *data, size_t len);
/* Whether written bytes still wait in the queue (the socket is full). */
bool conn_write_pending(struct conn *c);
/* Closes the connection once the replies queued so far are written (at
 * once when none wait). */
void conn_close_after_write(struct conn *c);
/* The request in flight was answered: serve the next one. */
void conn_request_done(struct conn *c);

#endif
