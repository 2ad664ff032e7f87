/* saveops.c: SaveJob, RestoreJob, ListSaves and RemoveSave (saveops.h). */
#include "saves/saveops.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cudackpt/protocol.h"
#include "base/log.h"

/* One call on the saves, from its checks on the loop through its work on
 * workers (and, for SaveJob, its dump) to its reply. */
struct saveop {
        uv_work_t work;
        struct saves *t;
        struct conn *c;                 /* referenced and busy until op_end() */
        bool oneway;
        struct saveops_request req;     /* its strings point into name and save */
        uid_t uid;
        pid_t caller_pid;               /* for the audit lines */
        char name[SAVESTORE_NAME_MAX + 1], save[SAVESTORE_NAME_MAX + 1];
        char tmp[SAVESTORE_TMP_MAX];    /* SaveJob: the dump's temporary name */
        bool holds_busy, holds_slot;    /* the save's busy mark, an operation slot */
        struct savejob *job;            /* SaveJob's job (savejobs_save_begin) */
        unsigned pending_all, pending_uid; /* other dumps and restores in flight */
        int uidfd;                      /* the uid's directory, -1 until opened */
        int hold_fd;                    /* RestoreJob: the save's hold, until its job has it */
        int r;                          /* the worker's result: 0 or -errno */
        const char *refused;            /* the worker's refusal: "saves" or "save_bytes" */
        uint64_t limit;
        struct savestore_info info;     /* the save made, or restored */
        struct savestore_info *list;    /* ListSaves' */
        size_t n;
        struct savecmd cmd;             /* SaveJob's dump */
        struct savebarrier *barrier;    /* ... held at a barrier, until it exited */
        struct savelocks_part *part;    /* ... its lock rules, taken at its exit (savelocks.h) */
        unsigned refs;                  /* the call, and the dump's handles */
        void (*work_fn)(struct saveop *op);
        void (*after_fn)(struct saveop *op);
};

static void op_unref(struct saveop *op)
{
        if (--op->refs > 0)
                return;
        if (op->uidfd >= 0)
                close(op->uidfd);
        if (op->hold_fd >= 0)
                close(op->hold_fd);
        free(op->list);
        life_release(op->t->life);
        free(op);
}

static void op_reply(struct saveop *op, cJSON *msg)
{
        if (op->oneway || op->c->closing)
                cJSON_Delete(msg);
        else
                conn_send(op->c, msg);
}

/* The call is over (answered, or its job took the connection over when
 * bound is set). */
static void give_back(struct saveop *op)
{
        if (op->holds_busy)
                savebusy_give(&op->t->busy, op->uid, op->save);
        if (op->holds_slot)
                share_give(&op->t->ops_share, op->uid, false);
        op->holds_busy = op->holds_slot = false;
}

static void op_end(struct saveop *op, bool bound)
{
        give_back(op);
        savebarrier_release(op->barrier); /* the call answered: no continues after */
        op->barrier = NULL;
        if (!bound) {
                conn_set_streaming(op->c, false); /* held at a barrier: it was */
                conn_request_done(op->c);
        }
        conn_unref(op->c);
        op_unref(op);
}

static void work_cb(uv_work_t *w)
{
        struct saveop *op = w->data;

        op->work_fn(op);
}

static void after_cb(uv_work_t *w, int status)
{
        struct saveop *op = w->data;

        if (status < 0)
                op->r = status;
        op->after_fn(op);
}

static void op_queue(struct saveop *op, void (*work_fn)(struct saveop *), void (*after_fn)(struct saveop *))
{
        op->work_fn = work_fn;
        op->after_fn = after_fn;
        op->work.data = op;
        if (uv_queue_work(op->t->loop, &op->work, work_cb, after_cb) < 0) {
                op->r = -ENOMEM;
                after_fn(op);
        }
}

/* An error of the disk work, as the caller is told it. */
static cJSON *store_error(const struct saveop *op, const char *what)
{
        if (op->r == -ENOENT)
                return saves_name_error(CUDACKPT_ERROR_NO_SUCH_SAVE, "save", op->save);
        if (op->r == -EEXIST)
                return saves_name_error(CUDACKPT_ERROR_SAVE_EXISTS, "save", op->save);
        if (op->r == -EBUSY) /* held by another node's restore or job */
                return saves_name_error(CUDACKPT_ERROR_SAVE_BUSY, "save", op->save);
        if (op->refused)
                return saves_queue_full(op->refused, op->limit);
        char msg[160];
        snprintf(msg, sizeof(msg), "%s in the saves directory: %s", what, strerror(-op->r));
        return saves_command_failed("store", 1, msg);
}

/* ---- SaveJob --------------------------------------------------------------- */

/* Whether one more save of bytes fits uid's bounds (worker). */
static void check_bounds(struct saveop *op, bool replacing)
{
        const struct config *cfg = op->t->cfg;
        size_t all = 0;
        uint64_t bytes = 0;

        if ((op->r = savestore_count_all(op->t->dir_fd, &all)) < 0 ||
            (op->r = savestore_list(op->uidfd, op->uid, &op->list, &op->n)) < 0)
                return;
        for (size_t i = 0; i < op->n; i++)
                bytes += op->list[i].bytes;
        if (!replacing && all + op->pending_all >= cfg->max_saves) {
                op->refused = "saves";
                op->limit = cfg->max_saves;
        } else if (!replacing && op->n + op->pending_uid >= cfg->max_saves_per_uid) {
                op->refused = "saves";
                op->limit = cfg->max_saves_per_uid;
        } else if (bytes >= cfg->max_save_bytes_per_uid) {
                op->refused = "save_bytes";
                op->limit = cfg->max_save_bytes_per_uid;
        }
        if (op->refused)
                op->r = -EDQUOT;
}

static void prepare_work(struct saveop *op)
{
        struct savestore_info old;
        bool exists;

        op->r = savestore_uid_dir(op->t->dir_fd, op->uid, true, &op->uidfd);
        if (op->r < 0)
                return;
        exists = savestore_info(op->uidfd, op->uid, op->save, &old) == 0;
        if (exists && !op->req.replace) {
                op->r = -EEXIST;
                return;
        }
        check_bounds(op, exists);
        savestore_tmp_name("dump", op->tmp, sizeof(op->tmp));
}

static void saved_after(struct saveop *op)
{
        bool ok = op->r == 0;

        if (ok) {
                cJSON *p = cJSON_CreateObject();
                if (p)
                        cJSON_AddItemToObject(p, "save", saves_info_json(&op->info));
                op_reply(op, proto_reply_new(p));
        } else {
                metrics_count(op->t->metrics, METRICS_SAVES_FAILED);
                op_reply(op, store_error(op, "Failed to keep the save"));
        }
        saves_audit(op->uid, op->caller_pid, "SaveJob", op->job->pid, ok ? "ok" : "failed", "job %s into save %s%s",
                    op->name, op->save, op->req.leave_running ? ", left running" : "");
        savejobs_save_end(op->job, ok ? op->save : NULL, ok && !op->req.leave_running);
        op_end(op, false);
}

static void install_work(struct saveop *op)
{
        op->r = savestore_install(op->uidfd, op->tmp, op->save, op->req.replace);
        savelocks_keep(&op->t->locks, op->uid, op->part, op->r == 0 ? op->save : NULL);
        if (op->r == 0)
                op->r = savestore_info(op->uidfd, op->uid, op->save, &op->info);
}

/* The dump failed: what it left under its temporary name goes. */
static void discard_work(struct saveop *op)
{
        savelocks_keep(&op->t->locks, op->uid, op->part, NULL); /* its go went, the dump failed after */
        (void)savestore_remove_tree(op->uidfd, op->tmp);
}

static void dump_failed_after(struct saveop *op)
{
        uint64_t limit;
        bool refused = savebarrier_refused(op->barrier, &limit);

        metrics_count(op->t->metrics, METRICS_SAVES_FAILED);
        saves_audit(op->uid, op->caller_pid, "SaveJob", op->job->pid, refused ? "QueueFull" : "CommandFailed",
                    "job %s into save %s: dump exited %d: %s", op->name, op->save, op->cmd.status,
                    refused ? "its lock rules would pass locked_connections" : savecmd_message(&op->cmd));
        op_reply(op, refused ? saves_queue_full("locked_connections", limit) :
                 saves_command_failed("dump", op->cmd.status, savecmd_message(&op->cmd)));
        savejobs_save_end(op->job, NULL, false);
        op_end(op, false);
}

static void dump_exit_cb(struct savecmd *cmd, int status)
{
        struct saveop *op = cmd->data;

        op->part = savebarrier_take_part(op->barrier);
        if (status == 0)
                op_queue(op, install_work, saved_after);
        else
                op_queue(op, discard_work, dump_failed_after);
}

static void dump_closed_cb(struct savecmd *cmd)
{
        op_unref(cmd->data);
}

/* The dump waits at its barrier: the call is told. */
static void barrier_ready_cb(void *data, cJSON *reply)
{
        op_reply(data, reply);
}

/* The barrier a held dump waits at: 0 and *ret_fd its end, the call streaming
 * until answered (so the daemon's stop closes it: the part rolls back), or -errno. */
static int open_barrier(struct saveop *op, int *ret_fd)
{
        int r = savebarrier_open(&op->t->barriers, &(struct savebarrier_spec){ .uid = op->uid, .caller_pid =
                                 op->caller_pid, .name = op->name, .verb = "dump", .c = op->c, .ready_cb =
                                 barrier_ready_cb, .data = op, .locks = &op->t->locks, .uidfd = op->uidfd,
                                 .images = op->tmp }, &op->barrier, ret_fd);

        if (r == 0)
                conn_set_streaming(op->c, true);
        return r;
}

static void spawn_dump(struct saveop *op)
{
        char run[80], owner[24], images[4200], tag[192];
        const char *argv[16] = { op->t->ctl, "dump", run, owner, images };
        size_t k = 5;
        int r = 0, barrier_fd = -1;

        snprintf(tag, sizeof(tag), "save %s of job %s of uid %u", op->save, op->name, (unsigned)op->uid);
        snprintf(run, sizeof(run), "--run=u%u-%s", (unsigned)op->uid, op->name);
        snprintf(owner, sizeof(owner), "--owner=%u", (unsigned)op->uid);
        snprintf(images, sizeof(images), "--images=%s/%u/%s", op->t->cfg->saves_dir, (unsigned)op->uid, op->tmp);
        if (op->req.leave_running)
                argv[k++] = "--leave-running";
        savebarrier_criu_options(op->t->cfg, op->req.barrier, argv + k);
        op->cmd.data = op;
        op->cmd.exit_cb = dump_exit_cb;
        op->cmd.close_cb = dump_closed_cb;
        r = op->req.barrier ? open_barrier(op, &barrier_fd) : 0;
        if (r == 0 && ++op->refs) /* until close_cb, which comes spawned or not */
                r = savecmd_spawn(op->t->loop, &op->cmd, &(struct savecmd_spec){ .argv = argv, .env = op->t->env,
                                                                                 .pidfd = -1, .envfd = -1,
                                                                                 .barrierfd = barrier_fd, .tag = tag });
        if (barrier_fd >= 0)
                close(barrier_fd);
        if (r < 0) {
                op->cmd.status = 127;
                snprintf(op->cmd.last, sizeof(op->cmd.last), "cannot run %s: %s", op->t->ctl, uv_strerror(r));
                dump_failed_after(op);
        }
}

static void prepared_after(struct saveop *op)
{
        if (op->r < 0) {
                op_reply(op, store_error(op, "Failed to prepare the save"));
                savejobs_save_end(op->job, NULL, false);
                op_end(op, false);
                return;
        }
        spawn_dump(op);
}

/* ---- RestoreJob ------------------------------------------------------------- */

static void restore_check_work(struct saveop *op)
{
        op->r = savestore_uid_dir(op->t->dir_fd, op->uid, false, &op->uidfd);
        /* No other node may restore it while this one does, nor while its
         * job runs here (SaveBusy there).  Held before it is read: another
         * node's RemoveSave removes it under the hold, so that a save read
         * while held is one that stays. */
        if (op->r == 0)
                op->r = savestore_hold(op->uidfd, op->save, &op->hold_fd);
        if (op->r == 0)
                op->r = savestore_info(op->uidfd, op->uid, op->save, &op->info);
        if (op->r == -ENOENT && op->hold_fd >= 0) /* no hold's file left for a save that is none */
                savestore_unhold(op->uidfd, op->save);
        if (op->r == -EPERM)
                op->r = -ENOENT; /* what is not a save of the uid's is none */
}

static void restore_checked_after(struct saveop *op)
{
        char images[4200], owner[24];
        const char *argv[16] = { op->t->ctl,      "restore",  images, owner, "--wait", "--cgroups-of=3",
                                 "--ready-fd=5", "--die-with-parent" };

        if (op->r == 0 && !op->info.job[0])
                op->r = -ENOENT; /* not a job of the uid's: no save the daemon made */
        if (op->r < 0 || op->c->closing) {
                op_reply(op, store_error(op, "Failed to read the save"));
                op_end(op, false);
                return;
        }
        snprintf(images, sizeof(images), "--images=%s/%u/%s", op->t->cfg->saves_dir, (unsigned)op->uid, op->save);
        snprintf(owner, sizeof(owner), "--owner=%u", (unsigned)op->uid);
        savebarrier_criu_options(op->t->cfg, op->req.barrier, argv + 8);
        /* The job takes the busy mark and the slot over. */
        op->holds_busy = op->holds_slot = false;
        bool bound = savejobs_start(op->t, op->c, &(struct savejobs_spec){ .verb = "restore", .name = op->info.job,
                                                                           .argv = argv, .envfd = -1,
                                                                           .restoring = op->save,
                                                                           .hold_fd = op->hold_fd,
                                                                           .barrier = op->req.barrier }) == 0;
        op->hold_fd = -1; /* the job's now */
        op_end(op, bound);
}

/* ---- ListSaves, RemoveSave ------------------------------------------------- */

static void list_work(struct saveop *op)
{
        op->r = savestore_uid_dir(op->t->dir_fd, op->uid, false, &op->uidfd);
        if (op->r == 0)
                op->r = savestore_list(op->uidfd, op->uid, &op->list, &op->n);
        else if (op->r == -ENOENT)
                op->r = 0; /* no save yet */
}

static void listed_after(struct saveop *op)
{
        cJSON *p = cJSON_CreateObject(), *a = p ? cJSON_AddArrayToObject(p, "saves") : NULL;

        if (op->r < 0) {
                cJSON_Delete(p);
                op_reply(op, store_error(op, "Failed to list the saves"));
        } else {
                for (size_t i = 0; a && i < op->n; i++)
                        cJSON_AddItemToArray(a, saves_info_json(&op->list[i]));
                op_reply(op, proto_reply_new(p));
        }
        op_end(op, false);
}

static void remove_work(struct saveop *op)
{
        int hold = -1;

        op->r = savestore_uid_dir(op->t->dir_fd, op->uid, false, &op->uidfd);
        /* Not while another node restores it or runs its job. */
        if (op->r == 0)
                op->r = savestore_hold(op->uidfd, op->save, &hold);
        if (op->r == 0) {
                op->r = savestore_remove(op->uidfd, op->save);
                savestore_unhold(op->uidfd, op->save);
                close(hold);
        }
        if (op->r == -EPERM)
                op->r = -ENOENT;
        /* This node's rules of it, if any (removed from another node too). */
        if (op->r == 0 || op->r == -ENOENT)
                savelocks_undo(&op->t->locks, op->uid, op->save);
}

static void removed_after(struct saveop *op)
{
        cJSON *p;

        saves_audit(op->uid, op->caller_pid, "RemoveSave", 0, op->r == 0 ? "ok" : "failed", "save %s%s%s", op->save,
                    op->r == 0 ? "" : ": ", op->r == 0 ? "" : strerror(-op->r));
        if (op->r < 0) {
                op_reply(op, store_error(op, "Failed to remove the save"));
        } else {
                p = cJSON_CreateObject();
                if (p)
                        cJSON_AddStringToObject(p, "save", op->save);
                op_reply(op, proto_reply_new(p));
        }
        op_end(op, false);
}

/* ---- the calls ---------------------------------------------------------------- */

/* The checks on the loop: NULL, or the error to answer.  A dump or a
 * restore takes the save's busy mark and an operation slot; a removal
 * the busy mark. */
static cJSON *admit(struct saveop *op)
{
        struct saves *t = op->t;
        struct share_refusal why = { 0 };
        enum proto_method m = op->req.method;
        cJSON *refused;

        if (m == PROTO_LIST_SAVES)
                return NULL;
        if (m == PROTO_SAVE_JOB) {
                op->job = savejobs_find(t, op->uid, op->name);
                if ((refused = savejobs_save_refusal(op->job, op->name, op->save, op->req.barrier)) != NULL)
                        return refused;
                if (op->uid != 0 && t->others_unsaveable)
                        return saves_command_failed("dump", 125, "the daemon lacks CAP_SYS_RESOURCE, which CRIU "
                                                    "needs to dump another user's job");
        }
        if (savebusy_has(&t->busy, op->uid, op->save))
                return saves_name_error(CUDACKPT_ERROR_SAVE_BUSY, "save", op->save);
        if (m != PROTO_REMOVE_SAVE && share_take(&t->ops_share, op->uid, false, &why) < 0)
                return saves_queue_full("save_operations", why.limit);
        op->holds_slot = m != PROTO_REMOVE_SAVE;
        if (savebusy_take(&t->busy, op->uid, op->save) < 0)
                return proto_error_new(CUDACKPT_ERROR_SHUTTING_DOWN, NULL);
        op->holds_busy = true;
        op->pending_all = t->ops_share.used - op->holds_slot;
        op->pending_uid = share_held(&t->ops_share, op->uid) - op->holds_slot;
        savejobs_save_begin(op->job, op->req.barrier);
        return NULL;
}

static struct saveop *op_new(struct saves *t, struct conn *c, const struct proto_call *call,
                             const struct saveops_request *req)
{
        struct saveop *op = calloc(1, sizeof(*op));

        if (!op)
                return NULL;
        *op = (struct saveop){ .t = t, .c = c, .oneway = call->oneway, .req = *req, .uid = c->caller.uid,
                               .caller_pid = c->caller.pid, .uidfd = -1, .hold_fd = -1,
                               .refs = 1 };
        snprintf(op->name, sizeof(op->name), "%s", req->name ? req->name : "");
        snprintf(op->save, sizeof(op->save), "%s", req->save ? req->save : "");
        op->req.name = op->name;
        op->req.save = op->save;
        return op;
}

void saveops_call(struct saves *t, struct conn *c, const struct proto_call *call, const struct saveops_request *req)
{
        struct saveop *op;
        cJSON *err;

        if (t->dir_fd < 0) {
                conn_reply(c, call, proto_error_new(CUDACKPT_ERROR_SAVES_DISABLED, NULL));
                return;
        }
        op = op_new(t, c, call, req);
        if (!op) {
                conn_close(c);
                return;
        }
        life_hold(t->life); /* until op_unref() frees it */
        err = admit(op);
        if (err) {
                /* Answered at once: the connection goes on by itself. */
                give_back(op);
                conn_reply(c, call, err);
                op_unref(op);
                return;
        }
        conn_ref(c);
        conn_request_begin(c);
        if (req->method == PROTO_SAVE_JOB)
                op_queue(op, prepare_work, prepared_after);
        else if (req->method == PROTO_RESTORE_JOB)
                op_queue(op, restore_check_work, restore_checked_after);
        else if (req->method == PROTO_LIST_SAVES)
                op_queue(op, list_work, listed_after);
        else
                op_queue(op, remove_work, removed_after);
}
