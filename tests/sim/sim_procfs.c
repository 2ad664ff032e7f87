/* Reading a process's files under /proc through a pinned directory fd. */

#include "sim.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Reads a whole /proc file through dir_fd, NUL-terminated (contents may hold
 * NULs too: *ret_len counts them). */
int sim_read_at(int dir_fd, const char *name, size_t max, char **ret_buf, size_t *ret_len) {
        size_t cap = 4096, len = 0;
        char *buf;
        int fd, r = 0;

        fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        buf = malloc(cap);
        if (!buf) {
                close(fd);
                return -ENOMEM;
        }
        for (;;) {
                ssize_t n;

                if (len + 1 >= cap) {
                        char *bigger;

                        if (cap >= max)
                                break; /* keep what fits: only the start matters */
                        bigger = realloc(buf, cap * 2);
                        if (!bigger) {
                                r = -ENOMEM;
                                break;
                        }
                        buf = bigger;
                        cap *= 2;
                }
                n = read(fd, buf + len, cap - len - 1);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        r = -errno;
                        break;
                }
                if (n == 0)
                        break;
                len += (size_t) n;
        }
        close(fd);
        if (r < 0) {
                free(buf);
                return r;
        }
        buf[len] = '\0';
        *ret_buf = buf;
        *ret_len = len;
        return 0;
}

int sim_read_stat_at(int dir_fd, const char *name, struct sim_stat *ret_stat) {
        struct sim_stat st = { 0 };
        char *buf, *p;
        size_t len;
        int r;

        r = sim_read_at(dir_fd, name, 64 * 1024, &buf, &len);
        if (r < 0)
                return r;
        p = strrchr(buf, ')');
        if (!p || p[1] != ' ' || p[2] == '\0') {
                free(buf);
                return -EIO;
        }
        p += 2;
        st.state = *p; /* field 3 */
        for (int field = 3; field <= 50; field++) {
                char *end = strchr(p, ' ');
                size_t flen = end ? (size_t) (end - p) : strcspn(p, "\n");

                if ((field == 9 && sim_parse_ulong(p, flen, ULLONG_MAX, &st.flags) < 0) ||
                    (field == 22 && sim_parse_ulong(p, flen, ULLONG_MAX, &st.start_time) < 0)) {
                        r = -EIO;
                        break;
                }
                if (field == 50 && sim_parse_ulong(p, flen, ULLONG_MAX, &st.env_start) < 0)
                        st.env_start = 0;
                if (!end) {
                        if (field < 22)
                                r = -EIO; /* no start time: not a stat file */
                        break;            /* an older kernel's shorter line: no env_start */
                }
                p = end + 1;
        }
        free(buf);
        if (r < 0)
                return r;
        *ret_stat = st;
        return 0;
}

/* Reads the state letter and start time from /proc/PID/stat. */
int sim_read_stat(int proc_fd, char *ret_state, unsigned long long *ret_start_time) {
        struct sim_stat st;
        int r = sim_read_stat_at(proc_fd, "stat", &st);

        if (r < 0)
                return r;
        *ret_state = st.state;
        *ret_start_time = st.start_time;
        return 0;
}

int sim_read_real_uid(int proc_fd, uid_t *ret_uid) {
        char *buf, *p;
        size_t len;
        unsigned long long uid;
        int r;

        r = sim_read_at(proc_fd, "status", 64 * 1024, &buf, &len);
        if (r < 0)
                return r;
        p = strstr(buf, "\nUid:\t");
        if (!p) {
                free(buf);
                return -EIO;
        }
        p += strlen("\nUid:\t");
        r = sim_parse_ulong(p, strcspn(p, "\t\n"), UINT32_MAX, &uid);
        free(buf);
        if (r < 0)
                return -EIO;
        *ret_uid = (uid_t) uid;
        return 0;
}


/* The last number of the NSpid line of status (the pid in the process's
 * own pid namespace); 0 when none can be read. */
static int sim_read_own_pid(int proc_fd) {
        char *buf, *line, *end;
        size_t len;
        long v, last = 0;

        if (sim_read_at(proc_fd, "status", 65536, &buf, &len) < 0)
                return 0;
        line = strstr(buf, "\nNSpid:");
        for (char *p = line ? line + 7 : NULL; p; p = end) {
                v = strtol(p, &end, 10);
                if (end == p || v <= 0 || v > INT32_MAX)
                        break;
                last = v;
        }
        free(buf);
        return (int) last;
}

/* The start time and pid namespace (its inode) of the process whose stat
 * and ns/pid name/stat and name/ns/pid are, through dir_fd. */
static int sim_identity_at(int dir_fd, const char *name, unsigned long long *ret_start, ino_t *ret_pidns) {
        char path[PATH_MAX];
        struct sim_stat st;
        struct stat ns;
        int r;

        (void) snprintf(path, sizeof(path), "%s/stat", name);
        r = sim_read_stat_at(dir_fd, path, &st);
        if (r < 0)
                return r;
        (void) snprintf(path, sizeof(path), "%s/ns/pid", name);
        if (fstatat(dir_fd, path, &ns, 0) < 0)
                return -errno;
        *ret_start = st.start_time;
        *ret_pidns = ns.st_ino;
        return 0;
}

bool sim_proc_is_own(int proc_fd) {
        char path[64];
        unsigned long long start, own_start;
        ino_t pidns, own_pidns;
        int pid = sim_read_own_pid(proc_fd), r;

        /* Who cannot look into its mount namespace cannot tell: not failed. */
        if (pid <= 0 || sim_identity_at(proc_fd, ".", &start, &pidns) < 0)
                return true;
        /* /proc/PID/root: the process's root in its mount namespace, so
         * root/proc is the /proc it sees. */
        (void) snprintf(path, sizeof(path), "root/proc/%d", pid);
        r = sim_identity_at(proc_fd, path, &own_start, &own_pidns);
        if (r == -EACCES || r == -EPERM)
                return true;
        return r == 0 && own_start == start && own_pidns == pidns;
}
