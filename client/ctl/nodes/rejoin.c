/* rejoin.c: the node's part's connection across a daemon restart
 * (rejoin.h). */
#include "rejoin.h"

#include "monotime.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <unistd.h>

/* One try. */
static void rejoin_once(nodes_conn *c, const char *node) {
        char prefix[80];
        cudackpt_client *n = NULL;

        if (c->held.id == 0) {
                if (cudackpt_client_connect(c->socket, &n) == 0) {
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
                if (k > 0 && f[0].revents)
                        return 0;
                if ((k > 0 && f[1].revents) || (k == 0 && !c->connected)) {
                        *ret_rejoined = true;
                        nodes_conn_rejoin(c, node, 0);
                }
        }
}
