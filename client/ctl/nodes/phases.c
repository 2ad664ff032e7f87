/* phases.c: the coordinator of a job's phases across its nodes (phases.h).
 *
 * One srun step runs the node's part on every node; no phase starts before
 * every node said hello.  Each phase is one line to all and one answer from
 * each; the next starts only when every node answered ok (the barrier).
 * A node failing a phase: every node gets "rollback" (each undoes its own
 * part).  The step ending (a node unreachable, a part killed, srun gone):
 * every node's part has ended, and each node's daemon undoes that node's
 * part through the on-close lease of the part's connection.  The
 * coordinator killed: the same, as its end of the link closes. */
#include "phases.h"

#include "args.h"
#include "describe.h"
#include "exitcode.h"
#include "json.h"
#include "link.h"
#include "monotime.h"
#include "slurm.h"

#include <cudackpt/protocol.h>

#include <cJSON.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How long closing the link waits for the nodes' parts to end. */
#define PHASES_CLOSE_TIMEOUT_MS 10000

typedef struct phases_node {
        char name[65];
        int n;                  /* its CUDA processes of the job */
        int by_environment;     /* ... found by each rule, -1 not said */
        int by_descent;
        bool answered, ok;
        char error[48], what[161];
} phases_node;

typedef struct phases {
        const ctl_phases_op *o;
        nodes_link *link;
        phases_node *v;
        unsigned n, said;       /* the job's nodes; those that said hello */
        bool gone;              /* the step ended, or the link broke */
        bool timed_out;         /* ... as a node did not answer in time */
        const char *phase;      /* the phase waited for ("hello" first) */
        int failed;             /* the first node that failed, -1 none */
        char failed_phase[16];
        bool rolled_back;       /* every node answered its rollback ok */
} phases;

static int phases_find(phases *p, const char *name) {
        for (unsigned i = 0; i < p->said; i++)
                if (strcmp(p->v[i].name, name) == 0)
                        return (int)i;
        return -1;
}

static void phases_copy(char *dst, size_t size, const char *src) {
        snprintf(dst, size, "%s", src ? src : "");
        ctl_sanitize(dst);
}

/* The next line: 0 with *ret_json, -1 the step ended or broke or timed out
 * (p->gone). */
static int phases_recv(phases *p, long long deadline, cJSON **ret_json) {
        for (;;) {
                nodes_msg m;
                long long left = deadline - monotime_ms();
                int r = nodes_link_recv(p->link, left > 0 ? (left > INT_MAX ? INT_MAX : (int)left) : 0, &m);

                if (r < 0 || m.ended) {
                        p->gone = true;
                        /* The step is then ended by the close, which
                         * waits for the late node's part (a driver call
                         * cannot be cancelled): the others' leases undo
                         * their part at once. */
                        p->timed_out = r == -ETIMEDOUT;
                        return -1;
                }
                *ret_json = m.json;
                return 0;
        }
}

/* How many of a node's members each rule found (nodepart.c), from its
 * hello; -1 where it says none (an older node part). */
static void phases_found_by(phases_node *v, const cJSON *by) {
        long long e, d;

        v->by_environment = v->by_descent = -1;
        if (json_get_integer(by, "environment", 0, INT_MAX, &e) && json_get_integer(by, "descent", 0, INT_MAX, &d)) {
                v->by_environment = (int)e;
                v->by_descent = (int)d;
        }
}

/* Every node's hello. */
static int phases_hello(phases *p) {
        long long deadline = monotime_ms() + PHASES_HELLO_TIMEOUT_MS;
        cJSON *j;

        while (p->said < p->n) {
                long long hello, n = 0;
                const char *node;

                if (phases_recv(p, deadline, &j) < 0)
                        return -1;
                node = json_get_string(j, "node");
                if (json_get_integer(j, "hello", 0, 1, &hello) && phases_find(p, node) < 0) {
                        phases_node *v = &p->v[p->said++];
                        phases_copy(v->name, sizeof(v->name), node);
                        (void)json_get_integer(j, "n", 0, INT_MAX, &n);
                        v->n = (int)n;
                        phases_found_by(v, cJSON_GetObjectItemCaseSensitive(j, "found_by"));
                        if (!hello) {
                                phases_copy(v->error, sizeof(v->error), json_get_string(j, "error"));
                                phases_copy(v->what, sizeof(v->what), json_get_string(j, "what"));
                                p->failed = (int)(v - p->v);
                                snprintf(p->failed_phase, sizeof(p->failed_phase), "hello");
                        }
                }
                cJSON_Delete(j);
        }
        return p->failed >= 0 ? -1 : 0;
}

static void phases_progress(const phases *p, const phases_node *v, const char *phase, double ms) {
        if (!p->o->progress)
                return;
        if (v->ok)
                fprintf(stderr, "%s: %s ok (%.1f ms)\n", v->name, phase, ms);
        else
                fprintf(stderr, "%s: %s failed: %s\n", v->name, phase, v->what[0] ? v->what : v->error);
}

/* One phase on every node: 0 all ok, -1 one failed (p->failed) or the
 * step ended (p->gone). */
static int phases_step(phases *p, const char *phase, int timeout_ms) {
        long long deadline = monotime_ms() + timeout_ms;
        unsigned answered = 0;
        int bad = -1;
        char line[64];
        cJSON *j;

        p->phase = phase;
        for (unsigned i = 0; i < p->n; i++)
                p->v[i].answered = false;
        snprintf(line, sizeof(line), "{\"phase\":\"%s\"}", phase);
        if (nodes_link_send(p->link, line, timeout_ms) < 0) {
                p->gone = true;
                return -1;
        }
        while (answered < p->n) {
                if (phases_recv(p, deadline, &j) < 0)
                        return -1;
                const char *said = json_get_string(j, "phase");
                int i = phases_find(p, json_get_string(j, "node"));
                long long ok;
                double ms = -1;

                if (i >= 0 && !p->v[i].answered && said && strcmp(said, phase) == 0 &&
                    json_get_integer(j, "ok", 0, 1, &ok)) {
                        phases_node *v = &p->v[i];
                        const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "ms");
                        v->answered = true;
                        v->ok = ok;
                        answered++;
                        if (cJSON_IsNumber(t))
                                ms = t->valuedouble;
                        if (!ok) {
                                phases_copy(v->error, sizeof(v->error), json_get_string(j, "error"));
                                phases_copy(v->what, sizeof(v->what), json_get_string(j, "what"));
                                if (bad < 0)
                                        bad = i;
                        }
                        phases_progress(p, v, phase, ms);
                }
                cJSON_Delete(j);
        }
        if (bad >= 0 && p->failed < 0) {
                p->failed = bad;
                snprintf(p->failed_phase, sizeof(p->failed_phase), "%s", phase);
        }
        return bad >= 0 ? -1 : 0;
}

/* The verb's phases, in order; NULL-terminated. */
static const char *const *phases_plan(const char *verb) {
        static const char *const lock[] = { "lock", NULL }, *const suspend[] = { "lock", "checkpoint", NULL },
                                 *const resume[] = { "restore", "unlock", NULL }, *const unlock[] = { "unlock", NULL };

        return strcmp(verb, "lock") == 0 ? lock : strcmp(verb, "suspend") == 0 ? suspend
                                              : strcmp(verb, "resume") == 0  ? resume
                                                                             : unlock;
}

static const char *phases_state(const char *verb) {
        return strcmp(verb, "lock") == 0 ? "locked" : strcmp(verb, "suspend") == 0 ? "checkpointed" : "running";
}

/* The step's command: srun into the job, running this program's node part. */
static int phases_start(phases *p) {
        char self[PATH_MAX], lt[32], uid[16], **argv = NULL, **env = NULL;
        unsigned owner;
        ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
        int r;

        if (k <= 0)
                return -errno;
        self[k] = '\0';
        if ((r = nodes_slurm_job_nodes(p->o->job, &p->n, &owner)) < 0)
                return r;
        snprintf(lt, sizeof(lt), "%lld", p->o->lock_timeout);
        snprintf(uid, sizeof(uid), "%u", owner);
        /* The job's owner: each node's part takes only that user's
         * processes (a caller who lists others', root, must not take
         * another user's process that forged the job's marks). */
        char *node_argv[] = { self, "node-part", (char *)p->o->verb, uid, p->o->lock_timeout >= 0 ? lt : NULL, NULL };
        if (!(p->v = calloc(p->n, sizeof(*p->v))))
                return -ENOMEM;
        if ((r = nodes_slurm_step_argv(p->o->job, p->n, owner, node_argv, &argv)) == 0 &&
            (r = nodes_slurm_step_env(owner, &env)) == 0) {
                char *const *commands[] = { argv };
                r = nodes_link_start(commands, 1, env, &p->link);
        }
        nodes_slurm_argv_free(argv);
        free(env);
        return r;
}

static void phases_json(const phases *p, int processes, double ms) {
        cJSON *o = cJSON_CreateObject(), *nodes = cJSON_AddArrayToObject(o, "nodes");
        char *text;

        cJSON_AddStringToObject(o, "job", p->o->job);
        cJSON_AddStringToObject(o, "method", p->o->verb);
        cJSON_AddBoolToObject(o, "ok", p->failed < 0 && !p->gone);
        cJSON_AddNumberToObject(o, "processes", processes);
        cJSON_AddNumberToObject(o, "duration_ms", ms);
        if (p->failed >= 0 || p->gone) {
                cJSON_AddStringToObject(o, "failed_phase", p->failed_phase[0] ? p->failed_phase
                                                           : p->timed_out          ? p->phase
                                                                                   : "link");
                if (p->timed_out)
                        cJSON_AddTrueToObject(o, "timed_out");
                cJSON_AddStringToObject(o, "rollback", p->gone ? "leases" : p->rolled_back ? "done" : "failed");
        }
        for (unsigned i = 0; i < p->said; i++) {
                cJSON *n = cJSON_CreateObject();
                cJSON_AddItemToArray(nodes, n);
                cJSON_AddStringToObject(n, "node", p->v[i].name);
                cJSON_AddNumberToObject(n, "processes", p->v[i].n);
                if (p->v[i].by_environment >= 0) {
                        cJSON *by = cJSON_AddObjectToObject(n, "found_by");
                        cJSON_AddNumberToObject(by, "environment", p->v[i].by_environment);
                        cJSON_AddNumberToObject(by, "descent", p->v[i].by_descent);
                }
                if (p->v[i].error[0]) {
                        cJSON_AddStringToObject(n, "error", p->v[i].error);
                        cJSON_AddStringToObject(n, "what", p->v[i].what);
                }
        }
        text = cJSON_PrintUnformatted(o);
        if (text)
                puts(text);
        free(text);
        cJSON_Delete(o);
}

/* The one summary, and the exit status. */
static int phases_report(const phases *p, double ms) {
        int processes = 0, status = CUDACKPT_EXIT_OK;
        char name[96];

        for (unsigned i = 0; i < p->said; i++)
                processes += p->v[i].n;
        if (p->failed >= 0) {
                const phases_node *v = &p->v[p->failed];
                snprintf(name, sizeof(name), "io.cudackpt.Process.%s", v->error);
                status = ctl_error_exit_code(name);
                fprintf(stderr, "%s%s failed at %s: %s; %s\n", p->o->prefix, v->name, p->failed_phase,
                        v->what[0] ? v->what : v->error,
                        p->gone ? "the step ended: each node's daemon undoes its part (its lease)"
                        : strcmp(p->failed_phase, "commit") == 0 ? "that node's lease undoes its part as the step ends"
                        : p->rolled_back ? "every node rolled back"
                                         : "rollback failed on a node (see above)");
        } else if (p->gone && p->said == 0) {
                status = CUDACKPT_EXIT_UNREACHABLE;
                fprintf(stderr, "%sno node's part started (srun's error above): nothing was done\n", p->o->prefix);
        } else if (p->timed_out) {
                status = CUDACKPT_EXIT_TIMEOUT;
                fprintf(stderr, "%snot every node answered %s in time (%u of %u said hello); the step is ended: "
                        "each node's daemon undoes its part (its lease)\n", p->o->prefix, p->phase, p->said, p->n);
        } else if (p->gone) {
                status = CUDACKPT_EXIT_UNREACHABLE;
                fprintf(stderr, "%sthe step on the job's nodes ended (%u of %u said hello); "
                        "each node's daemon undoes its part (its lease)\n", p->o->prefix, p->said, p->n);
        }
        if (p->o->json)
                phases_json(p, processes, ms);
        else if (status == CUDACKPT_EXIT_OK)
                printf("job %s: %u node%s, %d process%s %s (%.1f ms)\n", p->o->job, p->n, p->n == 1 ? "" : "s",
                       processes, processes == 1 ? "" : "es", phases_state(p->o->verb), ms);
        return status;
}

/* Every node's rollback, each undoing its own part. */
static void phases_rollback(phases *p, int timeout_ms) {
        phases_node *keep = NULL;

        if (p->gone)
                return;
        /* The failure reported is the first; the rollback's answers go to
         * a copy. */
        if (p->failed >= 0 && (keep = malloc(sizeof(*keep))))
                *keep = p->v[p->failed];
        p->rolled_back = phases_step(p, "rollback", timeout_ms) == 0;
        if (keep)
                p->v[p->failed] = *keep;
        free(keep);
}

#define phases_usage(...) \
        (ctl_usage_fail(CUDACKPT_EXIT_USAGE, "cudackptctl", "\nTry 'cudackptctl --help' for more information.\n", \
                        __VA_ARGS__), true)

bool ctl_phases_usage(const char *job, const char *verb, bool selector, bool lease_map) {
        if (!nodes_slurm_job_valid(job))
                return phases_usage("invalid --slurm-job '%s': expected a job id (J or J_T)", job);
        if (strcmp(verb, "lock") != 0 && strcmp(verb, "unlock") != 0 && strcmp(verb, "suspend") != 0 &&
            strcmp(verb, "resume") != 0)
                return phases_usage("--slurm-job is for lock, unlock, suspend and resume, not %s", verb);
        if (selector)
                return phases_usage("%s takes --slurm-job or a selector, not both", verb);
        if (lease_map)
                return phases_usage("--slurm-job takes no --lease-ms, --hold, --map or --force "
                                    "(each node's part holds a lease of its own)");
        return false;
}

int ctl_phases_run(const ctl_phases_op *o) {
        phases p = { .o = o, .failed = -1, .phase = "hello" };
        int timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : PHASES_PHASE_TIMEOUT_MS, r, status;
        long long t0 = monotime_ms();
        const char *const *plan = phases_plan(o->verb);

        if ((r = phases_start(&p)) < 0) {
                fprintf(stderr, "%s%s\n", o->prefix,
                        r == -ESRCH    ? "no running job of that id (squeue)"
                        : r == -ENOENT ? "srun, squeue or setpriv not found (set $" NODES_SLURM_SRUN_ENV ")"
                        : r == -EPERM  ? "the job's owner is no user here (getpwuid)"
                                       : strerror(-r));
                free(p.v);
                return r == -ESRCH ? CUDACKPT_EXIT_NO_SUCH_PROCESS : CUDACKPT_EXIT_FAILURE;
        }
        if (phases_hello(&p) == 0) {
                r = 0;
                for (size_t i = 0; plan[i] && r == 0; i++)
                        r = phases_step(&p, plan[i], timeout_ms);
                if (r == 0)
                        r = phases_step(&p, "commit", timeout_ms);
                else
                        phases_rollback(&p, timeout_ms);
        }
        nodes_link_close(p.link, PHASES_CLOSE_TIMEOUT_MS);
        status = phases_report(&p, (double)(monotime_ms() - t0));
        free(p.v);
        return status;
}
