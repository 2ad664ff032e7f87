/* watchevent.c: the JSON of Watch's events (watchevent.h). */
#include "jobs/watchevent.h"

#include <string.h>
#include <time.h>

#include "run/sched.h"

cJSON *watchevent_json(const struct watch_event *e, pid_t vpid)
{
        cJSON *p = cJSON_CreateObject(), *o = p ? cJSON_AddObjectToObject(p, "event") : NULL;
        struct timespec ts;
        char buf[32];

        if (!o) {
                cJSON_Delete(p);
                return NULL;
        }
        clock_gettime(CLOCK_REALTIME, &ts);
        cJSON_AddStringToObject(o, "type", e->type);
        cJSON_AddNumberToObject(o, "time", (double)ts.tv_sec + (double)(ts.tv_nsec / 1000) / 1e6);
        if (vpid > 0)
                cJSON_AddNumberToObject(o, "pid", vpid);
        if (e->start_time)
                cJSON_AddNumberToObject(o, "start_time", (double)e->start_time);
        if (e->method < PROTO_METHODS)
                cJSON_AddStringToObject(o, "method", proto_method_name(e->method));
        if (e->group < PROTO_METHODS)
                cJSON_AddStringToObject(o, "group", proto_method_name(e->group));
        if (e->result)
                cJSON_AddStringToObject(o, "result", e->result);
        if (e->state >= 0)
                cJSON_AddStringToObject(o, "state", proto_state_string(e->state, buf, sizeof(buf)));
        if (e->duration_ms >= 0)
                cJSON_AddNumberToObject(o, "duration_ms", e->duration_ms);
        if (e->caller_uid >= 0)
                cJSON_AddNumberToObject(o, "caller_uid", (double)e->caller_uid);
        if (e->lease)
                cJSON_AddNumberToObject(o, "lease", (double)e->lease);
        if (e->reason)
                cJSON_AddStringToObject(o, "reason", e->reason);
        if (e->undo)
                cJSON_AddStringToObject(o, "undo", e->undo);
        if (e->command)
                cJSON_AddStringToObject(o, "command", e->command);
        if (e->step)
                cJSON_AddStringToObject(o, "step", e->step);
        if (e->owner.ruid != (uid_t)-1 && e->pid > 0)
                cJSON_AddNumberToObject(o, "uid", e->owner.ruid);
        if (e->bytes >= 0)
                cJSON_AddNumberToObject(o, "bytes", (double)e->bytes);
        if (e->total_bytes >= 0)
                cJSON_AddNumberToObject(o, "total_bytes", (double)e->total_bytes);
        return proto_reply_continues(p);
}


static enum proto_method group_of(enum proto_method parent)
{
        return proto_method_is_group(parent) ? parent : PROTO_METHODS;
}

struct watch_event watchevent_of_op(const struct sched_op *op, const char *type)
{
        struct watch_event e = WATCH_EVENT_INIT(type);
        struct sched_target *t = op->target;

        uv_mutex_lock(&t->lock);
        e.pid = t->known ? t->watch_pid : op->req.pid;
        e.start_time = t->start_time;
        e.owner = t->owner;
        uv_mutex_unlock(&t->lock);
        if (e.pid <= 0)
                e.pid = op->req.pid;
        e.method = op->method;
        e.group = group_of(op->parent);
        e.caller_uid = (long long)op->caller->uid;
        return e;
}

struct watch_event watchevent_of_progress(const struct progress_sample *s)
{
        struct watch_event e = WATCH_EVENT_INIT(WATCH_PROGRESS);

        e.pid = s->pid;
        e.start_time = s->start_time;
        e.owner = s->owner;
        e.method = s->method;
        e.group = group_of(s->parent);
        e.step = "checkpoint";
        e.bytes = s->bytes;
        e.total_bytes = s->total_bytes;
        return e;
}

struct watch_event watchevent_of_proc(const struct procscan_proc *p, const char *type)
{
        struct watch_event e = WATCH_EVENT_INIT(type);

        e.proc = p;
        e.gone = strcmp(type, WATCH_EXITED) == 0;
        e.pid = p->pid;
        e.start_time = p->start_time;
        e.owner = p->owner;
        e.command = p->comm;
        return e;
}
