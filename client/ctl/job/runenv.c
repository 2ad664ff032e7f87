/* runenv.c: run --env-fd's environment, read and checked (runenv.h). */
#include "runenv.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Up to max bytes of fd, to its end, into buf; how many (max + 1: more
 * than max), or -errno. */
static ssize_t env_slurp(int fd, char *buf, size_t max) {
        size_t len = 0;

        for (;;) {
                struct pollfd pf = { .fd = fd, .events = POLLIN };
                ssize_t k = read(fd, buf + len, max + 1 - len);

                if (k == 0)
                        return (ssize_t) len;
                if (k > 0) {
                        len += (size_t) k;
                        if (len > max)
                                return (ssize_t) len;
                } else if (errno == EAGAIN) {
                        if (poll(&pf, 1, -1) < 0 && errno != EINTR)
                                return -errno;
                } else if (errno != EINTR)
                        return -errno;
        }
}

/* buf[0..len) (its last byte NUL) as runenv.h says: 0 or -EINVAL, -E2BIG
 * (err said). */
static int env_check(const char *buf, size_t len, char *err, size_t err_size) {
        size_t n = 0;

        for (size_t off = 0; off < len; n++) {
                const char *e = buf + off, *eq = strchr(e, '=');

                if (n == CTL_RUN_ENV_MAX_ENTRIES) {
                        snprintf(err, err_size, "--env-fd: more than %d entries", CTL_RUN_ENV_MAX_ENTRIES);
                        return -E2BIG;
                }
                if (!eq || eq == e) {
                        snprintf(err, err_size, "--env-fd: entry %zu is not KEY=VALUE", n + 1);
                        return -EINVAL;
                }
                off += strlen(e) + 1;
        }
        return 0;
}

int ctl_run_env_read(int fd, char *err, size_t err_size) {
        char *buf = malloc(CTL_RUN_ENV_MAX_BYTES + 2);
        ssize_t len = buf ? env_slurp(fd, buf, CTL_RUN_ENV_MAX_BYTES) : -ENOMEM;
        int r = len < 0 ? (int) len : 0, mfd = -1;

        if (r < 0)
                snprintf(err, err_size, "--env-fd: %s", strerror(-r));
        else if (len > CTL_RUN_ENV_MAX_BYTES) {
                snprintf(err, err_size, "--env-fd: more than %d bytes", CTL_RUN_ENV_MAX_BYTES);
                r = -E2BIG;
        } else {
                /* The last NUL is optional. */
                if (len > 0 && buf[len - 1] != '\0')
                        buf[len++] = '\0';
                r = env_check(buf, (size_t) len, err, err_size);
        }
        if (r == 0) {
                errno = 0;
                mfd = memfd_create("cudackpt-env", MFD_CLOEXEC | MFD_ALLOW_SEALING);
                if (mfd >= 0 && mfd <= STDERR_FILENO) {
                        int high = fcntl(mfd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);

                        close(mfd);
                        mfd = high;
                }
                if (mfd < 0 || write(mfd, buf, (size_t) len) != len ||
                    fcntl(mfd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0) {
                        r = errno ? -errno : -EIO;
                        snprintf(err, err_size, "--env-fd: its copy: %s", strerror(-r));
                }
        }
        free(buf);
        if (r < 0 && mfd >= 0)
                close(mfd);
        return r < 0 ? r : mfd;
}
