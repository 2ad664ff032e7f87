/* runcgroup.c: a job's own cgroup (runcgroup.h).  cgroup v2 only: on a
 * machine with cgroup v1 controllers the job runs in the cgroups of the
 * command that started it, as CRIU dumps them. */
#include "runcgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

static int cg_is_v2(const char *path) {
        struct statfs sf;

        if (statfs(path, &sf) < 0)
                return -errno;
        return sf.f_type == CGROUP2_SUPER_MAGIC ? 0 : -ENOTSUP;
}

int ctl_run_cgroup_make(const char *parent, const char *name, int *ret_fd, char *path, size_t size) {
        char up[PATH_MAX];
        int r, fd;

        if (snprintf(up, sizeof(up), "%s", parent) >= (int) sizeof(up) ||
            snprintf(path, size, "%s/%s", parent, name) >= (int) size)
                return -ENAMETOOLONG;
        r = cg_is_v2(parent);
        if (r == -ENOENT) {
                r = cg_is_v2(dirname(up));
                if (r == 0 && mkdir(parent, 0755) < 0 && errno != EEXIST)
                        r = -errno;
                if (r == 0)
                        r = cg_is_v2(parent);
        }
        if (r < 0)
                return r;
        /* One an earlier job of the name left behind goes, if it is empty. */
        (void) rmdir(path);
        if (mkdir(path, 0755) < 0)
                return -errno;
        fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                r = -errno;
                (void) rmdir(path);
                return r;
        }
        *ret_fd = fd;
        return 0;
}

int ctl_run_cgroup_join(int fd) {
        int p = openat(fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
        int r = 0;

        if (p < 0)
                return -errno;
        if (write(p, "0\n", 2) != 2)
                r = -errno;
        close(p);
        return r;
}

void ctl_run_cgroup_remove(const char *path) {
        if (path && *path)
                (void) rmdir(path);
}
