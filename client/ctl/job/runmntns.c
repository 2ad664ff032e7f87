/* runmntns.c: a run job's mount namespace (runmntns.h). */
#include "runmntns.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

int ctl_run_mntns_make(void) {
        /* Private, not slave: a slave mount's master is a peer group of the
         * node's, which CRIU would have to find again on the restoring node
         * (--enable-external-masters); the job needs none of the node's
         * later mounts. */
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return -errno;
        /* The node's /proc and whatever is mounted below it (binfmt_misc,
         * an automount of it) out of the job's view, not hidden beneath: CRIU
         * would dump them too.  Not a mount point (a chroot): mounted on. */
        if (umount2("/proc", MNT_DETACH) < 0 && errno != EINVAL)
                return -errno;
        if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                return -errno;
        return 0;
}

/* fd reopened by its path in this namespace, if it names one.  The path is
 * the one it was opened by (root's --output walk checked it, runinherit.h);
 * the file found there must be the same one (device and inode), else fd is
 * kept. */
static void mntns_reopen(int fd) {
        char link[64], path[PATH_MAX];
        struct stat was, now;
        int flags = fcntl(fd, F_GETFL), fdflags = fcntl(fd, F_GETFD), nfd;
        ssize_t k;
        off_t pos;

        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        k = readlink(link, path, sizeof(path) - 1);
        if (k <= 0 || flags < 0 || fdflags < 0 || fstat(fd, &was) < 0)
                return;
        path[k] = '\0';
        /* A pipe, socket or anonymous inode ("pipe:[N]"...) has no path, a
         * removed file none that opens it again. */
        if (path[0] != '/' || (S_ISDIR(was.st_mode) && (flags & O_PATH)) ||
            !(S_ISREG(was.st_mode) || S_ISCHR(was.st_mode) || S_ISDIR(was.st_mode)) ||
            (k > 10 && strcmp(path + k - 10, " (deleted)") == 0))
                return;
        /* Not blocking on a device while opened; the flags put back after. */
        nfd = open(path, (flags & (O_ACCMODE | O_APPEND | O_DIRECTORY | O_PATH)) | O_NOFOLLOW | O_NOCTTY |
                                 O_NONBLOCK | O_CLOEXEC);
        if (nfd < 0)
                return;
        pos = S_ISREG(was.st_mode) ? lseek(fd, 0, SEEK_CUR) : -1;
        if (fstat(nfd, &now) == 0 && now.st_dev == was.st_dev && now.st_ino == was.st_ino &&
            (pos < 0 || lseek(nfd, pos, SEEK_SET) == pos) && fcntl(nfd, F_SETFL, flags) == 0)
                (void) dup3(nfd, fd, (fdflags & FD_CLOEXEC) ? O_CLOEXEC : 0);
        close(nfd);
}

/* The most descriptors reopened: a job's init gets its standard three and
 * whatever few a root's caller left open; any beyond stay as they are (as
 * one that cannot be reopened: runmntns.h). */
#define RUN_MNTNS_MAX_FDS 1024

void ctl_run_mntns_reopen_fds(void) {
        DIR *d = opendir("/proc/self/fd");
        struct dirent *e;
        int fds[RUN_MNTNS_MAX_FDS];
        size_t n = 0;

        if (!d)
                return;
        /* The list first: dup3() must not change what is being read. */
        while ((e = readdir(d)) && n < sizeof(fds) / sizeof(fds[0])) {
                char *end;
                long v = strtol(e->d_name, &end, 10);

                if (end != e->d_name && *end == '\0' && v >= 0 && v != dirfd(d) && v <= INT_MAX)
                        fds[n++] = (int) v;
        }
        closedir(d);
        for (size_t i = 0; i < n; i++)
                mntns_reopen(fds[i]);
}
