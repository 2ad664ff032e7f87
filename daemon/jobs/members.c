/* members.c: a group's members and their part of its replies (members.h). */
#include "jobs/members.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cudackpt/protocol.h"
#include "base/log.h"

int members_take(struct members *ms, struct select_job *j)
{
        ms->m = calloc(j->n ? j->n : 1, sizeof(*ms->m));
        if (!ms->m)
                return -ENOMEM;
        for (size_t i = 0; i < j->n; i++)
                ms->m[i] = (struct group_member){ .s = j->m[i], .state = -1 };
        ms->n = j->n;
        free(j->m);
        j->m = NULL;
        j->n = 0;
        return 0;
}

void members_clear(struct members *ms)
{
        for (size_t i = 0; i < ms->n; i++)
                select_member_clear(&ms->m[i].s);
        free(ms->m);
        ms->m = NULL;
        ms->n = 0;
}

void members_hold(const struct members *ms, struct sched *s, const void *holder, enum proto_method m)
{
        for (size_t i = 0; i < ms->n; i++) {
                if (!members_active(&ms->m[i]))
                        continue;
                int r = sched_hold(s, ms->m[i].s.pid, holder, m);
                if (r < 0)
                        log_warning("%s: process %d cannot be held for the group (%s); other calls may come "
                                    "between its steps",
                                    proto_method_name(m), (int)ms->m[i].s.pid, strerror(-r));
        }
}

bool members_active(const struct group_member *mb)
{
        return !mb->s.skipped && !mb->gone;
}

void members_fail(struct group_member *mb, enum proto_method m, const struct ops_result *r)
{
        mb->s.failed = true;
        mb->s.err_method = m;
        mb->s.err = *r;
}

void members_rollback_fail(struct group_member *mb, enum proto_method m, const struct ops_result *r)
{
        mb->rb_failed = true;
        mb->rb_method = m;
        mb->rb_err = *r;
}

bool members_first_failed(const struct members *ms, size_t *ret)
{
        for (size_t i = 0; i < ms->n; i++)
                if (ms->m[i].s.failed) {
                        *ret = i;
                        return true;
                }
        return false;
}

void members_check_states(struct members *ms, enum proto_method m)
{
        enum proto_method single = proto_group_single(m);

        for (size_t i = 0; i < ms->n; i++) {
                struct group_member *mb = &ms->m[i];
                struct ops_result r = { .error = OPS_INVALID_STATE, .state = mb->state, .restore_tid = -1,
                                        .rolled_back = -1, .in_flight = -1 };
                if (!members_active(mb) || plan_state_allowed(m, mb->state))
                        continue;
                r.step = ops_first_step(single);
                members_fail(mb, single, &r);
        }
}

bool members_all_running(const struct members *ms)
{
        for (size_t i = 0; i < ms->n; i++)
                if (members_active(&ms->m[i]) && ms->m[i].state != CU_PROCESS_STATE_RUNNING)
                        return false;
        return true;
}

bool members_overlap(const struct members *a, const struct members *b)
{
        for (size_t i = 0; i < a->n; i++) {
                if (!members_active(&a->m[i]))
                        continue;
                for (size_t j = 0; j < b->n; j++)
                        if (members_active(&b->m[j]) && a->m[i].s.pid == b->m[j].s.pid)
                                return true;
        }
        return false;
}

/* ---- replies --------------------------------------------------------------- */

double members_ms(uint64_t ns)
{
        return round((double)ns / 1000.0) / 1000.0;
}

/* The error name and parameters ops_reply() gives a member's result. */
static void add_error(const struct members *ms, cJSON *o, pid_t pid, enum proto_method m,
                      const struct ops_result *r, const char *name_key, const char *params_key)
{
        cJSON *msg = ops_reply(ms->drv, m, pid, ms->caller->uid, r);
        cJSON *e = msg ? cJSON_GetObjectItemCaseSensitive(msg, "error") : NULL;

        if (cJSON_IsString(e)) {
                cJSON_AddStringToObject(o, name_key, e->valuestring);
                if (params_key) {
                        cJSON *p = cJSON_DetachItemFromObjectCaseSensitive(msg, "parameters");
                        if (p)
                                cJSON_AddItemToObject(o, params_key, p);
                }
        }
        cJSON_Delete(msg);
}

cJSON *members_json(const struct members *ms, const struct group_member *mb)
{
        cJSON *o = cJSON_CreateObject();
        char buf[32];

        if (!o)
                return NULL;
        cJSON_AddNumberToObject(o, "pid", mb->s.vpid);
        cJSON_AddNumberToObject(o, "start_time", (double)mb->s.start_time);
        if (!mb->gone && mb->state >= 0)
                cJSON_AddStringToObject(o, "state", proto_state_string(mb->state, buf, sizeof(buf)));
        cJSON_AddNumberToObject(o, "duration_ms", members_ms(mb->duration_ns));
        if (mb->s.failed)
                add_error(ms, o, mb->s.vpid, mb->s.err_method, &mb->s.err, "error", "error_parameters");
        if (mb->rb_failed)
                add_error(ms, o, mb->s.vpid, mb->rb_method, &mb->rb_err, "rollback_error", NULL);
        return o;
}

void members_add(const struct members *ms, cJSON *p)
{
        cJSON *members = cJSON_AddArrayToObject(p, "members");
        cJSON *skipped = cJSON_AddArrayToObject(p, "skipped");

        if (!members || !skipped)
                return;
        for (size_t i = 0; i < ms->n; i++) {
                const struct group_member *mb = &ms->m[i];
                if (mb->s.hidden)
                        continue;
                if (mb->s.skipped) {
                        cJSON *o = cJSON_CreateObject();
                        if (!o)
                                continue;
                        cJSON_AddNumberToObject(o, "pid", mb->s.vpid);
                        cJSON_AddNumberToObject(o, "start_time", (double)mb->s.start_time);
                        cJSON_AddStringToObject(o, "reason", CUDACKPT_SKIP_NOT_CUDA);
                        cJSON_AddItemToArray(skipped, o);
                } else {
                        cJSON_AddItemToArray(members, members_json(ms, mb));
                }
        }
}

cJSON *members_failure_reply(const struct members *ms, enum proto_method m, enum plan_phase p, bool rolled_back,
                             cJSON *params)
{
        const struct group_member *f = NULL;
        unsigned hidden = 0;

        for (size_t i = 0; i < ms->n; i++) {
                hidden += ms->m[i].s.hidden;
                if (!f && ms->m[i].s.failed && !ms->m[i].s.hidden)
                        f = &ms->m[i];
        }
        cJSON_AddStringToObject(params, "method", proto_method_name(m));
        cJSON_AddStringToObject(params, "phase", plan_phase_name(p));
        if (f) {
                cJSON_AddNumberToObject(params, "pid", f->s.vpid);
                add_error(ms, params, f->s.vpid, f->s.err_method, &f->s.err, "error", "error_parameters");
        } else {
                cJSON *ep = cJSON_CreateObject();
                cJSON_AddStringToObject(params, "error", CUDACKPT_ERROR_PERMISSION_DENIED);
                if (ep) {
                        cJSON_AddNumberToObject(ep, "caller_uid", ms->caller->uid);
                        cJSON_AddNumberToObject(ep, "refused", hidden);
                        cJSON_AddItemToObject(params, "error_parameters", ep);
                }
        }
        if (hidden)
                cJSON_AddNumberToObject(params, "refused", hidden);
        cJSON_AddBoolToObject(params, "rolled_back", rolled_back);
        members_add(ms, params);
        return proto_error_new(CUDACKPT_ERROR_GROUP_FAILED, params);
}
