/* savejobs.c: the jobs the daemon runs for its callers, bound to their
 * calls (savejobs.h). */
#include "saves/savejobs.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cudackpt/protocol.h"
#include "base/log.h"
#include "json.h"
#include "saves/savecaller.h"
#include "varlink/protomsg.h"

cJSON *saves_queue_full(const char *resource, uint64_t limit)
{
        cJSON *p = cJSON_CreateObject();

        if (p) {
                cJSON_AddNumberToObject(p, "limit", (double)limit);
                cJSON_AddStringToObject(p, "resource", resource);
        }
        return proto_error_new(CUDACKPT_ERROR_QUEUE_FULL, p);
}

cJSON *saves_command_failed(const char *command, int status, const char *message)
{
        cJSON *p = cJSON_CreateObject();

        if (p) {
                cJSON_AddStringToObject(p, "command", command);
                cJSON_AddNumberToObject(p, "exit_status", status);
                cJSON_AddStringToObject(p, "message", message);
        }
        return proto_error_new(CUDACKPT_ERROR_COMMAND_FAILED, p);
}

cJSON *saves_name_error(const char *error, const char *key, const char *name)
{
        cJSON *p = cJSON_CreateObject();

        if (p)
                cJSON_AddStringToObject(p, key, name);
        return proto_error_new(error, p);
}

void saves_audit(uid_t uid, pid_t caller_pid, const char *what, pid_t target, const char *result,
                 const char *fmt, ...)
{
        char detail[320];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(detail, sizeof(detail), fmt, ap);
        va_end(ap);
        log_audit(&(struct log_audit){ .caller_uid = (unsigned)uid, .caller_pid = (int)caller_pid,
                                       .target_pid = (int)target, .method = what, .result = result,
                                       .detail = detail });
}

cJSON *saves_info_json(const struct savestore_info *i)
{
        cJSON *o = cJSON_CreateObject();

        if (o) {
                cJSON_AddStringToObject(o, "save", i->save);
                cJSON_AddStringToObject(o, "job", i->job);
                cJSON_AddNumberToObject(o, "bytes", (double)i->bytes);
                cJSON_AddNumberToObject(o, "created", (double)i->created);
        }
        return o;
}

struct savejob *savejobs_find(struct saves *t, uid_t uid, const char *name)
{
        for (struct savejob *j = t->jobs; j; j = j->next)
                if (j->uid == uid && strcmp(j->name, name) == 0)
                        return j;
        return NULL;
}

/* The job's JobEvent: {"event": ..., "name": ..., ...}. */
static cJSON *job_event(const struct savejob *j, const char *event)
{
        cJSON *e = cJSON_CreateObject();

        if (!e)
                return NULL;
        cJSON_AddStringToObject(e, "event", event);
        cJSON_AddStringToObject(e, "name", j->name);
        if (strcmp(event, "started") == 0 || strcmp(event, "running") == 0) {
                cJSON_AddNumberToObject(e, "pid", j->pid);
                cJSON_AddNumberToObject(e, "start_time", (double)j->start_time);
        } else if (strcmp(event, "ended") == 0) {
                cJSON_AddNumberToObject(e, "exit_status", j->exit_status);
        } else if (strcmp(event, "saved") == 0) {
                cJSON_AddStringToObject(e, "save", j->saved);
        }
        return e;
}

static cJSON *job_params(const struct savejob *j, const char *event)
{
        cJSON *p = cJSON_CreateObject();

        if (p)
                cJSON_AddItemToObject(p, "job", job_event(j, event));
        return p;
}

cJSON *savejobs_list(const struct saves *t, uid_t uid)
{
        cJSON *a = cJSON_CreateArray();

        for (const struct savejob *j = t->jobs; a && j; j = j->next)
                if (j->uid == uid && j->started)
                        (void)json_add_to_array(a, job_event(j, "running"));
        return a;
}

/* The call is over: c serves further calls again. */
static void unbind(struct savejob *j)
{
        struct conn *c = j->conn;

        j->answered = true;
        if (!c)
                return;
        j->conn = NULL;
        conn_hook_remove(c, &j->closing);
        conn_set_streaming(c, false);
        conn_request_done(c);
        conn_unref(c);
}

static void job_free_cb(uv_handle_t *h);

/* j goes once nothing refers to it any more. */
static void maybe_free(struct savejob *j)
{
        if (j->closes > 0 || j->saving > 0 || !j->answered)
                return;
        life_release(j->t->life);
        free(j);
}

/* The last reply, once the command ended and no save of it is in flight. */
static void maybe_answer(struct savejob *j)
{
        cJSON *msg;

        if (j->answered || !j->ended || j->saving > 0)
                return;
        if (!j->started)
                msg = saves_command_failed(j->verb, j->exit_status, savecmd_message(&j->cmd));
        else
                msg = proto_reply_new(job_params(j, j->saved[0] ? "saved" : "ended"));
        if (j->started)
                metrics_count(j->t->metrics, j->saved[0] ? METRICS_JOBS_SAVED : METRICS_JOBS_ENDED);
        if (!j->started)
                saves_audit(j->uid, j->caller_pid, "Job", 0, "CommandFailed", "job %s: %s exited %d: %s", j->name,
                            j->verb, j->exit_status, savecmd_message(&j->cmd));
        else
                saves_audit(j->uid, j->caller_pid, "Job", j->pid, j->saved[0] ? "saved" : "ended",
                            "job %s%s%s, exit status %d", j->name, j->saved[0] ? " into save " : "", j->saved,
                            j->exit_status);
        if (j->conn)
                conn_send(j->conn, msg);
        else
                cJSON_Delete(msg);
        unbind(j);
}

/* A restore's save and its operation slot go back once it is up or gone. */
static void give_back_restore(struct savejob *j)
{
        if (!j->restoring[0])
                return;
        savebusy_give(&j->t->busy, j->uid, j->restoring);
        share_give(&j->t->ops_share, j->uid, false);
        j->restoring[0] = '\0';
}

static void ready_cb(struct savecmd *cmd, const char *line)
{
        struct savejob *j = cmd->data;
        cJSON *o = cJSON_Parse(line);
        long long pid = 0, st = 0;

        /* Restored: the save's lock rules on this node, if any, were lifted
         * by CRIU under the lock the restore ran with. */
        if (j->restoring[0])
                savelocks_restored(&j->t->locks, j->uid, j->restoring, j->barrier ?
                                   j->t->cfg->save_parts_network_lock : j->t->cfg->save_network_lock);
        give_back_restore(j);
        if (!json_get_integer(o, "pid", 1, 4194304, &pid) || !json_get_integer(o, "start_time", 0, 9e15, &st)) {
                /* Not a job we can name: it does not run for the caller. */
                log_warning("Job %s of uid %u: the %s command's ready line is not one, stopping it", j->name,
                            (unsigned)j->uid, j->verb);
                savecmd_kill(cmd, SIGRTMIN + 2);
                cJSON_Delete(o);
                return;
        }
        cJSON_Delete(o);
        j->started = true;
        j->pid = (pid_t)pid;
        j->start_time = (uint64_t)st;
        metrics_count(j->t->metrics, METRICS_JOBS_STARTED);
        saves_audit(j->uid, j->caller_pid, "Job", j->pid, "started", "job %s (%s)", j->name, j->verb);
        if (j->conn)
                conn_send(j->conn, proto_reply_continues(job_params(j, "started")));
}

/* The restore waits at its barrier: the call is told, before "started". */
static void barrier_ready_cb(void *data, cJSON *reply)
{
        struct savejob *j = data;

        if (j->conn)
                conn_send(j->conn, reply);
        else
                cJSON_Delete(reply);
}

static void exit_cb(struct savecmd *cmd, int status)
{
        struct savejob *j = cmd->data;

        give_back_restore(j);
        savebarrier_release(j->barrier);
        j->barrier = NULL;
        if (j->hold_fd >= 0) /* another node may restore the save now */
                close(j->hold_fd);
        j->hold_fd = -1;
        j->ended = true;
        j->exit_status = status;
        if (j->prev)
                j->prev->next = j->next;
        else
                j->t->jobs = j->next;
        if (j->next)
                j->next->prev = j->prev;
        j->prev = j->next = NULL;
        share_give(&j->t->jobs_share, j->uid, false);
        uv_timer_stop(&j->stop_timer);
        uv_close((uv_handle_t *)&j->stop_timer, job_free_cb);
        if (j->answered && j->started) /* its call is gone: no reply says how it ended */
                metrics_count(j->t->metrics, METRICS_JOBS_ENDED);
        if (j->answered)
                saves_audit(j->uid, j->caller_pid, "Job", j->pid, "ended", "job %s, its call gone, exit status %d",
                            j->name, status);
        maybe_answer(j);
}

static void cmd_closed_cb(struct savecmd *cmd)
{
        struct savejob *j = cmd->data;

        j->closes--;
        maybe_free(j);
}

static void job_free_cb(uv_handle_t *h)
{
        struct savejob *j = h->data;

        j->closes--;
        maybe_free(j);
}

/* The stop's next step: SIGRTMIN+2 (the command kills the job's init),
 * then SIGKILL. */
static void stop_timer_cb(uv_timer_t *timer)
{
        struct savejob *j = timer->data;

        j->stop_step++;
        log_notice("Job %s of uid %u still runs %llu ms after its call closed: %s", j->name, (unsigned)j->uid,
                   (unsigned long long)j->t->cfg->job_stop_ms * (unsigned)j->stop_step,
                   j->stop_step == 1 ? "killing it" : "killing its command");
        savecmd_kill(&j->cmd, j->stop_step == 1 ? SIGRTMIN + 2 : SIGKILL);
        if (j->stop_step == 1)
                uv_timer_start(&j->stop_timer, stop_timer_cb, j->t->cfg->job_stop_ms, 0);
}

/* The call's connection closes before the job ended: the job is stopped. */
static void closing_cb(struct conn_hook *h, struct conn *c)
{
        struct savejob *j = (struct savejob *)((char *)h - offsetof(struct savejob, closing));

        (void)c;
        unbind(j);
        if (j->ended)
                return;
        saves_audit(j->uid, j->caller_pid, "Job", j->pid, "stopping", "job %s: its call closed", j->name);
        savecmd_kill(&j->cmd, SIGTERM);
        uv_timer_start(&j->stop_timer, stop_timer_cb, j->t->cfg->job_stop_ms, 0);
}

/* j joins the table and is bound to the call on c. */
static void bind_call(struct saves *t, struct savejob *j, struct conn *c)
{
        j->next = t->jobs;
        if (t->jobs)
                t->jobs->prev = j;
        t->jobs = j;
        j->conn = c;
        j->closing.closing_cb = closing_cb;
        conn_hook_add(c, &j->closing);
        conn_set_streaming(c, true);
        conn_ref(c);
        conn_request_begin(c);
        uv_timer_init(t->loop, &j->stop_timer);
        j->stop_timer.data = j;
        j->closes = 2; /* the command's handles and the timer */
        life_hold(t->life); /* until maybe_free() */
}

static struct savejob *job_new(struct saves *t, uid_t uid, const struct savejobs_spec *spec)
{
        struct savejob *j = calloc(1, sizeof(*j));

        if (!j)
                return NULL;
        j->t = t;
        j->uid = uid;
        j->verb = spec->verb;
        snprintf(j->name, sizeof(j->name), "%s", spec->name);
        if (spec->restoring)
                snprintf(j->restoring, sizeof(j->restoring), "%s", spec->restoring);
        j->hold_fd = spec->restoring ? spec->hold_fd : -1;
        j->cmd.data = j;
        j->cmd.ready_cb = ready_cb;
        j->cmd.exit_cb = exit_cb;
        j->cmd.close_cb = cmd_closed_cb;
        return j;
}

/* PermissionDenied for the caller itself (savecaller.h says why). */
static cJSON *caller_denied(const struct policy_caller *caller)
{
        cJSON *p = cJSON_CreateObject();

        if (p) {
                cJSON_AddNumberToObject(p, "pid", caller->pidns.other ? 0 : caller->pid);
                cJSON_AddNumberToObject(p, "caller_uid", caller->uid);
        }
        return proto_error_new(CUDACKPT_ERROR_PERMISSION_DENIED, p);
}

/* Refusals before anything runs: 0, or the error to answer. */
static cJSON *admit(struct saves *t, const struct conn *c, const struct savejobs_spec *spec)
{
        struct share_refusal why = { 0 };
        char why_not[200];

        if (!t->ctl)
                return saves_command_failed(spec->verb, 127, t->ctl_why);
        if (!c->caller.has_pidfd)
                return saves_command_failed(spec->verb, 125, "no pidfd of the caller (SO_PEERPIDFD, Linux 6.5)");
        if (savecaller_check(&c->caller, why_not, sizeof(why_not)) < 0) {
                saves_audit(c->caller.uid, c->caller.pid, "Job", 0, "PermissionDenied", "job %s (%s): %s", spec->name,
                            spec->verb, why_not);
                return caller_denied(&c->caller);
        }
        if (savejobs_find(t, c->caller.uid, spec->name))
                return saves_name_error(CUDACKPT_ERROR_JOB_EXISTS, "name", spec->name);
        if (share_take(&t->jobs_share, c->caller.uid, false, &why) < 0)
                return saves_queue_full("jobs", why.limit);
        return NULL;
}

/* The barrier a restore held across nodes waits at: 0 and *ret_fd its
 * command's end, or -1 with the job freed and its slot given back. */
static int open_barrier(struct saves *t, struct conn *c, struct savejob *j, int *ret_fd)
{
        if (savebarrier_open(&t->barriers, &(struct savebarrier_spec){ .uid = j->uid, .caller_pid = c->caller.pid,
                                                                       .name = j->name, .verb = j->verb, .c = c,
                                                                       .ready_cb = barrier_ready_cb, .data = j },
                             &j->barrier, ret_fd) == 0)
                return 0;
        share_give(&t->jobs_share, c->caller.uid, false);
        free(j);
        return -1;
}

int savejobs_start(struct saves *t, struct conn *c, const struct savejobs_spec *spec)
{
        struct savejob *j = NULL;
        cJSON *err = admit(t, c, spec);
        char tag[192];
        int r, barrier_fd = -1;

        if (!err && !(j = job_new(t, c->caller.uid, spec))) {
                share_give(&t->jobs_share, c->caller.uid, false);
                err = proto_error_new(CUDACKPT_ERROR_SHUTTING_DOWN, NULL);
        }
        if (!err && spec->barrier && open_barrier(t, c, j, &barrier_fd) < 0)
                err = saves_command_failed(spec->verb, 125, "the daemon is out of memory or descriptors");
        if (err) {
                if (spec->restoring) {
                        savebusy_give(&t->busy, c->caller.uid, spec->restoring);
                        share_give(&t->ops_share, c->caller.uid, false);
                        if (spec->hold_fd >= 0)
                                close(spec->hold_fd);
                }
                conn_send(c, err);
                return -1;
        }
        j->caller_pid = c->caller.pid;
        bind_call(t, j, c);
        snprintf(tag, sizeof(tag), "job %s of uid %u (%s)", j->name, (unsigned)j->uid, j->verb);
        r = savecmd_spawn(t->loop, &j->cmd, &(struct savecmd_spec){ .argv = spec->argv, .env = t->env,
                                                                      .pidfd = c->caller.pidfd,
                                                                      .envfd = spec->envfd, .ready = true,
                                                                      .barrierfd = barrier_fd, .tag = tag });
        if (barrier_fd >= 0) /* the command's now, or nobody's: its end closing rolls the part back */
                close(barrier_fd);
        if (r < 0) {
                snprintf(j->cmd.last, sizeof(j->cmd.last), "cannot run %s: %s", t->ctl, uv_strerror(r));
                exit_cb(&j->cmd, 127);
        }
        return 0;
}

cJSON *savejobs_save_refusal(const struct savejob *j, const char *name, const char *save, bool held)
{
        cJSON *p;

        if (!j || !j->started)
                return saves_name_error(CUDACKPT_ERROR_NO_SUCH_JOB, "name", name);
        /* A part held at a barrier is its job's only dump: PassBarrier
         * names the job, so two held would be one name for two barriers,
         * and another dump of its frozen tree would only contend for it. */
        if (j->saving == 0 || !(held || j->saving_held))
                return NULL;
        p = cJSON_CreateObject();
        if (p) {
                cJSON_AddStringToObject(p, "save", save);
                cJSON_AddStringToObject(p, "name", name);
        }
        return proto_error_new(CUDACKPT_ERROR_SAVE_BUSY, p);
}

void savejobs_save_begin(struct savejob *j, bool held)
{
        if (!j)
                return;
        j->saving++;
        j->saving_held = held; /* admitted as the first of its SaveJobs when held */
}

void savejobs_save_end(struct savejob *j, const char *save, bool ended_it)
{
        j->saving--;
        if (save && ended_it)
                snprintf(j->saved, sizeof(j->saved), "%s", save);
        maybe_answer(j);
        maybe_free(j);
}
