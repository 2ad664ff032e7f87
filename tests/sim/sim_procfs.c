/* Reading a process's files under /proc through a pinned directory fd. */

#include "sim.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
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

