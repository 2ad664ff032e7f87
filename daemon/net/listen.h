/* listen.h: the daemon's listening sockets.
 *
 * Under socket activation the daemon serves the sockets systemd passed it
 * (all those that are listening AF_UNIX stream sockets) and nothing else;
 * without, it binds cfg->socket_path itself (mode socket_mode, its
 * directory created when missing, a socket file left by a dead daemon
 * removed) and unlinks it at the stop.  Accepting is the caller's:
 * connection_cb runs with the listening pipe's data set to data. */
#ifndef CUDACKPT_LISTEN_H
#define CUDACKPT_LISTEN_H

#include <uv.h>

#include "base/config.h"

#define LISTEN_MAX 16

struct listen_set {
        uv_loop_t *loop;
        const struct config *cfg;
        uv_connection_cb connection_cb;
        void *data;                     /* each pipe's, for connection_cb */
        uv_pipe_t pipes[LISTEN_MAX];
        unsigned n;                     /* slots used (a failed one stays used, closed) */
        char *bound_path;               /* the socket bound here, unlinked at the stop */
};

/* Serves the passed sockets, else binds one; 0 or -errno (logged). */
int listen_start(struct listen_set *l, uv_loop_t *loop, const struct config *cfg, uv_connection_cb connection_cb,
                 void *data);
/* Closes the sockets and unlinks the one bound here. */
void listen_stop(struct listen_set *l);
void listen_free(struct listen_set *l);

#endif
