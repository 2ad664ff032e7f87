/* watchbuf.h: a watcher's output buffer, and the memory all watchers'
 * buffers take.
 *
 * Events for a watcher gather in its buffer while its previous write is
 * in flight; a buffer counts what it has allocated plus the buffer being
 * written.  A buffer that would pass max_watcher_bytes, or make all pass
 * max_watch_bytes (or, for an unprivileged caller's, the part of it the
 * watchers' reserve does not keep for privileged ones), is cut: nothing
 * more is appended and its watcher is to be disconnected.  Pure logic (no
 * libuv, no connection): watch.c writes what it takes; test_watchbuf.c
 * checks the bounds. */
#ifndef CUDACKPT_WATCHBUF_H
#define CUDACKPT_WATCHBUF_H

#include <stdbool.h>
#include <stddef.h>

struct watchbuf_pool {
        size_t max_one;                 /* max_watcher_bytes */
        size_t max_all;                 /* max_watch_bytes */
        size_t max_unprivileged;        /* of max_all, what unprivileged callers' may take */
        size_t mem;                     /* what all buffers take */
        size_t mem_unprivileged;        /* ... those of unprivileged callers' watchers */
};

struct watchbuf {
        char *out;                      /* events not yet handed to the connection */
        size_t len, cap;
        size_t in_flight;               /* the size of the buffer being written, 0 none */
        size_t mem;                     /* cap + in_flight, counted in the pool */
        bool cut;                       /* it would have passed a bound */
        bool privileged;                /* its caller has a reserve (set before use) */
};

/* The bounds; reserved of limit watchers are kept for privileged callers,
 * and as much of max_all for their buffers. */
void watchbuf_pool_init(struct watchbuf_pool *p, size_t max_one, size_t max_all, unsigned limit, unsigned reserved);
/* Appends len bytes; false when the buffer is (now) cut. */
bool watchbuf_append(struct watchbuf_pool *p, struct watchbuf *b, const char *data, size_t len);
/* Hands the pending bytes over for writing (malloc'ed, taken over; NULL
 * when none); *ret_len gets their length, *ret_cap the buffer's size. */
char *watchbuf_take(struct watchbuf_pool *p, struct watchbuf *b, size_t *ret_len, size_t *ret_cap);
/* A write of a buffer of size cap is in flight (0: it was written at once). */
void watchbuf_writing(struct watchbuf_pool *p, struct watchbuf *b, size_t cap);
/* The write in flight is done. */
void watchbuf_drained(struct watchbuf_pool *p, struct watchbuf *b);
/* Frees the buffer and takes it out of the count; returns what it took. */
size_t watchbuf_release(struct watchbuf_pool *p, struct watchbuf *b);

#endif
