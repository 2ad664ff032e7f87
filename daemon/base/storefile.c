/* storefile.c: the daemon's small state files (storefile.h). */
#include "base/storefile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int put(int fd, const char *p, size_t len)
{
        while (len > 0) {
                ssize_t k = write(fd, p, len);

                if (k < 0 && errno != EINTR)
                        return -errno;
                if (k > 0) {
                        p += k;
                        len -= (size_t)k;
                }
        }
        return 0;
}

/* fsync of the directory holding path, so that a rename there lasts. */
static int sync_parent(const char *path)
{
        char *copy = strdup(path);
        int fd, r;

        if (!copy)
                return -ENOMEM;
        fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        free(copy);
        if (fd < 0)
                return -errno;
        r = fsync(fd) < 0 ? -errno : 0;
        close(fd);
        return r;
}

int storefile_write(const char *path, const char *text, size_t len, char *why, size_t whylen)
{
        char *tmp = NULL;
        int fd = -1, r;

        if (asprintf(&tmp, "%s.XXXXXX", path) < 0) {
                snprintf(why, whylen, "out of memory");
                return -ENOMEM;
        }
        /* mkostemp creates the file exclusively, mode 0600, under a name no
         * one can foresee: a file or directory put there beforehand by
         * someone else stops nothing. */
        fd = mkostemp(tmp, O_CLOEXEC);
        r = fd < 0 ? -errno : put(fd, text, len);
        /* Nothing is renamed into place before all of it is on the disk. */
        if (r == 0 && fsync(fd) < 0)
                r = -errno;
        if (fd >= 0 && close(fd) < 0 && r == 0)
                r = -errno;
        if (r == 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r == 0)
                r = sync_parent(path);
        else if (fd >= 0)
                (void)unlink(tmp);
        if (r < 0)
                snprintf(why, whylen, "%s", strerror(-r));
        free(tmp);
        return r;
}

/* Why the open file fd (of path) is not to be believed, or NULL. */
static const char *refuse(int fd, size_t max, struct stat *st, char *buf, size_t len)
{
        if (fstat(fd, st) < 0)
                return strerror(errno);
        if (!S_ISREG(st->st_mode))
                return "not a regular file";
        if (st->st_uid != geteuid())
                snprintf(buf, len, "owned by uid %u, not by the daemon's", (unsigned)st->st_uid);
        else if ((st->st_mode & 07777) != 0600)
                snprintf(buf, len, "mode %04o, not 0600", (unsigned)(st->st_mode & 07777));
        else if (st->st_nlink != 1)
                snprintf(buf, len, "%ju links, not 1", (uintmax_t)st->st_nlink);
        else if ((uintmax_t)st->st_size > max)
                snprintf(buf, len, "%jd bytes, more than %zu", (intmax_t)st->st_size, max);
        else
                return NULL;
        return buf;
}

int storefile_read(const char *path, size_t max, char **ret, size_t *ret_len, char *why, size_t whylen)
{
        int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        char reason[128], *buf = NULL;
        const char *bad;
        struct stat st;
        size_t len = 0;
        int r = 0;

        if (fd < 0) {
                r = -errno;
                snprintf(why, whylen, "%s", r == -ELOOP ? "it is a symbolic link" : strerror(-r));
                return r;
        }
        if ((bad = refuse(fd, max, &st, reason, sizeof(reason)))) {
                snprintf(why, whylen, "%s", bad);
                close(fd);
                return -EPERM;
        }
        buf = malloc((size_t)st.st_size + 1);
        r = buf ? 0 : -ENOMEM;
        while (r == 0) {
                ssize_t k = read(fd, buf + len, (size_t)st.st_size + 1 - len);
                if (k == 0)
                        break;
                if (k < 0 && errno != EINTR)
                        r = -errno;
                else if (k > 0 && (len += (size_t)k) > (size_t)st.st_size)
                        r = -EFBIG; /* it grew while read */
        }
        close(fd);
        if (r < 0) {
                snprintf(why, whylen, "%s", strerror(-r));
                free(buf);
                return r;
        }
        buf[len] = '\0';
        *ret = buf;
        *ret_len = len;
        return 0;
}

bool storefile_dir_safe(const char *dir, char *why, size_t whylen)
{
        struct stat st;

        if (stat(dir, &st) < 0)
                snprintf(why, whylen, "%s: %s", dir, strerror(errno));
        else if (!S_ISDIR(st.st_mode))
                snprintf(why, whylen, "%s is not a directory", dir);
        else if (st.st_uid != geteuid())
                snprintf(why, whylen, "%s is owned by uid %u, not by the daemon's", dir, (unsigned)st.st_uid);
        else if (st.st_mode & 022)
                snprintf(why, whylen, "%s may be written by others (mode %04o)", dir, (unsigned)(st.st_mode & 07777));
        else
                return true;
        return false;
}
