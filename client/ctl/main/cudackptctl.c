/* cudackptctl.c: the command-line client of cudackptd.
 *
 * main() parses the command line (cmdline.c), then runs the command's
 * verb from a table: most make one call through libcudackpt and print its
 * result: a bare value for scripts ("running", a tid), "STATE (D.D ms)"
 * for operations, or with --json the reply's parameters.  Errors go to
 * stderr as one line and map to distinct exit statuses (see --help).
 * The operations also take a set of processes (--pids, --cgroup, --tree)
 * in place of the PID, and ps lists CUDA processes: see group.c and ps.c.
 *
 * Started under the name "cuda-checkpoint" (a symlink), it speaks the
 * command line of NVIDIA's utility instead, for CRIU's CUDA plugin: see
 * compat.c; dump and restore --images run a whole job with CRIU: job.c.
 * Both are rows of the verb table (cmdline.c) with command lines of their
 * own. */
#include "addrgroup.h"
#include "args.h"
#include "cmdline.h"
#include "compat.h"
#include "describe.h"
#include "doctor.h"
#include "doctorcheck.h"
#include "exitcode.h"
#include "exporter.h"
#include "failure.h"
#include "group.h"
#include "job.h"
#include "lease.h"
#include "phases.h"
#include "progress.h"
#include "ps.h"
#include "selector.h"
#include "status.h"
#include "gpus.h"
#include "watch.h"
#include "json.h"

#include <cJSON.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* metrics --listen: a scrape's limit without --timeout (Prometheus's
 * default scrape_timeout is 10 s). */
#define CTL_SCRAPE_TIMEOUT_MS 10000
/* metrics --listen: a request's deadline beyond the scrape's timeout, and
 * connections at once from one address, when not given. */
#define CTL_SCRAPE_DEADLINE_MARGIN_MS 5000
#define CTL_SCRAPE_PER_ADDRESS 4u

static void ctl_error_prefix(const ctl_args *a) {
        fputs(a->prefix, stderr);
}

static int ctl_malformed(const ctl_args *a, const char *what) {
        ctl_error_prefix(a);
        fprintf(stderr, "invalid reply from cudackptd: %s\n", what);
        return CUDACKPT_EXIT_FAILURE;
}

/* Print a string member of an object as "key: value", when present. */
static void ctl_print_info_field(const cJSON *params, const char *key) {
        const char *value = json_get_string(params, key);

        if (!value)
                return;
        printf("%s: ", key);
        ctl_fputs_safe(value, stdout);
        putchar('\n');
}

static int ctl_print_info(const ctl_args *a, const cudackpt_reply *reply) {
        cJSON *params = cJSON_Parse(reply->parameters_json);
        const cJSON *interfaces, *item;

        if (!cJSON_IsObject(params)) {
                cJSON_Delete(params);
                return ctl_malformed(a, "parameters are not an object");
        }
        ctl_print_info_field(params, "vendor");
        ctl_print_info_field(params, "product");
        ctl_print_info_field(params, "version");
        ctl_print_info_field(params, "url");
        interfaces = cJSON_GetObjectItemCaseSensitive(params, "interfaces");
        if (cJSON_IsArray(interfaces)) {
                puts("interfaces:");
                cJSON_ArrayForEach(item, interfaces) {
                        if (!cJSON_IsString(item) || !item->valuestring)
                                continue;
                        fputs("  ", stdout);
                        ctl_fputs_safe(item->valuestring, stdout);
                        putchar('\n');
                }
        }
        cJSON_Delete(params);
        return CUDACKPT_EXIT_OK;
}

/* Print a successful reply in the command's format. */
static int ctl_print_result(const ctl_args *a, const cudackpt_reply *reply) {
        if (a->json) {
                puts(reply->parameters_json);
                return CUDACKPT_EXIT_OK;
        }
        switch (a->command->id) {
        case CTL_INFO:
                return ctl_print_info(a, reply);
        case CTL_STATE:
                if (!reply->state)
                        return ctl_malformed(a, "no state");
                ctl_fputs_safe(reply->state, stdout);
                putchar('\n');
                return CUDACKPT_EXIT_OK;
        case CTL_RESTORE_TID:
                if (reply->restore_thread_id < 0)
                        return ctl_malformed(a, "no restore_thread_id");
                printf("%d\n", reply->restore_thread_id);
                return CUDACKPT_EXIT_OK;
        default:
                if (!reply->state)
                        return ctl_malformed(a, "no state");
                ctl_fputs_safe(reply->state, stdout);
                if (reply->duration_ms >= 0)
                        printf(" (%.1f ms)", reply->duration_ms);
                putchar('\n');
                return CUDACKPT_EXIT_OK;
        }
}

static int ctl_call(cudackpt_client *client, const ctl_args *a, cudackpt_reply *reply) {
        const char *const *map = (const char *const *) a->map.items;

        switch (a->command->id) {
        case CTL_STATE:
                return cudackpt_get_state(client, a->pid, reply);
        case CTL_RESTORE_TID:
                return cudackpt_get_restore_thread_id(client, a->pid, reply);
        case CTL_LOCK:
                return cudackpt_lock(client, a->pid, a->lock_timeout, reply);
        case CTL_CHECKPOINT:
                return cudackpt_checkpoint(client, a->pid, reply);
        case CTL_RESTORE:
                return cudackpt_restore_flags(client, a->pid, map, a->force ? CUDACKPT_FORCE : 0, reply);
        case CTL_UNLOCK:
                return cudackpt_unlock(client, a->pid, reply);
        case CTL_SUSPEND:
                return cudackpt_suspend(client, a->pid, a->lock_timeout, reply);
        case CTL_RESUME:
                return cudackpt_resume_flags(client, a->pid, map, a->force ? CUDACKPT_FORCE : 0, reply);
        case CTL_INFO:
                return cudackpt_call(client, "org.varlink.service.GetInfo", NULL, reply);
        case CTL_PS:
        case CTL_WATCH:
        case CTL_METRICS:
        case CTL_RELEASE:
        case CTL_RENEW:
        case CTL_DOCTOR:
        case CTL_STATUS:
        case CTL_GPUS:
                break; /* run in ctl_run() */
        case CTL_DUMP:
        case CTL_RESTORE_IMAGES:
        case CTL_CRIU_BARRIER:
        case CTL_RUN:
        case CTL_VERIFY:
        case CTL_CUDA_CHECKPOINT:
        case CTL_NODE_PART:
        case CTL_JOB_PART:
        case CTL_JOB:
                break; /* rows with a command line of their own: never here */
        }
        return -EINVAL;
}

/* A group's --hold: the lease lives as long as this client's connection
 * (claimed again across a daemon restart, which replaces *clientp); the
 * undo is made here on exactly the members, so its result shows. */
static int ctl_group_hold(const ctl_args *a, cudackpt_client **clientp, const ctl_group *gp, const char *path) {
        ctl_group g = *gp;
        cJSON *members = NULL;
        ctl_held h = { 0 };
        ctl_lease_op keep = { .prefix = a->prefix, .command = a->command_argv, .socket = path,
                              .timeout_ms = a->timeout_ms };
        int status;

        g.lease_on_close = true;
        g.ret_members = &members;
        g.ret_lease = &h;
        ctl_hold_signals();
        status = ctl_group_run(*clientp, &g);
        if (status == CUDACKPT_EXIT_OK) {
                int held = ctl_hold_keep(&keep, clientp, &h);
                ctl_selector undo_sel = { .kind = CTL_SELECT_PIDS, .arg = a->selector.arg, .json = members };
                ctl_group u = g;
                u.method = a->command->id == CTL_LOCK ? CUDACKPT_METHOD_UNLOCK_GROUP : CUDACKPT_METHOD_RESUME_GROUP;
                u.selector = &undo_sel;
                u.lock_timeout = -1;
                u.lease_ms = -1;
                u.lease_on_close = false;
                u.ret_members = NULL;
                u.ret_lease = NULL;
                if (h.lost) {
                        fprintf(stderr, "%sthe hold was lost while the daemon restarted: it undid the group itself\n",
                                a->prefix);
                        status = CUDACKPT_EXIT_FAILURE;
                } else if (!h.connected) {
                        status = held; /* the daemon could not be reached again */
                } else {
                        status = members ? ctl_group_run(*clientp, &u) : CUDACKPT_EXIT_OK;
                        if (status == CUDACKPT_EXIT_OK)
                                status = held;
                }
        }
        cJSON_Delete(members);
        return status;
}

/* ---- The verbs ------------------------------------------------------------------ */

/* A verb runs one command.  path is the daemon's socket; *clientp a
 * connection to it (NULL for a verb of the table that connects itself),
 * which the verb may replace and ctl_run() frees.  Returns the exit status. */
typedef int (*ctl_verb_fn)(const ctl_args *a, const char *path, cudackpt_client **clientp);

static int ctl_verb_doctor(const ctl_args *a, const char *path, cudackpt_client **clientp) {
        ctl_doctor d = {
                .socket = a->socket,
                .driver = a->driver,
                .json = a->json,
                .timeout_ms = a->timeout_ms,
        };

        (void) path;
        (void) clientp;
        return ctl_doctor_run(&d);
}

/* Connects *clientp to the daemon at path with --timeout: 0, or the exit
 * status, having said why not. */
static int ctl_connect(const ctl_args *a, const char *path, cudackpt_client **clientp) {
        if (ctl_connect_daemon(a->prefix, path, clientp) != 0)
                return CUDACKPT_EXIT_UNREACHABLE;
        /* Cannot fail: timeout_ms was parsed as 0..INT_MAX. */
        (void) cudackpt_client_set_timeout(*clientp, a->timeout_ms);
        return CUDACKPT_EXIT_OK;
}

/* metrics: --listen serves them (a connection per scrape), else one call. */
static int ctl_verb_metrics(const ctl_args *a, const char *path, cudackpt_client **clientp) {
        int status;

        if (a->listen) {
                ctl_exporter e = {
                        .prefix = a->prefix,
                        .socket = path,
                        .listen = a->listen,
                        .timeout_ms = a->timeout_ms > 0 ? a->timeout_ms : CTL_SCRAPE_TIMEOUT_MS,
                        .per_address = a->max_per_address ? a->max_per_address : CTL_SCRAPE_PER_ADDRESS,
                        .ipv4_prefix = a->ipv4_prefix >= 0 ? (unsigned) a->ipv4_prefix : CTL_ADDRGROUP_IPV4_PREFIX,
                        .ipv6_prefix = a->ipv6_prefix >= 0 ? (unsigned) a->ipv6_prefix : CTL_ADDRGROUP_IPV6_PREFIX,
                };

                e.deadline_ms = a->request_deadline ? a->request_deadline
                                                    : e.timeout_ms + (long long) CTL_SCRAPE_DEADLINE_MARGIN_MS;

                return ctl_exporter_run(&e);
        }
        status = ctl_connect(a, path, clientp);
        return status != CUDACKPT_EXIT_OK ? status : ctl_metrics_run(*clientp, a->prefix, a->output);
}

static int ctl_verb_watch(const ctl_args *a, const char *path, cudackpt_client **clientp) {
        ctl_watch w = { .prefix = a->prefix, .selector = &a->selector, .json = a->json };

        (void) path;
        return ctl_watch_run(*clientp, &w);
}

static int ctl_verb_status(const ctl_args *a, const char *path, cudackpt_client **clientp) {
        (void) path;
        return a->command->id == CTL_GPUS ? ctl_gpus_run(*clientp, a->prefix, a->json)
                                          : ctl_status_run(*clientp, a->prefix, a->json);
}

/* release LEASE, renew LEASE --lease-ms=MS. */
static int ctl_verb_lease(const ctl_args *a, const char *path, cudackpt_client **clientp) {
        (void) path;
        return ctl_lease_manage(*clientp, a->prefix, a->lease, a->command->id == CTL_RENEW ? a->lease_ms : -1,
                                a->json);
}

static int ctl_verb_ps(const ctl_args *a, const char *path, cudackpt_client **clientp) {
        ctl_ps ps = { .prefix = a->prefix, .selector = &a->selector, .json = a->json };

        (void) path;
        return ctl_ps_run(*clientp, &ps);
}

/* lock or suspend of one PID with --lease-ms or --hold. */
static int ctl_run_lease(const ctl_args *a, const char *path, cudackpt_client **clientp) {
        bool lock = a->command->id == CTL_LOCK;
        ctl_lease_op o = {
                .prefix = a->prefix,
                .method = lock ? CUDACKPT_METHOD_LOCK : CUDACKPT_METHOD_SUSPEND,
                .undo_method = lock ? CUDACKPT_METHOD_UNLOCK : CUDACKPT_METHOD_RESUME,
                .pid = a->pid,
                .lock_timeout = a->lock_timeout,
                .lease_ms = a->lease_ms,
                .hold = a->hold,
                .command = a->command_argv,
                .json = a->json,
                .socket = path,
                .timeout_ms = a->timeout_ms,
        };

        return ctl_lease_run(clientp, &o);
}

/* An operation on a selector: a group. */
static int ctl_run_group(const ctl_args *a, const char *path, cudackpt_client **clientp) {
        bool tty = isatty(STDERR_FILENO);
        ctl_group g = {
                .prefix = a->prefix,
                .method = a->command->group_method,
                .selector = &a->selector,
                .lock_timeout = a->lock_timeout,
                .map = (const char *const *) a->map.items,
                .force = a->force,
                .json = a->json,
                .progress = a->progress < 0 ? tty : a->progress > 0,
                .progress_tty = tty,
                .lease_ms = a->lease_ms,
        };

        if (a->hold)
                return ctl_group_hold(a, clientp, &g, path);
        return ctl_group_run(*clientp, &g);
}

/* The calls on one PID (and info): lease forms and group forms aside. */
static int ctl_verb_call(const ctl_args *a, const char *path, cudackpt_client **clientp) {
        ctl_progress *progress = NULL;
        cudackpt_reply reply;
        int r, status;

        if (a->slurm_job)
                return ctl_phases_run(&(ctl_phases_op) {
                        .prefix = a->prefix, .verb = a->command->name, .job = a->slurm_job,
                        .lock_timeout = a->lock_timeout, .timeout_ms = a->timeout_ms, .json = a->json,
                        .progress = a->progress > 0 || (a->progress < 0 && isatty(STDERR_FILENO)) });
        if (a->selector.kind == CTL_SELECT_NONE && (a->lease_ms > 0 || a->hold))
                return ctl_run_lease(a, path, clientp);
        if (a->selector.kind != CTL_SELECT_NONE)
                return ctl_run_group(a, path, clientp);

        /* A checkpoint or restore of a GPU's memory takes seconds: show how far it is. */
        if ((a->command->id == CTL_SUSPEND || a->command->id == CTL_CHECKPOINT) &&
            (a->progress > 0 || (a->progress < 0 && isatty(STDERR_FILENO))))
                (void) ctl_progress_start(path, a->pid, isatty(STDERR_FILENO), &progress);
        cudackpt_reply_init(&reply);
        r = ctl_call(*clientp, a, &reply);
        ctl_progress_stop(progress);
        if (r < 0 || reply.error)
                status = ctl_call_failed(a->prefix, r, &reply, a->json);
        else
                status = ctl_print_result(a, &reply);
        cudackpt_reply_clear(&reply);
        return status;
}

/* Each command's verb; connect: ctl_run() connects first. */
static const struct {
        ctl_verb_fn run;
        bool connect;
} ctl_verbs[] = {
        [CTL_STATE] = { ctl_verb_call, true },
        [CTL_RESTORE_TID] = { ctl_verb_call, true },
        [CTL_LOCK] = { ctl_verb_call, true },
        [CTL_CHECKPOINT] = { ctl_verb_call, true },
        [CTL_RESTORE] = { ctl_verb_call, true },
        [CTL_UNLOCK] = { ctl_verb_call, true },
        [CTL_SUSPEND] = { ctl_verb_call, true },
        [CTL_RESUME] = { ctl_verb_call, true },
        [CTL_INFO] = { ctl_verb_call, true },
        [CTL_PS] = { ctl_verb_ps, true },
        [CTL_WATCH] = { ctl_verb_watch, true },
        [CTL_METRICS] = { ctl_verb_metrics, false },
        [CTL_RELEASE] = { ctl_verb_lease, true },
        [CTL_RENEW] = { ctl_verb_lease, true },
        [CTL_DOCTOR] = { ctl_verb_doctor, false },
        [CTL_STATUS] = { ctl_verb_status, true },
        [CTL_GPUS] = { ctl_verb_status, true },
};

static int ctl_run(const ctl_args *a) {
        const char *path = ctl_socket_path(a->socket);
        cudackpt_client *client = NULL;
        int status = CUDACKPT_EXIT_OK;

        if (!a->prefix) {
                fputs(CTL_NAME ": out of memory\n", stderr);
                return CUDACKPT_EXIT_FAILURE;
        }
        /* --slurm-job reaches the job's nodes' daemons, not this machine's. */
        if (ctl_verbs[a->command->id].connect && !a->slurm_job)
                status = ctl_connect(a, path, &client);
        if (status == CUDACKPT_EXIT_OK)
                status = ctl_verbs[a->command->id].run(a, path, &client);
        cudackpt_client_free(client);
        return status;
}

/* a->prefix for errors: "cudackptctl: suspend 1234: ", "cudackptctl: suspend --cgroup /pod42: ".
 * -ENOMEM (a->prefix NULL). */
static int ctl_prefix(ctl_args *a) {
        char *copy = NULL;
        int k;

        if (a->slurm_job)
                k = asprintf(&a->prefix, CTL_NAME ": %s --slurm-job %s: ", a->command->name, a->slurm_job);
        else if (a->selector.kind != CTL_SELECT_NONE) {
                copy = strdup(a->selector.arg);
                if (!copy)
                        return -ENOMEM;
                /* The argument may come from anywhere (a script's variable). */
                ctl_sanitize(copy);
                k = asprintf(&a->prefix, CTL_NAME ": %s %s %s: ", a->command->name,
                             ctl_selector_option(a->selector.kind), copy);
                free(copy);
        } else if (a->command->flags & CTL_TAKES_PID)
                k = asprintf(&a->prefix, CTL_NAME ": %s %d: ", a->command->name, a->pid);
        else
                k = asprintf(&a->prefix, CTL_NAME ": %s: ", a->command->name);
        if (k < 0) {
                a->prefix = NULL;
                return -ENOMEM;
        }
        return 0;
}

/* Defined here, where the rows run, rather than in cmdline.c (which parses). */
int ctl_cmdline_run_own(const ctl_command *c, int argc, char **argv, bool help) {
        char *help_argv[] = { argv[0], (char *) c->name, (char *) "--help", NULL };

        if (help)
                return c->main(3, help_argv);
        /* "cudackptctl cuda-checkpoint ARGS" as the program of that name. */
        if ((c->flags & CTL_ALIAS) && argc > 1 && strcmp(argv[1], c->name) == 0)
                return c->main(argc - 1, argv + 1);
        return c->main(argc, argv);
}

int main(int argc, char **argv) {
        ctl_args args = { .lock_timeout = -1, .progress = -1, .lease_ms = -1, .ipv4_prefix = -1, .ipv6_prefix = -1 };
        const ctl_command *row, *help_row;
        int status;

        /* The verb table first: a row with a command line of its own
         * (cuda-checkpoint by the program's name, dump, restore --images)
         * gets it whole; "help VERB" is VERB's --help. */
        row = ctl_cmdline_find(argc, argv, &help_row);
        if (row && row->main)
                return ctl_cmdline_run_own(row, argc, argv, false);
        if (!row && help_row && help_row->main)
                return ctl_cmdline_run_own(help_row, argc, argv, true);

        status = ctl_cmdline_parse(argc, argv, &args);
        if (status < 0) {
                (void) ctl_prefix(&args); /* ctl_run() says when it failed */
                status = ctl_run(&args);
        }
        ctl_cmdline_free(&args);

        /* Output that could not be written (a full disk, a closed pipe) is a failure. */
        if (fflush(stdout) != 0 && status == CUDACKPT_EXIT_OK)
                status = CUDACKPT_EXIT_FAILURE;
        return status;
}
