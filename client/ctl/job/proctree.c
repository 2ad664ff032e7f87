/* proctree.c: the process tree, read from /proc, for dump: which trees
 * CRIU must dump (one per root: a process of the job none of whose
 * ancestors is in the job) and which processes each holds.
 *
 * A snapshot: the job is suspended when it is taken, but its processes
 * that do no CUDA may still fork or exit; CRIU reads the tree again itself. */
#include "proctree.h"

#include "args.h"
#include "host.h"
#include "procfs.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Field 4 (ppid) and field 22 (start time) of /proc/PID/stat. */
int ctl_proc_stat(int pid, int *ret_ppid, uint64_t *ret_start) {
        char path[64], buf[1024];
        uint64_t start;
        int ppid, r;

        snprintf(path, sizeof(path), "/proc/%d/stat", pid);
        r = ctl_host_read_file(path, buf, sizeof(buf));
        if (r < 0)
                return r;
        if (procfs_stat_ppid(buf, &ppid) < 0 || procfs_stat_u64(buf, 22, &start) < 0)
                return -EINVAL;
        if (ret_ppid)
                *ret_ppid = ppid;
        if (ret_start)
                *ret_start = start;
        return 0;
}

uint64_t ctl_proc_start_time(int pid) {
        uint64_t start = 0;

        return ctl_proc_stat(pid, NULL, &start) < 0 ? 0 : start;
}

int ctl_proctree_scan(ctl_proctree *ret) {
        ctl_proctree t = { 0 };
        size_t cap = 0;
        struct dirent *de;
        DIR *d = opendir("/proc");

        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                int pid, ppid;

                if (!isdigit((unsigned char) de->d_name[0]) || ctl_parse_pid(de->d_name, &pid) < 0)
                        continue;
                if (ctl_proc_stat(pid, &ppid, NULL) < 0)
                        continue; /* gone meanwhile */
                if (t.n == cap) {
                        size_t ncap = cap ? 2 * cap : 512;
                        int *a = realloc(t.pid, ncap * sizeof(int)), *b;

                        if (a)
                                t.pid = a;
                        b = a ? realloc(t.ppid, ncap * sizeof(int)) : NULL;
                        if (!b) {
                                closedir(d);
                                ctl_proctree_free(&t);
                                return -ENOMEM;
                        }
                        t.ppid = b;
                        cap = ncap;
                }
                t.pid[t.n] = pid;
                t.ppid[t.n++] = ppid;
        }
        closedir(d);
        *ret = t;
        return 0;
}

void ctl_proctree_free(ctl_proctree *t) {
        if (!t)
                return;
        free(t->pid);
        free(t->ppid);
        *t = (ctl_proctree) { 0 };
}

static bool proctree_has(const int *set, size_t n, int pid) {
        for (size_t i = 0; i < n; i++)
                if (set[i] == pid)
                        return true;
        return false;
}

static int proctree_parent(const ctl_proctree *t, int pid) {
        for (size_t i = 0; i < t->n; i++)
                if (t->pid[i] == pid)
                        return t->ppid[i];
        return 0;
}

int ctl_proctree_subtree(const ctl_proctree *t, int pid, int **ret, size_t *ret_n) {
        return procfs_descendants(t->pid, t->ppid, t->n, pid, SIZE_MAX, ret, ret_n);
}

int ctl_proctree_roots(const ctl_proctree *t, const int *set, size_t n, int **ret, size_t *ret_n) {
        int *out = malloc((n ? n : 1) * sizeof(int));
        size_t k = 0;

        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                bool covered = false;
                int p = proctree_parent(t, set[i]);

                /* Up to pid 1 (or a process outside the snapshot); bounded by t->n
                 * against a cycle read from a tree that changed meanwhile. */
                for (size_t hops = 0; p > 0 && hops < t->n && !covered; hops++) {
                        covered = proctree_has(set, n, p);
                        p = proctree_parent(t, p);
                }
                if (!covered)
                        out[k++] = set[i];
        }
        *ret = out;
        *ret_n = k;
        return 0;
}

/* Whether the "0::" line of /proc/PID/cgroup names cgroup or a cgroup below it. */
static bool proctree_in_cgroup(int pid, const char *cgroup, size_t len) {
        char path[64], buf[4096];
        const char *p;
        size_t n;

        snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
        if (ctl_host_read_file(path, buf, sizeof(buf)) < 0 || procfs_cgroup_v2(buf, &p, &n) < 0)
                return false;
        if (len == 1) /* "/": every process */
                return true;
        return n >= len && strncmp(p, cgroup, len) == 0 && (n == len || p[len] == '/');
}

int ctl_proctree_cgroup(const ctl_proctree *t, const char *cgroup, int **ret, size_t *ret_n) {
        size_t len = strlen(cgroup), k = 0;
        int *out = malloc((t->n ? t->n : 1) * sizeof(int));

        if (!out)
                return -ENOMEM;
        /* The selector allows a trailing slash; /proc names none. */
        while (len > 1 && cgroup[len - 1] == '/')
                len--;
        for (size_t i = 0; i < t->n; i++)
                if (t->pid[i] != getpid() && proctree_in_cgroup(t->pid[i], cgroup, len))
                        out[k++] = t->pid[i];
        *ret = out;
        *ret_n = k;
        return 0;
}
