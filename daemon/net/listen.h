/* listen.h: the daemon's listening sockets.
 *
 * Under socket activation the daemon serves the sockets systemd passed it
 * (all those that are listening AF_UNIX stream sockets) and nothing else;
 * without, it binds cfg->socket_path itself (mode socket_mode, its
 * directory created when missing, a socket file left by a dead daemon
 * removed) and unlinks it at the stop.  Accepting is accept.h's: cb
 * runs with each connection accepted. */
#ifndef CUDACKPT_LISTEN_H
#define CUDACKPT_LISTEN_H

#include <uv.h>

#include "base/config.h"
#include "base/metrics.h"
#include "net/accept.h"

struct listen_set {
        const struct config *cfg;
        struct accept_set accept;       /* the sockets served, accepted on (accept.h) */
        char *bound_path;               /* the socket bound here, unlinked at the stop */
};

/* Serves the passed sockets, else binds one; 0 or -errno (logged). */
int listen_start(struct listen_set *l, uv_loop_t *loop, const struct config *cfg, struct metrics *metrics,
                 accept_cb cb, void *data);
/* Closes the sockets and unlinks the one bound here. */
void listen_stop(struct listen_set *l);
void listen_free(struct listen_set *l);

#endif
