/* target.c: pidfds and /proc for the processes the daemon acts on. */
#include "host/target.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernel-abi.h"
#include "procfs.h"

static int sys_pidfd_open(pid_t pid)
{
        return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int open_proc(pid_t pid, const char *what)
{
        char path[64];
        int fd;

        snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        return fd < 0 ? -errno : fd;
}

/* The whole of a procfs file from its start, NUL-terminated.  pread() at 0
 * makes procfs produce the text anew, so an open descriptor can be read
 * again and again. */
static ssize_t read_fd(int fd, char *buf, size_t len)
{
        ssize_t n, total = 0;

        while ((size_t)total < len - 1) {
                n = pread(fd, buf + total, len - 1 - (size_t)total, total);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                total += n;
        }
        buf[total] = '\0';
        return total;
}

static ssize_t read_proc(pid_t pid, const char *what, char *buf, size_t len)
{
        int fd = open_proc(pid, what);
        ssize_t n;

        if (fd < 0)
                return fd;
        n = read_fd(fd, buf, len);
        close(fd);
        return n;
}

int target_parse_start_time(const char *stat_line, uint64_t *ret_start_time, char *ret_state)
{
        const char *state = procfs_stat_field(stat_line, 3);
        int r;

        if (!state)
                return -EINVAL;
        r = procfs_stat_u64(stat_line, 22, ret_start_time);
        if (r < 0)
                return r;
        if (ret_state)
                *ret_state = *state;
        return 0;
}

int target_read_stat(pid_t pid, uint64_t *ret_start_time, char *ret_state)
{
        char buf[1024];
        ssize_t n;

        if (pid <= 0)
                return -ESRCH;
        n = read_proc(pid, "stat", buf, sizeof(buf));
        if (n <= 0)
                return n == 0 || n == -ENOENT ? -ESRCH : (int)n;
        return target_parse_start_time(buf, ret_start_time, ret_state);
}

int target_parse_flags(const char *stat_line, uint64_t *ret_flags)
{
        return procfs_stat_u64(stat_line, 9, ret_flags);
}

int target_parse_uids(const char *status_text, uid_t *ret_ruid, uid_t *ret_euid, uid_t *ret_suid)
{
        const char *p = strstr(status_text, "\nUid:");
        unsigned long r, e, s;

        if (!p)
                return -EINVAL;
        if (sscanf(p + 5, " %lu %lu %lu", &r, &e, &s) != 3)
                return -EINVAL;
        *ret_ruid = (uid_t)r;
        *ret_euid = (uid_t)e;
        *ret_suid = (uid_t)s;
        return 0;
}

int target_parse_tgid(const char *status_text, pid_t *ret_tgid)
{
        const char *p = strstr(status_text, "\nTgid:");
        long v;

        if (!p || sscanf(p + 6, " %ld", &v) != 1 || v <= 0)
                return -EINVAL;
        *ret_tgid = (pid_t)v;
        return 0;
}

/* 1 if the process lives after up to timeout_ms, 0 once it has exited.  A
 * pidfd turns readable when its process exits: a zombie has gone even
 * though its pid is still held. */
static int await_exit(const struct target_identity *id, int timeout_ms)
{
        return target_pidfd_wait(id->pidfd, timeout_ms);
}

int target_pidfd_wait(int pidfd, int timeout_ms)
{
        struct pollfd p = { .fd = pidfd, .events = POLLIN };
        int r;

        if (pidfd < 0)
                return 0;
        do
                r = poll(&p, 1, timeout_ms);
        while (r < 0 && errno == EINTR);
        return r == 0;
}

int target_alive(const struct target_identity *id)
{
        return await_exit(id, 0);
}

/* PF_EXITING of include/linux/sched.h: set on a thread as its exit begins. */
#define TARGET_PF_EXITING 0x00000004u

int target_alive_settled(const struct target_identity *id, uint64_t exit_wait_ms)
{
        char buf[1024];
        uint64_t flags;
        ssize_t n;

        if (target_alive(id) != 1)
                return 0;
        /* The pidfd turns readable only at the end of an exit, after the
         * process's memory and files (its GPU contexts among them) are
         * released; before that the driver already fails on it.  Until the
         * pidfd says otherwise the pid is still this process's, so its stat
         * file can be opened by number. */
        n = read_proc(id->pid, "stat", buf, sizeof(buf));
        if (n <= 0)
                exit_wait_ms = 0; /* reaped since the poll above, or unreadable */
        else if (target_parse_flags(buf, &flags) < 0 || !(flags & TARGET_PF_EXITING))
                return 1;
        return await_exit(id, exit_wait_ms > INT32_MAX ? INT32_MAX : (int)exit_wait_ms);
}

/* A pinned procfs file's text.  Once the process has gone it reads as
 * ESRCH (or empty): it never shows another process. */
static ssize_t read_pinned(int fd, char *buf, size_t size)
{
        ssize_t n;

        if (fd < 0)
                return -ESRCH;
        n = read_fd(fd, buf, size);
        if (n <= 0)
                return n == 0 || n == -ESRCH || n == -ENOENT ? -ESRCH : n;
        return n;
}

static ssize_t read_stat(const struct target_identity *id, char *buf, size_t size)
{
        return read_pinned(id->stat_fd, buf, size);
}

static ssize_t read_status(const struct target_identity *id, char *buf, size_t size)
{
        return read_pinned(id->status_fd, buf, size);
}

/* The state letter (field 3) of the pinned stat file: > 0, or -errno. */
static int read_state(const struct target_identity *id)
{
        char buf[1024];
        const char *f;
        ssize_t n = read_stat(id, buf, sizeof(buf));

        if (n < 0)
                return (int)n;
        f = procfs_stat_field(buf, 3);
        return f && *f ? (unsigned char)*f : -EINVAL;
}

/* The kernel lacks PIDFD_GET_INFO (before Linux 6.13): learnt from its
 * first answer, and never written again. */
static atomic_bool pidfd_info_missing;

void target_use_pidfd_info(bool on)
{
        atomic_store(&pidfd_info_missing, !on);
}

/* The user ids through the pidfd: 0, -ENOTTY where the kernel lacks
 * PIDFD_GET_INFO, another -errno when it did not answer for this process
 * (reaped; or, on 6.13 to 6.15, one whose parent the daemon's pid namespace
 * does not see). */
static int uids_from_pidfd(struct target_identity *id)
{
        struct cudackpt_pidfd_info info = { .mask = CUDACKPT_PIDFD_INFO_CREDS };

        if (atomic_load_explicit(&pidfd_info_missing, memory_order_relaxed))
                return -ENOTTY;
        if (ioctl(id->pidfd, CUDACKPT_PIDFD_GET_INFO, &info) < 0) {
                if (errno != ENOTTY && errno != EINVAL)
                        return -errno;
                atomic_store_explicit(&pidfd_info_missing, true, memory_order_relaxed);
                return -ENOTTY;
        }
        /* The kernel always fills both; the pid, in the daemon's namespace,
         * must be the one the stat and status files were opened by. */
        if (!(info.mask & CUDACKPT_PIDFD_INFO_CREDS) || !(info.mask & CUDACKPT_PIDFD_INFO_PID) ||
            (pid_t)info.pid != id->pid || (pid_t)info.tgid != id->pid)
                return -ESRCH;
        id->ruid = info.ruid;
        id->euid = info.euid;
        id->suid = info.suid;
        return 0;
}

/* The user ids and the State: letter of the pinned status file, for
 * kernels without PIDFD_GET_INFO. */
static int uids_from_status(struct target_identity *id)
{
        char buf[4096];
        const char *p;
        ssize_t n = read_status(id, buf, sizeof(buf));

        if (n < 0)
                return (int)n;
        p = strstr(buf, "\nState:");
        if (p) {
                p += strlen("\nState:");
                id->state = p[strspn(p, " \t")];
        }
        return target_parse_uids(buf, &id->ruid, &id->euid, &id->suid);
}

/* The user ids, through the pidfd or else the status file (whose read
 * gives the State: letter too, in id->state). */
static int refresh_uids(struct target_identity *id)
{
        int r = uids_from_pidfd(id);

        /* Any refusal of a process that lives (an LSM, a 6.13 kernel's
         * ESRCH for a parent outside our pid namespace) falls back to the
         * pinned status file, for this call only. */
        if (r == -ENOTTY || (r < 0 && target_alive(id) == 1))
                return uids_from_status(id);
        return r;
}

int target_refresh(struct target_identity *id)
{
        int r;

        id->state = 0;
        r = refresh_uids(id);
        if (r < 0 || id->state)
                return r;
        r = read_state(id);
        if (r < 0)
                return r;
        id->state = (char)r;
        return 0;
}

int target_rss(const struct target_identity *id, uint64_t *ret_bytes)
{
        char buf[4096];
        unsigned long long kb;
        const char *p;
        ssize_t n;

        n = read_status(id, buf, sizeof(buf));
        if (n < 0)
                return (int)n;
        p = strstr(buf, "\nVmRSS:");
        if (!p || sscanf(p + strlen("\nVmRSS:"), "%llu kB", &kb) != 1)
                return -ENODATA; /* a zombie, or a kernel thread */
        *ret_bytes = (uint64_t)kb * 1024;
        return 0;
}

/* The state letter of a thread: field 3 of its stat line, or 0. */
static char task_state(int task_dir_fd, const char *tid)
{
        char path[300], buf[1024];
        const char *f;
        ssize_t n;
        int fd;

        snprintf(path, sizeof(path), "%s/stat", tid); /* tid: a d_name, at most 255 bytes */
        fd = openat(task_dir_fd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return 0;
        n = read_fd(fd, buf, sizeof(buf));
        close(fd);
        if (n <= 0)
                return 0;
        f = procfs_stat_field(buf, 3);
        return f ? *f : 0;
}

int target_stopped_after_refresh(struct target_identity *id)
{
        char state = id->state;

        id->state = 0;
        if (state && state != 'T' && state != 't' && state != 'Z')
                return 0;
        return target_stopped(id);
}

int target_stopped(const struct target_identity *id)
{
        char buf[64];
        struct dirent *de;
        bool traced = false;
        unsigned stopped = 0;
        DIR *dir;
        int fd, state;

        /* Almost always the answer is in the main thread's state: a process
         * whose main thread runs or sleeps is not stopped. */
        state = read_state(id);
        if (state < 0)
                return state;
        if (state != 'T' && state != 't' && state != 'Z')
                return 0;

        /* Stopped, or a leader that has exited before its threads: every
         * thread decides.  Threads that have exited count for nothing. */
        snprintf(buf, sizeof(buf), "/proc/%d/task", (int)id->pid);
        fd = open(buf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? -ESRCH : -errno;
        dir = fdopendir(fd);
        if (!dir) {
                close(fd);
                return -ENOMEM;
        }
        while ((de = readdir(dir))) {
                if (de->d_name[0] == '.')
                        continue;
                switch (task_state(dirfd(dir), de->d_name)) {
                case 't':
                        traced = true;
                        stopped++;
                        break;
                case 'T':
                        stopped++;
                        break;
                case 'Z':
                case 'X':
                case 0: /* ended while we looked */
                        break;
                default:
                        closedir(dir);
                        return 0;
                }
        }
        closedir(dir);
        if (!stopped)
                return 0;
        return traced ? TARGET_STOPPED_TRACED : TARGET_STOPPED_SIGNAL;
}

const char *target_stop_name(int stopped)
{
        return stopped == TARGET_STOPPED_TRACED ? "traced" : "signal";
}

/* The rest of pinning, once id->pidfd names the process: start time, user
 * ids, and the check that they are the pinned process's.  Consumes id. */
static int pin_pidfd(struct target_identity id, struct target_identity *ret_id)
{
        char buf[1024];
        char state = 0;
        ssize_t n;
        int r;

        id.stat_fd = open_proc(id.pid, "stat");
        if (id.stat_fd < 0) {
                r = id.stat_fd == -ENOENT ? -ESRCH : id.stat_fd;
                goto fail;
        }
        n = read_stat(&id, buf, sizeof(buf));
        if (n < 0) {
                r = (int)n;
                goto fail;
        }
        r = target_parse_start_time(buf, &id.start_time, &state);
        if (r < 0)
                goto fail;
        if (state == 'Z' || state == 'X') {
                r = -ESRCH;
                goto fail;
        }
        id.status_fd = open_proc(id.pid, "status");
        if (id.status_fd < 0) {
                r = id.status_fd == -ENOENT ? -ESRCH : id.status_fd;
                goto fail;
        }
        /* The state just read serves as target_refresh()'s would. */
        id.state = state;
        r = refresh_uids(&id);
        if (r < 0)
                goto fail;
        /* What we read is the pinned process's only if it still lives now:
         * the pid could have been reused between pidfd_open() and the reads. */
        if (!target_alive(&id)) {
                r = -ESRCH;
                goto fail;
        }
        *ret_id = id;
        return 0;
fail:
        target_close(&id);
        return r;
}

int target_open(pid_t pid, struct target_identity *ret_id)
{
        struct target_identity id = { .pid = pid, .pidfd = -1, .stat_fd = -1, .status_fd = -1 };

        if (pid <= 0)
                return -ESRCH;
        id.pidfd = sys_pidfd_open(pid);
        if (id.pidfd < 0 && (errno == EINVAL || errno == ENOENT)) {
                /* A thread id (CRIU asks about the restore thread): act on its
                 * process.  pidfds name processes, not threads; the kernel
                 * says EINVAL for a thread id before Linux 6.9, ENOENT since. */
                char buf[4096];
                pid_t tgid;
                if (read_proc(pid, "status", buf, sizeof(buf)) < 0 ||
                    target_parse_tgid(buf, &tgid) < 0 || tgid == pid)
                        return -ESRCH;
                id.pid = tgid;
                id.pidfd = sys_pidfd_open(tgid);
        }
        if (id.pidfd < 0)
                return errno == ESRCH || errno == EINVAL || errno == ENOENT ? -ESRCH : -errno;
        return pin_pidfd(id, ret_id);
}

int target_open_pidfd(pid_t pid, int pidfd, struct target_identity *ret_id)
{
        struct target_identity id = { .pid = pid, .pidfd = -1, .stat_fd = -1, .status_fd = -1 };

        if (pid <= 0 || pidfd < 0)
                return -ESRCH;
        id.pidfd = fcntl(pidfd, F_DUPFD_CLOEXEC, 3);
        if (id.pidfd < 0)
                return -errno;
        return pin_pidfd(id, ret_id);
}

void target_close(struct target_identity *id)
{
        if (id->pidfd >= 0)
                close(id->pidfd);
        if (id->stat_fd >= 0)
                close(id->stat_fd);
        if (id->status_fd >= 0)
                close(id->status_fd);
        id->pidfd = id->stat_fd = id->status_fd = -1;
}
