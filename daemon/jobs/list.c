/* list.c: ListProcesses (list.h). */
#include "jobs/list.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#include <uv.h>

#include "net/conn.h"
#include "cudackpt/protocol.h"
#include "base/log.h"
#include "run/ops.h"
#include "run/sched.h"
#include "host/target.h"

struct entry {
        struct select_member s;
        bool gone;
        bool skipped;                   /* never initialised CUDA */
        int state;                      /* driver state, -1 unknown */
        int stopped;                    /* TARGET_STOPPED_*, 0 when it runs */
        int in_flight;                  /* the method running on it, -1 none */
};

struct listing {
        struct jobs_call call;          /* its caller, parameters and selection */
        struct list_table *table;
        struct entry *e;
        size_t n;
        unsigned waiting;               /* the selection and NVML, then the states */
        uv_work_t usage_work;
        struct gpumem_use *use;         /* NVML's GPU memory by pid */
        size_t n_use;
        bool have_use;                  /* NVML answered: "gpus" in every entry */
        uint64_t t_selected;            /* for the debug log */
};

void list_init(struct list_table *t, struct jobs *js, const struct gpumem *gpumem)
{
        *t = (struct list_table){ .jobs = js, .gpumem = gpumem };
}

void list_gpumem_ready(struct list_table *t)
{
        t->gpumem_on = t->gpumem->available;
}

/* ---- the reply ------------------------------------------------------------- */

/* "gpus": the GPUs pid holds memory on now, as NVML says (none when it is
 * checkpointed). */
static void add_gpus(const struct listing *l, cJSON *o, pid_t pid)
{
        cJSON *arr = cJSON_AddArrayToObject(o, "gpus");

        for (size_t i = 0; arr && i < l->n_use; i++) {
                const struct gpumem_use *u = &l->use[i];
                cJSON *e;
                if (u->pid != pid || !(e = cJSON_CreateObject()))
                        continue;
                cJSON_AddStringToObject(e, "uuid", l->table->gpumem->uuid[u->gpu]);
                if (u->bytes != GPUMEM_NO_BYTES)
                        cJSON_AddNumberToObject(e, "memory_bytes", (double)u->bytes);
                cJSON_AddItemToArray(arr, e);
        }
}

static cJSON *entry_json(const struct listing *l, const struct entry *en)
{
        cJSON *o = cJSON_CreateObject();
        char buf[32];

        if (!o)
                return NULL;
        cJSON_AddNumberToObject(o, "pid", en->s.vpid);
        cJSON_AddNumberToObject(o, "uid", en->s.owner.ruid);
        cJSON_AddNumberToObject(o, "start_time", (double)en->s.start_time);
        cJSON_AddStringToObject(o, "command", en->s.comm);
        cJSON_AddStringToObject(o, "cgroup", en->s.cgroup ? en->s.cgroup : "");
        if (en->stopped > 0)
                cJSON_AddStringToObject(o, "stop", target_stop_name(en->stopped));
        else if (en->state >= 0)
                cJSON_AddStringToObject(o, "state", proto_state_string(en->state, buf, sizeof(buf)));
        if (en->in_flight >= 0)
                cJSON_AddStringToObject(o, "in_flight", proto_method_name((enum proto_method)en->in_flight));
        if (l->have_use)
                add_gpus(l, o, en->s.pid);
        return o;
}

static cJSON *list_reply(const struct listing *l)
{
        cJSON *p = cJSON_CreateObject(), *arr;

        if (!p)
                return NULL;
        arr = cJSON_AddArrayToObject(p, "processes");
        for (size_t i = 0; arr && i < l->n; i++) {
                const struct entry *en = &l->e[i];
                cJSON *o;
                if (en->skipped || en->gone || !(o = entry_json(l, en)))
                        continue;
                cJSON_AddItemToArray(arr, o);
        }
        return proto_reply_new(p);
}

static void list_end(struct listing *l, cJSON *msg)
{
        for (size_t i = 0; i < l->n; i++)
                select_member_clear(&l->e[i].s);
        free(l->e);
        free(l->use);
        jobs_call_end(&l->call, msg);
        free(l);
}

/* Answers msg (consumed), counted as result (a static string). */
static void list_finish(struct listing *l, cJSON *msg, const char *result)
{
        uint64_t t0 = l->call.t0;

        jobs_call_count(&l->call, result);
        if (l->t_selected)
                log_debug("ListProcesses: %zu candidates; %.1f us to the scan's end, %.1f us more to the selection, "
                          "%.1f us for the states", l->call.sel.n_cand, (double)(l->call.sel.t_scanned - t0) / 1e3,
                          (double)(l->t_selected - l->call.sel.t_scanned) / 1e3,
                          (double)(uv_hrtime() - l->t_selected) / 1e3);
        list_end(l, msg);
}

/* ---- the states ------------------------------------------------------------ */

static void state_done_cb(struct sched *s, struct sched_op *op)
{
        struct listing *l = op->ctx;
        struct entry *en = &l->e[op->index];
        const struct ops_result *r = &op->result;

        (void)s;
        if (r->error == OPS_OK)
                en->state = r->state;
        else if (r->error == OPS_PROCESS_GONE || r->error == OPS_NO_SUCH_PROCESS || r->error == OPS_PROCESS_CHANGED)
                en->gone = true;
        else
                en->state = r->state;
        if (r->error == OPS_NOT_CUDA_PROCESS)
                en->skipped = true;
        if (r->error == OPS_PROCESS_STOPPED)
                en->stopped = r->stopped;
        proto_request_free(&op->req);
        free(op);
        if (--l->waiting == 0)
                list_finish(l, list_reply(l), "ok");
}

/* Entry i's state: from an operation running on it, as GetState answers,
 * else through its queue (one that refuses leaves it unknown). */
static void read_state(struct listing *l, size_t i)
{
        struct entry *en = &l->e[i];
        struct sched *sched = l->table->jobs->sched;
        struct share_refusal limit = { 0 };
        struct sched_snapshot snap;
        struct sched_op *op;

        if (sched_running_snapshot(sched, en->s.pid, &snap) && snap.known && snap.last_state >= 0 &&
            snap.start_time == en->s.start_time) {
                en->state = snap.last_state;
                en->in_flight = (int)snap.running;
                return;
        }
        op = calloc(1, sizeof(*op));
        if (!op)
                return;
        *op = (struct sched_op){ .conn = l->call.conn, .caller = l->call.caller, .parent = l->call.method,
                                 .method = PROTO_GET_STATE, .reply = true, .done = state_done_cb, .ctx = l,
                                 .index = (unsigned)i };
        op->req.pid = en->s.pid;
        op->req.has_start_time = true;
        op->req.start_time = en->s.start_time;
        if (sched_submit(sched, op, &limit) == 0) {
                l->waiting++;
                return;
        }
        proto_request_free(&op->req);
        free(op);
}

/* ---- the selection --------------------------------------------------------- */

/* The first entry refused at the selection (a pid with no process, the
 * daemon named); false when none. */
static bool refused(const struct listing *l, size_t *ret)
{
        for (size_t i = 0; i < l->n; i++)
                if (l->e[i].s.failed) {
                        *ret = i;
                        return true;
                }
        return false;
}

/* The selection and NVML have answered. */
static void selection_ready(struct listing *l)
{
        struct select_job *j = &l->call.sel;
        size_t first;

        if (j->error == 0)
                l->t_selected = uv_hrtime();
        if (j->error < 0 && !(j->error == -ESRCH && j->n == 1)) {
                list_end(l, jobs_call_selection_error(&l->call, l->table->jobs->cfg->max_group_members));
                return;
        }
        l->e = calloc(j->n ? j->n : 1, sizeof(*l->e));
        if (!l->e) {
                conn_close(l->call.conn);
                list_end(l, NULL);
                return;
        }
        for (size_t i = 0; i < j->n; i++)
                l->e[i] = (struct entry){ .s = j->m[i], .state = -1, .in_flight = -1 };
        l->n = j->n;
        free(j->m);
        j->m = NULL;
        j->n = 0;
        if (j->error == 0 && jobs_stopping(l->table->jobs)) {
                jobs_call_count(&l->call, "ShuttingDown");
                list_end(l, proto_error_new(CUDACKPT_ERROR_SHUTTING_DOWN, NULL));
                return;
        }
        /* One refused answers as a single call would. */
        if (refused(l, &first)) {
                const struct entry *f = &l->e[first];
                cJSON *msg = ops_reply(l->table->jobs->drv, f->s.err_method, f->s.vpid, l->call.caller->uid, &f->s.err);
                list_finish(l, msg, ops_error_short_name(f->s.err.error));
                return;
        }
        l->waiting = 1;
        for (size_t i = 0; i < l->n; i++)
                read_state(l, i);
        if (--l->waiting == 0)
                list_finish(l, list_reply(l), "ok");
}

static void selected_cb(struct select_job *j)
{
        struct listing *l = (struct listing *)((char *)j - offsetof(struct listing, call.sel));

        if (--l->waiting == 0)
                selection_ready(l);
}

/* A listing's GPU memory (gpumem.h), beside the selection (worker thread). */
static void usage_work(uv_work_t *w)
{
        struct listing *l = w->data;

        l->have_use = gpumem_usage(l->table->gpumem, &l->use, &l->n_use) == 0;
}

static void usage_done_cb(uv_work_t *w, int status)
{
        struct listing *l = w->data;

        (void)status;
        if (--l->waiting == 0)
                selection_ready(l);
}

void list_call(struct list_table *t, struct conn *c, struct proto_call *call)
{
        struct listing *l = calloc(1, sizeof(*l));
        struct share_refusal why = { 0 };

        if (!l) {
                conn_close(c);
                return;
        }
        if (jobs_call_open(t->jobs, &l->call, c, call) < 0) {
                free(l);
                return;
        }
        if (jobs_call_take_slot(&l->call, &why) < 0) {
                jobs_call_refuse(&l->call, jobs_call_queue_full(&l->call, &why));
                free(l);
                return;
        }
        l->table = t;
        l->waiting = 1;
        /* NVML is asked (one call per GPU) while the selection is read. */
        if (t->gpumem_on) {
                l->usage_work.data = l;
                if (uv_queue_work(t->jobs->loop, &l->usage_work, usage_work, usage_done_cb) == 0)
                        l->waiting++;
        }
        jobs_call_start(&l->call, SELECT_TO_LIST, selected_cb);
}
