/* target.c: pidfds and /proc for the processes the daemon acts on. */
#include "target.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int sys_pidfd_open(pid_t pid)
{
        return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int sys_pidfd_send_signal(int pidfd, int sig)
{
        return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

static ssize_t read_proc(pid_t pid, const char *what, char *buf, size_t len)
{
        char path[64];
        ssize_t n, total = 0;
        int fd;

        snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        while ((size_t)total < len - 1) {
                n = read(fd, buf + total, len - 1 - (size_t)total);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        n = -errno;
                        close(fd);
                        return n;
                }
                if (n == 0)
                        break;
                total += n;
        }
        close(fd);
        buf[total] = '\0';
        return total;
}

int target_parse_start_time(const char *stat_line, uint64_t *ret_start_time, char *ret_state)
{
        /* comm (field 2) may hold spaces and parentheses: start after the last ')'. */
        const char *p = strrchr(stat_line, ')');
        char state;
        unsigned long long v;
        char *end;

        if (!p || p[1] != ' ' || !p[2])
                return -EINVAL;
        p += 2;
        state = *p; /* field 3 */
        for (int field = 3; field < 22; field++) {
                p = strchr(p, ' ');
                if (!p)
                        return -EINVAL;
                p++;
        }
        errno = 0;
        v = strtoull(p, &end, 10);
        if (errno || end == p || (*end != ' ' && *end != '\n' && *end != '\0'))
                return -EINVAL;
        *ret_start_time = v;
        if (ret_state)
                *ret_state = state;
        return 0;
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

int target_alive(const struct target_identity *id)
{
        if (id->pidfd < 0)
                return 0;
        /* Signal 0 checks existence; EPERM means alive but not ours to signal
         * (a daemon run without root for development). */
        if (sys_pidfd_send_signal(id->pidfd, 0) < 0 && errno == ESRCH)
                return 0;
        /* A zombie has exited even though its pid is still held. */
        char buf[1024];
        uint64_t st;
        char state = 0;
        if (read_proc(id->pid, "stat", buf, sizeof(buf)) < 0 ||
            target_parse_start_time(buf, &st, &state) < 0 || st != id->start_time)
                return 0;
        return state != 'Z' && state != 'X';
}

int target_open(pid_t pid, struct target_identity *ret_id)
{
        struct target_identity id = { .pid = pid, .pidfd = -1 };
        char buf[4096];
        char state = 0;
        ssize_t n;
        int r;

        if (pid <= 0)
                return -ESRCH;
        id.pidfd = sys_pidfd_open(pid);
        if (id.pidfd < 0 && errno == EINVAL) {
                /* A thread id (CRIU asks about the restore thread): act on its
                 * process.  pidfds name processes, not threads. */
                pid_t tgid;
                if (read_proc(pid, "status", buf, sizeof(buf)) < 0 ||
                    target_parse_tgid(buf, &tgid) < 0 || tgid == pid)
                        return -ESRCH;
                id.pid = pid = tgid;
                id.pidfd = sys_pidfd_open(pid);
        }
        if (id.pidfd < 0)
                return errno == ESRCH || errno == EINVAL ? -ESRCH : -errno;
        n = read_proc(pid, "stat", buf, sizeof(buf));
        if (n < 0) {
                r = n == -ENOENT ? -ESRCH : (int)n;
                goto fail;
        }
        r = target_parse_start_time(buf, &id.start_time, &state);
        if (r < 0)
                goto fail;
        if (state == 'Z' || state == 'X') {
                r = -ESRCH;
                goto fail;
        }
        n = read_proc(pid, "status", buf, sizeof(buf));
        if (n < 0) {
                r = n == -ENOENT ? -ESRCH : (int)n;
                goto fail;
        }
        r = target_parse_uids(buf, &id.ruid, &id.euid, &id.suid);
        if (r < 0)
                goto fail;
        /* What we read is the pinned process's only if it still lives now. */
        if (sys_pidfd_send_signal(id.pidfd, 0) < 0 && errno == ESRCH) {
                r = -ESRCH;
                goto fail;
        }
        *ret_id = id;
        return 0;
fail:
        close(id.pidfd);
        return r;
}

void target_close(struct target_identity *id)
{
        if (id->pidfd >= 0)
                close(id->pidfd);
        id->pidfd = -1;
}
