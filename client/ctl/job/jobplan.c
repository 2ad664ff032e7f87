/* jobplan.c: restore --images' device plan on this node (jobplan.h). */
#include "jobplan.h"

#include "devplan.h"
#include "exitcode.h"
#include "json.h"
#include "manifestgpu.h"
#include "monotime.h"

#include <cudackpt/protocol.h>
#include <cJSON.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024.0 * 1024.0)

/* What this node's daemon tells of its GPUs. */
typedef struct plan_here {
        cJSON *reply;             /* ListGpus' parameters (owned) */
        ctl_node node;
        ctl_node_gpu *gpus;
        char why[256];            /* why no plan can be made, when so */
} plan_here;

/* ListGpus' reply into h; -ENODATA (h->why) when it tells no GPUs (an
 * older daemon, no NVML), -ECONNREFUSED when the daemon cannot be asked. */
static int plan_ask(const ctl_job_args *a, plan_here *h) {
        const char *path = ctl_socket_path(a->socket);
        cudackpt_client *client = NULL;
        cudackpt_reply reply;
        bool nvml = false;
        int r;

        cudackpt_reply_init(&reply);
        r = cudackpt_client_connect(path, &client);
        if (r == 0)
                r = cudackpt_call(client, CUDACKPT_METHOD_LIST_GPUS, NULL, &reply);
        cudackpt_client_free(client);
        if (r < 0) {
                snprintf(h->why, sizeof(h->why), "cannot reach cudackptd at %s: %s", path, strerror(-r));
                cudackpt_reply_clear(&reply);
                return -ECONNREFUSED;
        }
        h->reply = cJSON_Parse(reply.parameters_json);
        if (reply.error)
                snprintf(h->why, sizeof(h->why), "cudackptd does not tell its GPUs (%s)", reply.error);
        else if (!json_get_bool(h->reply, "nvml", &nvml) || !nvml)
                snprintf(h->why, sizeof(h->why), "cudackptd has no NVML: %s",
                         json_get_string(h->reply, "reason") ? json_get_string(h->reply, "reason") : "?");
        cudackpt_reply_clear(&reply);
        return h->why[0] ? -ENODATA : 0;
}

/* h->node from h->reply; -EBADMSG when it is not a ListGpus reply. */
static int plan_node(plan_here *h) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(h->reply, "gpus"), *g;
        const char *version = json_get_string(h->reply, "driver_version");
        long long margin, index, free_bytes;
        size_t n = 0;

        if (!cJSON_IsArray(list) || !version ||
            !json_get_integer(h->reply, "restore_gpu_margin_bytes", 0, 9007199254740992.0, &margin))
                return -EBADMSG;
        h->gpus = calloc((size_t) cJSON_GetArraySize(list) + 1, sizeof(*h->gpus));
        if (!h->gpus)
                return -ENOMEM;
        cJSON_ArrayForEach(g, list) {
                ctl_node_gpu *x = &h->gpus[n++];
                x->uuid = json_get_string(g, "uuid");
                x->name = json_get_string(g, "name");
                if (!x->uuid || !x->name || !json_get_integer(g, "index", 0, INT_MAX, &index))
                        return -EBADMSG;
                x->index = (int) index;
                x->free_known = json_get_integer(g, "memory_free_bytes", 0, 9007199254740992.0, &free_bytes);
                x->free = x->free_known ? (uint64_t) free_bytes : 0;
        }
        h->node = (ctl_node) { version, (uint64_t) margin, h->gpus, n };
        return 0;
}

/* ---- what is said ----------------------------------------------------------------- */

static void plan_print_entry(FILE *f, const ctl_plan_entry *e, const ctl_node *node) {
        const ctl_node_gpu *to = e->to >= 0 ? &node->gpus[e->to] : NULL;

        fprintf(f, "  %s (%s, ordinal %d): %u process%s, %.1f MiB with the margin\n", e->from->uuid,
                e->from->name[0] ? e->from->name : "model not known", e->from->index, e->members,
                e->members == 1 ? "" : "es", (double) e->need / MIB);
        if (!to) {
                fprintf(f, "    -> none: no GPU of this node of its model with room is left for it\n");
                return;
        }
        fprintf(f, "    -> %s (%s, ordinal %d), %s: model %s; memory %s (%.1f MiB needed there, ", to->uuid,
                to->name[0] ? to->name : "model not known", to->index, ctl_plan_how_name(e->how),
                ctl_plan_check_name(e->model), ctl_plan_check_name(e->memory), (double) e->need_there / MIB);
        if (to->free_known)
                fprintf(f, "%.1f MiB free)\n", (double) to->free / MIB);
        else
                fprintf(f, "free not known)\n");
}

static void plan_print(FILE *f, const ctl_plan *p, const ctl_devrec *rec, const ctl_node *node) {
        fprintf(f, "device plan: driver %s here, %s at the dump: %s; margin %.1f MiB per process and GPU\n",
                node->driver_version[0] ? node->driver_version : "not known",
                rec->driver_version[0] ? rec->driver_version : "not known", ctl_plan_check_name(p->driver),
                (double) node->margin / MIB);
        for (size_t k = 0; k < p->n; k++)
                plan_print_entry(f, &p->e[k], node);
        fprintf(f, "plan: %s\n", ctl_plan_verdict_name(p->verdict));
}

static cJSON *plan_entry_json(const ctl_plan_entry *e, const ctl_node *node) {
        cJSON *o = cJSON_CreateObject();
        const ctl_node_gpu *to = e->to >= 0 ? &node->gpus[e->to] : NULL;

        if (!o)
                return NULL;
        cJSON_AddStringToObject(o, "from", e->from->uuid);
        cJSON_AddStringToObject(o, "model", e->from->name);
        cJSON_AddNumberToObject(o, "members", e->members);
        cJSON_AddNumberToObject(o, "need_bytes", (double) e->need);
        cJSON_AddStringToObject(o, "how", ctl_plan_how_name(e->how));
        if (!to)
                return o;
        cJSON_AddStringToObject(o, "to", to->uuid);
        cJSON_AddNumberToObject(o, "need_there_bytes", (double) e->need_there);
        if (to->free_known)
                cJSON_AddNumberToObject(o, "free_bytes", (double) to->free);
        cJSON_AddStringToObject(o, "model_check", ctl_plan_check_name(e->model));
        cJSON_AddStringToObject(o, "memory_check", ctl_plan_check_name(e->memory));
        return o;
}

/* --json's "plan" (p NULL: none could be made, why says why). */
static cJSON *plan_json(const ctl_plan *p, const ctl_devrec *rec, const plan_here *h, const char *why) {
        cJSON *o = cJSON_CreateObject(), *arr;

        if (!o)
                return NULL;
        cJSON_AddStringToObject(o, "verdict", ctl_plan_verdict_name(p ? p->verdict : CTL_PLAN_NO_RECORDS));
        if (!p || p->verdict == CTL_PLAN_NO_RECORDS) {
                cJSON_AddStringToObject(o, "reason", why);
                return o;
        }
        cJSON_AddStringToObject(o, "driver_here", h->node.driver_version);
        cJSON_AddStringToObject(o, "driver_dumped", rec->driver_version);
        cJSON_AddStringToObject(o, "driver_check", ctl_plan_check_name(p->driver));
        cJSON_AddNumberToObject(o, "margin_bytes", (double) h->node.margin);
        arr = cJSON_AddArrayToObject(o, "gpus");
        for (size_t k = 0; arr && k < p->n; k++) {
                cJSON *e = plan_entry_json(&p->e[k], &h->node);
                if (e)
                        cJSON_AddItemToArray(arr, e);
        }
        return o;
}

/* The refusal's sentence on stderr and its exit status. */
static int plan_refuse(const ctl_job_args *a, const ctl_plan *p, const ctl_devrec *rec, const ctl_node *node) {
        const ctl_plan_entry *e = p->n ? &p->e[p->failed] : NULL;
        const ctl_node_gpu *to = e && e->to >= 0 ? &node->gpus[e->to] : NULL;

        fputs(a->prefix, stderr);
        switch (p->verdict) {
        case CTL_PLAN_OLDER_DRIVER:
                fprintf(stderr, "this node's driver %s is older than the dump's %s", node->driver_version,
                        rec->driver_version);
                break;
        case CTL_PLAN_UNKNOWN_TARGET:
                fprintf(stderr, "--device-map sends %s to a GPU this node does not have", e->from->uuid);
                break;
        case CTL_PLAN_NO_MEMORY:
                if (to)
                        fprintf(stderr, "GPU %s needs %.1f MiB on %s (the job's processes there, with the margin), "
                                "which has %.1f MiB free", e->from->uuid, (double) e->need_there / MIB, to->uuid,
                                (double) to->free / MIB);
                else
                        fprintf(stderr, "no GPU of this node of model %s that the job does not use already has "
                                "the %.1f MiB free that GPU %s needs (with the margin)", e->from->name,
                                (double) e->need / MIB, e->from->uuid);
                break;
        default:
                fprintf(stderr, "no GPU of this node of model %s is left for GPU %s of the job (each GPU of the "
                        "job goes to one of its own)", e->from->name[0] ? e->from->name : "(not known)",
                        e->from->uuid);
        }
        fprintf(stderr, "; nothing was restored%s\n",
                p->verdict == CTL_PLAN_NO_GPU ? " (--device-map=OLD=NEW names a GPU, with --force for another model)"
                : p->verdict == CTL_PLAN_UNKNOWN_TARGET ? ""
                                                        : " (--force restores anyway)");
        return p->verdict == CTL_PLAN_NO_MEMORY        ? CUDACKPT_EXIT_INSUFFICIENT_GPU_MEMORY
               : p->verdict == CTL_PLAN_UNKNOWN_TARGET ? CUDACKPT_EXIT_INVALID_GPU_MAPPING
                                                       : CUDACKPT_EXIT_NO_DEVICE_PLAN;
}

/* Says the plan (or why there is none), as a asks; the exit status. */
static int plan_say(const ctl_job_args *a, const ctl_plan *p, const ctl_devrec *rec, const plan_here *h,
                    const char *why, double ms) {
        bool refused = !why && p->verdict != CTL_PLAN_FITS;
        int status = refused ? CUDACKPT_EXIT_FAILURE : CUDACKPT_EXIT_OK;

        if (a->dry_run && a->json) {
                cJSON *o = cJSON_CreateObject();
                if (o) {
                        cJSON_AddStringToObject(o, "images", a->images);
                        cJSON_AddBoolToObject(o, "dry_run", true);
                        cJSON_AddItemToObject(o, "plan", plan_json(why ? NULL : p, rec, h, why));
                        cJSON_AddNumberToObject(o, "plan_ms", ms);
                }
                ctl_job_print_json(o);
        } else if (a->dry_run && why)
                printf("no device plan: %s; restore goes onto the GPUs of the dump%s\n", why,
                       a->map.items ? " as --device-map maps them" : "");
        else if (a->dry_run || refused)
                plan_print(a->dry_run ? stdout : stderr, p, rec, &h->node);
        if (refused)
                status = plan_refuse(a, p, rec, &h->node);
        else if (why)
                ctl_job_progress(a, "no device plan: %s", why);
        else
                ctl_job_progress(a, "device plan: %s, %zu GPU%s, in %.1f ms", ctl_plan_verdict_name(p->verdict),
                                 p->n, p->n == 1 ? "" : "s", ms);
        if (a->dry_run && status == CUDACKPT_EXIT_OK && !a->json)
                printf("nothing was touched (--dry-run)\n");
        return status;
}

int ctl_job_plan(const ctl_job_args *a, const ctl_manifest *m, ctl_map *ret_map) {
        plan_here h = { 0 };
        ctl_plan p = { 0 };
        double t0 = monotime_ms_exact();
        const char *why = NULL;
        int status = CUDACKPT_EXIT_OK, r = 0;

        *ret_map = (ctl_map) { 0 };
        if (!m->devices)
                why = "the manifest has no device records (an older dump, or its daemon had no NVML)";
        else if ((r = plan_ask(a, &h)) == -ECONNREFUSED) {
                fprintf(stderr, "%s%s; nothing was restored\n", a->prefix, h.why);
                status = CUDACKPT_EXIT_UNREACHABLE;
                goto out;
        } else if (r < 0)
                why = h.why;
        else if ((r = plan_node(&h)) < 0)
                why = r == -ENOMEM ? "out of memory" : "cudackptd's ListGpus reply is malformed";
        if (!why && ctl_plan_make(m->devices, &h.node, &a->map, a->force, &p) < 0)
                why = "out of memory";
        if (!why && p.verdict == CTL_PLAN_NO_RECORDS)
                why = "a member's GPU memory was not told at the dump";
        status = plan_say(a, &p, m->devices, &h, why, monotime_ms_exact() - t0);
        if (status == CUDACKPT_EXIT_OK && !why && !a->dry_run && ctl_plan_map(&p, &h.node, ret_map) < 0) {
                fprintf(stderr, "%sout of memory\n", a->prefix);
                status = CUDACKPT_EXIT_FAILURE;
        }
out:
        ctl_plan_free(&p);
        free(h.gpus);
        cJSON_Delete(h.reply);
        return status;
}
