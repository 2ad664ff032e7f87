/* safedir.c: a directory opened by a walk whose every step is checked on
 * the descriptor it gives (see safedir.h).
 *
 * Why the walk: root given "/home/u/ckpt/img" that passes every check on
 * the last component can still be handed the user's own directory, if the
 * user may rename what lies on the way (RENAME_EXCHANGE of "ckpt" with a
 * directory of its own, in a loop).  Walking with openat() from the
 * descriptor of the step before, and checking each step on its own
 * descriptor, the directory opened is one no one else could have put
 * there; from then on only its descriptor is used. */
#include "safedir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Links followed on one walk, as the kernel's own bound (MAXSYMLINKS). */
#define SAFEDIR_MAX_LINKS 40

bool ctl_safedir_owned(const struct stat *st, mode_t type) {
        return (st->st_mode & S_IFMT) == type && st->st_uid == geteuid() && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* A directory on the way: root's or ours, written by no one else unless
 * sticky (then *ret_shared: what is in it is checked by its owner). */
static bool safedir_ancestor_ok(const struct stat *st, bool *ret_shared) {
        bool shared = (st->st_mode & (S_IWGRP | S_IWOTH)) != 0;

        if (!S_ISDIR(st->st_mode) || (st->st_uid != 0 && st->st_uid != geteuid()))
                return false;
        if (shared && !(st->st_mode & S_ISVTX))
                return false;
        *ret_shared = shared;
        return true;
}

/* The state of one walk. */
typedef struct safedir_walk {
        char rest[2 * PATH_MAX];      /* what is left to walk */
        char walked[PATH_MAX];        /* what was walked, for messages */
        int cur;                      /* the directory reached (O_PATH) */
        bool shared;                  /* cur may be written by others (sticky) */
        int links;
        char *err;
        size_t err_size;
} safedir_walk;

static int safedir_fail(safedir_walk *w, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int safedir_fail(safedir_walk *w, int r, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(w->err, w->err_size, fmt, ap);
        va_end(ap);
        return r;
}

/* Takes the next component of w->rest into name; false when none is left. */
static bool safedir_next(safedir_walk *w, char *name, size_t size, bool *ret_last) {
        char *p = w->rest, *end;
        size_t len;

        while (*p == '/')
                p++;
        if (!*p)
                return false;
        end = strchrnul(p, '/');
        len = (size_t) (end - p);
        if (len >= size)
                len = size - 1;
        memcpy(name, p, len);
        name[len] = '\0';
        while (*end == '/')
                end++;
        *ret_last = !*end;
        memmove(w->rest, end, strlen(end) + 1);
        return true;
}

/* name, a link in w->cur: its target goes in front of what is left. */
static int safedir_follow(safedir_walk *w, const char *name, const struct stat *lst) {
        char target[PATH_MAX], rest[2 * PATH_MAX];
        ssize_t k;

        if (w->shared && lst->st_uid != 0 && lst->st_uid != geteuid())
                return safedir_fail(w, -EPERM, "%s/%s is another user's symbolic link in a directory others may "
                                    "write", w->walked, name);
        if (++w->links > SAFEDIR_MAX_LINKS)
                return safedir_fail(w, -ELOOP, "%s/%s: %s", w->walked, name, "too many symbolic links");
        k = readlinkat(w->cur, name, target, sizeof(target) - 1);
        if (k <= 0)
                return safedir_fail(w, k < 0 ? -errno : -ENOENT, "cannot read the link %s/%s", w->walked, name);
        target[k] = '\0';
        if ((size_t) snprintf(rest, sizeof(rest), "%s/%s", target, w->rest) >= sizeof(rest))
                return safedir_fail(w, -ENAMETOOLONG, "%s/%s: %s", w->walked, name, "its target is too long");
        memcpy(w->rest, rest, sizeof(rest));
        if (target[0] == '/') {
                int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

                if (fd < 0)
                        return -errno;
                close(w->cur);
                w->cur = fd;
                w->shared = false;
                w->walked[0] = '\0';
        }
        return 0;
}

/* One step: name in w->cur, opened and checked; w->cur is then it. */
static int safedir_step(safedir_walk *w, const char *name, bool last, bool create) {
        int fd = openat(w->cur, name, (last ? O_RDONLY : O_PATH) | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        bool shared = false;
        size_t len = strlen(w->walked);

        if (fd < 0 && errno == ENOENT && last && create && (mkdirat(w->cur, name, 0700) == 0 || errno == EEXIST))
                fd = openat(w->cur, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && (errno == ELOOP || errno == ENOTDIR) && fstatat(w->cur, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISLNK(st.st_mode))
                return last ? safedir_fail(w, -ELOOP, "%s/%s is a symbolic link (give the directory itself)",
                                           w->walked, name)
                            : safedir_follow(w, name, &st);
        if (fd < 0) {
                int e = errno;

                snprintf(w->err, w->err_size, "cannot open %s/%s: %s", w->walked, name, strerror(e));
                return -e;
        }
        snprintf(w->walked + len, sizeof(w->walked) - len, "/%s", name);
        if (fstat(fd, &st) < 0) {
                close(fd);
                return safedir_fail(w, -errno, "cannot stat %s%s", w->walked, "");
        }
        if (last ? !ctl_safedir_owned(&st, S_IFDIR) : !safedir_ancestor_ok(&st, &shared)) {
                close(fd);
                if (last)
                        return safedir_fail(w, -EPERM, "%s is %s: it must belong to this user and be writable by "
                                            "no group or other user (mode 0700), since its files are trusted",
                                            w->walked, st.st_uid != geteuid() ? "another user's"
                                                                              : "writable by others");
                return safedir_fail(w, -EPERM, "%s, a directory on its way, %s: root would act on what "
                                    "another user may rename (a directory above it must belong to root or to this "
                                    "user and be writable by no one else, or be sticky as /tmp)", w->walked,
                                    st.st_uid != 0 && st.st_uid != geteuid() ? "belongs to another user"
                                                                             : "is writable by others");
        }
        close(w->cur);
        w->cur = fd;
        w->shared = shared;
        return 0;
}

/* path walked as above into w->cur; with dir_last its last component is
 * checked as the directory root trusts, else as one on the way (for a
 * file's directory: the file is checked on its own). */
static int safedir_walk_path(safedir_walk *w, const char *path, bool dir_last, bool create) {
        char cwd[PATH_MAX] = "", name[NAME_MAX + 1];
        struct stat st;
        bool last = false, any = false;
        int r = 0;

        if (path[0] != '/' && !getcwd(cwd, sizeof(cwd)))
                return safedir_fail(w, -errno, "cannot tell where %s is: %s", path, strerror(errno));
        if ((size_t) snprintf(w->rest, sizeof(w->rest), "%s/%s", cwd, path) >= sizeof(w->rest))
                return safedir_fail(w, -ENAMETOOLONG, "%s: %s", path, strerror(ENAMETOOLONG));
        w->cur = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (w->cur < 0 || fstat(w->cur, &st) < 0 || !safedir_ancestor_ok(&st, &w->shared))
                return safedir_fail(w, -EPERM, "%s: the root directory is %s", path,
                                    "not root's, or writable by others");
        while (r == 0 && safedir_next(w, name, sizeof(name), &last)) {
                any = true;
                if (strcmp(name, ".") == 0 && (!last || !dir_last))
                        continue;
                if (strcmp(name, "..") == 0 || strcmp(name, ".") == 0)
                        r = safedir_fail(w, -EINVAL, "%s: \"%s\" is not followed (give the directory's own path)",
                                         path, name);
                else
                        r = safedir_step(w, name, last && dir_last, create);
                if (r == 0 && last && dir_last)
                        break;
        }
        if (r == 0 && dir_last && (!any || !last))
                r = safedir_fail(w, -EINVAL, "%s: %s", path, "not a directory of this user's");
        return r;
}

int ctl_safedir_open(const char *path, bool create, int *ret_fd, char *err, size_t err_size) {
        safedir_walk w = { .cur = -1, .err = err, .err_size = err_size };
        int r = safedir_walk_path(&w, path, true, create);

        if (r == 0) {
                *ret_fd = w.cur;
                return 0;
        }
        if (w.cur >= 0)
                close(w.cur);
        return r;
}

int ctl_safedir_open_file(const char *path, int *ret_fd, char *err, size_t err_size) {
        safedir_walk w = { .cur = -1, .err = err, .err_size = err_size };
        const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
        char dir[PATH_MAX];
        struct stat st;
        int fd = -1, r = 0;

        if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
                r = safedir_fail(&w, -EINVAL, "%s does not name a file", path);
        else if ((size_t) snprintf(dir, sizeof(dir), "%.*s", slash ? (int) (slash - path) + 1 : 1,
                                   slash ? path : ".") >= sizeof(dir))
                r = safedir_fail(&w, -ENAMETOOLONG, "%s: %s", path, strerror(ENAMETOOLONG));
        if (r == 0)
                r = safedir_walk_path(&w, dir, false, false);
        if (r == 0 && (fd = openat(w.cur, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0)
                r = safedir_fail(&w, -errno, "cannot open %s: %s", path,
                                 errno == ELOOP ? "it is a symbolic link (give the file itself)" : strerror(errno));
        if (r == 0 && (fstat(fd, &st) < 0 || !ctl_safedir_owned(&st, S_IFREG)))
                r = safedir_fail(&w, -EPERM, "%s must be a regular file of uid %u that no one else may write: "
                                 "its content is trusted", path, (unsigned) geteuid());
        if (r == 0 && fcntl(fd, F_SETFL, 0) < 0)
                r = -errno;
        if (w.cur >= 0)
                close(w.cur);
        if (r < 0 && fd >= 0)
                close(fd);
        if (r == 0)
                *ret_fd = fd;
        return r;
}

int ctl_safedir_sub(int dir_fd, const char *name, bool create, int *ret_fd) {
        struct stat st;
        int fd;

        if (create && mkdirat(dir_fd, name, 0700) < 0 && errno != EEXIST)
                return -errno;
        fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ELOOP || errno == ENOTDIR ? -EEXIST : -errno;
        if (fstat(fd, &st) < 0 || !ctl_safedir_owned(&st, S_IFDIR)) {
                close(fd);
                return -EEXIST;
        }
        *ret_fd = fd;
        return 0;
}
