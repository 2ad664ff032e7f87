/* workdir.c: the private image directory of the archive commands (see
 * workdir.h).  Everything in it is made and removed through descriptors:
 * the parent may be shared (sticky, as /var/tmp), the directory is not. */
#include "workdir.h"
#include "fdio.h"

#include "safedir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

int ctl_workdir_parent(const char *path, int *ret_fd, char *err, size_t err_size) {
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct stat st;
        bool shared;

        if (fd < 0) {
                int e = errno;

                snprintf(err, err_size, "cannot open the directory %s: %s", path, strerror(e));
                return -e;
        }
        if (fstat(fd, &st) < 0)
                st.st_uid = (uid_t) -1;
        shared = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
        if ((st.st_uid != 0 && st.st_uid != geteuid()) || (shared && !(st.st_mode & S_ISVTX))) {
                snprintf(err, err_size, "%s belongs to another user, or others may write it and it is not sticky "
                         "(as /tmp): root would work in what another user may rename", path);
                close(fd);
                return -EPERM;
        }
        *ret_fd = fd;
        return 0;
}

int ctl_workdir_random_name(const char *prefix, char *name, size_t size) {
        unsigned char rnd[12];
        char hex[2 * sizeof(rnd) + 1];

        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t) sizeof(rnd))
                return -EIO;
        for (size_t i = 0; i < sizeof(rnd); i++)
                snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
        return (size_t) snprintf(name, size, "%s.%s", prefix, hex) >= size ? -ENAMETOOLONG : 0;
}

int ctl_workdir_make(const char *parent, ctl_workdir *ret, char *err, size_t err_size) {
        ctl_workdir w = { .parent_fd = -1, .fd = -1 };
        int r;

        err[0] = '\0';
        r = ctl_workdir_parent(parent, &w.parent_fd, err, err_size);

        if (r == 0)
                r = ctl_workdir_random_name("cudackpt-archive", w.name, sizeof(w.name));
        if (r == 0 && (size_t) snprintf(w.path, sizeof(w.path), "%s/%s", parent, w.name) >= sizeof(w.path))
                r = -ENAMETOOLONG;
        if (r == 0 && mkdirat(w.parent_fd, w.name, 0700) < 0)
                r = -errno;
        /* Ours, 0700, not a link: what the mkdir made. */
        if (r == 0) {
                r = ctl_safedir_sub(w.parent_fd, w.name, false, &w.fd);
                if (r < 0)
                        w.name[0] = '\0'; /* not ours to remove */
        }
        if (r < 0) {
                if (!*err)
                        snprintf(err, err_size, "cannot make a private directory in %s: %s", parent, strerror(-r));
                if (w.parent_fd >= 0)
                        close(w.parent_fd);
                return r;
        }
        *ret = w;
        return 0;
}

/* Every entry of dir_fd removed, directories (depth levels down) with
 * theirs; 0 or the first -errno. */
static int workdir_empty(int dir_fd, int depth) {
        struct dirent *de;
        DIR *d;
        int r = fdio_opendir(dir_fd, &d);

        if (r < 0)
                return r;
        while ((errno = 0, de = readdir(d))) {
                struct stat st;
                int sub;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (fstatat(dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (S_ISDIR(st.st_mode) && depth > 0 &&
                    (sub = openat(dir_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0) {
                        int e = workdir_empty(sub, depth - 1);

                        close(sub);
                        if (e < 0 && r == 0)
                                r = e;
                }
                if (unlinkat(dir_fd, de->d_name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0 && r == 0)
                        r = -errno;
        }
        closedir(d);
        return r;
}

int ctl_workdir_remove(ctl_workdir *w) {
        int r = 0;

        if (w->fd >= 0) {
                r = workdir_empty(w->fd, 1);
                close(w->fd);
                w->fd = -1;
        }
        if (w->parent_fd >= 0) {
                if (w->name[0] && unlinkat(w->parent_fd, w->name, AT_REMOVEDIR) < 0 && r == 0)
                        r = -errno;
                close(w->parent_fd);
                w->parent_fd = -1;
        }
        return r;
}
