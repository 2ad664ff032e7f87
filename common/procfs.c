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

static int procfs_has(const int *set, size_t n, int pid) {
        for (size_t i = 0; i < n; i++)
                if (set[i] == pid)
                        return 1;
        return 0;
}

int procfs_descendants(const int *pid, const int *ppid, size_t n, int root, size_t max, int **ret, size_t *ret_n) {
        size_t k = 1;
        int *out;

        if (!procfs_has(pid, n, root))
                return -ESRCH;
        out = malloc((n + 1) * sizeof(int));
        if (!out)
                return -ENOMEM;
        out[0] = root;
        /* Breadth first: each found process's children are appended after
         * it; one already there (a snapshot taken while pids were reused) is
         * not taken again. */
        for (size_t i = 0; i < k; i++)
                for (size_t j = 0; j < n; j++) {
                        if (ppid[j] != out[i] || pid[j] == out[i] || procfs_has(out, k, pid[j]))
                                continue;
                        if (k >= max) {
                                free(out);
                                return -E2BIG;
                        }
                        out[k++] = pid[j];
                }
        *ret = out;
        *ret_n = k;
        return 0;
}
