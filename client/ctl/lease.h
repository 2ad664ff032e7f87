/* lease.h: lock and suspend with a lease (--lease-ms, --hold), release
 * and renew. */
#ifndef CUDACKPT_CTL_LEASE_H
#define CUDACKPT_CTL_LEASE_H

#include <cudackpt/client.h>

#include <stdbool.h>

/* lock or suspend of one PID with a lease, and --hold. */
typedef struct ctl_lease_op {
        const char *prefix;
        const char *method;             /* CUDACKPT_METHOD_LOCK or _SUSPEND */
        const char *undo_method;        /* CUDACKPT_METHOD_UNLOCK or _RESUME */
        int pid;
        long long lock_timeout;         /* -1: the daemon's default */
        long long lease_ms;             /* -1: none */
        bool hold;                      /* lease_on_close, held until command ends or a signal */
        char **command;                 /* NULL-terminated, or NULL: hold until SIGINT/SIGTERM/SIGHUP */
        bool json;
        const char *socket;             /* to connect again after a daemon restart */
        int timeout_ms;                 /* --timeout, for such a connection */
} ctl_lease_op;

/* --hold: when the daemon closes the connection meanwhile (a restart),
 * connects again and claims the lease (ClaimLease), so *clientp may be
 * replaced. */
int ctl_lease_run(cudackpt_client **clientp, const ctl_lease_op *o);

/* The lease a --hold holds (a single process's or a group's), to claim it
 * again after a daemon restart. */
typedef struct ctl_held {
        long long id;                   /* 0: none in the reply */
        char secret[65];                /* "": none */
        bool connected;                 /* the connection that holds it is open */
        bool lost;                      /* the daemon no longer knows it as ours */
} ctl_held;
/* The lease of a reply's parameters (the grant's "lease"). */
void ctl_held_of(const char *parameters_json, ctl_held *h);
/* The daemon closed the connection that holds h (a restart, an upgrade):
 * connects again to socket (the library waits for it) and claims the lease
 * with its secret (ClaimLease), replacing *clientp once the daemon
 * answered; timeout_ms bounds the new connection's calls (0: none), prefix
 * begins what is said on stderr.  Returns -errno while the daemon cannot
 * be reached, to be tried again; 0 once it answered (h->lost when it
 * refused, or h has no secret). */
int ctl_held_reclaim(const char *socket, int timeout_ms, const char *prefix, cudackpt_client **clientp,
                     ctl_held *h);
/* --hold's wait: runs o->command (or waits for a stop signal), passing a
 * stop signal on to it, while keeping h held across daemon restarts (uses
 * o->prefix, command, socket, timeout_ms); then, if the holding connection
 * is still lost, connects again and claims it.  Returns the command's
 * status (0 without one), or a failure exit code when the daemon cannot be
 * reached again; h->lost when the daemon undid the lease meanwhile. */
int ctl_hold_keep(const ctl_lease_op *o, cudackpt_client **clientp, ctl_held *h);

/* --hold: called before the operation, makes SIGINT, SIGTERM and SIGHUP
 * end the hold (ctl_hold_keep() passes them on to its command) rather than
 * the client. */
void ctl_hold_signals(void);

/* release LEASE, renew LEASE MS. */
int ctl_lease_manage(cudackpt_client *client, const char *prefix, long long lease, long long renew_ms, bool json);

#endif
