/* connect.c: libcudackpt's way to the daemon's socket (connect.h): a
 * connect that waits out a restarting daemon, the waits of every call,
 * the environment's numbers. */
#include "connect.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "monotime.h"

/* Wait until fd is ready for events, or the deadline (-1: none) passes. */
int client_wait(int fd, short events, int64_t deadline_ms) {
        for (;;) {
                struct pollfd p = { .fd = fd, .events = events };
                int wait_ms = -1, r;

                if (deadline_ms >= 0) {
                        int64_t left = deadline_ms - monotime_ms();

                        if (left <= 0)
                                return -ETIMEDOUT;
                        wait_ms = left > INT_MAX ? INT_MAX : (int) left;
                }
                r = poll(&p, 1, wait_ms);
                if (r < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (r == 0)
                        continue; /* the deadline check above decides */
                /* POLLHUP/POLLERR: let the next read or write report what happened. */
                return 0;
        }
}

/* A connect() interrupted by a signal goes on in the background: wait for
 * it to finish and fetch its result instead of calling connect() again. */
static int client_finish_connect(int fd) {
        int r, err = 0;
        socklen_t len = sizeof(err);

        r = client_wait(fd, POLLOUT, -1);
        if (r < 0)
                return r;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                return -errno;
        return -err;
}

/* The value of the environment variable name (read with secure_getenv()):
 * a plain decimal number (digits only: no sign, no spaces) from 0 to max,
 * else def (unset, empty or invalid), as the Python client reads it. */
int64_t client_env_number(const char *name, int64_t max, int64_t def) {
        const char *v = secure_getenv(name);
        char *end;
        long long n;

        if (!v || *v < '0' || *v > '9')
                return def;
        errno = 0;
        n = strtoll(v, &end, 10);
        if (errno || *end || end == v || n < 0 || n > max)
                return def;
        return n;
}

/* How long cudackpt_client_connect() waits for a daemon that is not
 * there: $CUDACKPT_CONNECT_TIMEOUT_MS, else the default. */
static int64_t client_connect_timeout_ms(void) {
        return client_env_number(CUDACKPT_CONNECT_TIMEOUT_ENV, CUDACKPT_CONNECT_TIMEOUT_MAX_MS,
                                 CUDACKPT_CONNECT_TIMEOUT_DEFAULT_MS);
}

/* One connect(); the socket on success, else -errno. */
static int client_connect_once(const struct sockaddr_un *sa, size_t len) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), r;

        if (fd < 0)
                return -errno;
        r = connect(fd, (const struct sockaddr *) sa, (socklen_t) (offsetof(struct sockaddr_un, sun_path) + len + 1));
        if (r < 0)
                r = errno == EINTR ? client_finish_connect(fd) : -errno;
        if (r < 0) {
                close(fd);
                return r;
        }
        return fd;
}

/* ECONNREFUSED from a path that is no socket at all (a regular file, a
 * directory's name mistyped): -ENOTSOCK, which no restart will mend. */
static int client_refused_why(const char *path, int r) {
        struct stat st;

        if (r == -ECONNREFUSED && stat(path, &st) == 0 && !S_ISSOCK(st.st_mode))
                return -ENOTSOCK;
        return r;
}

/* A daemon that is restarting has no socket file (ENOENT), a file nobody
 * listens on (ECONNREFUSED) or a full backlog (EAGAIN) for a moment:
 * try again, waiting longer each time, until the timeout. */
int client_connect_retrying(const struct sockaddr_un *sa, size_t len) {
        int64_t deadline = monotime_ms() + client_connect_timeout_ms(), delay = 20;

        for (;;) {
                int fd = client_refused_why(sa->sun_path, client_connect_once(sa, len));
                int64_t left = deadline - monotime_ms();
                struct timespec ts;

                if (fd >= 0 || (fd != -ENOENT && fd != -ECONNREFUSED && fd != -EAGAIN) || left <= 0)
                        return fd;
                if (delay > left)
                        delay = left;
                ts = (struct timespec) { .tv_sec = delay / 1000, .tv_nsec = (long) (delay % 1000) * 1000000 };
                while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                        ;
                delay = delay * 2 > 500 ? 500 : delay * 2;
        }
}
