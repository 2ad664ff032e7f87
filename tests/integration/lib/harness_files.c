/* harness_files.c: the files a test sets up and reads besides the daemon's
 * own: a cgroup2 mount of its own (this machine's cgroup v2 hierarchy is
 * empty), a process moved into one of its groups, a file's text. */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

char *itest_cgroup2_mount(void)
{
        char *mnt = itest_strdupf("/tmp/itest-cg2-%d-XXXXXX", (int)getpid());

        ck_assert(mkdtemp(mnt));
        if (mount("none", mnt, "cgroup2", 0, NULL) < 0) {
                int e = errno;

                rmdir(mnt);
                errno = e;
                return NULL;
        }
        return mnt;
}

char *itest_cgroup2_or_skip(void)
{
        char *mnt;

        if (itest_need_root())
                return NULL;
        mnt = itest_cgroup2_mount();
        if (!mnt)
                itest_skip("cannot mount cgroup2: %s", strerror(errno));
        return mnt;
}

void itest_cgroup_move(const char *dir, pid_t pid)
{
        const char *path = itest_strdupf("%s/cgroup.procs", dir);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        char buf[32];
        int n = snprintf(buf, sizeof(buf), "%d\n", (int)pid);

        ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
        ck_assert_msg(write(fd, buf, (size_t)n) == n, "move %d to %s: %s", (int)pid, dir, strerror(errno));
        close(fd);
}

const char *itest_read_text(const char *path)
{
        static char buf[1 << 20];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : 0;

        if (fd >= 0)
                close(fd);
        buf[n > 0 ? n : 0] = '\0';
        return itest_strdupf("%s", buf);
}
