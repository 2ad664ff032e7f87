/* select.c: the selection engine (select.h). */
#include "jobs/select.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth/access.h"
#include "cudackpt/protocol.h"
#include "base/log.h"
#include "host/pidns.h"
#include "host/procindex.h"
#include "host/target.h"

/* Processes examined by one work item: /proc reads of a few thousand
 * processes spread over the pool's threads. */
#define SELECT_CHUNK 128

struct chunk {
        uv_work_t work;
        struct select_job *j;
        size_t first, n;
};

int select_candidates(struct select_source *src, pid_t **ret_pids, size_t *ret_n)
{
        struct procindex *ix = atomic_load(&src->index);

        if (ix && !atomic_load(&src->index_lost)) {
                int r = procindex_candidates(ix, ret_pids, ret_n);
                if (r == 0) {
                        atomic_fetch_add(&src->scans_index, 1);
                        return 0;
                }
                if (r == -EOVERFLOW && !atomic_exchange(&src->index_lost, true))
                        log_warning("The process index is full (process_index_max %u) and has missed a process: "
                                    "ListProcesses and Watch scan /proc from now on",
                                    src->index_max);
                else if (r != -EOVERFLOW)
                        log_debug("The process index failed (%s): scanning /proc", strerror(-r));
        }
        atomic_fetch_add(&src->scans_proc, 1);
        return discover_all(ret_pids, ret_n);
}

int select_cgroup_in_ours(const char *root, const char *sel, char **ret)
{
        if (root[0] && strcmp(sel, "/") == 0)
                sel = "";
        if (asprintf(ret, "%s%s", root, sel) < 0) {
                *ret = NULL;
                return -ENOMEM;
        }
        return 0;
}

void select_member_clear(struct select_member *m)
{
        if (m->pidfd >= 0)
                close(m->pidfd);
        m->pidfd = -1;
        free(m->cgroup);
        m->cgroup = NULL;
}

void select_job_clear(struct select_job *j)
{
        for (size_t i = 0; j->m && i < j->n; i++)
                select_member_clear(&j->m[i]);
        free(j->m);
        j->m = NULL;
        j->n = 0;
        free(j->cand);
        j->cand = NULL;
        free(j->cgroup_sel);
        j->cgroup_sel = NULL;
}

/* ---- examining one candidate (worker threads) ------------------------------ */

#define RESULT_INIT(e) \
        (struct ops_result){ .error = (e), .state = -1, .restore_tid = -1, .rolled_back = -1, .in_flight = -1 }

static void fail(struct select_member *mb, enum proto_method m, const struct ops_result *r)
{
        mb->failed = true;
        mb->err_method = m;
        mb->err = *r;
}

static void refuse(struct select_member *mb, enum proto_method m, enum ops_error e)
{
        struct ops_result r = RESULT_INIT(e);

        fail(mb, m, &r);
}

/* Candidate i as the caller names it, and the request it stands for;
 * false when it is left out (the daemon, or a process the caller cannot
 * see), or not in the selected cgroup (cg gets its cgroup then). */
static bool name_member(const struct select_job *j, size_t i, struct select_member *mb, struct proto_request *req,
                        char *cg)
{
        const bool pids = j->req->kind == PROTO_SELECT_PIDS;

        *mb = (struct select_member){ .pid = j->cand[i], .vpid = pids ? j->req->pids[i].pid : j->cand[i],
                                      .pidfd = -1 };
        *req = (struct proto_request){ .pid = j->cand[i] };
        cg[0] = '\0';
        if (pids) {
                req->has_start_time = j->req->pids[i].has_start_time;
                req->start_time = j->req->pids[i].start_time;
        } else if (j->cand[i] == getpid() || pidns_to_caller(&j->caller->pidns, j->cand[i], &mb->vpid) < 0) {
                return false;
        }
        /* Cheapest test first: the cgroup (when it selects), the owner,
         * then the maps. */
        if (j->req->kind == PROTO_SELECT_CGROUP &&
            (discover_cgroup(j->cand[i], cg, DISCOVER_CGROUP_MAX) < 0 || !discover_cgroup_within(cg, j->cgroup_sel)))
                return false;
        return true;
}

/* Takes over the pin of id (closed after); *ret_t gets its uids. */
static void take_pin(const struct select_job *j, struct select_member *mb, struct target_identity *id,
                     struct policy_target *ret_t)
{
        if (id->pid != mb->pid) /* a thread id named its process */
                (void)pidns_to_caller(&j->caller->pidns, id->pid, &mb->vpid);
        mb->pid = id->pid;
        mb->start_time = id->start_time;
        mb->owner = (struct policy_target){ id->ruid, id->euid, id->suid };
        mb->pidfd = id->pidfd;
        id->pidfd = -1;
        *ret_t = mb->owner;
        target_close(id);
}

/* A group's member: what it may not act on is its failure. */
static void examine_to_act(const struct select_job *j, size_t i, struct select_member *mb)
{
        const bool pids = j->req->kind == PROTO_SELECT_PIDS;
        const enum proto_method judge_as = proto_group_single(j->method);
        char cg[DISCOVER_CGROUP_MAX];
        struct target_identity id;
        struct proto_request req;
        struct policy_target t;
        struct ops_result r;
        int k;

        if (!name_member(j, i, mb, &req, cg)) {
                mb->excluded = true;
                return;
        }
        if (!pids) {
                k = discover_maps_driver(j->cand[i], &j->source->driver_lib);
                if (k < 0) {
                        mb->excluded = true;
                        return;
                }
                mb->skipped = k == 0;
        }
        k = target_open(j->cand[i], &id);
        if (k < 0) {
                if (!pids || j->lenient)
                        mb->excluded = true; /* gone since the scan */
                else
                        refuse(mb, judge_as, k == -ESRCH ? OPS_NO_SUCH_PROCESS : OPS_PERMISSION_DENIED);
                return;
        }
        take_pin(j, mb, &id, &t);
        if (!pids && !access_may_read(j->cfg, j->caller, &t)) {
                /* Another's process met by a tree or cgroup: the group
                 * learns how many, not which. */
                mb->excluded = mb->skipped;
                mb->hidden = !mb->excluded;
                if (mb->hidden)
                        refuse(mb, judge_as, OPS_PERMISSION_DENIED);
                return;
        }
        if (mb->skipped)
                return; /* not acted on: not judged */
        if (mb->pid == getpid()) {
                refuse(mb, judge_as, OPS_PERMISSION_DENIED);
                return;
        }
        r = RESULT_INIT(OPS_OK);
        if (ops_judge(j->cfg, j->caller, judge_as, &req, &t, mb->start_time, &r))
                return;
        if (j->lenient && r.error == OPS_PROCESS_CHANGED)
                mb->excluded = true;
        else
                fail(mb, judge_as, &r);
}

/* A cgroup path of ours as the caller's cgroup namespace shows it; NULL
 * for one outside that namespace. */
static char *cgroup_for_caller(const struct select_job *j, const char *path)
{
        size_t n = strlen(j->cgroup_root);

        if (j->cgroup_hidden)
                return NULL;
        if (n == 0)
                return strdup(path);
        if (!discover_cgroup_within(path, j->cgroup_root))
                return NULL;
        return strdup(path[n] ? path + n : "/");
}

/* A listing's entry: it shows what the caller may see, and only CUDA
 * processes; a pid named that has no process is an error. */
static void examine_to_list(const struct select_job *j, size_t i, struct select_member *mb)
{
        const bool pids = j->req->kind == PROTO_SELECT_PIDS;
        char cg[DISCOVER_CGROUP_MAX];
        struct target_identity id;
        struct proto_request req;
        struct policy_target t;
        uid_t owner;
        int k;

        if (!name_member(j, i, mb, &req, cg)) {
                mb->excluded = true;
                return;
        }
        /* A first look at the owner spares reading the maps of everyone
         * else's. */
        if (j->caller->uid != 0 && discover_owner(j->cand[i], &owner) == 0) {
                t = (struct policy_target){ owner, owner, owner };
                if (!policy_allowed(policy_decide(j->cfg, j->caller, &t, true))) {
                        mb->excluded = true;
                        return;
                }
        }
        if (!pids && discover_maps_driver(j->cand[i], &j->source->driver_lib) <= 0) {
                mb->excluded = true;
                return;
        }
        k = target_open(j->cand[i], &id);
        if (k < 0) {
                /* One it names that has no process it says; one it may
                 * not open it leaves out. */
                if (!pids || k != -ESRCH)
                        mb->excluded = true;
                else
                        refuse(mb, PROTO_GET_STATE, OPS_NO_SUCH_PROCESS);
                return;
        }
        take_pin(j, mb, &id, &t);
        if (!pids && !access_may_read(j->cfg, j->caller, &t)) {
                mb->excluded = true;
                return;
        }
        if (mb->pid == getpid()) {
                refuse(mb, PROTO_GET_STATE, OPS_PERMISSION_DENIED);
        } else {
                struct ops_result r = RESULT_INIT(OPS_OK);
                if (!ops_judge(j->cfg, j->caller, PROTO_GET_STATE, &req, &t, mb->start_time, &r)) {
                        mb->excluded = true;
                        return;
                }
        }
        /* The cgroup of the few CUDA processes is read last. */
        (void)discover_comm(mb->pid, mb->comm, sizeof(mb->comm));
        if (j->req->kind != PROTO_SELECT_CGROUP && discover_cgroup(mb->pid, cg, sizeof(cg)) < 0)
                cg[0] = '\0';
        mb->cgroup = cg[0] ? cgroup_for_caller(j, cg) : NULL;
}

static void chunk_work(uv_work_t *w)
{
        struct chunk *ch = w->data;
        struct select_job *j = ch->j;

        for (size_t i = ch->first; i < ch->first + ch->n; i++) {
                if (j->purpose == SELECT_TO_LIST)
                        examine_to_list(j, i, &j->m[i]);
                else
                        examine_to_act(j, i, &j->m[i]);
        }
}

/* ---- the result (loop thread) ---------------------------------------------- */

static int cmp_member(const void *a, const void *b)
{
        const struct select_member *x = a, *y = b;

        return (x->pid > y->pid) - (x->pid < y->pid);
}

/* Compacts, sorts by pid and merges a process named twice (by a thread
 * id), then hands the result over. */
static void settle(struct select_job *j)
{
        size_t n = 0;

        for (size_t i = 0; i < j->n; i++) {
                if (j->m[i].excluded) {
                        select_member_clear(&j->m[i]);
                        continue;
                }
                j->m[n++] = j->m[i];
        }
        j->n = n;
        if (n > 1)
                qsort(j->m, n, sizeof(*j->m), cmp_member);
        n = 0;
        for (size_t i = 0; i < j->n; i++) {
                if (n > 0 && j->m[n - 1].pid == j->m[i].pid && !j->m[i].failed && !j->m[n - 1].failed) {
                        select_member_clear(&j->m[i]);
                        continue;
                }
                j->m[n++] = j->m[i];
        }
        j->n = n;
        j->done_cb(j);
}

static void chunk_done_cb(uv_work_t *w, int status)
{
        struct chunk *ch = w->data;
        struct select_job *j = ch->j;

        (void)status;
        free(ch);
        if (--j->chunks_left == 0)
                settle(j);
}

/* ---- the candidates -------------------------------------------------------- */

/* What the selector names, before any process is looked at (worker). */
static void candidates_work(uv_work_t *w)
{
        struct select_job *j = w->data;
        const struct pidns *ns = &j->caller->pidns;
        pid_t root;

        /* Pids the caller names are turned into ours here; one it cannot
         * see becomes -1, which no process has (NoSuchProcess). */
        switch (j->req->kind) {
        case PROTO_SELECT_PIDS:
                j->cand = calloc(j->req->n_pids, sizeof(*j->cand));
                if (!j->cand) {
                        j->error = -ENOMEM;
                        return;
                }
                for (size_t i = 0; i < j->req->n_pids; i++)
                        if (pidns_to_daemon(ns, j->req->pids[i].pid, &j->cand[i]) < 0)
                                j->cand[i] = -1;
                j->n_cand = j->req->n_pids;
                return;
        case PROTO_SELECT_TREE:
                if (pidns_to_daemon(ns, j->req->tree, &root) < 0)
                        j->error = -ESRCH;
                else
                        j->error = discover_tree(root, SELECT_TREE_MAX, &j->cand, &j->n_cand);
                return;
        default:
                break;
        }
        /* Cgroup paths in and out are the caller's cgroup namespace's. */
        if (discover_cgroup_ns_root(j->caller->pid, j->cgroup_root, sizeof(j->cgroup_root)) < 0) {
                if (j->req->kind == PROTO_SELECT_CGROUP) {
                        j->error = -EREMOTE;
                        return;
                }
                j->cgroup_hidden = true;
        }
        if (j->req->kind == PROTO_SELECT_CGROUP) {
                if (select_cgroup_in_ours(j->cgroup_root, j->req->cgroup, &j->cgroup_sel) < 0) {
                        j->error = -ENOMEM;
                        return;
                }
                /* A cgroup that does not exist is no empty selection: a
                 * scheduler must not read "nothing matched" as done. */
                if (discover_cgroup_exists(j->cgroup_sel) == 0) {
                        j->error = -ENOENT;
                        return;
                }
        }
        /* A listing wants CUDA processes only; a group by cgroup also
         * reports the others it skips, so it reads every process. */
        if (j->purpose == SELECT_TO_ACT)
                j->error = discover_all(&j->cand, &j->n_cand);
        else
                j->error = select_candidates(j->source, &j->cand, &j->n_cand);
}

/* The root of a tree has gone: one failed member says so. */
static void root_gone(struct select_job *j)
{
        j->m = calloc(1, sizeof(*j->m));
        if (!j->m)
                return;
        j->n = 1;
        j->m[0] = (struct select_member){ .pid = -1, .vpid = j->req->tree, .pidfd = -1 };
        refuse(&j->m[0], proto_group_single(j->method), OPS_NO_SUCH_PROCESS);
}

static void candidates_done_cb(uv_work_t *w, int status)
{
        struct select_job *j = w->data;
        size_t per;

        (void)status;
        j->t_scanned = uv_hrtime();
        if (j->error == -ESRCH)
                root_gone(j);
        if (j->error == 0) {
                j->n = j->n_cand;
                j->m = calloc(j->n ? j->n : 1, sizeof(*j->m));
                if (!j->m)
                        j->error = -ENOMEM;
        }
        if (j->error < 0 || j->n == 0) {
                j->done_cb(j);
                return;
        }
        /* Spread over the workers: a few candidates (the process index's)
         * cost tens of microseconds each in /proc, and they are examined at
         * once rather than one after another. */
        per = (j->n + j->cfg->workers - 1) / j->cfg->workers;
        if (per > SELECT_CHUNK)
                per = SELECT_CHUNK;
        for (size_t first = 0; first < j->n; first += per) {
                struct chunk *ch = calloc(1, sizeof(*ch));
                if (!ch) {
                        /* Examine what is left here, on the loop: out of memory is
                         * no state to be fast in. */
                        struct chunk tmp = { .j = j, .first = first, .n = j->n - first };
                        tmp.work.data = &tmp;
                        chunk_work(&tmp.work);
                        break;
                }
                *ch = (struct chunk){ .j = j, .first = first, .n = j->n - first < per ? j->n - first : per };
                ch->work.data = ch;
                j->chunks_left++;
                (void)uv_queue_work(j->loop, &ch->work, chunk_work, chunk_done_cb);
        }
        if (j->chunks_left == 0)
                settle(j);
}

void select_start(struct select_job *j)
{
        j->error = 0;
        j->scan.data = j;
        (void)uv_queue_work(j->loop, &j->scan, candidates_work, candidates_done_cb);
}
