/* rejoin.h: the node's part's connection to its node's daemon, kept
 * across a restart of the daemon (nodepart.c; docs/slurm.md, "What each
 * failure leaves").  The daemon keeps an on-close lease across its
 * restart for lease_claim_grace_ms, then undoes it unless its holder
 * claims it again (ClaimLease with the grant's secret): the part watches
 * the connection between phases, so that it claims the lease at once
 * however long the other nodes' phase takes. */
#ifndef CUDACKPT_CTL_NODES_REJOIN_H
#define CUDACKPT_CTL_NODES_REJOIN_H

#include "lease.h"

#include <cudackpt/client.h>

#include <stdbool.h>

/* How often a part whose daemon restarted tries to connect again, between
 * phases (each try waits CUDACKPT_CONNECT_TIMEOUT_MS for the socket). */
#define REJOIN_RETRY_MS 100

typedef struct nodes_conn {
        cudackpt_client *client;
        const char *socket;     /* the daemon's */
        ctl_held held;          /* the on-close lease held (id 0: none), and its secret */
        bool connected;         /* client's connection is open */
} nodes_conn;

/* How long a daemon reached again has to answer on the new connection
 * (GetInfo) before the part takes it for none and tries again. */
#define REJOIN_ANSWER_MS 3000

/* How long a call of a part whose daemon restarted waits for the daemon
 * to answer again (the daemon's default lease_claim_grace_ms). */
#define REJOIN_WAIT_MS 10000

/* The daemon closed the connection (a restart, an upgrade): connects
 * again (the library waits for its socket; tried again until wait_ms has
 * passed) to a daemon that answers on the connection (a killed daemon's
 * listener, closing, may still take one) and, if a lease is held, claims
 * it.  Where the daemon answers that it no longer holds the lease,
 * it undid it (the members run again): c->held becomes none.  What went
 * wrong is said on stderr, each line beginning "NODE: ". */
void nodes_conn_rejoin(nodes_conn *c, const char *node, int wait_ms);

/* Waits until standard input is readable, meanwhile watching the
 * connection: the daemon sends nothing unasked, so its end readable is a
 * hang-up, and then nodes_conn_rejoin() (retried every REJOIN_RETRY_MS
 * while the daemon cannot be reached and keep is set).  Returns 0 once
 * input is readable, with *ret_rejoined set when a hang-up came; -errno
 * when poll() fails.  Standard input must be unbuffered (setvbuf). */
int nodes_conn_await_input(nodes_conn *c, const char *node, bool keep, bool *ret_rejoined);

#endif
