/* savejobs.h: the jobs the daemon runs for its callers (StartJob,
 * RestoreJob), each bound to the call that started it, and the table the
 * saves feature keeps (the cudackptctl it runs as root, the saves
 * directory, the bounds).
 *
 * A job is one root `cudackptctl run` (or `restore --wait`) spawned for a
 * caller (savecmd.h), named u<UID>-<name>, as the caller's uid and gid, in
 * the caller's cgroups (its pidfd as the command's fd 3).  The call gets
 * "started" (continues) once the command's ready line came, then one last
 * reply: "ended" with the job's exit status, "saved" when a SaveJob ended
 * it (held until that SaveJob's save is on stable storage), or
 * CommandFailed when it never started; a restore held at a barrier
 * (savebarrier.h) first gets {"barrier": "ready"}.  The job lives no
 * longer than its call: when the connection closes first, the command
 * gets SIGTERM (run forwards it to the job), SIGRTMIN+2 after job_stop_ms
 * (it kills the job's init) and SIGKILL after job_stop_ms more;
 * --die-with-parent ends the jobs with the daemon.  A caller sees only its own uid's jobs. */
#ifndef CUDACKPT_SAVEJOBS_H
#define CUDACKPT_SAVEJOBS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "base/config.h"
#include "base/life.h"
#include "base/metrics.h"
#include "base/share.h"
#include "net/conn.h"
#include "saves/savebarrier.h"
#include "saves/savebusy.h"
#include "saves/savecmd.h"
#include "saves/savestore.h"

struct savejob;

/* What the table is given at its start (the server's, outliving it). */
struct saves_deps {
        uv_loop_t *loop;
        const struct config *cfg;
        struct metrics *metrics;
        struct life *life;
        const char *runtime_dir;        /* the daemon's (savelocks.h's records); NULL: none */
};

struct saves {
        uv_loop_t *loop;
        const struct config *cfg;
        struct metrics *metrics;
        struct life *life;
        char *ctl;                      /* the cudackptctl run as root; NULL: none usable (ctl_why) */
        char ctl_why[256];
        bool others_unsaveable;         /* no CAP_SYS_RESOURCE: only root's jobs can be dumped */
        char **env;                     /* the commands' environment: the daemon's, CUDACKPT_SOCKET its own */
        int dir_fd;                     /* saves_dir, opened and checked at start; -1: no saves */
        struct savejob *jobs;           /* running or starting, by uid and name */
        struct share jobs_share;        /* jobs, by uid (max_jobs, max_jobs_per_uid) */
        struct share ops_share;         /* dumps and restores in flight, by uid */
        struct savebusy busy;           /* saves a dump or restore works on */
        struct savebarriers barriers;   /* the parts held at a barrier */
        struct savelocks locks;         /* the lock rules their saves left on this node */
};

struct savejob {
        struct saves *t;
        struct savejob *prev, *next;    /* t->jobs while its command runs */
        uid_t uid;
        pid_t caller_pid;               /* the caller's, for the audit lines */
        char name[SAVESTORE_NAME_MAX + 1];
        const char *verb;               /* "run" or "restore": CommandFailed's command */
        char restoring[SAVESTORE_NAME_MAX + 1]; /* RestoreJob: the save held busy until up */
        int hold_fd;                    /* RestoreJob: its save's hold across nodes until the
                                         * job ended (savestore_hold()); -1: none */
        struct conn *conn;              /* the call's; NULL once answered or closed */
        struct conn_hook closing;       /* on conn: its closing stops the job */
        struct savecmd cmd;
        struct savebarrier *barrier;    /* RestoreJob held at a barrier, until its command exited */
        uv_timer_t stop_timer;          /* the steps of a stop */
        int stop_step;                  /* signals sent by the stop so far */
        bool started;                   /* the ready line came: pid and start_time */
        pid_t pid;
        uint64_t start_time;
        bool ended;                     /* the command exited (exit_status) */
        int exit_status;
        unsigned saving;                /* SaveJobs of it in flight: the last reply waits */
        bool saving_held;               /* ... one held at a barrier among them: the only one */
        char saved[SAVESTORE_NAME_MAX + 1]; /* the save that ended it, "" when none */
        bool answered;                  /* the last reply went, or the call is gone */
        unsigned closes;                /* handles not yet closed (command, timer) */
};

/* What savejobs_start() runs: argv (argv[0] the cudackptctl), envfd (the
 * command's fd 4, -1: none; the caller closes it after). */
struct savejobs_spec {
        const char *verb;
        const char *name;
        const char *const *argv;
        int envfd;
        const char *restoring;          /* RestoreJob: the save, whose busy mark and save
                                         * operation the caller took and the job gives back */
        int hold_fd;                    /* with restoring: the save's hold, the job's in every
                                         * case (-1: none) */
        bool barrier;                   /* the command's fd 6 a barrier's end (savebarrier.h):
                                         * argv has its --barrier-fd */
};

/* The caller's job name, started or starting; NULL when none. */
struct savejob *savejobs_find(struct saves *t, uid_t uid, const char *name);
/* Starts a job for the call on c (more: true): 0, the call bound to it
 * (busy, streaming, referenced until its last reply); or -1, the error
 * answered (JobExists, QueueFull, CommandFailed).  The spec's restoring
 * save is given back in every case. */
int savejobs_start(struct saves *t, struct conn *c, const struct savejobs_spec *spec);
/* Whether SaveJob of job name into save (held: at a barrier) may dump j,
 * savejobs_find()'s (NULL: none): NULL, or the error to answer, NoSuchJob
 * (none running) or SaveBusy {save, name} (a held save of it is in
 * flight, or another save of it for a held one). */
cJSON *savejobs_save_refusal(const struct savejob *j, const char *name, const char *save, bool held);
/* A SaveJob of j (NULL: none) begins (held: at a barrier); it ends with
 * savejobs_save_end(): save names the save made (NULL: failed), ended_it
 * whether the dump ended the job. */
void savejobs_save_begin(struct savejob *j, bool held);
void savejobs_save_end(struct savejob *j, const char *save, bool ended_it);
/* ListJobs' jobs of uid: an array of JobEvents ("running"). */
cJSON *savejobs_list(const struct saves *t, uid_t uid);

/* The errors the saves' calls share. */
cJSON *saves_queue_full(const char *resource, uint64_t limit);
cJSON *saves_command_failed(const char *command, int status, const char *message);
cJSON *saves_name_error(const char *error, const char *key, const char *name);
/* A save as ListSaves and SaveJob tell it: {save, job, bytes, created}. */
cJSON *saves_info_json(const struct savestore_info *i);
/* An audit line of uid's caller_pid: what (a method, or "Job" for a job's
 * life), on target (0: none), its result ("ok", an error, or the job's
 * event), and a detail. */
void saves_audit(uid_t uid, pid_t caller_pid, const char *what, pid_t target, const char *result,
                 const char *fmt, ...) __attribute__((format(printf, 6, 7)));

#endif
