/* listen.c: socket activation, binding the daemon's own socket, and
 * closing them at the stop (listen.h). */
#include "net/listen.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "base/log.h"

/* fd, a socket bound or passed, listens and is accepted on; the set owns
 * it even when this fails. */
static int listen_on(struct listen_set *l, int fd)
{
        if (listen(fd, SOMAXCONN) < 0) { /* the largest backlog: a passed socket's is never shrunk */
                int r = -errno;
                close(fd);
                return r;
        }
        return accept_add(&l->accept, fd);
}

static int take_activated_sockets(struct listen_set *l)
{
        char **names = NULL;
        int n = sd_listen_fds_with_names(1, &names), served = 0, r;

        if (n <= 0)
                return n;
        for (int i = 0; i < n; i++) {
                int fd = SD_LISTEN_FDS_START + i;
                const char *name = names && names[i] ? names[i] : "unknown";

                if (sd_is_socket(fd, AF_UNIX, SOCK_STREAM, 1) <= 0 ||
                    l->accept.n >= ACCEPT_MAX) {
                        log_warning("Passed file descriptor %d (%s) is not a listening AF_UNIX stream socket, ignoring",
                                    fd, name);
                        close(fd);
                        continue;
                }
                (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
                r = listen_on(l, fd);
                if (r < 0) {
                        log_error("Failed to serve passed socket %d (%s): %s", fd, name, strerror(-r));
                        continue;
                }
                served++;
                log_info("Serving socket-activated socket %d (%s)", fd, name);
        }
        for (int i = 0; names && i < n; i++)
                free(names[i]);
        free(names);
        /* Under socket activation the daemon serves what it was given: binding
         * a socket of its own would serve a path nobody configured. */
        if (served == 0) {
                log_error("None of the %d passed file descriptors can be served", n);
                return -EBADF;
        }
        return served;
}

/* A socket file left by a daemon that died is removed; a live one is not. */
static int clear_stale_socket(const char *path)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct stat st;
        int fd, r;

        if (lstat(path, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISSOCK(st.st_mode))
                return -EEXIST;
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        strncpy(sa.sun_path, path, sizeof(sa.sun_path) - 1);
        r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
        close(fd);
        if (r == 0)
                return -EADDRINUSE;
        return unlink(path) < 0 ? -errno : 0;
}

static int bind_own_socket(struct listen_set *l)
{
        const char *path = l->cfg->socket_path;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char *dir = strdup(path);
        mode_t old;
        int fd, r;

        if (!dir)
                return -ENOMEM;
        if (strlen(path) >= sizeof(sa.sun_path)) {
                free(dir);
                log_error("Socket path %s is too long", path);
                return -ENAMETOOLONG;
        }
        /* The runtime directory (/run/cudackpt) is created when missing;
         * nothing above it is. */
        if (mkdir(dirname(dir), 0755) < 0 && errno != EEXIST) {
                r = -errno;
                log_error("Failed to create %s: %s", dir, strerror(errno));
                free(dir);
                return r;
        }
        free(dir);
        r = clear_stale_socket(path);
        if (r < 0) {
                log_error("Failed to bind %s: %s", path,
                          r == -EADDRINUSE ? "another daemon is serving it"
                          : r == -EEXIST   ? "a file that is not a socket is in the way"
                                           : strerror(-r));
                return r;
        }
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
                log_error("Failed to listen on %s: %s", path, strerror(errno));
                return -errno;
        }
        memcpy(sa.sun_path, path, strlen(path) + 1);
        old = umask(0177); /* no window in which the socket is open to all */
        r = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
        umask(old);
        if (r == 0 && chmod(path, l->cfg->socket_mode) < 0)
                r = -errno;
        if (r < 0)
                close(fd);
        else
                r = listen_on(l, fd);
        if (r < 0) {
                log_error("Failed to listen on %s: %s", path, strerror(-r));
                return r;
        }
        l->bound_path = strdup(path);
        log_info("Listening on %s", path);
        return 0;
}

int listen_start(struct listen_set *l, uv_loop_t *loop, const struct config *cfg, struct metrics *metrics,
                 accept_cb cb, void *data)
{
        int r;

        l->cfg = cfg;
        accept_init(&l->accept, loop, metrics, cfg->accept_retry_ms, cb, data);
        r = take_activated_sockets(l);
        if (r == 0)
                r = bind_own_socket(l);
        return r < 0 ? r : 0;
}

void listen_stop(struct listen_set *l)
{
        accept_stop(&l->accept);
        if (l->bound_path) {
                unlink(l->bound_path);
                free(l->bound_path);
                l->bound_path = NULL;
        }
}

void listen_free(struct listen_set *l)
{
        free(l->bound_path);
        l->bound_path = NULL;
}
