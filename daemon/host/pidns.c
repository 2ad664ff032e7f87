/* pidns.c: translating pids between the caller's pid namespace and ours. */
#include "host/pidns.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernel-abi.h"
#include "host/target.h"


/* The daemon's own pid namespace, read once. */
static struct stat own_ns;
static bool own_ns_known;
static pthread_once_t own_ns_once = PTHREAD_ONCE_INIT;

static void read_own_ns(void)
{
        own_ns_known = stat("/proc/self/ns/pid", &own_ns) == 0;
}

static bool is_own_ns(int fd)
{
        struct stat st;

        (void)pthread_once(&own_ns_once, read_own_ns);
        return own_ns_known && fstat(fd, &st) == 0 && st.st_dev == own_ns.st_dev && st.st_ino == own_ns.st_ino;
}

/* Whether the pidfd's process still lives: then what was opened through
 * its pid belonged to it. */
static int open_ns(pid_t pid, int pidfd)
{
        char path[64];
        int fd;

        if (pidfd >= 0) {
                fd = ioctl(pidfd, PIDFD_GET_PID_NAMESPACE, 0);
                if (fd >= 0)
                        return fd;
        }
        if (pid <= 0)
                return -ESRCH;
        snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (pidfd >= 0 && target_pidfd_wait(pidfd, 0) != 1) {
                close(fd);
                return -ESRCH;
        }
        return fd;
}

void pidns_of_peer(pid_t pid, int pidfd, struct pidns *ret)
{
        int fd = open_ns(pid, pidfd);

        *ret = PIDNS_SAME;
        if (fd < 0) {
                ret->other = ret->unsupported = true;
                return;
        }
        if (is_own_ns(fd)) {
                close(fd);
                return;
        }
        ret->other = true;
        ret->fd = fd;
        /* The peer's own pid tells whether this kernel translates: ENOTTY
         * or EINVAL before Linux 6.7.  (A peer whose pid the daemon cannot
         * see has pid 0 here: it cannot be translated either.) */
        if (pid <= 0 ||
            (ioctl(fd, NS_GET_PID_IN_PIDNS, (unsigned long)pid) < 0 && (errno == ENOTTY || errno == EINVAL)))
                ret->unsupported = true;
}

void pidns_free(struct pidns *ns)
{
        if (ns->other && ns->fd >= 0)
                close(ns->fd);
        *ns = PIDNS_SAME;
}

static int translate(const struct pidns *ns, unsigned long request, pid_t pid, pid_t *ret)
{
        int r;

        if (!ns->other) {
                *ret = pid;
                return 0;
        }
        if (ns->unsupported || ns->fd < 0)
                return -EOPNOTSUPP;
        if (pid <= 0)
                return -ESRCH;
        r = ioctl(ns->fd, request, (unsigned long)pid);
        if (r < 0 && (errno == ENOTTY || errno == EINVAL))
                return -EOPNOTSUPP;
        if (r <= 0)
                return -ESRCH;
        *ret = (pid_t)r;
        return 0;
}

int pidns_to_daemon(const struct pidns *ns, pid_t pid, pid_t *ret)
{
        return translate(ns, NS_GET_PID_FROM_PIDNS, pid, ret);
}

int pidns_to_caller(const struct pidns *ns, pid_t pid, pid_t *ret)
{
        return translate(ns, NS_GET_PID_IN_PIDNS, pid, ret);
}
