/* jobpart.c: a node's part of a job saved across nodes (jobpart.h).
 *
 * The main thread reads the coordinator's lines and answers the short
 * calls (ListSaves, PassBarrier, RemoveSave), each on a connection of its
 * own.  The calls that last run on threads of their own, each on its own
 * connection: the job's (StartJob, or RestoreJob held at its barrier),
 * which lasts as long as the job, and a save's (SaveJob held at its
 * barrier).  Their events go to the coordinator as they come; one lock
 * keeps the lines whole. */
#include "jobpart.h"

#include "args.h"
#include "describe.h"
#include "jobcall.h"
#include "jobset.h"
#include "nodepart.h"
#include "json.h"

#include <cudackpt/client.h>
#include <cudackpt/protocol.h>

#include <cJSON.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

typedef struct jobpart {
        const char *save, *name, *output, *socket;
        char **argv;
        char node[65];
        uint32_t hash;
        char job[CTL_JOB_NAME_MAX + 1];   /* the node's job, as its daemon names it */
        atomic_bool job_call;             /* the job's call runs */
        atomic_int save_state;            /* JOBPART_SAVE_* */
        uint32_t others[JOBPART_MAX_OTHERS]; /* other nodes' hashes seen with parts of S */
        unsigned n_others;
} jobpart;

/* A save's part: none in flight, dumping, held at its barrier (said
 * ready), or aborted before it got there (rolled back as it gets there). */
enum { JOBPART_SAVE_NONE, JOBPART_SAVE_DUMPING, JOBPART_SAVE_READY, JOBPART_SAVE_ABORTED };

/* A thread's call: what it asks, and what it says. */
typedef struct jobpart_call {
        jobpart *p;
        const char *method;
        char *params;
        bool save;                        /* SaveJob: says "saved"; else the job's call */
} jobpart_call;

static pthread_mutex_t jobpart_out = PTHREAD_MUTEX_INITIALIZER;

/* One line to the coordinator, with the node's name; takes o. */
static void jobpart_say(const jobpart *p, cJSON *o) {
        char *text;

        if (!o)
                return;
        cJSON_AddStringToObject(o, "node", p->node);
        text = cJSON_PrintUnformatted(o);
        pthread_mutex_lock(&jobpart_out);
        if (text && (fputs(text, stdout) < 0 || fputc('\n', stdout) < 0 || fflush(stdout) != 0))
                _exit(0); /* the coordinator is gone */
        pthread_mutex_unlock(&jobpart_out);
        free(text);
        cJSON_Delete(o);
}

static void jobpart_event(const jobpart *p, const char *event) {
        cJSON *o = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "event", event);
        jobpart_say(p, o);
}

/* A call that failed: {"event": "failed", "of": of, "error", "what"}. */
static void jobpart_failed(const jobpart *p, const char *of, int r, const cudackpt_reply *reply) {
        cJSON *o = cJSON_CreateObject();
        char *what = r == 0 && reply && reply->error ? ctl_describe_error(reply) : NULL;

        cJSON_AddStringToObject(o, "event", "failed");
        cJSON_AddStringToObject(o, "of", of);
        cJSON_AddStringToObject(o, "error", r == 0 && reply && reply->error ? reply->error : "CallFailed");
        /* srun may pass a long line on in pieces: short ones. */
        if (what && strlen(what) > JOBPART_MAX_WHAT)
                what[JOBPART_MAX_WHAT] = '\0';
        if (what)
                ctl_sanitize(what);
        cJSON_AddStringToObject(o, "what", what ? what : ctl_describe_call_failure(r));
        free(what);
        jobpart_say(p, o);
}

/* One short call on a connection of its own: 0 with *reply (to clear), or
 * the failure (said, as of). */
static int jobpart_call_once(const jobpart *p, const char *of, const char *method, char *params,
                             cudackpt_reply *reply) {
        cudackpt_client *c = NULL;
        int r = params ? cudackpt_client_connect(p->socket, &c) : -ENOMEM;

        cudackpt_reply_init(reply);
        if (r == 0)
                r = cudackpt_call(c, method, params, reply);
        cudackpt_client_free(c);
        free(params);
        if (r < 0 || reply->error) {
                jobpart_failed(p, of, r, reply);
                cudackpt_reply_clear(reply);
                return r < 0 ? r : -EIO;
        }
        return 0;
}

/* A part save of S of another node (a shared saves directory): its
 * node's hash, noted once. */
static void jobpart_other(jobpart *p, uint32_t hash) {
        for (unsigned i = 0; i < p->n_others; i++)
                if (p->others[i] == hash)
                        return;
        if (p->n_others < JOBPART_MAX_OTHERS)
                p->others[p->n_others++] = hash;
}

/* The node's part saves of S, each given to fn with its generation (the
 * other nodes' noted in p->others). */
static int jobpart_saves(jobpart *p, void (*fn)(jobpart *, const cJSON *, uint32_t, void *),
                         void *ctx) {
        cudackpt_reply reply;
        const cJSON *s;
        cJSON *o;
        uint32_t gen, hash;
        int r = jobpart_call_once(p, "ListSaves", CUDACKPT_METHOD_LIST_SAVES, strdup("{}"), &reply);

        if (r < 0)
                return r;
        o = cJSON_Parse(reply.parameters_json);
        cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(o, "saves")) {
                const char *name = json_get_string(s, "save");

                if (!name || !jobset_part_parse_any(name, p->save, &gen, &hash))
                        continue;
                if (hash == p->hash)
                        fn(p, s, gen, ctx);
                else
                        jobpart_other(p, hash);
        }
        cJSON_Delete(o);
        cudackpt_reply_clear(&reply);
        return 0;
}

static void jobpart_add_gen(jobpart *p, const cJSON *s, uint32_t gen, void *ctx) {
        (void)p;
        (void)s;
        json_add_to_array(ctx, cJSON_CreateNumber(gen));
}

static void jobpart_hello(jobpart *p) {
        cJSON *o = cJSON_CreateObject(), *gens = cJSON_AddArrayToObject(o, "gens");

        if (jobpart_saves(p, jobpart_add_gen, gens) < 0) {
                cJSON_Delete(o);
                return; /* said as failed: the coordinator counts no hello */
        }
        cJSON *others = cJSON_AddArrayToObject(o, "others");
        for (unsigned i = 0; i < p->n_others; i++)
                json_add_to_array(others, cJSON_CreateNumber(p->others[i]));
        cJSON_AddNumberToObject(o, "hello", 1);
        jobpart_say(p, o);
}

/* A "continues" reply of a held or a job's call. */
static int jobpart_progress(void *ctx, const char *parameters_json) {
        jobpart_call *c = ctx;
        cJSON *o = cJSON_Parse(parameters_json), *say;
        const char *barrier = json_get_string(o, "barrier");
        ctl_job_event ev;

        if (barrier && strcmp(barrier, "ready") == 0) {
                int dumping = JOBPART_SAVE_DUMPING;

                /* An abort that came while it dumped: the call's connection
                 * closes here, and the daemon rolls the part back. */
                if (c->save && !atomic_compare_exchange_strong(&c->p->save_state, &dumping, JOBPART_SAVE_READY)) {
                        cJSON_Delete(o);
                        return -ECANCELED;
                }
                jobpart_event(c->p, "ready");
        }
        else if (ctl_job_event_parse(parameters_json, &ev) == 0 && strcmp(ev.event, "started") == 0) {
                say = cJSON_CreateObject();
                cJSON_AddStringToObject(say, "event", "started");
                cJSON_AddNumberToObject(say, "pid", ev.pid);
                jobpart_say(c->p, say);
        }
        cJSON_Delete(o);
        return 0;
}

/* The last reply of a job's call: "ended" with its status, or "saved"
 * (the save's own call says that). */
static void jobpart_job_end(const jobpart *p, const cudackpt_reply *reply) {
        ctl_job_event ev;
        cJSON *o;

        if (ctl_job_event_parse(reply->parameters_json, &ev) < 0 ||
            (strcmp(ev.event, "ended") != 0 && strcmp(ev.event, "saved") != 0))
                return;
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "event", "ended");
        cJSON_AddNumberToObject(o, "status", ev.exit_status);
        /* Saved: by the coordinator's save (its own "saved" says so), or
         * by another SaveJob of the user's: the job is gone either way. */
        if (strcmp(ev.event, "saved") == 0)
                cJSON_AddStringToObject(o, "saved", ev.save);
        jobpart_say(p, o);
}

static void *jobpart_thread(void *data) {
        jobpart_call *c = data;
        cudackpt_client *client = NULL;
        cudackpt_reply reply;
        int r = cudackpt_client_connect(c->p->socket, &client);

        cudackpt_reply_init(&reply);
        if (r == 0)
                r = cudackpt_call_more(client, c->method, c->params, jobpart_progress, c, &reply);
        /* Before its end is said: the coordinator may send the next save
         * as soon as it reads it. */
        if (c->save)
                atomic_store(&c->p->save_state, JOBPART_SAVE_NONE);
        if (r < 0 || reply.error)
                jobpart_failed(c->p, c->save ? "SaveJob" : c->method + sizeof("io.cudackpt.Process.") - 1, r,
                               &reply);
        else if (c->save)
                jobpart_event(c->p, "saved");
        else
                jobpart_job_end(c->p, &reply);
        cudackpt_reply_clear(&reply);
        /* The job's connection closes here once its call ended: the job
         * ended or was saved. */
        cudackpt_client_free(client);
        if (!c->save)
                atomic_store(&c->p->job_call, false);
        free(c->params);
        free(c);
        return NULL;
}

/* Runs method with params (taken) on a thread of its own. */
static void jobpart_spawn(jobpart *p, const char *method, char *params, bool save) {
        jobpart_call *c = calloc(1, sizeof(*c));
        pthread_t t;

        if (!c || !params) {
                free(c);
                free(params);
                jobpart_failed(p, save ? "SaveJob" : "Job", -ENOMEM, NULL);
                return;
        }
        *c = (jobpart_call){ .p = p, .method = method, .params = params, .save = save };
        if (!save)
                atomic_store(&p->job_call, true);
        else
                atomic_store(&p->save_state, JOBPART_SAVE_DUMPING);
        if (pthread_create(&t, NULL, jobpart_thread, c) != 0) {
                if (!save)
                        atomic_store(&p->job_call, false);
                else
                        atomic_store(&p->save_state, JOBPART_SAVE_NONE);
                free(params);
                free(c);
                jobpart_failed(p, save ? "SaveJob" : "Job", -EAGAIN, NULL);
                return;
        }
        pthread_detach(t);
}

/* {"save": part, "barrier": true} and SaveJob's {"name", "save", "barrier"}. */
static char *jobpart_held_params(const char *job, const char *part) {
        cJSON *o = cJSON_CreateObject();
        char *text = NULL;

        if (o && (!job || cJSON_AddStringToObject(o, "name", job)) && cJSON_AddStringToObject(o, "save", part) &&
            cJSON_AddBoolToObject(o, "barrier", 1))
                text = json_print_dup(o);
        cJSON_Delete(o);
        return text;
}

static void jobpart_start(jobpart *p) {
        char cwd[PATH_MAX];

        snprintf(p->job, sizeof(p->job), "%s", p->name);
        if (!getcwd(cwd, sizeof(cwd))) {
                jobpart_failed(p, "StartJob", -errno, NULL);
                return;
        }
        jobpart_spawn(p, CUDACKPT_METHOD_START_JOB,
                      ctl_job_start_params(p->name, p->argv, environ, cwd, p->output), false);
}

typedef struct jobpart_find {
        uint32_t gen;
        bool found;
} jobpart_find;

/* The job that the part save of generation gen holds: its name. */
static void jobpart_find_job(jobpart *p, const cJSON *s, uint32_t gen, void *ctx) {
        jobpart_find *f = ctx;
        const char *job = json_get_string(s, "job");

        if (gen == f->gen && job && ctl_job_name_valid(job)) {
                snprintf(p->job, sizeof(p->job), "%s", job);
                f->found = true;
        }
}

static void jobpart_restore(jobpart *p, uint32_t gen) {
        jobpart_find f = { .gen = gen };
        char part[CTL_JOB_NAME_MAX + 1];

        if (jobset_part_name(p->save, gen, p->hash, part, sizeof(part)) < 0 ||
            jobpart_saves(p, jobpart_find_job, &f) < 0)
                return;
        if (!f.found) {
                cJSON *o = cJSON_CreateObject();

                cJSON_AddStringToObject(o, "event", "failed");
                cJSON_AddStringToObject(o, "of", "RestoreJob");
                cJSON_AddStringToObject(o, "error", CUDACKPT_ERROR_NO_SUCH_SAVE);
                cJSON_AddStringToObject(o, "what", "the node's part save of that set is gone");
                jobpart_say(p, o);
                return;
        }
        jobpart_spawn(p, CUDACKPT_METHOD_RESTORE_JOB, jobpart_held_params(NULL, part), false);
}

static void jobpart_save(jobpart *p, uint32_t gen) {
        char part[CTL_JOB_NAME_MAX + 1];

        if (jobset_part_name(p->save, gen, p->hash, part, sizeof(part)) < 0 ||
            atomic_load(&p->save_state) != JOBPART_SAVE_NONE) {
                jobpart_failed(p, "SaveJob", -EBUSY, NULL);
                return;
        }
        jobpart_spawn(p, CUDACKPT_METHOD_SAVE_JOB, jobpart_held_params(p->job, part), true);
}

/* PassBarrier: the part held at its barrier goes on (go) or rolls back.
 * The held call's thread says how it ended. */
static void jobpart_pass(jobpart *p, bool go) {
        cJSON *o = cJSON_CreateObject();
        cudackpt_reply reply;
        char *params = NULL;
        int dumping = JOBPART_SAVE_DUMPING;

        /* A save not yet at its barrier rolls back as it gets there; one
         * that already failed holds nothing. */
        if (!go && (atomic_compare_exchange_strong(&p->save_state, &dumping, JOBPART_SAVE_ABORTED) ||
                    dumping == JOBPART_SAVE_NONE)) {
                cJSON_Delete(o);
                return;
        }
        if (o && cJSON_AddStringToObject(o, "job", p->job) && cJSON_AddBoolToObject(o, "go", go))
                params = json_print_dup(o);
        cJSON_Delete(o);
        if (jobpart_call_once(p, "PassBarrier", CUDACKPT_METHOD_PASS_BARRIER, params, &reply) == 0)
                cudackpt_reply_clear(&reply);
}

static void jobpart_remove(jobpart *p, const cJSON *s, uint32_t gen, void *ctx) {
        const uint32_t *keep = ctx;
        cudackpt_reply reply;

        if (gen != *keep && jobpart_call_once(p, "RemoveSave", CUDACKPT_METHOD_REMOVE_SAVE,
                                              ctl_job_save_param(json_get_string(s, "save")), &reply) == 0)
                cudackpt_reply_clear(&reply);
}

/* forget: every part save of S but generation keep (0: all), once the
 * job's call ended (a save restored holds its job's until then). */
static void jobpart_forget(jobpart *p, uint32_t keep) {
        for (int i = 0; i < JOBPART_FORGET_WAIT_MS / 10 && atomic_load(&p->job_call); i++)
                usleep(10000);
        if (jobpart_saves(p, jobpart_remove, &keep) == 0)
                jobpart_event(p, "forgot");
}

/* One line of the coordinator's. */
static void jobpart_line(jobpart *p, const char *line) {
        cJSON *o = cJSON_Parse(line);
        const char *what = json_get_string(o, "do");
        long long gen = 0;

        if (!what) {
                cJSON_Delete(o);
                return;
        }
        (void)json_get_integer(o, "gen", 1, JOBSET_GEN_MAX, &gen);
        if (strcmp(what, "start") == 0)
                jobpart_start(p);
        else if (strcmp(what, "restore") == 0 && gen > 0)
                jobpart_restore(p, (uint32_t)gen);
        else if (strcmp(what, "save") == 0 && gen > 0)
                jobpart_save(p, (uint32_t)gen);
        else if (strcmp(what, "go") == 0 || strcmp(what, "abort") == 0)
                jobpart_pass(p, strcmp(what, "go") == 0);
        else if (strcmp(what, "forget") == 0 && json_get_integer(o, "keep", 0, JOBSET_GEN_MAX, &gen))
                jobpart_forget(p, (uint32_t)gen);
        cJSON_Delete(o);
}

static int jobpart_args(int argc, char **argv, jobpart *p) {
        int i = 2;

        for (; i < argc && strcmp(argv[i], "--") != 0; i++)
                if (strncmp(argv[i], "--save=", 7) == 0)
                        p->save = argv[i] + 7;
                else if (strncmp(argv[i], "--name=", 7) == 0)
                        p->name = argv[i] + 7;
                else if (strncmp(argv[i], "--output=", 9) == 0)
                        p->output = argv[i] + 9;
                else
                        break;
        if (i >= argc || strcmp(argv[i], "--") != 0 || !argv[i + 1] || !p->save || !p->name ||
            strlen(p->save) > JOBSET_SAVE_MAX || !ctl_job_name_valid(p->save) || !ctl_job_name_valid(p->name)) {
                fputs("usage: cudackptctl job-part --save=S --name=N [--output=PATH] -- COMMAND...\n"
                      "(run by job start --slurm's step on each node of a job, not by people)\n", stderr);
                return -EINVAL;
        }
        p->argv = argv + i + 1;
        return 0;
}

int ctl_jobpart_main(int argc, char **argv) {
        static const int ignored[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE };
        jobpart p = { 0 };
        char line[JOBPART_MAX_LINE];

        if (jobpart_args(argc, argv, &p) < 0)
                return 2;
        /* Slurm signals every task of every step of the job (a requeue's
         * SIGTERM): the coordinator decides, and this part ends only with
         * its input. */
        for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
                signal(ignored[i], SIG_IGN);
        p.socket = ctl_socket_path(NULL);
        ctl_nodepart_node_name(p.node, sizeof(p.node));
        p.hash = jobset_node_hash(p.node);
        jobpart_hello(&p);
        setvbuf(stdin, NULL, _IONBF, 0);
        while (fgets(line, sizeof(line), stdin))
                jobpart_line(&p, line);
        /* The coordinator is done, or gone: every connection closes with
         * this process, and the daemon stops the node's job or rolls its
         * held part back. */
        pthread_mutex_lock(&jobpart_out);
        fflush(stdout);
        _exit(0);
}
