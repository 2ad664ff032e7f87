/* rejoin.c: the node's part's connection across a daemon restart
 * (rejoin.h). */
#include "rejoin.h"

#include "monotime.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <unistd.h>

/* A connection to a daemon that answers on it (GetInfo, which makes no
 * driver call): 0 with *ret_client, else -errno.  The kernel closes a
 * killed daemon's descriptors one by one, so its listening socket may
 * still take a connection a moment after the one the part watched was
 * closed; that connection is reset as the listener closes, and a call
 * sent on it is lost.  Only an answer tells the new daemon's connection
 * from such a one (as ClaimLease's does where a lease is held). */
static int rejoin_connect_live(const char *socket, cudackpt_client **ret_client) {
        cudackpt_client *n = NULL;
        cudackpt_reply reply;
        int r = cudackpt_client_connect(socket, &n);

        if (r < 0)
                return r;
        cudackpt_reply_init(&reply);
        (void)cudackpt_client_set_timeout(n, REJOIN_ANSWER_MS);
        r = cudackpt_call(n, "org.varlink.service.GetInfo", NULL, &reply);
        cudackpt_reply_clear(&reply);
        if (r < 0) {
                cudackpt_client_free(n);
                return r;
        }
        (void)cudackpt_client_set_timeout(n, 0); /* the phases' calls take as long as they take */
        *ret_client = n;
        return 0;
}

/* One try. */
static void rejoin_once(nodes_conn *c, const char *node) {
        char prefix[80];
        cudackpt_client *n = NULL;

        if (c->held.id == 0) {
                if (rejoin_connect_live(c->socket, &n) == 0) {
                        cudackpt_client_free(c->client);
                        c->client = n;
                        c->connected = true;
                }
                return;
        }
        snprintf(prefix, sizeof(prefix), "%s: ", node);
        if (ctl_held_reclaim(c->socket, 0, prefix, &c->client, &c->held) == 0) {
                c->connected = true;
                if (c->held.lost)
                        c->held = (ctl_held){ 0 };
        }
}

void nodes_conn_rejoin(nodes_conn *c, const char *node, int wait_ms) {
        long long deadline = monotime_ms() + wait_ms;

        c->connected = false;
        for (;;) {
                rejoin_once(c, node);
                if (c->connected || monotime_ms() >= deadline)
                        return;
                (void)poll(NULL, 0, REJOIN_RETRY_MS);
        }
}

int nodes_conn_await_input(nodes_conn *c, const char *node, bool keep, bool *ret_rejoined) {
        for (;;) {
                struct pollfd f[2] = { { .fd = STDIN_FILENO, .events = POLLIN },
                                       { .fd = c->connected ? cudackpt_client_fd(c->client) : -1, .events = POLLIN } };
                int k = poll(f, 2, c->connected || !keep ? -1 : REJOIN_RETRY_MS);

                if (k < 0 && errno != EINTR)
                        return -errno;
                /* A hang-up that came with the next phase is seen first:
                 * the phase's call then goes to the daemon that answers,
                 * not to the connection it closed. */
                if ((k > 0 && f[1].revents) || (k == 0 && !c->connected)) {
                        *ret_rejoined = true;
                        nodes_conn_rejoin(c, node, 0);
                        continue;
                }
                if (k > 0 && f[0].revents)
                        return 0;
        }
}
