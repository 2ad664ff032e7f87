/* jobwait.c: a job waited on, and the signals while it runs (jobwait.h).
 *
 * The call blocks in the library, so the signals are taken by a thread of
 * their own (sigwait() on signals blocked in every thread): a save signal
 * saves through its own connection while the first one waits for the
 * event that follows ("saved": the daemon holds it until the dump ended). */
#include "jobwait.h"

#include "args.h"
#include "describe.h"
#include "failure.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct job_waiter {
        const ctl_job_wait *w;
        pthread_mutex_t lock;
        char name[CTL_JOB_NAME_MAX + 1]; /* the job's, once started */
} job_waiter;

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

/* SaveJob of the started job into w->save, replacing it. */
static void waiter_save(job_waiter *jw, const char *name, int sig) {
        const ctl_job_wait *w = jw->w;
        cudackpt_client *client = NULL;
        cudackpt_reply reply;
        char *params = ctl_job_save_params(name, w->save, false, true);
        int r;

        cudackpt_reply_init(&reply);
        fprintf(stderr, "%s%s: saving job %s into %s\n", w->prefix, strsignal(sig), name, w->save);
        if (!params || ctl_connect_daemon(w->prefix, w->socket, &client) != 0) {
                free(params);
                return;
        }
        r = cudackpt_call(client, CUDACKPT_METHOD_SAVE_JOB, params, &reply);
        if (r < 0 || reply.error) {
                (void) ctl_call_failed(w->prefix, r, &reply, false);
                fprintf(stderr, "%sjob %s was not saved and runs on\n", w->prefix, name);
        }
        cudackpt_reply_clear(&reply);
        cudackpt_client_free(client);
        free(params);
}

static void *waiter_signals(void *data) {
        job_waiter *jw = data;
        char name[CTL_JOB_NAME_MAX + 1];
        sigset_t set;
        int sig;

        ctl_job_wait_signals(&set);
        for (;;) {
                if (sigwait(&set, &sig) != 0)
                        continue;
                pthread_mutex_lock(&jw->lock);
                memcpy(name, jw->name, sizeof(name));
                pthread_mutex_unlock(&jw->lock);
                if (jw->w->save && name[0] && sigismember(&jw->w->save_on, sig)) {
                        waiter_save(jw, name, sig);
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

int ctl_job_wait_run(const ctl_job_wait *w, ctl_job_event *ret_last, cudackpt_reply *ret_reply) {
        job_waiter jw = { .w = w, .lock = PTHREAD_MUTEX_INITIALIZER };
        cudackpt_client *client = NULL;
        pthread_t thread;
        sigset_t set, old;
        int r;

        r = ctl_connect_daemon(w->prefix, w->socket, &client);
        if (r != 0)
                return r;
        ctl_job_wait_signals(&set);
        pthread_sigmask(SIG_BLOCK, &set, &old);
        r = pthread_create(&thread, NULL, waiter_signals, &jw);
        if (r != 0) {
                pthread_sigmask(SIG_SETMASK, &old, NULL);
                cudackpt_client_free(client);
                return -r;
        }
        pthread_detach(thread);
        r = cudackpt_call_more(client, w->method, w->params, waiter_event_cb, &jw, ret_reply);
        if (r == 0 && !ret_reply->error) {
                if (ctl_job_event_parse(ret_reply->parameters_json, ret_last) < 0)
                        r = -EBADMSG;
                else
                        waiter_say(&jw, ret_last, ret_reply->parameters_json);
        }
        /* The signal thread stays (it may be saving): the process ends
         * with it when the command returns. */
        cudackpt_client_free(client);
        return r;
}
