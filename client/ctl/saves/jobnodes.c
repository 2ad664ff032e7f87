/* jobnodes.c: the coordinator of a job run on every node of a Slurm job
 * and saved whole (jobnodes.h).
 *
 * Every node's part says hello with the generations of the save it holds;
 * the newest generation that every node holds is restored, else the job
 * starts afresh (or, where some node holds a part of S but no generation
 * is whole, nothing starts).  A restore is held on every node at its
 * barrier, and let go only once every node is ready: anything else ends
 * the link, and every node's daemon rolls its part back as the part's
 * connection closes.  A save is the same: every node's SaveJob held, then
 * all let go, or all passed back (the job runs on).  The link ending ends
 * every node's part, and with it that node's job. */
#include "jobnodes.h"

#include "jobcoord.h"

#include "describe.h"
#include "exitcode.h"
#include "jobholds.h"
#include "jobset.h"
#include "jobwait.h"
#include "json.h"
#include "link.h"
#include "monotime.h"
#include "slurm.h"

#include <cJSON.h>

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* One node's hello: its name, what it holds of S. */
static void jn_hello_one(jobcoord *j, const char *node, const cJSON *m) {
        jobcoord_node *v = &j->v[j->known];

        if (jobcoord_find(j, node) >= 0) {
                jobcoord_fail(j, node, "DuplicateNode", "two nodes' parts say this name (set SLURMD_NODENAME)");
                return;
        }
        jobcoord_copy(v->name, sizeof(v->name), node);
        if (jobholds_add(&j->holds, node, m) < 0) {
                jobcoord_fail(j, node, "DuplicateNode", "its name hashes as another node's: their part saves' names "
                        "would be one");
                return;
        }
        j->known++;
}

/* Every node's hello, with the generations it holds. */
static int jn_hello(jobcoord *j) {
        long long deadline = monotime_ms() + JOBNODES_HELLO_TIMEOUT_MS;
        cJSON *m;
        int r;

        while (j->known < j->n) {
                if ((r = jobcoord_recv(j, deadline, &m)) != 0)
                        return r;
                const char *node = json_get_string(m, "node");
                long long hello = 0;

                if (json_get_integer(m, "hello", 1, 1, &hello))
                        jn_hello_one(j, node, m);
                else if (json_get_string(m, "event"))
                        jobcoord_fail(j, node, json_get_string(m, "error"), json_get_string(m, "what"));
                cJSON_Delete(m);
                if (j->failed)
                        return -EIO;
        }
        return 0;
}

/* The job running on every node: restored from the newest whole set, or
 * started.  0, or the exit status. */
static int jn_begin(jobcoord *j) {
        uint32_t whole = jobholds_whole(&j->holds), top = j->holds.top;
        char text[240];
        int r;

        if ((top || jobholds_strangers(&j->holds)) && !whole) {
                snprintf(text, sizeof(text), "no generation of save %s is whole on these %u nodes (parts of it are "
                         "on %s): nothing started; `cudackptctl job rm` its parts to start afresh", j->o->save, j->n,
                         top ? "some of them" : "other nodes");
                jobcoord_say(j, NULL, text);
                return CUDACKPT_EXIT_INCOMPLETE_SAVE;
        }
        if (whole < top) {
                snprintf(text, sizeof(text), "generation %u of save %s is not whole (a save that failed on a node): "
                         "generation %u is restored", (unsigned)top, j->o->save, (unsigned)whole);
                jobcoord_say(j, NULL, text);
        }
        if (!whole) {
                if ((r = jobcoord_send(j, "start", NULL, 0)) < 0 ||
                    (r = jobcoord_await(j, "started", j->o->timeout_ms, true)))
                        return jobcoord_failure(j, r, "start");
                snprintf(text, sizeof(text), "job %s started on %u nodes", j->o->name, j->n);
        } else {
                if ((r = jobcoord_send(j, "restore", "gen", whole)) < 0 ||
                    (r = jobcoord_await(j, "ready", j->o->timeout_ms, true)))
                        return jobcoord_failure(j, r, "restore");
                /* Every node's part restored and held: all go on. */
                if ((r = jobcoord_send(j, "go", NULL, 0)) < 0 ||
                    (r = jobcoord_await(j, "started", j->o->timeout_ms, true)))
                        return jobcoord_failure(j, r, "restore");
                snprintf(text, sizeof(text), "job restored from save %s generation %u on %u nodes", j->o->save,
                         (unsigned)whole, j->n);
        }
        jobcoord_say(j, NULL, text);
        return 0;
}

/* After an abort: every node's part of the save ended (failed, rolled
 * back), so that no part of it is still on its way to its barrier when
 * the next save starts.  0, or the link ended. */
static int jn_settle(jobcoord *j) {
        long long deadline = monotime_ms() + j->o->timeout_ms;
        bool open = true;
        cJSON *m;
        int r;

        while (open) {
                open = false;
                for (unsigned i = 0; i < j->n; i++)
                        open |= j->v[i].saving;
                if (!open)
                        break;
                r = jobcoord_recv(j, deadline, &m);
                if (r == 1) {
                        if (sigismember(&j->o->save_on, j->sig))
                                j->again = j->sig;
                        else
                                j->pending = j->sig;
                        continue;
                }
                if (r < 0)
                        return r;
                jobcoord_note(j, jobcoord_find(j, json_get_string(m, "node")), m);
                cJSON_Delete(m);
        }
        j->failed = false;
        return 0;
}

/* The save failed before the go: every part held rolls back, the job runs
 * on.  -EAGAIN, or 0 with *ret_status when the command must end. */
static int jn_save_abort(jobcoord *j, int r, int *ret_status) {
        (void)jobcoord_failure(j, r, "save");
        if (j->gone || jobcoord_send(j, "abort", NULL, 0) < 0 || jn_settle(j) < 0) {
                *ret_status = CUDACKPT_EXIT_UNREACHABLE;
                return 0;
        }
        jobcoord_say(j, NULL, "the job was not saved and runs on, on every node");
        return -EAGAIN;
}

/* A set saved whole restores only on these nodes: the job, requeued,
 * waits for them (else its next start could only refuse, 33).  quiet: a
 * failure is not said (SIGTERM's save: an scancel's job is no more). */
static void jn_pin(const jobcoord *j, bool quiet) {
        const char *job = getenv("SLURM_JOB_ID"), *nodes = getenv("SLURM_JOB_NODELIST");
        char text[300];
        int r = nodes_slurm_pin(job, nodes);

        if (r < 0 && quiet)
                return;
        if (r == 0)
                snprintf(text, sizeof(text), "Slurm job %s held to nodes %.120s for its next start, which restores "
                         "the save there (scontrol update JobId=%s ReqNodeList= frees it)", job, nodes, job);
        else
                snprintf(text, sizeof(text), "Slurm job %s not held to its nodes (scontrol update: %s): a start on "
                         "other nodes cannot restore the save", job ? job : "?",
                         r == -EPERM ? "refused" : strerror(-r));
        ctl_sanitize(text);
        jobcoord_say(j, NULL, text);
}

/* A save of a new generation: every node's part held, then all let go, or
 * all passed back.  0 with *ret_status (0: saved whole; else a set left
 * part saved, the job gone), or -EAGAIN: not saved, the job runs on. */
static int jn_save(jobcoord *j, int *ret_status) {
        uint32_t gen = j->holds.top + 1;
        long long t0 = monotime_ms();
        char text[240];
        int r, sig = j->sig;

        snprintf(text, sizeof(text), "%s: saving the job into %s generation %u on %u nodes", strsignal(sig),
                 j->o->save, (unsigned)gen, j->n);
        jobcoord_say(j, NULL, text);
        j->sig = 0;
        if (gen == 0) {
                jobcoord_say(j, NULL, "no generation left for a save (job rm its parts): the job runs on");
                return -EAGAIN;
        }
        for (unsigned i = 0; i < j->n; i++)
                j->v[i].saving = true;
        if ((r = jobcoord_send(j, "save", "gen", gen)) < 0 || (r = jobcoord_await(j, "ready", j->o->timeout_ms, false)))
                return jn_save_abort(j, r, ret_status);
        j->holds.top = gen;
        if ((r = jobcoord_send(j, "go", NULL, 0)) < 0 || (r = jobcoord_await(j, "saved", j->o->timeout_ms, false))) {
                *ret_status = jobcoord_failure(j, r, "save");
                snprintf(text, sizeof(text), "generation %u of %s is not whole: the next start restores the one "
                         "before it, if any", (unsigned)gen, j->o->save);
                jobcoord_say(j, NULL, text);
                return 0;
        }
        snprintf(text, sizeof(text), "job saved into %s generation %u on %u nodes (%lld ms)", j->o->save,
                 (unsigned)gen, j->n, monotime_ms() - t0);
        jobcoord_say(j, NULL, text);
        /* The older generations: a state the job has gone past. */
        if (jobcoord_send(j, "forget", "keep", gen) == 0)
                (void)jobcoord_await(j, "forgot", JOBCOORD_CLOSE_TIMEOUT_MS, false);
        if (sig == SIGTERM || (j->o->requeue && ctl_job_requeue_after(j->o->prefix, sig) == 0))
                jn_pin(j, sig == SIGTERM);
        *ret_status = CUDACKPT_EXIT_OK;
        return 0;
}

/* The job runs: until it ends on every node, fails on one, or is saved;
 * what ended while a phase waited counts as much as what ends now. */
static int jn_run(jobcoord *j) {
        int r, status;
        cJSON *m;

        while (!jobcoord_over(j, &status)) {
                r = jobcoord_recv(j, -1, &m);
                if (r == 1 && sigismember(&j->o->save_on, j->sig)) {
                        /* A save signal taken while a save rolled back
                         * (Slurm's TERM after USR1's): another save. */
                        do {
                                j->again = 0;
                                if (jn_save(j, &status) == 0)
                                        return status;
                                j->sig = j->again;
                        } while (j->sig && !j->pending);
                        if (!j->pending)
                                continue;
                        j->sig = j->pending;
                }
                if (r != 0)
                        return jobcoord_failure(j, r, "the job");
                jobcoord_note(j, jobcoord_find(j, json_get_string(m, "node")), m);
                cJSON_Delete(m);
                j->failed = false;
        }
        /* Done on every node: its saves hold a state it has gone past. */
        if (status == 0 && j->holds.top && jobcoord_send(j, "forget", "keep", 0) == 0 &&
            jobcoord_await(j, "forgot", JOBCOORD_CLOSE_TIMEOUT_MS, true) == 0)
                jobcoord_say(j, NULL, "the job ended on every node: its saves removed");
        return status;
}

/* The step: srun into this job, running this program's job-part. */
static int jn_start(jobcoord *j, const char *job) {
        char self[PATH_MAX], save[80], name[80], output[PATH_MAX + 16], **argv = NULL, **env = NULL, **node_argv;
        ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
        unsigned owner, n = 0, i = 0;
        int r;

        if (k <= 0)
                return -errno;
        self[k] = '\0';
        if ((r = nodes_slurm_job_nodes(job, &j->n, &owner)) < 0)
                return r;
        while (j->o->argv[n])
                n++;
        if (!(j->v = calloc(j->n, sizeof(*j->v))) || !(j->holds.v = calloc(j->n, sizeof(*j->holds.v))) ||
            !(node_argv = calloc(n + 7, sizeof(*node_argv))))
                return -ENOMEM;
        snprintf(save, sizeof(save), "--save=%s", j->o->save);
        snprintf(name, sizeof(name), "--name=%s", j->o->name);
        snprintf(output, sizeof(output), "--output=%s", j->o->output ? j->o->output : "");
        node_argv[i++] = self;
        node_argv[i++] = "job-part";
        node_argv[i++] = save;
        node_argv[i++] = name;
        if (j->o->output)
                node_argv[i++] = output;
        node_argv[i++] = "--";
        for (unsigned a = 0; a < n; a++)
                node_argv[i++] = j->o->argv[a];
        if ((r = nodes_slurm_step_argv(job, j->n, owner, node_argv, &argv)) == 0 &&
            (r = nodes_slurm_step_env(owner, &env)) == 0) {
                char *const *commands[] = { argv };
                r = nodes_link_start(commands, 1, env, &j->link);
        }
        nodes_slurm_argv_free(argv);
        free(env);
        free(node_argv);
        return r;
}

int ctl_jobnodes_run(const ctl_jobnodes_op *o) {
        static const int sigs[] = { SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2 };
        ctl_jobnodes_op op = *o;
        jobcoord j = { .o = &op, .prefix = o->prefix, .save_on = &op.save_on };
        const char *job = getenv("SLURM_JOB_ID");
        int r;

        if (op.timeout_ms <= 0)
                op.timeout_ms = JOBNODES_PHASE_TIMEOUT_MS;
        sigemptyset(&j.sigs);
        for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
                sigaddset(&j.sigs, sigs[i]);
        if ((r = jn_start(&j, job)) < 0) {
                fprintf(stderr, "%s%s\n", o->prefix,
                        r == -ESRCH    ? "no running job $SLURM_JOB_ID (squeue)"
                        : r == -ENOENT ? "srun, squeue or setpriv not found (set $" NODES_SLURM_SRUN_ENV ")"
                                       : strerror(-r));
                nodes_link_close(j.link, 0);
                free(j.v);
                free(j.holds.v);
                return r == -ESRCH ? CUDACKPT_EXIT_NO_SUCH_JOB : CUDACKPT_EXIT_FAILURE;
        }
        /* srun started with the signals as they were; from now on they
         * are taken in turn between the nodes' lines. */
        sigprocmask(SIG_BLOCK, &j.sigs, NULL);
        if ((r = jn_hello(&j)) != 0)
                r = jobcoord_failure(&j, r, "hello");
        else if ((r = jn_begin(&j)) == 0)
                r = jn_run(&j);
        nodes_link_close(j.link, JOBCOORD_CLOSE_TIMEOUT_MS);
        free(j.v);
        free(j.holds.v);
        return r;
}
