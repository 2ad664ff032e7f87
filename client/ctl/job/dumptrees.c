/* dumptrees.c: the trees and members of a dump, from /proc (dumptrees.h). */
#include "dumptrees.h"

#include "args.h"
#include "nstree.h"
#include "proctree.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A member's GPUs from the listing: UUIDs, or NULL (not known). */
static int dtrees_member_gpus(const cJSON *processes, ctl_manifest_member *m) {
        const cJSON *p, *gpus, *g;

        cJSON_ArrayForEach(p, processes) {
                const cJSON *pid = cJSON_GetObjectItemCaseSensitive(p, "pid");

                if (!cJSON_IsNumber(pid) || pid->valuedouble != m->pid)
                        continue;
                gpus = cJSON_GetObjectItemCaseSensitive(p, "gpus");
                if (!cJSON_IsArray(gpus))
                        return 0;
                m->gpus = calloc((size_t) cJSON_GetArraySize(gpus) + 1, sizeof(char *));
                if (!m->gpus)
                        return -ENOMEM;
                cJSON_ArrayForEach(g, gpus) {
                        const cJSON *u = cJSON_GetObjectItemCaseSensitive(g, "uuid");

                        if (cJSON_IsString(u) && !(m->gpus[m->n_gpus++] = strdup(u->valuestring)))
                                return -ENOMEM;
                }
                return 0;
        }
        return 0;
}

/* The processes whose trees are dumped: roots among them are the trees. */
static int dtrees_job_set(const ctl_job_args *a, const cJSON *members, const ctl_proctree *t, int **ret,
                          size_t *ret_n) {
        const ctl_selector *sel = &a->selector;

        if (sel->kind == CTL_SELECT_CGROUP)
                return ctl_proctree_cgroup(t, sel->arg, ret, ret_n);
        if (sel->kind == CTL_SELECT_TREE) {
                *ret = malloc(sizeof(int));
                if (!*ret)
                        return -ENOMEM;
                (void) ctl_parse_pid(sel->arg, *ret);
                *ret_n = 1;
                return 0;
        }
        /* --pids: each one is a CUDA member (the daemon refused any other). */
        *ret = ctl_job_selector_pids(members ? members : sel->json, ret_n);
        return *ret ? 0 : -ENOMEM;
}

int ctl_dump_find_trees(const ctl_job_args *a, const cJSON *selected, const cJSON *processes, ctl_manifest *m_out,
                        int *ret_outside) {
        ctl_proctree t = { 0 };
        int *set = NULL, *roots = NULL, *members = NULL;
        size_t n_set = 0, n_roots = 0, n_members = 0;
        int r;

        r = ctl_proctree_scan(&t);
        if (r == 0)
                r = dtrees_job_set(a, selected, &t, &set, &n_set);
        if (r == 0)
                r = ctl_proctree_roots(&t, set, n_set, &roots, &n_roots);
        if (r == 0 && selected && !(members = ctl_job_selector_pids(selected, &n_members)))
                r = -ENOMEM;
        if (r == 0 && n_roots == 0)
                r = -ESRCH;
        if (r == 0 && n_roots > CTL_JOB_MAX_TREES)
                r = -E2BIG;
        m_out->trees = r == 0 ? calloc(n_roots, sizeof(*m_out->trees)) : NULL;
        m_out->members = r == 0 ? calloc(n_members + 1, sizeof(*m_out->members)) : NULL;
        if (r == 0 && (!m_out->trees || !m_out->members))
                r = -ENOMEM;
        for (size_t i = 0; r == 0 && i < n_roots; i++) {
                ctl_manifest_tree *tr = &m_out->trees[m_out->n_trees++];

                tr->root = roots[i];
                r = asprintf(&tr->images, "tree-%d", roots[i]) < 0 ? -ENOMEM : 0;
                if (r == 0)
                        r = ctl_proctree_subtree(&t, roots[i], &tr->pids, &tr->n_pids);
        }
        for (size_t i = 0; r == 0 && i < n_members; i++) {
                ctl_manifest_member *m = &m_out->members[m_out->n_members++];

                m->pid = members[i];
                m->start_time = ctl_proc_start_time(members[i]);
                for (size_t k = 0; k < m_out->n_trees && !m->tree; k++)
                        for (size_t j = 0; j < m_out->trees[k].n_pids; j++)
                                if (m_out->trees[k].pids[j] == m->pid)
                                        m->tree = m_out->trees[k].root;
                /* Gone, or moved out of the trees since the suspend: criu
                 * would not dump it, and restore would refuse the manifest. */
                if (!m->tree) {
                        *ret_outside = m->pid;
                        r = -EXDEV;
                }
                if (r == 0)
                        r = dtrees_member_gpus(processes, m);
        }
        /* A tree whose root is a pid namespace's init keeps its pids there. */
        for (size_t i = 0; r == 0 && i < m_out->n_trees; i++)
                r = ctl_nstree_fill(m_out, i);
        ctl_proctree_free(&t);
        free(set);
        free(roots);
        free(members);
        return r;
}
