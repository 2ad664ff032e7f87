/* privdir.c: opening and checking a directory only the daemon's user may
 * change (privdir.h). */
#include "base/privdir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LINKS 40 /* as the kernel's own limit on links in one lookup */

static bool trusted_owner(uid_t uid)
{
        return uid == 0 || uid == geteuid();
}

/* fd, opened as shown: the directory itself (last) or one above it. */
static int check(int fd, const char *shown, bool last, char *why, size_t whylen)
{
        struct stat st;

        if (fstat(fd, &st) < 0) {
                snprintf(why, whylen, "fstat %s: %s", shown, strerror(errno));
                return -errno;
        }
        if (!trusted_owner(st.st_uid)) {
                snprintf(why, whylen, "%s is owned by uid %u, neither root nor the daemon's uid %u", shown,
                         (unsigned)st.st_uid, (unsigned)geteuid());
                return -EPERM;
        }
        /* Above it, a sticky directory (/tmp) is safe: others may add
         * names there but not move or remove the root-owned one we go
         * through.  The directory itself must be closed to them. */
        if ((st.st_mode & (S_IWGRP | S_IWOTH)) && (last || !(st.st_mode & S_ISVTX))) {
                snprintf(why, whylen, "%s may be written by others than its owner (mode %04o)", shown,
                         (unsigned)(st.st_mode & 07777));
                return -EPERM;
        }
        return 0;
}

/* name in dirfd is a symbolic link root or the daemon's user owns: its
 * target (NUL-terminated) in buf.  -errno otherwise. */
static int trusted_link(int dirfd, const char *name, char *buf, size_t size)
{
        struct stat st;
        ssize_t n;

        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (!S_ISLNK(st.st_mode))
                return -ENOTDIR;
        if (!trusted_owner(st.st_uid))
                return -EPERM;
        n = readlinkat(dirfd, name, buf, size - 1);
        if (n < 0)
                return -errno;
        if ((size_t)n >= size - 1)
                return -ENAMETOOLONG;
        buf[n] = '\0';
        return 0;
}

/* Replaces todo with head + "/" + rest (rest may alias todo). */
static int join_path(char *todo, size_t size, const char *head, const char *rest)
{
        char tmp[PATH_MAX * 2];
        int n = snprintf(tmp, sizeof(tmp), "%s/%s", head, rest);

        if (n < 0 || (size_t)n >= size)
                return -ENAMETOOLONG;
        memcpy(todo, tmp, (size_t)n + 1);
        return 0;
}

/* One step of the walk: the next component of todo, from *fd (the
 * directory shown as done).  1 when the path is used up. */
static int step(int *fd, char *todo, size_t size, char *done, size_t donelen, int *hops, char *why,
                size_t whylen)
{
        char name[NAME_MAX + 1], link[PATH_MAX];
        const char *comp = todo + strspn(todo, "/");
        size_t len = strcspn(comp, "/");
        const char *rest = comp + len + strspn(comp + len, "/");
        int nfd, r;

        if (len == 0)
                return 1;
        if (len > NAME_MAX) {
                snprintf(why, whylen, "a name in the path is too long");
                return -ENAMETOOLONG;
        }
        memcpy(name, comp, len);
        name[len] = '\0';
        if (strcmp(name, "..") == 0) {
                snprintf(why, whylen, "the path goes up (\"..\") after %s", done[0] ? done : "/");
                return -EPERM;
        }
        if (strcmp(name, ".") != 0) {
                r = check(*fd, done[0] ? done : "/", false, why, whylen);
                if (r < 0)
                        return r;
                nfd = openat(*fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (nfd < 0 && (errno == ELOOP || errno == ENOTDIR)) {
                        r = trusted_link(*fd, name, link, sizeof(link));
                        if (r == 0 && ++*hops > MAX_LINKS)
                                r = -ELOOP;
                        if (r == 0)
                                return join_path(todo, size, link, rest);
                        snprintf(why, whylen, "%s/%s: %s", done, name,
                                 r == -EPERM ? "a symbolic link owned by another user" : strerror(-r));
                        return r;
                }
                if (nfd < 0) {
                        snprintf(why, whylen, "%s/%s: %s", done, name, strerror(errno));
                        return -errno;
                }
                close(*fd);
                *fd = nfd;
                if ((size_t)snprintf(done + strlen(done), donelen - strlen(done), "/%s", name) >=
                    donelen - strlen(done)) {
                        snprintf(why, whylen, "the path is too long");
                        return -ENAMETOOLONG;
                }
        }
        memmove(todo, rest, strlen(rest) + 1);
        return 0;
}

int privdir_open(const char *path, int *ret_fd, char *why, size_t whylen)
{
        char todo[PATH_MAX * 2], done[PATH_MAX] = "", cwd[PATH_MAX];
        int fd = -1, hops = 0, r = 0;

        if (!path || !*path || strlen(path) >= PATH_MAX) {
                snprintf(why, whylen, "no directory, or a path too long");
                return -EINVAL;
        }
        if (path[0] != '/' && !getcwd(cwd, sizeof(cwd))) {
                snprintf(why, whylen, "getcwd: %s", strerror(errno));
                return -errno;
        }
        r = join_path(todo, sizeof(todo), path[0] == '/' ? "" : cwd, path);
        while (r == 0) {
                if (todo[0] == '/') { /* the start, or an absolute link: from / again */
                        if (fd >= 0)
                                close(fd);
                        done[0] = '\0';
                        fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                        if (fd < 0) {
                                snprintf(why, whylen, "open /: %s", strerror(errno));
                                return -errno;
                        }
                }
                r = step(&fd, todo, sizeof(todo), done, sizeof(done), &hops, why, whylen);
        }
        if (r == 1)
                r = check(fd, done[0] ? done : "/", true, why, whylen);
        if (r < 0) {
                if (fd >= 0)
                        close(fd);
                return r;
        }
        *ret_fd = fd;
        return 0;
}
