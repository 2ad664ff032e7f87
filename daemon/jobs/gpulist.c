/* gpulist.c: ListGpus (gpulist.h). */
#include "jobs/gpulist.h"

#include <errno.h>
#include <stdlib.h>

#include <uv.h>

#include "auth/access.h"
#include "net/conn.h"
#include "cudackpt/protocol.h"

/* A ListGpus call waiting for its answer. */
struct gpu_waiter {
        struct gpu_waiter *next;
        struct conn *conn;
        enum proto_method method;
        bool reply;                             /* not oneway */
        uint64_t t0;                            /* uv_hrtime() at arrival */
        uid_t uid;
        bool privileged;
};

/* The one NVML query in flight: every call that arrives while it runs
 * waits for it and is answered from it, so that however many callers
 * there are, at most one worker thread waits on NVML for them (the pool
 * is shared with the driver calls and the leases' flushes). */
struct gpu_round {
        struct list_table *table;
        struct gpu_waiter *waiters;
        uv_work_t work;
        int error[GPUMEM_MAX_GPUS];             /* per GPU: 0 or why its memory is not known */
        uint64_t free[GPUMEM_MAX_GPUS], total[GPUMEM_MAX_GPUS];
};

/* On a worker: what each GPU has free now. */
static void round_work(uv_work_t *w)
{
        struct gpu_round *r = w->data;
        const struct gpumem *g = r->table->gpumem;

        for (unsigned d = 0; d < g->n_gpus; d++)
                r->error[d] = gpumem_free(g, d, &r->free[d], &r->total[d]);
}

static cJSON *gpu_json(const struct list_table *t, const struct gpu_round *r, unsigned d)
{
        const struct gpumem *g = t->gpumem;
        cJSON *o = cJSON_CreateObject();

        if (!o)
                return NULL;
        cJSON_AddNumberToObject(o, "index", d);
        cJSON_AddStringToObject(o, "uuid", g->uuid[d]);
        cJSON_AddStringToObject(o, "name", g->name[d]);
        cJSON_AddStringToObject(o, "pci_bus_id", g->pci_bus_id[d]);
        if (r->error[d] == 0) {
                cJSON_AddNumberToObject(o, "memory_total_bytes", (double)r->total[d]);
                cJSON_AddNumberToObject(o, "memory_free_bytes", (double)r->free[d]);
        }
        return o;
}

/* The answer from NVML's round r, or (r NULL) that there is no NVML. */
static cJSON *query_reply(const struct list_table *t, const struct gpu_round *r)
{
        const struct gpumem *g = t->gpumem;
        cJSON *p = cJSON_CreateObject(), *arr;

        if (!p)
                return NULL;
        cJSON_AddBoolToObject(p, "nvml", r != NULL);
        if (!r)
                cJSON_AddStringToObject(p, "reason", "the daemon has no NVML (yet): GetStatus and its log say why");
        cJSON_AddStringToObject(p, "driver_version", r ? g->driver_version : "");
        cJSON_AddNumberToObject(p, "restore_gpu_margin_bytes",
                                (double)t->jobs->cfg->restore_gpu_margin_mib * 1024.0 * 1024.0);
        arr = cJSON_AddArrayToObject(p, "gpus");
        for (unsigned d = 0; arr && r && d < g->n_gpus; d++) {
                cJSON *o = gpu_json(t, r, d);
                if (o)
                        cJSON_AddItemToArray(arr, o);
        }
        return proto_reply_new(p);
}

/* Answers w from r, gives its slot back, lets go. */
static void waiter_end(const struct gpu_round *r, struct gpu_waiter *w)
{
        struct jobs *js = r->table->jobs;
        struct conn *c = w->conn;
        cJSON *msg = query_reply(r->table, r);

        metrics_op(js->metrics, w->method, msg ? "ok" : "NoMemory", uv_hrtime() - w->t0);
        if (w->reply && !c->closing)
                conn_send(c, msg);
        else
                cJSON_Delete(msg);
        share_give(&js->slots, w->uid, w->privileged);
        conn_request_done(c);
        conn_unref(c);
        life_release(js->life);
        free(w);
}

/* The round has ended: a call from now on starts the next one. */
static void round_done_cb(uv_work_t *work, int status)
{
        struct gpu_round *r = work->data;

        (void)status;
        r->table->gpu_round = NULL;
        while (r->waiters) {
                struct gpu_waiter *w = r->waiters;
                r->waiters = w->next;
                waiter_end(r, w);
        }
        free(r);
}

/* Starts a round for t's first waiter w: 0 or -errno (nothing started). */
static int round_start(struct list_table *t, struct gpu_waiter *w)
{
        struct gpu_round *r = calloc(1, sizeof(*r));
        int rc;

        if (!r)
                return -ENOMEM;
        *r = (struct gpu_round){ .table = t, .waiters = w };
        r->work.data = r;
        rc = uv_queue_work(t->jobs->loop, &r->work, round_work, round_done_cb);
        if (rc < 0) {
                free(r);
                return rc;
        }
        t->gpu_round = r;
        return 0;
}

/* Refused before it starts: QueueFull (why) or ShuttingDown. */
static void refuse(struct jobs *js, struct conn *c, struct proto_call *call, const struct share_refusal *why)
{
        cJSON *p = NULL;

        if (why && (p = cJSON_CreateObject())) {
                cJSON_AddNumberToObject(p, "limit", why->limit);
                if (why->key)
                        cJSON_AddStringToObject(p, "resource", why->key);
        }
        metrics_op(js->metrics, call->method, why ? "QueueFull" : "ShuttingDown", 0);
        conn_reply(c, call, proto_error_new(why ? CUDACKPT_ERROR_QUEUE_FULL : CUDACKPT_ERROR_SHUTTING_DOWN, p));
}

void gpulist_call(struct list_table *t, struct conn *c, struct proto_call *call)
{
        struct jobs *js = t->jobs;
        struct share_refusal why = { 0 };
        struct gpu_waiter *w;
        bool privileged = access_privileged(js->cfg, &c->caller);

        /* Without NVML there is nothing to ask: the answer comes at once. */
        if (!t->gpumem_on) {
                uint64_t t0 = uv_hrtime();
                cJSON *msg = query_reply(t, NULL);
                metrics_op(js->metrics, call->method, msg ? "ok" : "NoMemory", uv_hrtime() - t0);
                conn_reply(c, call, msg);
                return;
        }
        if (jobs_stopping(js) || share_take(&js->slots, c->caller.uid, privileged, &why) < 0) {
                refuse(js, c, call, jobs_stopping(js) ? NULL : &why);
                return;
        }
        w = calloc(1, sizeof(*w));
        if (w)
                *w = (struct gpu_waiter){ .conn = c, .uid = c->caller.uid, .privileged = privileged,
                                          .method = call->method, .reply = !call->oneway, .t0 = uv_hrtime() };
        if (w && t->gpu_round) {
                /* A round is in flight: w is answered from it. */
                w->next = t->gpu_round->waiters;
                t->gpu_round->waiters = w;
        } else if (!w || round_start(t, w) < 0) {
                share_give(&js->slots, c->caller.uid, privileged);
                conn_close(c);
                free(w);
                return;
        }
        /* Held until the answer, which comes on a later turn of the loop. */
        life_hold(js->life);
        conn_ref(c);
        conn_request_begin(c);
}
