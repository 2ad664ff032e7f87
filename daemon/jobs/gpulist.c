/* gpulist.c: ListGpus (gpulist.h). */
#include "jobs/gpulist.h"

#include <errno.h>
#include <stdlib.h>

#include <uv.h>

#include "auth/access.h"
#include "net/conn.h"
#include "cudackpt/protocol.h"

struct gpu_query {
        struct list_table *table;
        struct conn *conn;
        enum proto_method method;
        bool reply;                             /* not oneway */
        uint64_t t0;                            /* uv_hrtime() at arrival */
        uid_t uid;
        bool privileged;
        uv_work_t work;
        bool nvml;                              /* NVML was open when asked */
        int error[GPUMEM_MAX_GPUS];             /* per GPU: 0 or why its memory is not known */
        uint64_t free[GPUMEM_MAX_GPUS], total[GPUMEM_MAX_GPUS];
};

/* On a worker: what each GPU has free now. */
static void query_work(uv_work_t *w)
{
        struct gpu_query *q = w->data;
        const struct gpumem *g = q->table->gpumem;

        for (unsigned d = 0; d < g->n_gpus; d++)
                q->error[d] = gpumem_free(g, d, &q->free[d], &q->total[d]);
}

static cJSON *gpu_json(const struct gpu_query *q, unsigned d)
{
        const struct gpumem *g = q->table->gpumem;
        cJSON *o = cJSON_CreateObject();

        if (!o)
                return NULL;
        cJSON_AddNumberToObject(o, "index", d);
        cJSON_AddStringToObject(o, "uuid", g->uuid[d]);
        cJSON_AddStringToObject(o, "name", g->name[d]);
        cJSON_AddStringToObject(o, "pci_bus_id", g->pci_bus_id[d]);
        if (q->error[d] == 0) {
                cJSON_AddNumberToObject(o, "memory_total_bytes", (double)q->total[d]);
                cJSON_AddNumberToObject(o, "memory_free_bytes", (double)q->free[d]);
        }
        return o;
}

static cJSON *query_reply(const struct gpu_query *q)
{
        const struct gpumem *g = q->table->gpumem;
        cJSON *p = cJSON_CreateObject(), *arr;

        if (!p)
                return NULL;
        cJSON_AddBoolToObject(p, "nvml", q->nvml);
        if (!q->nvml)
                cJSON_AddStringToObject(p, "reason", "the daemon has no NVML (yet): GetStatus and its log say why");
        cJSON_AddStringToObject(p, "driver_version", q->nvml ? g->driver_version : "");
        cJSON_AddNumberToObject(p, "restore_gpu_margin_bytes",
                                (double)q->table->jobs->cfg->restore_gpu_margin_mib * 1024.0 * 1024.0);
        arr = cJSON_AddArrayToObject(p, "gpus");
        for (unsigned d = 0; arr && q->nvml && d < g->n_gpus; d++) {
                cJSON *o = gpu_json(q, d);
                if (o)
                        cJSON_AddItemToArray(arr, o);
        }
        return proto_reply_new(p);
}

/* Answers, gives the slot back, lets go (after the worker, or at once). */
static void query_end(struct gpu_query *q)
{
        struct jobs *js = q->table->jobs;
        struct conn *c = q->conn;
        cJSON *msg = query_reply(q);

        metrics_op(js->metrics, q->method, msg ? "ok" : "NoMemory", uv_hrtime() - q->t0);
        if (q->reply && !c->closing)
                conn_send(c, msg);
        else
                cJSON_Delete(msg);
        share_give(&js->slots, q->uid, q->privileged);
        conn_request_done(c);
        conn_unref(c);
        life_release(js->life);
        free(q);
}

static void query_done_cb(uv_work_t *w, int status)
{
        (void)status;
        query_end(w->data);
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
        struct gpu_query *q = calloc(1, sizeof(*q));
        struct share_refusal why = { 0 };

        if (!q) {
                conn_close(c);
                return;
        }
        *q = (struct gpu_query){ .table = t, .conn = c, .uid = c->caller.uid,
                                 .privileged = access_privileged(js->cfg, &c->caller), .method = call->method,
                                 .reply = !call->oneway, .t0 = uv_hrtime(), .nvml = t->gpumem_on };
        /* Without NVML there is nothing to ask: the answer comes at once. */
        if (!q->nvml) {
                metrics_op(js->metrics, call->method, "ok", uv_hrtime() - q->t0);
                conn_reply(c, call, query_reply(q));
                free(q);
                return;
        }
        if (jobs_stopping(js) || share_take(&js->slots, q->uid, q->privileged, &why) < 0) {
                refuse(js, c, call, jobs_stopping(js) ? NULL : &why);
                free(q);
                return;
        }
        q->work.data = q;
        if (uv_queue_work(js->loop, &q->work, query_work, query_done_cb) < 0) {
                share_give(&js->slots, q->uid, q->privileged);
                conn_close(c);
                free(q);
                return;
        }
        /* Held until the answer, which comes on a later turn of the loop. */
        life_hold(js->life);
        conn_ref(c);
        conn_request_begin(c);
}
