/* read_file.c: a whole file read into memory (see read_file.h). */
#include "read_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

ssize_t test_read_file(const char *path, char **ret_buf)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        size_t len = 0, cap = 0;
        char *buf = NULL;

        if (fd < 0)
                return -errno;
        for (;;) {
                if (cap - len < 4096) {
                        size_t ncap = cap ? cap * 2 : 65536;
                        char *nb = realloc(buf, ncap);
                        if (!nb) {
                                free(buf);
                                close(fd);
                                return -ENOMEM;
                        }
                        buf = nb;
                        cap = ncap;
                }
                ssize_t n = read(fd, buf + len, cap - len - 1);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t)n;
        }
        close(fd);
        buf[len] = '\0';
        *ret_buf = buf;
        return (ssize_t)len;
}
