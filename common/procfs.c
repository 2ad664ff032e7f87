/* procfs.c: /proc/PID/stat and the cgroup v2 line parsed (procfs.h). */
#include "procfs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *procfs_stat_field(const char *stat_line, int n) {
        const char *p = strrchr(stat_line, ')');

        if (!p || p[1] != ' ' || !p[2])
                return NULL;
        p += 2; /* field 3 */
        for (int field = 3; field < n; field++) {
                p = strchr(p, ' ');
                if (!p)
                        return NULL;
                p++;
        }
        return p;
}

int procfs_stat_u64(const char *stat_line, int n, uint64_t *ret) {
        const char *p = procfs_stat_field(stat_line, n);
        unsigned long long v;
        char *end;

        if (!p || *p < '0' || *p > '9')
                return -EINVAL;
        errno = 0;
        v = strtoull(p, &end, 10);
        if (errno || end == p || (*end != ' ' && *end != '\n' && *end != '\0'))
                return -EINVAL;
        *ret = v;
        return 0;
}

int procfs_stat_ppid(const char *stat_line, int *ret_ppid) {
        uint64_t v;

        if (procfs_stat_u64(stat_line, 4, &v) < 0 || v > 2147483647)
                return -EINVAL;
        *ret_ppid = (int) v;
        return 0;
}

int procfs_cgroup_v2(const char *text, const char **ret_path, size_t *ret_len) {
        for (const char *line = text; line && *line;) {
                const char *nl = strchr(line, '\n');

                if (strncmp(line, "0::", 3) == 0) {
                        *ret_path = line + 3;
                        *ret_len = nl ? (size_t) (nl - line - 3) : strlen(line + 3);
                        return 0;
                }
                line = nl ? nl + 1 : NULL;
        }
        return -ENOENT;
}
