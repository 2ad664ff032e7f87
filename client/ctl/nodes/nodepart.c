/* nodepart.c: the node's part of a job's phases (nodepart.h).
 *
 * Which processes are the job's here: those CUDA processes the daemon
 * lists to this caller (ListProcesses: exactly those it may act on) whose
 * user is the job's owner (the coordinator's squeue says who: root lists
 * every user's processes, and another user's process is none of the
 * job's), found by either of two rules, each counted in the hello:
 *   - the environment: it holds this step's SLURM_JOB_ID and this node's
 *     SLURMD_NODENAME.  Slurm sets both in every task of every step,
 *     whatever the process tracking plugin (under proctrack/linuxproc, the
 *     test cluster's, a job has no cgroup of its own, and the cgroup v1
 *     layouts of proctrack/cgroup differ from site to site), and a process
 *     that a double fork gave to init keeps them.  The node name matters
 *     where nodes share one pid space (the test cluster's, or several
 *     slurmd on one host): each sees the others' tasks;
 *   - the descent: it descends from a slurmstepd of the job on this node
 *     (stepdescent.h), which finds a task that cleared its environment
 *     (`env -i`, some launchers).
 * The set is read once, at hello, and pinned by start time: a process
 * started later is no member.
 *
 * The daemon restarting while this step's work is in its hands: the part
 * connects again and claims its lease at once (nodepart_rejoin), then
 * fails the next phase that could still be rolled back on every node, or
 * goes on with one that could not (docs/slurm.md, "What each failure
 * leaves"). */
#include "nodepart.h"

#include "args.h"
#include "describe.h"
#include "groupreply.h"
#include "lease.h"
#include "rejoin.h"
#include "json.h"
#include "monotime.h"
#include "stepdescent.h"

#include <cudackpt/client.h>
#include <cudackpt/protocol.h>

#include <cJSON.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The most of a process's environment read to find SLURM_JOB_ID. */
#define NODEPART_MAX_ENVIRON (256u * 1024u)
/* The most of an error's sentence said on a line (srun may interleave long
 * lines of several nodes). */
#define NODEPART_MAX_WHAT 160

typedef struct nodepart {
        nodes_conn conn;           /* the daemon's connection, and the lease held */
        const char *verb;          /* lock, suspend, resume, unlock */
        long long lock_timeout;    /* -1: the daemon's default */
        long long owner;           /* the job's owner's uid */
        char node[65];
        cJSON *selector;           /* {"pids": [...]} of the members, NULL when none */
        int n;
        int by_environment;        /* members the environment rule found */
        int by_descent;            /* ... and the descent rule (a member may be both's) */
        bool restarted;            /* the daemon restarted while this step's work was in its hands */
        bool restoring;            /* this step's restore phase began here */
        bool unlocking;            /* ... and its unlock phase */
        char *error, *what;        /* the last call's failure */
} nodepart;

/* Whether pid's environment holds entry ("SLURM_JOB_ID=J") and, when not
 * NULL, entry2. */
static bool nodepart_environ_has(long long pid, const char *entry, const char *entry2) {
        char path[64], *buf = malloc(NODEPART_MAX_ENVIRON);
        size_t len = 0, n = strlen(entry), n2 = entry2 ? strlen(entry2) : 0;
        bool found = false, found2 = !entry2;
        ssize_t k;
        int fd;

        snprintf(path, sizeof(path), "/proc/%lld/environ", pid);
        if (!buf || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
                free(buf);
                return false;
        }
        while (len < NODEPART_MAX_ENVIRON && (k = read(fd, buf + len, NODEPART_MAX_ENVIRON - len)) > 0)
                len += (size_t)k;
        close(fd);
        for (size_t i = 0; i < len; i += strnlen(buf + i, len - i) + 1) {
                size_t m = strnlen(buf + i, len - i);
                found |= m == n && memcmp(buf + i, entry, n) == 0;
                found2 |= entry2 && m == n2 && memcmp(buf + i, entry2, n2) == 0;
        }
        free(buf);
        return found && found2;
}

static void nodepart_fail(nodepart *p, const char *error, const char *what) {
        free(p->error);
        free(p->what);
        p->error = strdup(error);
        p->what = what ? strndup(what, NODEPART_MAX_WHAT) : NULL;
        if (p->what && strlen(what) > NODEPART_MAX_WHAT)
                memcpy(p->what + NODEPART_MAX_WHAT - 3, "...", 3);
        if (p->what)
                ctl_sanitize(p->what);
}

/* The daemon closed the connection: connects again and claims the lease
 * (rejoin.h), with this step's work (if any) now to be failed before the
 * last barrier. */
static void nodepart_rejoin(nodepart *p) {
        if (p->n > 0)
                p->restarted = true;
        nodes_conn_rejoin(&p->conn, p->node, REJOIN_WAIT_MS);
}

/* One call; 0, or -1 with p->error.  ret_params: the reply's parameters
 * on success (the caller's), when not NULL. */
static int nodepart_call(nodepart *p, const char *method, cJSON *params, cJSON **ret_params) {
        char *text = json_print_dup(params);
        cudackpt_reply reply;
        int r;

        cJSON_Delete(params);
        if (!text) {
                nodepart_fail(p, "OutOfMemory", NULL);
                return -1;
        }
        cudackpt_reply_init(&reply);
        /* A daemon that did not answer again yet (a restart between
         * phases) is waited for. */
        if (!p->conn.connected)
                nodes_conn_rejoin(&p->conn, p->node, REJOIN_WAIT_MS);
        r = p->conn.connected ? cudackpt_call(p->conn.client, method, text, &reply) : -ENOTCONN;
        free(text);
        if (r == -ECONNRESET || r == -ENOTCONN || r == -EPIPE) {
                /* The daemon closed the connection (a restart): what the
                 * call did is unknown.  It fails; the connection is made
                 * again, and the lease claimed, for the rollback. */
                nodepart_fail(p, "ShuttingDown", "the node's daemon closed the connection during the call "
                                                 "(a restart?)");
                nodepart_rejoin(p);
        } else if (r < 0)
                nodepart_fail(p, "Unreachable", strerror(-r));
        else if (reply.error) {
                /* A group's failure is named by its member's error, as
                 * the group commands' exit status is. */
                cJSON *ep = strcmp(reply.error, CUDACKPT_ERROR_GROUP_FAILED) == 0 ? cJSON_Parse(reply.parameters_json)
                                                                                 : NULL;
                const char *inner = json_get_string(ep, "error");
                char *what = ctl_describe_error(&reply);
                nodepart_fail(p, ctl_group_short_name(inner ? inner : reply.error), what);
                free(what);
                cJSON_Delete(ep);
        } else if (ret_params)
                *ret_params = cJSON_Parse(reply.parameters_json);
        r = r < 0 || reply.error ? -1 : 0;
        cudackpt_reply_clear(&reply);
        return r;
}

/* Whether the listed process e is a member, counted by the rules that
 * found it; its pid and start time into *ret_pid, *ret_start. */
static bool nodepart_member(nodepart *p, const cJSON *e, const char *entry, const char *entry2,
                            const stepdescent *descent, long long *ret_pid, long long *ret_start) {
        long long uid;
        bool by_environment, by_descent;

        if (!json_get_integer(e, "pid", 1, 2147483647.0, ret_pid) ||
            !json_get_integer(e, "uid", 0, 4294967294.0, &uid) || uid != p->owner ||
            !json_get_integer(e, "start_time", 0, JSON_MAX_EXACT, ret_start))
                return false;
        by_environment = nodepart_environ_has(*ret_pid, entry, entry2);
        by_descent = descent && stepdescent_of(descent, (int)*ret_pid, (uint64_t)*ret_start);
        p->by_environment += by_environment;
        p->by_descent += by_descent;
        return by_environment || by_descent;
}

/* The job's CUDA processes here, into p->selector and p->n. */
static int nodepart_members(nodepart *p, const char *job) {
        cJSON *params = NULL, *pids;
        const cJSON *procs, *e;
        const char *node = getenv("SLURMD_NODENAME");
        char entry[64], entry2[128];
        stepdescent descent;
        /* Not under a slurmstepd of the job (not started by srun), no
         * process is found by descent. */
        bool descent_ok = stepdescent_init(&descent, job) == 0;

        snprintf(entry, sizeof(entry), "SLURM_JOB_ID=%s", job);
        if (node && strlen(node) < 64)
                snprintf(entry2, sizeof(entry2), "SLURMD_NODENAME=%s", node);
        if (nodepart_call(p, CUDACKPT_METHOD_LIST_PROCESSES, cJSON_CreateObject(), &params) < 0)
                return -1;
        procs = cJSON_GetObjectItemCaseSensitive(params, "processes");
        if (!(p->selector = cJSON_CreateObject()) || !(pids = cJSON_AddArrayToObject(p->selector, "pids"))) {
                cJSON_Delete(params);
                nodepart_fail(p, "OutOfMemory", NULL);
                return -1;
        }
        if (!cJSON_IsArray(procs))
                procs = NULL;
        cJSON_ArrayForEach(e, procs) {
                long long pid, start;
                cJSON *ref;

                if (!nodepart_member(p, e, entry, node && strlen(node) < 64 ? entry2 : NULL,
                                     descent_ok ? &descent : NULL, &pid, &start))
                        continue;
                if (!(ref = cJSON_CreateObject()) || !cJSON_AddItemToArray(pids, ref) ||
                    !cJSON_AddNumberToObject(ref, "pid", (double)pid) ||
                    !cJSON_AddNumberToObject(ref, "start_time", (double)start)) {
                        cJSON_Delete(params);
                        nodepart_fail(p, "OutOfMemory", NULL);
                        return -1;
                }
                p->n++;
        }
        cJSON_Delete(params);
        return 0;
}

/* A group call on the members; lease: with an on-close lease, kept in
 * p->conn.held (with its secret, to claim it after a daemon restart). */
static int nodepart_group(nodepart *p, const char *method, bool lease) {
        cJSON *params = cJSON_CreateObject(), *reply = NULL;
        char *text;
        int r;

        if (!params || !cJSON_AddItemToObject(params, "selector", cJSON_Duplicate(p->selector, 1)) ||
            (lease && p->lock_timeout >= 0 && strcmp(method, CUDACKPT_METHOD_LOCK_GROUP) == 0 &&
             !cJSON_AddNumberToObject(params, "timeout_ms", (double)p->lock_timeout)) ||
            (lease && !cJSON_AddTrueToObject(params, "lease_on_close"))) {
                cJSON_Delete(params);
                nodepart_fail(p, "OutOfMemory", NULL);
                return -1;
        }
        r = nodepart_call(p, method, params, lease ? &reply : NULL);
        if (r == 0 && lease) {
                p->conn.held = (ctl_held){ 0 };
                text = reply ? cJSON_PrintUnformatted(reply) : NULL;
                if (text)
                        ctl_held_of(text, &p->conn.held);
                free(text);
        }
        cJSON_Delete(reply);
        return r;
}

/* Ends the lease held without an undo (the work is kept). */
static int nodepart_release(nodepart *p) {
        long long id = p->conn.held.id;

        for (int tries = 0; id != 0 && tries < 2; tries++) {
                cJSON *params = cJSON_CreateObject();

                if (!params || !cJSON_AddNumberToObject(params, "lease", (double)id)) {
                        cJSON_Delete(params);
                        nodepart_fail(p, "OutOfMemory", NULL);
                        return -1;
                }
                /* A lease that ended already (its processes came back to
                 * running, or exited) has nothing left to keep. */
                if (nodepart_call(p, CUDACKPT_METHOD_RELEASE_LEASE, params, NULL) == 0 ||
                    strcmp(p->error, ctl_group_short_name(CUDACKPT_ERROR_NO_SUCH_LEASE)) == 0)
                        break;
                /* A restart during the release: claimed again (rejoin),
                 * the lease is released as asked; lost, the daemon undid
                 * it and the commit fails. */
                if (tries == 1 || strcmp(p->error, "ShuttingDown") != 0 || p->conn.held.id != id ||
                    !p->conn.connected)
                        return -1;
        }
        p->conn.held = (ctl_held){ 0 };
        return 0;
}

/* Undoes what this step did, and only that: suspend and lock back to
 * running where this step's lock took its lease (ends the lease; a node
 * whose lock failed was brought back by its daemon, and a job that was
 * checkpointed before stays so), resume back to checkpointed where this
 * step's restore began (then the lease is let go); an unlock has nothing
 * to undo. */
static int nodepart_rollback(nodepart *p) {
        if (strcmp(p->verb, "resume") == 0) {
                /* Once the unlock phase began, other nodes may run: a node
                 * whose unlock failed keeps its lease, which brings its
                 * members to running as the step ends. */
                if (!p->restoring || p->unlocking)
                        return 0;
                if (nodepart_group(p, CUDACKPT_METHOD_CHECKPOINT_GROUP, false) < 0)
                        return -1;
                return nodepart_release(p);
        }
        if (strcmp(p->verb, "unlock") == 0 || p->conn.held.id == 0)
                return 0;
        p->conn.held = (ctl_held){ 0 };
        return nodepart_group(p, CUDACKPT_METHOD_RESUME_GROUP, false);
}

/* One phase: 0 done, -1 failed (p->error), -2 no such phase.  A phase
 * that could still be rolled back on every node (lock, checkpoint,
 * restore) fails once the daemon restarted while it held this step's
 * work: the whole job is rolled back rather than gone on with.  The
 * unlock and commit phases, which other nodes may have passed already, go
 * on with the lease claimed again. */
static int nodepart_phase(nodepart *p, const char *phase) {
        bool none = p->n == 0;

        if (p->restarted && (strcmp(phase, "lock") == 0 || strcmp(phase, "checkpoint") == 0 ||
                             strcmp(phase, "restore") == 0)) {
                p->restarted = false;
                nodepart_fail(p, "ShuttingDown", p->conn.held.id
                                                         ? "the node's daemon restarted (its lease claimed again)"
                                                         : "the node's daemon restarted (its lease was undone)");
                return -1;
        }

        if (strcmp(phase, "lock") == 0)
                return none ? 0 : nodepart_group(p, CUDACKPT_METHOD_LOCK_GROUP, true);
        if (strcmp(phase, "checkpoint") == 0)
                return none ? 0 : nodepart_group(p, CUDACKPT_METHOD_CHECKPOINT_GROUP, false);
        if (strcmp(phase, "restore") == 0) {
                /* Restored under an on-close lease from its first driver
                 * call: the step ending (or the daemon restarting past its
                 * claim) before the unlock phase checkpoints the members
                 * again, so the job stays suspended whole. */
                p->restoring = true;
                return none ? 0 : nodepart_group(p, CUDACKPT_METHOD_RESTORE_GROUP, true);
        }
        if (strcmp(phase, "unlock") == 0) {
                p->unlocking = true;
                /* Past the last barrier the job runs whole: the restore's
                 * lease (whose undo checkpoints) gives way to a lock's
                 * (whose undo runs them), so that this part ending before
                 * its unlock, or its unlock failing, runs the members as
                 * the step ends.  Failing, the unlock is tried anyway. */
                if (!none && p->restoring && p->conn.held.id != 0)
                        (void)nodepart_group(p, CUDACKPT_METHOD_LOCK_GROUP, true);
                if (!none && nodepart_group(p, CUDACKPT_METHOD_UNLOCK_GROUP, false) < 0)
                        return -1;
                p->conn.held = (ctl_held){ 0 }; /* the unlock ended it (finished) */
                return 0;
        }
        if (strcmp(phase, "commit") == 0)
                return nodepart_release(p);
        if (strcmp(phase, "rollback") == 0)
                return none ? 0 : nodepart_rollback(p);
        return -2;
}

/* One line on stdout, then flushed (the coordinator waits for it). */
static void nodepart_say(cJSON *o) {
        char *text = o ? cJSON_PrintUnformatted(o) : NULL;

        if (text) {
                fputs(text, stdout);
                fputc('\n', stdout);
                fflush(stdout);
        }
        free(text);
        cJSON_Delete(o);
}

static cJSON *nodepart_line(const nodepart *p) {
        cJSON *o = cJSON_CreateObject();

        if (o && !cJSON_AddStringToObject(o, "node", p->node)) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}

static void nodepart_answer(nodepart *p, const char *phase, int r, double ms) {
        cJSON *o = nodepart_line(p);

        if (!o)
                return;
        cJSON_AddStringToObject(o, "phase", phase);
        cJSON_AddNumberToObject(o, "ok", r == 0);
        if (r == 0)
                cJSON_AddNumberToObject(o, "ms", ms);
        else {
                cJSON_AddStringToObject(o, "error", r == -2 ? "UnknownPhase" : p->error ? p->error : "Failed");
                if (r != -2 && p->what)
                        cJSON_AddStringToObject(o, "what", p->what);
        }
        nodepart_say(o);
}

/* The phases, one a line, until the input ends. */
static void nodepart_serve(nodepart *p) {
        char line[NODEPART_MAX_LINE];
        bool rejoined = false;

        /* Unbuffered: what poll() says of the input is all there is. */
        setvbuf(stdin, NULL, _IONBF, 0);
        while (nodes_conn_await_input(&p->conn, p->node, p->n > 0, &rejoined) == 0 &&
               fgets(line, sizeof(line), stdin)) {
                cJSON *o = cJSON_Parse(line);
                const char *phase = json_get_string(o, "phase");
                char name[16];
                long long t0 = monotime_ms();

                snprintf(name, sizeof(name), "%s", phase && strlen(phase) < sizeof(name) ? phase : "?");
                cJSON_Delete(o);
                /* A restart between phases, with this step's work there. */
                p->restarted |= rejoined && p->n > 0;
                rejoined = false;
                int r = phase ? nodepart_phase(p, name) : -2;
                nodepart_answer(p, name, r, (double)(monotime_ms() - t0));
        }
}

void ctl_nodepart_node_name(char *buf, size_t size) {
        const char *n = getenv("SLURMD_NODENAME");

        if (n && *n)
                snprintf(buf, size, "%s", n);
        else if (gethostname(buf, size) < 0 || !buf[0])
                snprintf(buf, size, "?");
        buf[size - 1] = '\0';
        ctl_sanitize(buf);
}

static int nodepart_start(nodepart *p, const char *job) {
        const char *path = ctl_socket_path(NULL);
        int r;

        if (!job || !*job || strlen(job) > 20 || strspn(job, "0123456789") != strlen(job)) {
                nodepart_fail(p, "NoSlurmJob", "SLURM_JOB_ID is not set to a job id");
                return -1;
        }
        if ((r = cudackpt_client_connect(path, &p->conn.client)) < 0) {
                nodepart_fail(p, "Unreachable", strerror(-r));
                return -1;
        }
        p->conn.socket = path;
        p->conn.connected = true;
        return nodepart_members(p, job);
}

int ctl_nodepart_main(int argc, char **argv) {
        static const char *const verbs[] = { "lock", "suspend", "resume", "unlock" };
        nodepart p = { .lock_timeout = -1 };
        cJSON *hello;
        char *end;

        for (size_t i = 0; argc >= 3 && i < sizeof(verbs) / sizeof(verbs[0]); i++)
                if (strcmp(argv[2], verbs[i]) == 0)
                        p.verb = verbs[i];
        if (!p.verb || argc < 4 || argc > 5 ||
            (p.owner = strtoll(argv[3], &end, 10), *end || end == argv[3] || p.owner < 0 || p.owner > 4294967294LL) ||
            (argc == 5 && (p.lock_timeout = strtoll(argv[4], &end, 10), *end || p.lock_timeout < 0))) {
                fputs("usage: cudackptctl node-part lock|suspend|resume|unlock JOB_UID [LOCK_TIMEOUT_MS]\n"
                      "(run by the coordinator's step on each node of a job, not by people)\n", stderr);
                return 2;
        }
        ctl_nodepart_node_name(p.node, sizeof(p.node));
        hello = nodepart_line(&p);
        if (nodepart_start(&p, getenv("SLURM_JOB_ID")) < 0) {
                cJSON_AddNumberToObject(hello, "hello", 0);
                cJSON_AddStringToObject(hello, "error", p.error ? p.error : "Failed");
                if (p.what)
                        cJSON_AddStringToObject(hello, "what", p.what);
                nodepart_say(hello);
        } else {
                cJSON_AddNumberToObject(hello, "hello", 1);
                cJSON_AddNumberToObject(hello, "uid", (double)getuid());
                cJSON_AddNumberToObject(hello, "n", p.n);
                cJSON *by = cJSON_AddObjectToObject(hello, "found_by");
                cJSON_AddNumberToObject(by, "environment", p.by_environment);
                cJSON_AddNumberToObject(by, "descent", p.by_descent);
                nodepart_say(hello);
                nodepart_serve(&p);
        }
        /* Exit 0 whatever happened: a part that fails would end every
         * node's part (--kill-on-bad-exit) before the coordinator's
         * rollback; the failure was said on its line. */
        cudackpt_client_free(p.conn.client);
        cJSON_Delete(p.selector);
        free(p.error);
        free(p.what);
        return 0;
}
