/* doctorsys.c: the checks of cudackptctl doctor on the system around the
 * CUDA stack: the kernel features the daemon uses (each tried on this
 * process's own pid, namespace and maps), cgroup v2, CRIU for checkpoints
 * to disk, transparent huge pages.  Nothing here changes the node. */
#include "doctorsys.h"
#include "host.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

/* The kernel interfaces the daemon uses, as it defines them for older
 * headers (common/). */
#include "kernel-abi.h"

/* The oldest CRIU whose CUDA plugin drives cuda-checkpoint (docs/criu.md). */
#define DOCTOR_CRIU_MIN_MAJOR 4

#define DOCTOR_THP_FILE "/sys/kernel/mm/transparent_hugepage/enabled"
#define DOCTOR_THP_ADVICE                                                                       \
        "echo always > " DOCTOR_THP_FILE ": checkpoints of large GPUs about 1.5x faster "       \
        "(docs/performance.md)"

/* ---- Kernel features ---------------------------------------------------------- */

/* "not in this kernel" for the errors of a kernel that lacks a feature,
 * else the error itself (a seccomp filter's EPERM, say). */
static const char *doctor_missing_why(int err) {
        if (err == ENOSYS || err == ENOTTY || err == EINVAL || err == ENOPROTOOPT)
                return "not in this kernel";
        return strerror(err);
}

void doctor_check_pidfd_open(const ctl_doctor *d, doctor_result *r) {
        int fd = (int) syscall(SYS_pidfd_open, getpid(), 0);

        (void) d;
        if (fd >= 0) {
                close(fd);
                doctor_set(r, DOCTOR_OK, "pidfd_open() works (Linux 5.3 or newer)");
                return;
        }
        doctor_set(r, DOCTOR_FAIL, "pidfd_open(): %s", doctor_missing_why(errno));
        doctor_advise(r, "run Linux 5.3 or newer and allow pidfd_open in any seccomp filter: the daemon pins "
                         "every process it acts on with a pidfd, and acts on none without");
}

void doctor_check_peer_pidfd(const ctl_doctor *d, doctor_result *r) {
        socklen_t len = sizeof(int);
        int sv[2], pidfd = -1, err;

        (void) d;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
                doctor_set(r, DOCTOR_WARN, "cannot try SO_PEERPIDFD: socketpair(): %s", strerror(errno));
                return;
        }
        err = getsockopt(sv[0], SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0 && pidfd >= 0 ? 0 : errno;
        if (err == 0)
                close(pidfd);
        close(sv[0]);
        close(sv[1]);
        if (err == 0) {
                doctor_set(r, DOCTOR_OK, "SO_PEERPIDFD works (Linux 6.5 or newer)");
                return;
        }
        doctor_set(r, DOCTOR_WARN, "SO_PEERPIDFD: %s", doctor_missing_why(err));
        doctor_advise(r, "run Linux 6.5 or newer: until then the daemon knows its callers by pid alone, not "
                         "pinned by a pidfd (a narrow pid-reuse race when it reads a caller's pid namespace)");
}

void doctor_check_pidns_ioctl(const ctl_doctor *d, doctor_result *r) {
        unsigned long self = (unsigned long) getpid();
        int fd, from, in, err = 0;

        (void) d;
        fd = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                doctor_set(r, DOCTOR_WARN, "cannot open /proc/self/ns/pid: %s", strerror(errno));
                doctor_advise(r, "mount /proc");
                return;
        }
        from = ioctl(fd, NS_GET_PID_FROM_PIDNS, self);
        if (from < 0)
                err = errno;
        in = ioctl(fd, NS_GET_PID_IN_PIDNS, self);
        if (in < 0 && err == 0)
                err = errno;
        close(fd);
        if (err == 0 && (unsigned long) from == self && (unsigned long) in == self) {
                doctor_set(r, DOCTOR_OK,
                           "NS_GET_PID_FROM_PIDNS and NS_GET_PID_IN_PIDNS work (Linux 6.7 or newer)");
                return;
        }
        if (err != 0)
                doctor_set(r, DOCTOR_WARN, "NS_GET_PID_FROM_PIDNS, NS_GET_PID_IN_PIDNS: %s", doctor_missing_why(err));
        else
                doctor_set(r, DOCTOR_WARN, "NS_GET_PID_FROM_PIDNS, NS_GET_PID_IN_PIDNS: pid %lu came back as %d "
                           "and %d", self, from, in);
        doctor_advise(r, "run Linux 6.7 or newer: until then callers in another pid namespace (containers "
                         "without hostPID) are refused with PermissionDenied");
}

void doctor_check_procmap_query(const ctl_doctor *d, doctor_result *r) {
        char name[PATH_MAX];
        struct procmap_query q = {
                .size = sizeof(q),
                .query_flags = PROCMAP_QUERY_COVERING_OR_NEXT_VMA | PROCMAP_QUERY_FILE_BACKED_VMA |
                               PROCMAP_QUERY_VMA_EXECUTABLE,
                .query_addr = 0,
                .vma_name_addr = (uint64_t) (uintptr_t) name,
                .vma_name_size = sizeof(name),
        };
        int fd, err = 0;

        (void) d;
        fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                doctor_set(r, DOCTOR_WARN, "cannot open /proc/self/maps: %s", strerror(errno));
                doctor_advise(r, "mount /proc");
                return;
        }
        /* ENOENT: no such mapping, which a kernel without the ioctl never says. */
        if (ioctl(fd, PROCMAP_QUERY, &q) < 0 && errno != ENOENT)
                err = errno;
        close(fd);
        if (err == 0) {
                doctor_set(r, DOCTOR_OK, "PROCMAP_QUERY works (Linux 6.11 or newer)");
                return;
        }
        doctor_set(r, DOCTOR_WARN, "PROCMAP_QUERY: %s", doctor_missing_why(err));
        doctor_advise(r, "run Linux 6.11 or newer: until then ps, --cgroup and --tree find CUDA processes by "
                         "reading each /proc/PID/maps as text, slower on busy nodes");
}

/* ---- cgroups ------------------------------------------------------------------ */

static bool doctor_fs_is(const char *path, unsigned long magic) {
        struct statfs sfs;

        return statfs(path, &sfs) == 0 && (unsigned long) sfs.f_type == magic;
}

void doctor_check_cgroup(const ctl_doctor *d, doctor_result *r) {
        struct statfs sfs;
        unsigned long type;

        (void) d;
        if (statfs("/sys/fs/cgroup", &sfs) < 0) {
                doctor_set(r, DOCTOR_WARN, "cannot look at /sys/fs/cgroup: %s", strerror(errno));
                doctor_advise(r, "mount cgroup v2 at /sys/fs/cgroup: --cgroup selectors need it");
                return;
        }
        type = (unsigned long) sfs.f_type;
        if (type == CGROUP2_SUPER_MAGIC) {
                doctor_set(r, DOCTOR_OK, "cgroup v2 at /sys/fs/cgroup");
                return;
        }
        if (type == TMPFS_MAGIC && doctor_fs_is("/sys/fs/cgroup/unified", CGROUP2_SUPER_MAGIC))
                doctor_set(r, DOCTOR_WARN, "hybrid: cgroup v1 at /sys/fs/cgroup, v2 only at /sys/fs/cgroup/unified");
        else if (type == TMPFS_MAGIC || type == CGROUP_SUPER_MAGIC)
                doctor_set(r, DOCTOR_WARN, "cgroup v1 at /sys/fs/cgroup");
        else
                doctor_set(r, DOCTOR_WARN, "/sys/fs/cgroup is no cgroup file system (type %#lx)", type);
        doctor_advise(r, "boot with systemd.unified_cgroup_hierarchy=1 (cgroup v2): --cgroup selectors and ps's "
                         "CGROUP column read cgroup v2 paths; under v1 processes have none, under hybrid only "
                         "systemd's (not a v1 container runtime's /kubepods/...)");
}

/* ---- CRIU --------------------------------------------------------------------- */

void doctor_check_criu(const ctl_doctor *d, doctor_result *r) {
        char criu[PATH_MAX], out[4096];
        char *argv[] = { criu, (char *) "--version", NULL };
        const char *v;
        int status, major = 0, minor = 0;

        (void) d;
        if (ctl_host_find_criu(criu, sizeof(criu)) < 0) {
                const char *env = secure_getenv(CTL_HOST_CRIU_ENV);

                if (env && *env) {
                        doctor_set(r, DOCTOR_WARN, CTL_HOST_CRIU_ENV " names no executable: %s", env);
                        doctor_advise(r, "point " CTL_HOST_CRIU_ENV " at CRIU %d.0 or newer, or unset it to use "
                                      "criu on PATH", DOCTOR_CRIU_MIN_MAJOR);
                        return;
                }
                doctor_set(r, DOCTOR_SKIP, "no criu on PATH (nor " CTL_HOST_CRIU_ENV ")");
                doctor_advise(r, "needed only for checkpoints to disk (docs/criu.md): install CRIU %d.0 or newer",
                              DOCTOR_CRIU_MIN_MAJOR);
                return;
        }
        status = ctl_host_run_program(criu, argv, out, sizeof(out), DOCTOR_PROGRAM_TIMEOUT_MS);
        v = status >= 0 ? strstr(out, "Version:") : NULL;
        if (!v || sscanf(v, "Version: %d.%d", &major, &minor) < 1) {
                if (status == -ETIMEDOUT)
                        doctor_set(r, DOCTOR_WARN, "%s --version did not answer within %d s", criu,
                                   DOCTOR_PROGRAM_TIMEOUT_MS / 1000);
                else if (status < 0)
                        doctor_set(r, DOCTOR_WARN, "%s --version: %s", criu, strerror(-status));
                else
                        doctor_set(r, DOCTOR_WARN, "%s --version does not say \"Version: X.Y\"", criu);
                doctor_advise(r, "needed only for checkpoints to disk (docs/criu.md): install CRIU %d.0 or newer",
                              DOCTOR_CRIU_MIN_MAJOR);
                return;
        }
        if (major < DOCTOR_CRIU_MIN_MAJOR) {
                doctor_set(r, DOCTOR_WARN, "criu %d.%d at %s: too old for the CUDA plugin", major, minor, criu);
                doctor_advise(r, "needed only for checkpoints to disk (docs/criu.md): install CRIU %d.0 or newer",
                              DOCTOR_CRIU_MIN_MAJOR);
                return;
        }
        doctor_set(r, DOCTOR_OK, "criu %d.%d at %s", major, minor, criu);
}

/* ---- Transparent huge pages --------------------------------------------------- */

void doctor_check_thp(const ctl_doctor *d, doctor_result *r) {
        char text[256], *open_, *close_;
        ssize_t len;

        (void) d;
        len = ctl_host_read_file(DOCTOR_THP_FILE, text, sizeof(text));
        if (len == -ENOENT) {
                doctor_set(r, DOCTOR_SKIP, "no transparent huge pages in this kernel (no %s)", DOCTOR_THP_FILE);
                return;
        }
        open_ = len > 0 ? strchr(text, '[') : NULL;
        close_ = open_ ? strchr(open_, ']') : NULL;
        if (len < 0 || !close_) {
                if (len < 0)
                        doctor_set(r, DOCTOR_WARN, "cannot read %s: %s", DOCTOR_THP_FILE, strerror((int) -len));
                else
                        doctor_set(r, DOCTOR_WARN, "%s names no mode in brackets", DOCTOR_THP_FILE);
                doctor_advise(r, "%s", DOCTOR_THP_ADVICE);
                return;
        }
        *close_ = '\0';
        if (strcmp(open_ + 1, "always") == 0) {
                doctor_set(r, DOCTOR_OK, "transparent huge pages: always");
                return;
        }
        doctor_set(r, DOCTOR_WARN, "transparent huge pages: %s", open_ + 1);
        doctor_advise(r, "%s", DOCTOR_THP_ADVICE);
}
