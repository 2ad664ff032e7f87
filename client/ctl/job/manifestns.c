/* manifestns.c: the pid namespace keys of manifest.json (manifestns.h). */
#include "manifestns.h"

#include "json.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>

bool ctl_manifest_ns_write_tree(cJSON *o, const ctl_manifest_tree *tr) {
        cJSON *a;

        if (!tr->pid_ns)
                return true;
        a = cJSON_CreateIntArray(tr->ns_pids, (int) tr->n_pids);
        if (!a || !cJSON_AddItemToObject(o, "ns_pids", a)) {
                cJSON_Delete(a);
                return false;
        }
        return cJSON_AddBoolToObject(o, "pid_namespace", true) != NULL;
}

bool ctl_manifest_ns_write_member(cJSON *o, const ctl_manifest_member *m) {
        return m->ns_pid <= 0 || cJSON_AddNumberToObject(o, "ns_pid", m->ns_pid);
}

static int ns_cmp_int(const void *a, const void *b) {
        int x = *(const int *) a, y = *(const int *) b;

        return (x > y) - (x < y);
}

/* No number twice among v (n of them): 0 or -EBADMSG. */
static int ns_unique(const int *v, size_t n) {
        int *c = malloc((n + 1) * sizeof(int));
        int r = c ? 0 : -ENOMEM;

        for (size_t i = 0; c && i < n; i++)
                c[i] = v[i];
        if (c)
                qsort(c, n, sizeof(int), ns_cmp_int);
        for (size_t i = 1; r == 0 && i < n; i++)
                if (c[i] == c[i - 1])
                        r = -EBADMSG;
        free(c);
        return r;
}

int ctl_manifest_ns_read_tree(const cJSON *o, ctl_manifest_tree *tr) {
        const cJSON *flag = cJSON_GetObjectItemCaseSensitive(o, "pid_namespace");
        const cJSON *pids = cJSON_GetObjectItemCaseSensitive(o, "ns_pids"), *p;
        size_t n = 0;

        if (!flag && !pids)
                return 0;
        if (!cJSON_IsTrue(flag) || !cJSON_IsArray(pids))
                return -EINVAL;
        if ((size_t) cJSON_GetArraySize(pids) != tr->n_pids)
                return -EBADMSG;
        tr->ns_pids = calloc(tr->n_pids + 1, sizeof(int));
        if (!tr->ns_pids)
                return -ENOMEM;
        cJSON_ArrayForEach(p, pids) {
                if (!json_is_integer(p, 1, INT_MAX))
                        return -EINVAL;
                tr->ns_pids[n] = (int) p->valuedouble;
                /* The root is the namespace's init. */
                if ((tr->pids[n] == tr->root) != (tr->ns_pids[n] == 1))
                        return -EBADMSG;
                n++;
        }
        tr->pid_ns = true;
        return ns_unique(tr->ns_pids, n);
}

int ctl_manifest_ns_read_member(const cJSON *o, ctl_manifest_member *mb) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "ns_pid");

        if (!v)
                return 0;
        if (!json_is_integer(v, 1, INT_MAX))
                return -EINVAL;
        mb->ns_pid = (int) v->valuedouble;
        return 0;
}

int ctl_manifest_ns_check(const ctl_manifest *m) {
        for (size_t i = 0; i < m->n_members; i++) {
                const ctl_manifest_member *mb = &m->members[i];
                int want = 0;

                for (size_t k = 0; k < m->n_trees; k++)
                        for (size_t j = 0; m->trees[k].root == mb->tree && m->trees[k].pid_ns &&
                                           j < m->trees[k].n_pids; j++)
                                if (m->trees[k].pids[j] == mb->pid)
                                        want = m->trees[k].ns_pids[j];
                if (mb->ns_pid != want)
                        return -EBADMSG;
        }
        return 0;
}
