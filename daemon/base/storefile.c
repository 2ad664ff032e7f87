/* storefile.c: the daemon's small state files (storefile.h). */
#include "base/storefile.h"
#include "fdio.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define TMP_SUFFIX ".tmp"

/* A new file of mode 0600 in dirfd under a name nobody can foresee
 * (name.<16 random hex digits>.tmp): no name made in advance, and no
 * symbolic link, can stand in its way.  fd, its name in tmp, or -errno. */
static int open_temp(int dirfd, const char *name, char *tmp, size_t size)
{
        for (int i = 0; i < 8; i++) {
                uint64_t rnd;
                if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
                        return errno ? -errno : -EIO;
                if ((size_t)snprintf(tmp, size, "%s.%016" PRIx64 TMP_SUFFIX, name, rnd) >= size)
                        return -ENAMETOOLONG;
                int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd >= 0 || errno != EEXIST)
                        return fd >= 0 ? fd : -errno;
        }
        return -EEXIST;
}

int storefile_write(int dirfd, const char *name, const char *text, size_t len, char *why, size_t whylen)
{
        char tmp[NAME_MAX + 1];
        int fd = open_temp(dirfd, name, tmp, sizeof(tmp)), r = fd < 0 ? fd : 0;

        /* The umask may have taken bits off: the reader wants 0600. */
        if (r == 0 && fchmod(fd, 0600) < 0)
                r = -errno;
        if (r == 0)
                r = fdio_write_all(fd, text, len);
        /* Nothing is renamed into place before all of it is on the disk. */
        if (r == 0 && fsync(fd) < 0)
                r = -errno;
        if (fd >= 0 && close(fd) < 0 && r == 0)
                r = -errno;
        if (r == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
                r = -errno;
        if (r < 0 && fd >= 0)
                (void)unlinkat(dirfd, tmp, 0);
        /* So that the rename lasts. */
        if (r == 0 && fsync(dirfd) < 0)
                r = -errno;
        if (r < 0)
                snprintf(why, whylen, "%s", strerror(-r));
        return r;
}

void storefile_remove_leftovers(int dirfd, const char *name)
{
        size_t pre = strlen(name), suf = strlen(TMP_SUFFIX);
        struct dirent *e;
        DIR *d;

        if (fdio_opendir(dirfd, &d) < 0)
                return;
        while ((e = readdir(d))) {
                size_t n = strlen(e->d_name);
                if (n > pre + 1 + suf && strncmp(e->d_name, name, pre) == 0 && e->d_name[pre] == '.' &&
                    strcmp(e->d_name + n - suf, TMP_SUFFIX) == 0)
                        (void)unlinkat(dirfd, e->d_name, 0);
        }
        closedir(d);
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

int storefile_read(int dirfd, const char *name, size_t max, char **ret, size_t *ret_len, char *why, size_t whylen)
{
        int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
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

void storefile_boot_id(char out[40])
{
        int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, out, 39) : -1;

        if (fd >= 0)
                close(fd);
        out[n > 0 ? n : 0] = '\0';
        out[strcspn(out, "\n")] = '\0';
}
