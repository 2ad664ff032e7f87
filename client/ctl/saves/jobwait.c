/* jobwait.c: a job waited on, and the signals while it runs (jobwait.h).
 *
 * The call blocks in the library, so the signals are taken by a thread of
 * their own (sigwait() on signals blocked in every thread): a save signal
 * saves through its own connection while the first one waits for the
 * event that follows ("saved": the daemon holds it until the dump ended).
 * One such thread serves the process (start may wait twice: a restore,
 * then the start), on one waiter whose call it knows only while a wait
 * runs: between waits a signal ends the command. */
#include "jobwait.h"

#include "args.h"
#include "describe.h"
#include "failure.h"
#include "slurm.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct job_waiter {
        const ctl_job_wait *w;           /* the wait running, NULL none */
        pthread_mutex_t lock;
        char name[CTL_JOB_NAME_MAX + 1]; /* the job's, once started */
        int saved_by;                    /* the signal of the save made, 0 none */
        bool saving;                     /* a SaveJob is in flight */
        pthread_cond_t saved;            /* ... ended */
} job_waiter;

static job_waiter waiter = { .lock = PTHREAD_MUTEX_INITIALIZER, .saved = PTHREAD_COND_INITIALIZER };
static pthread_once_t waiter_once = PTHREAD_ONCE_INIT;
static int waiter_started; /* pthread_create()'s result */

void ctl_job_wait_signals(sigset_t *set) {
        static const int sigs[] = { SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2 };

        sigemptyset(set);
        for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
                sigaddset(set, sigs[i]);
}

int ctl_job_parse_signals(const char *spec, sigset_t *set) {
        static const struct { const char *name; int sig; } names[] = {
                { "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT },
                { "TERM", SIGTERM }, { "USR1", SIGUSR1 }, { "USR2", SIGUSR2 },
        };
        char buf[128], *save = NULL, *tok;
        bool found;

        if (snprintf(buf, sizeof(buf), "%s", spec) >= (int) sizeof(buf))
                return -EINVAL;
        sigemptyset(set);
        for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (strncmp(tok, "SIG", 3) == 0)
                        tok += 3;
                found = false;
                for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                        if (strcmp(tok, names[i].name) == 0) {
                                sigaddset(set, names[i].sig);
                                found = true;
                        }
                if (!found)
                        return -EINVAL;
        }
        return 0;
}

/* SaveJob of the started job into w->save, replacing it; called with
 * jw->saving set, which keeps w (the wait's) alive until it is cleared. */
static void waiter_save(job_waiter *jw, const ctl_job_wait *w, const char *name, int sig) {
        cudackpt_client *client = NULL;
        cudackpt_reply reply;
        char *params = ctl_job_save_params(name, w->save, false, true);
        int r = -ENOMEM;

        cudackpt_reply_init(&reply);
        fprintf(stderr, "%s%s: saving job %s into %s\n", w->prefix, strsignal(sig), name, w->save);
        if (params && (r = ctl_connect_daemon(w->prefix, w->socket, &client)) == 0)
                r = cudackpt_call(client, CUDACKPT_METHOD_SAVE_JOB, params, &reply);
        /* Said while w is still the wait's: it may end once saving is
         * cleared. */
        if (r > 0)
                fprintf(stderr, "%sjob %s was not saved and runs on\n", w->prefix, name);
        else if (r < 0 || reply.error) {
                (void) ctl_call_failed(w->prefix, r, &reply, false);
                fprintf(stderr, "%sjob %s was not saved and runs on\n", w->prefix, name);
        }
        pthread_mutex_lock(&jw->lock);
        jw->saving = false;
        jw->saved_by = r == 0 && !reply.error ? sig : jw->saved_by;
        pthread_cond_broadcast(&jw->saved);
        pthread_mutex_unlock(&jw->lock);
        cudackpt_reply_clear(&reply);
        cudackpt_client_free(client);
        free(params);
}

static void *waiter_signals(void *data) {
        job_waiter *jw = data;
        const ctl_job_wait *w;
        char name[CTL_JOB_NAME_MAX + 1];
        sigset_t set;
        bool save;
        int sig;

        ctl_job_wait_signals(&set);
        for (;;) {
                if (sigwait(&set, &sig) != 0)
                        continue;
                pthread_mutex_lock(&jw->lock);
                /* Saved: the job is gone and the command ends with 0 (and
                 * --requeue's scontrol); a later signal neither saves again
                 * nor ends it otherwise. */
                if (jw->saved_by) {
                        pthread_mutex_unlock(&jw->lock);
                        continue;
                }
                memcpy(name, jw->name, sizeof(name));
                w = jw->w;
                save = w && w->save && name[0] && sigismember(&w->save_on, sig);
                jw->saving = save;
                pthread_mutex_unlock(&jw->lock);
                if (save) {
                        waiter_save(jw, w, name, sig);
                        continue;
                }
                /* The connection closes with this process: the daemon
                 * stops the job (SIGTERM, then SIGKILL). */
                fflush(stdout);
                _exit(128 + sig);
        }
        return NULL;
}

static void waiter_say(const job_waiter *jw, const ctl_job_event *ev, const char *json) {
        if (jw->w->json) {
                puts(json);
                fflush(stdout);
                return;
        }
        fprintf(stderr, "%sjob %s %s", jw->w->prefix, ev->name, ev->event);
        /* RestoreJob's "started": the job is the save's, come back. */
        if (strcmp(ev->event, "started") == 0 && strcmp(jw->w->method, CUDACKPT_METHOD_RESTORE_JOB) == 0 &&
            jw->w->save)
                fprintf(stderr, " from save %s", jw->w->save);
        if (ev->pid > 0)
                fprintf(stderr, " (init pid %d)", ev->pid);
        if (ev->save[0])
                fprintf(stderr, " into %s", ev->save);
        if (ev->exit_status >= 0)
                fprintf(stderr, " with status %d", ev->exit_status);
        fputc('\n', stderr);
}

static int waiter_event_cb(void *ctx, const char *parameters_json) {
        job_waiter *jw = ctx;
        ctl_job_event ev;

        if (ctl_job_event_parse(parameters_json, &ev) < 0)
                return -EBADMSG;
        if (strcmp(ev.event, "started") == 0) {
                pthread_mutex_lock(&jw->lock);
                memcpy(jw->name, ev.name, sizeof(jw->name));
                pthread_mutex_unlock(&jw->lock);
        }
        waiter_say(jw, &ev, parameters_json);
        return 0;
}

/* The signal thread, once for the process, with the signals blocked in
 * every thread from then on. */
static void waiter_start(void) {
        pthread_t thread;
        sigset_t set;

        ctl_job_wait_signals(&set);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        waiter_started = pthread_create(&thread, NULL, waiter_signals, &waiter);
        if (waiter_started == 0)
                pthread_detach(thread);
}

int ctl_job_wait_run(const ctl_job_wait *w, ctl_job_event *ret_last, int *ret_saved_by, cudackpt_reply *ret_reply) {
        cudackpt_client *client = NULL;
        int r;

        r = ctl_connect_daemon(w->prefix, w->socket, &client);
        if (r != 0)
                return r;
        pthread_once(&waiter_once, waiter_start);
        if (waiter_started != 0) {
                cudackpt_client_free(client);
                return -waiter_started;
        }
        pthread_mutex_lock(&waiter.lock);
        waiter.w = w;
        waiter.name[0] = '\0';
        waiter.saved_by = 0;
        pthread_mutex_unlock(&waiter.lock);
        r = cudackpt_call_more(client, w->method, w->params, waiter_event_cb, &waiter, ret_reply);
        if (r == 0 && !ret_reply->error) {
                if (ctl_job_event_parse(ret_reply->parameters_json, ret_last) < 0)
                        r = -EBADMSG;
                else
                        waiter_say(&waiter, ret_last, ret_reply->parameters_json);
        }
        /* The job's call may end ("saved") before the SaveJob's reply;
         * the save uses w until it ended. */
        pthread_mutex_lock(&waiter.lock);
        while (waiter.saving)
                pthread_cond_wait(&waiter.saved, &waiter.lock);
        *ret_saved_by = waiter.saved_by;
        waiter.w = NULL;
        pthread_mutex_unlock(&waiter.lock);
        cudackpt_client_free(client);
        return r;
}

int ctl_job_requeue_after(const char *prefix, int sig) {
        const char *job = getenv("SLURM_JOB_ID");
        int r;

        /* SIGTERM: Slurm is ending the job already (a requeue, a
         * preemption, scancel): it requeues it or not as it was asked. */
        if (sig == 0 || sig == SIGTERM)
                return -ECANCELED;
        r = nodes_slurm_requeue(job);
        if (r == 0)
                fprintf(stderr, "%sSlurm job %s requeued: its next start restores the save\n", prefix, job);
        else
                fprintf(stderr, "%sthe Slurm job %s could not be requeued (scontrol requeue: %s): the save is "
                        "kept\n", prefix, job ? job : "(no $SLURM_JOB_ID)",
                        r == -EPERM ? "refused" : strerror(-r));
        return r;
}
