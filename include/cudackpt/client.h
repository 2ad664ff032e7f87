/* cudackpt/client.h: the C client library of cudackptd (libcudackpt.so).
 *
 * A client connects to the daemon's Varlink socket, sends one call at a
 * time and reads its reply.  Every call blocks until the daemon answers
 * (driver operations can take tens of seconds), or until the optional
 * timeout set with cudackpt_client_set_timeout() expires.  A client handle
 * is not thread-safe: use one per thread, or serialise calls on it.
 *
 * Conventions: functions return 0 on success and a negative errno value on
 * failure; output parameters (ret_*) are written only on success.
 *
 * A call "succeeds" (returns 0) whenever the daemon answered, including when
 * it answered with a Varlink error: check ret_reply->error.  A negative
 * return means no usable answer arrived:
 *   -EINVAL       a bad argument (pid <= 0, an odd gpu_mapping, ...), nothing sent
 *   -ECONNRESET   the daemon closed the connection before a whole reply
 *   -ETIMEDOUT    the timeout expired
 *   -EPROTO       the reply is not a valid Varlink reply (not JSON, ...)
 *   -EMSGSIZE     the reply exceeds CUDACKPT_CLIENT_MAX_REPLY_BYTES
 *   -ENOTCONN     an earlier call on this client failed in one of the ways
 *                 above; the connection cannot be trusted any more (a late
 *                 reply would be taken for the answer to the next call), so
 *                 free the client and connect again
 *   -ENOMEM       out of memory
 * and any other errno of the socket calls. */
#ifndef CUDACKPT_CLIENT_H
#define CUDACKPT_CLIENT_H

#include <cudackpt/protocol.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility; only what carries this is
 * exported from libcudackpt.so. */
#if defined(__GNUC__) || defined(__clang__)
#define CUDACKPT_EXPORT __attribute__((visibility("default")))
#else
#define CUDACKPT_EXPORT
#endif

/* Longest reply the library accepts, NUL terminator excluded.  Bigger
 * replies fail with -EMSGSIZE, so a hostile server cannot make a client
 * buffer without bound. */
#define CUDACKPT_CLIENT_MAX_REPLY_BYTES (16u * 1024u * 1024u)

/* A connection to cudackptd.  Opaque. */
typedef struct cudackpt_client cudackpt_client;

/* One reply of the daemon, decoded.  The typed fields are filled from the
 * reply's parameters (of a success or of an error) when present there with
 * the right type and range, else they hold the "absent" value given.
 * All strings are owned by the reply; cudackpt_reply_clear() frees them. */
typedef struct cudackpt_reply {
        char *error;            /* NULL on success, else the Varlink error name */
        char *parameters_json;  /* the parameters object of the reply or error, as JSON text
                                 * (never NULL after a successful call; "{}" when absent) */
        int pid;                /* -1 when absent */
        char *state;            /* NULL when absent */
        char *in_flight;        /* NULL when absent */
        double duration_ms;     /* -1 when absent */
        int restore_thread_id;  /* -1 when absent */
} cudackpt_reply;

/* How long cudackpt_client_connect() keeps trying while the daemon is not
 * there (its socket is missing or refuses: a daemon being restarted or
 * upgraded), in milliseconds: $CUDACKPT_CONNECT_TIMEOUT_MS (read with
 * secure_getenv(); 0 to CUDACKPT_CONNECT_TIMEOUT_MAX_MS, 0 = one try;
 * anything else means the default). */
#define CUDACKPT_CONNECT_TIMEOUT_ENV "CUDACKPT_CONNECT_TIMEOUT_MS"
#define CUDACKPT_CONNECT_TIMEOUT_DEFAULT_MS 3000
#define CUDACKPT_CONNECT_TIMEOUT_MAX_MS 600000

/* The spin of a new client (cudackpt_client_set_spin()), in microseconds:
 * $CUDACKPT_SPIN_US (read with secure_getenv() at connect; 0 to
 * CUDACKPT_CLIENT_SPIN_MAX_US; anything else means 0, no spin), so that a
 * program can opt in without a change of its code. */
#define CUDACKPT_SPIN_ENV "CUDACKPT_SPIN_US"
/* The longest spin: one second. */
#define CUDACKPT_CLIENT_SPIN_MAX_US 1000000

/* Connect to the daemon.  socket_path NULL means $CUDACKPT_SOCKET (read with
 * secure_getenv(), ignored when empty), else CUDACKPT_DEFAULT_SOCKET.
 * While connect() fails with ENOENT, ECONNREFUSED or EAGAIN it is tried
 * again, 20 ms later and then up to every 500 ms, for the connect timeout
 * above (3 s by default), so a client started while the daemon restarts
 * waits for it.
 * Returns -ENAMETOOLONG for a path that does not fit in sockaddr_un, -EINVAL
 * for an empty one, -ENOTSOCK at once for a path that exists and is no
 * socket (connect() says ECONNREFUSED for it, which no restart mends),
 * else the errno of socket()/connect() (-ENOENT, -ECONNREFUSED, -EACCES,
 * ...). */
CUDACKPT_EXPORT int cudackpt_client_connect(const char *socket_path, cudackpt_client **ret_client);

/* The connection's socket, to poll() for the daemon closing it (it sends
 * nothing unasked: readable between calls means it hung up); -EINVAL for
 * NULL.  Read or write it only through the calls below. */
CUDACKPT_EXPORT int cudackpt_client_fd(const cudackpt_client *c);

/* Close the connection and free the client.  Accepts NULL. */
CUDACKPT_EXPORT void cudackpt_client_free(cudackpt_client *c);

/* Limit each later call (sending the request and reading the whole reply)
 * to timeout_ms milliseconds; 0 (the default) waits without limit.  A call
 * that runs out of time returns -ETIMEDOUT; the daemon still carries out
 * the operation.  For cudackpt_call_more() the limit covers the whole
 * call, every progress reply and the progress callbacks included, not
 * each reply: a server cannot stretch a call without end by sending
 * progress.  Returns -EINVAL for a negative timeout. */
CUDACKPT_EXPORT int cudackpt_client_set_timeout(cudackpt_client *c, int timeout_ms);

/* Make each later call busy-wait for its reply for up to spin_us
 * microseconds after its request is sent, before it sleeps as usual: the
 * socket is polled with recv(MSG_DONTWAIT), a CPU pause instruction
 * between tries and sched_yield() every few tens of them.  A thread that
 * sleeps in recv() pays for being woken when the reply comes (tens of
 * microseconds on a virtual machine whose idle vCPU halts); a spinning one
 * does not.  The cost: the calling thread burns a whole core for up to
 * spin_us on every call (a call whose reply takes longer spins for all of
 * spin_us, then sleeps).  Worth it only for latency-bound loops of short
 * calls (GetState, GetInfo) on a machine with idle cores; set it to a bit
 * more than the calls take (a GetState on a GPU takes about 100 us).
 * 0 (the default, unless $CUDACKPT_SPIN_US says otherwise) never spins.
 * Values above CUDACKPT_CLIENT_SPIN_MAX_US are taken as that maximum.  The
 * timeout of cudackpt_client_set_timeout() still bounds the whole call:
 * the spin ends at its deadline.  Returns -EINVAL for a negative spin_us. */
CUDACKPT_EXPORT int cudackpt_client_set_spin(cudackpt_client *c, int spin_us);

/* Set every field of *r to its "absent" value.  Call it on a reply before
 * its first use. */
CUDACKPT_EXPORT void cudackpt_reply_init(cudackpt_reply *r);

/* Free the strings of *r and init it again.  Accepts NULL. */
CUDACKPT_EXPORT void cudackpt_reply_clear(cudackpt_reply *r);

/* Every call below writes *ret_reply wholesale when it returns 0, without
 * freeing what it held: clear a reply before passing it again. */

/* Call any method.  parameters_json: a JSON object as text, or NULL for {}
 * (-EINVAL when it is not an object).  The request is serialised by cJSON,
 * so strings in it are escaped correctly. */
CUDACKPT_EXPORT int cudackpt_call(cudackpt_client *c, const char *method, const char *parameters_json,
                                  cudackpt_reply *ret_reply);

/* Called by cudackpt_call_more() for each reply that says more replies
 * follow ("continues": true), with that reply's parameters object as JSON
 * text (valid only during the call; "{}" when absent).  Return 0 to go
 * on, or a negative errno value to stop: cudackpt_call_more() then
 * returns that value at once, and since the call's remaining replies are
 * never read, the client is left unusable (-ENOTCONN afterwards). */
typedef int (*cudackpt_progress_fn)(void *ctx, const char *parameters_json);

/* Call any method with "more": true, for methods that report progress
 * (the Group methods of io.cudackpt.Process): each reply with
 * "continues": true goes to fn (NULL: read and dropped), and the last
 * reply, or an error, is decoded into *ret_reply as by cudackpt_call().
 * Every reply is held to CUDACKPT_CLIENT_MAX_REPLY_BYTES (-EMSGSIZE); an
 * error reply that says "continues": true is -EPROTO.  The timeout of
 * cudackpt_client_set_timeout() bounds the whole call.  A failure after
 * the request was sent (-EMSGSIZE, -EPROTO, -ETIMEDOUT, -ENOMEM, an
 * error of fn, ...) leaves the client unusable. */
CUDACKPT_EXPORT int cudackpt_call_more(cudackpt_client *c, const char *method, const char *parameters_json,
                                       cudackpt_progress_fn fn, void *ctx, cudackpt_reply *ret_reply);

/* io.cudackpt.Process.GetState: fills pid, state and, while another
 * operation on the process runs, in_flight. */
CUDACKPT_EXPORT int cudackpt_get_state(cudackpt_client *c, int pid, cudackpt_reply *ret_reply);

/* io.cudackpt.Process.GetRestoreThreadId: fills pid, state, restore_thread_id. */
CUDACKPT_EXPORT int cudackpt_get_restore_thread_id(cudackpt_client *c, int pid, cudackpt_reply *ret_reply);

/* The operations fill pid, state and duration_ms.
 * timeout_ms (Lock, Suspend): how long to wait for the process's submitted
 * work; < 0 leaves it to the daemon's configured default, 0 waits without
 * limit, at most 4294967295 (the driver's range; larger is -EINVAL).
 * gpu_mapping (Restore, Resume): NULL or an empty array restores in place;
 * otherwise a NULL-terminated array old0, new0, old1, new1, ..., NULL of
 * GPU UUID strings.  An odd count or an old UUID named twice is -EINVAL;
 * the daemon checks the UUIDs themselves (InvalidGpuMapping). */
CUDACKPT_EXPORT int cudackpt_lock(cudackpt_client *c, int pid, long long timeout_ms, cudackpt_reply *ret_reply);
CUDACKPT_EXPORT int cudackpt_checkpoint(cudackpt_client *c, int pid, cudackpt_reply *ret_reply);
CUDACKPT_EXPORT int cudackpt_restore(cudackpt_client *c, int pid, const char *const *gpu_mapping,
                                     cudackpt_reply *ret_reply);
CUDACKPT_EXPORT int cudackpt_unlock(cudackpt_client *c, int pid, cudackpt_reply *ret_reply);
/* Lock then Checkpoint; the daemon unlocks again if the checkpoint fails. */
CUDACKPT_EXPORT int cudackpt_suspend(cudackpt_client *c, int pid, long long timeout_ms, cudackpt_reply *ret_reply);
/* Restore then Unlock. */
CUDACKPT_EXPORT int cudackpt_resume(cudackpt_client *c, int pid, const char *const *gpu_mapping,
                                    cudackpt_reply *ret_reply);
/* Restore and Resume with flags: CUDACKPT_FORCE sends force: true, which
 * skips the daemon's check that the restore fits in the free memory of
 * its GPUs (InsufficientGpuMemory).  Other flags are -EINVAL. */
#define CUDACKPT_FORCE 1u
CUDACKPT_EXPORT int cudackpt_restore_flags(cudackpt_client *c, int pid, const char *const *gpu_mapping,
                                           unsigned flags, cudackpt_reply *ret_reply);
CUDACKPT_EXPORT int cudackpt_resume_flags(cudackpt_client *c, int pid, const char *const *gpu_mapping,
                                          unsigned flags, cudackpt_reply *ret_reply);

#ifdef __cplusplus
}
#endif

#endif
