/* nstree.c: trees that are pid namespaces of their own (nstree.h).
 *
 * CRIU dumps such a tree with its namespace when the tree's root is the
 * namespace's init, and restores it into a new namespace, each process
 * with its pid there; the host pids are new ones.  So the manifest keeps,
 * beside each host pid, the pid inside the namespace, and restore maps the
 * members by it: at post-restore, with every process held by criu and
 * pinned (jobpin.c), the member whose pid in the namespace was N is the
 * pinned process of the tree whose NSpid says N at the namespace's level. */
#include "nstree.h"

#include "host.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int ctl_ns_pids(int pid, int *ret, size_t max) {
        char path[64], buf[4096], *line, *p, *end;
        size_t n = 0;
        ssize_t k;

        snprintf(path, sizeof(path), "/proc/%d/status", pid);
        k = ctl_host_read_file(path, buf, sizeof(buf));
        if (k < 0)
                return (int) k;
        line = strstr(buf, "\nNSpid:");
        if (!line)
                return -ENOTSUP; /* a kernel before 4.1 */
        p = line + 7;
        while (n < max) {
                long v = strtol(p, &end, 10);

                if (end == p || v <= 0 || v > 0x7fffffffL)
                        break;
                ret[n++] = (int) v;
                p = end;
                if (*p == '\n' || *p == '\0')
                        break;
        }
        return n > 0 ? (int) n : -EINVAL;
}

/* Levels of namespaces from ours down: enough for any job. */
#define NS_MAX_LEVELS 32

/* The pid at level (0: ours) of pid's NSpid; 0 when it has no such level. */
static int ns_pid_at(int pid, size_t level, size_t *ret_levels) {
        int v[NS_MAX_LEVELS];
        int n = ctl_ns_pids(pid, v, NS_MAX_LEVELS);

        if (n < 0)
                return 0;
        if (ret_levels)
                *ret_levels = (size_t) n;
        return (size_t) n > level ? v[level] : 0;
}

/* Whether pid is the init of a namespace below ours; its level then. */
static bool ns_is_init(int pid, size_t *ret_level) {
        int v[NS_MAX_LEVELS];
        int n = ctl_ns_pids(pid, v, NS_MAX_LEVELS);

        if (n < 2 || v[n - 1] != 1)
                return false;
        *ret_level = (size_t) n - 1;
        return true;
}

/* Whether pid's mount namespace is another than ours (a run job's). */
static bool ns_mnt_own(int pid) {
        char path[64];
        struct stat ours, its;

        snprintf(path, sizeof(path), "/proc/%d/ns/mnt", pid);
        return stat("/proc/self/ns/mnt", &ours) == 0 && stat(path, &its) == 0 &&
               (ours.st_dev != its.st_dev || ours.st_ino != its.st_ino);
}

int ctl_nstree_fill(ctl_manifest *m, size_t i) {
        ctl_manifest_tree *tr = &m->trees[i];
        size_t level, levels = 0;

        if (!ns_is_init(tr->root, &level))
                return 0;
        tr->ns_pids = calloc(tr->n_pids + 1, sizeof(int));
        if (!tr->ns_pids)
                return -ENOMEM;
        for (size_t j = 0; j < tr->n_pids; j++) {
                tr->ns_pids[j] = ns_pid_at(tr->pids[j], level, &levels);
                /* A process that entered the namespace from outside
                 * (setns): its NSpid stops above the namespace's level. */
                if (tr->ns_pids[j] == 0 || levels != level + 1)
                        return -EXDEV;
        }
        for (size_t j = 0; j < m->n_members; j++)
                for (size_t k = 0; k < tr->n_pids && m->members[j].tree == tr->root; k++)
                        if (tr->pids[k] == m->members[j].pid)
                                m->members[j].ns_pid = tr->ns_pids[k];
        tr->pid_ns = true;
        tr->mnt_ns = ns_mnt_own(tr->root);
        return 0;
}

int ctl_nstree_locate(ctl_manifest_tree *tree, const ctl_proctree *t, int criu_pid) {
        size_t level;

        for (size_t k = 0; k < t->n; k++)
                if (t->ppid[k] == criu_pid && ns_is_init(t->pid[k], &level) && level == 1) {
                        tree->root = t->pid[k];
                        return 0;
                }
        return -ESRCH;
}

/* The pinned process of the namespace whose pid there is ns_pid; NULL if none. */
static const ctl_pin *ns_find_pin(const ctl_pins *pins, const int *tree_pids, size_t n, int ns_pid) {
        for (size_t k = 0; k < n; k++) {
                const ctl_pin *p = ctl_pins_find(pins, tree_pids[k]);
                size_t levels = 0;

                /* Read after the pin: a pin still alive after the read is
                 * the process read (criu holds them all here anyway). */
                if (p && ns_pid_at(p->pid, 1, &levels) == ns_pid && levels == 2 && ctl_pin_alive(p))
                        return p;
        }
        return NULL;
}

int ctl_nstree_map(ctl_manifest *m, size_t i, int old_root, const ctl_proctree *t, const ctl_pins *pins) {
        ctl_manifest_tree *tr = &m->trees[i];
        int *now = NULL;
        size_t n = 0;
        int r = ctl_proctree_subtree(t, tr->root, &now, &n);

        for (size_t j = 0; r == 0 && j < m->n_members; j++) {
                ctl_manifest_member *mb = &m->members[j];
                const ctl_pin *p;

                if (mb->tree != old_root)
                        continue;
                p = mb->ns_pid > 0 ? ns_find_pin(pins, now, n, mb->ns_pid) : NULL;
                if (!p)
                        r = -ESRCH;
                else {
                        mb->pid = p->pid;
                        mb->tree = tr->root;
                }
        }
        for (size_t j = 0; r == 0 && j < tr->n_pids; j++) {
                const ctl_pin *p = ns_find_pin(pins, now, n, tr->ns_pids[j]);

                /* A process that exited since the dump keeps its old number. */
                if (p)
                        tr->pids[j] = p->pid;
        }
        free(now);
        return r;
}
