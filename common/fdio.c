/* fdio.c: see fdio.h. */
#include "fdio.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

int fdio_write_all(int fd, const void *buf, size_t len)
{
        const char *p = buf;

        while (len > 0) {
                ssize_t k = write(fd, p, len);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        return -EIO;
                p += k;
                len -= (size_t)k;
        }
        return 0;
}

ssize_t fdio_read_at(int dir_fd, const char *name, char *buf, size_t size)
{
        int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        size_t len = 0;
        ssize_t k;

        if (fd < 0)
                return -errno;
        while (len < size - 1 && (k = read(fd, buf + len, size - 1 - len)) != 0) {
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0) {
                        k = -errno;
                        close(fd);
                        return k;
                }
                len += (size_t)k;
        }
        close(fd);
        buf[len] = '\0';
        return (ssize_t)len;
}

int fdio_opendir(int dir_fd, DIR **ret)
{
        /* A new open file description: readdir's offset is its own. */
        int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d;

        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                int r = -errno;
                close(fd);
                return r;
        }
        *ret = d;
        return 0;
}
