/* jobcmd.c: cudackptctl job (jobcmd.h).
 *
 *   job start [--slurm] [--name=N] [--output=FILE] [--save=S [--save-on=SIGS] [--requeue]] -- COMMAND [ARG...]
 *   job restore SAVE [--save-on=SIGS] [--requeue]
 *   job save NAME [SAVE] [--leave-running] [--replace]
 *   job list | saves [SAVE] | rm SAVE
 * each with [--socket=PATH] [--json].  start and restore stay in the
 * foreground until the job ends (their exit status is the job's) or is
 * saved (0); jobwait.h says what signals do meanwhile. */
#include "jobcmd.h"

#include "args.h"
#include "describe.h"
#include "exitcode.h"
#include "failure.h"
#include "jobcall.h"
#include "jobenv.h"
#include "jobnodes.h"
#include "jobset.h"
#include "jobwait.h"
#include "json.h"
#include "slurm.h"

#include <cJSON.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define JOB_NAME "cudackptctl job"
#define JOB_PREFIX "cudackptctl: job: "

extern char **environ;

typedef struct job_args {
        const char *sub, *socket, *name, *output, *save, *operand2;
        const char *operand;      /* restore's, save's, saves' and rm's first */
        bool json, leave_running, replace, save_on_given, slurm, requeue;
        int timeout_ms;           /* start --slurm: each phase's limit, 0 the default */
        sigset_t save_on;
        char **argv;              /* start's command */
} job_args;

#define job_usage(...) \
        ctl_usage_fail(CUDACKPT_EXIT_USAGE, JOB_NAME, "\nTry '" JOB_NAME " --help' for more information.\n", __VA_ARGS__)

static void job_help(void) {
        printf("Usage: cudackptctl job start [--slurm [--timeout=MS]] [--name=N] [--output=FILE] [--save=S [--save-on=SIGS]\n"
               "           [--requeue]] -- COMMAND [ARG...]\n"
               "       cudackptctl job restore SAVE [--save-on=SIGS] [--requeue]\n"
               "       cudackptctl job save NAME [SAVE] [--leave-running] [--replace]\n"
               "       cudackptctl job list | saves [SAVE] | rm SAVE\n"
               "  each with [--socket=PATH] [--json]\n"
               "\n"
               "Jobs that cudackptd runs, saves and restores for you, as you, in your cgroups\n"
               "(a Slurm job's), in a pid namespace of their own so that they restore on any\n"
               "node that shares the administrator's saves directory.\n"
               "  start     start COMMAND as job N (default \"job\") with this environment and\n"
               "            directory; its output goes to FILE (default: this command's\n"
               "            standard output when it is a file or a terminal).  With --save,\n"
               "            S is restored instead when it exists, the signals SIGS (default\n"
               "            TERM,USR1) save the job into S, and S is removed once the job\n"
               "            exits 0 (kept when it fails or is killed, to restore again).\n"
               "            Waits for the job: its exit status, or 0 once saved.  With --slurm\n"
               "            (and --save), COMMAND runs on every node of this Slurm job, saved\n"
               "            and restored whole, back on the same nodes: S is at most 28\n"
               "            characters, the output only a file, exit status 33 when parts of S\n"
               "            exist but no generation is whole on these nodes; a requeued job is\n"
               "            held to its nodes (ReqNodeList).  --requeue: after a save on a signal\n"
               "            other than TERM (--signal=B:USR1@N's warning), scontrol requeue\n"
               "            $SLURM_JOB_ID.  --timeout=MS (--slurm): each phase's limit (the\n"
               "            nodes' jobs started, their parts ready, saved; 600000)\n"
               "  restore   restore SAVE as a job and wait for it, as start does\n"
               "  save      dump job NAME into SAVE (default NAME); the job ends once the\n"
               "            save is on stable storage, unless --leave-running\n"
               "  list      your jobs that the daemon runs\n"
               "  saves     your saves (exit status 30 when SAVE is not one)\n"
               "  rm        remove SAVE\n"
               "While start or restore waits, HUP, INT, QUIT, TERM, USR1 and USR2 (but those\n"
               "of --save-on) end it, and the daemon stops the job.\n");
}

enum { J_SOCKET = 0x100, J_JSON, J_NAME, J_OUTPUT, J_SAVE, J_SAVE_ON, J_LEAVE_RUNNING, J_REPLACE, J_SLURM, J_REQUEUE,
       J_TIMEOUT };

static const struct option job_options[] = {
        { "socket", required_argument, NULL, J_SOCKET },
        { "json", no_argument, NULL, J_JSON },
        { "name", required_argument, NULL, J_NAME },
        { "output", required_argument, NULL, J_OUTPUT },
        { "save", required_argument, NULL, J_SAVE },
        { "save-on", required_argument, NULL, J_SAVE_ON },
        { "leave-running", no_argument, NULL, J_LEAVE_RUNNING },
        { "replace", no_argument, NULL, J_REPLACE },
        { "slurm", no_argument, NULL, J_SLURM },
        { "requeue", no_argument, NULL, J_REQUEUE },
        { "timeout", required_argument, NULL, J_TIMEOUT },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
};

static int job_option(job_args *a, int c) {
        switch (c) {
        case J_SOCKET: a->socket = optarg; return -1;
        case J_JSON: a->json = true; return -1;
        case J_NAME: a->name = optarg; return -1;
        case J_OUTPUT: a->output = optarg; return -1;
        case J_SAVE: a->save = optarg; return -1;
        case J_LEAVE_RUNNING: a->leave_running = true; return -1;
        case J_REPLACE: a->replace = true; return -1;
        case J_SLURM: a->slurm = true; return -1;
        case J_REQUEUE: a->requeue = true; return -1;
        case J_TIMEOUT: {
                unsigned long long v;

                if (ctl_parse_uint(optarg, INT_MAX, &v) < 0 || v == 0)
                        return job_usage("invalid --timeout '%s': milliseconds, 1 and up", optarg);
                a->timeout_ms = (int)v;
                return -1;
        }
        case J_SAVE_ON:
                if (ctl_job_parse_signals(optarg, &a->save_on) < 0)
                        return job_usage("invalid --save-on '%s': a list of HUP INT QUIT TERM USR1 USR2", optarg);
                a->save_on_given = true;
                return -1;
        case 'h': job_help(); return CUDACKPT_EXIT_OK;
        default: return job_usage("invalid option");
        }
}

/* Which options go with which subcommand; -1 when all is well. */
static int job_check(job_args *a, int n_operands) {
        bool waits = strcmp(a->sub, "start") == 0 || strcmp(a->sub, "restore") == 0;
        int want = strcmp(a->sub, "restore") == 0 || strcmp(a->sub, "rm") == 0 || strcmp(a->sub, "save") == 0 ? 1 : 0;

        if (!a->name)
                a->name = "job";
        if (!waits && (a->save_on_given || a->output || a->requeue))
                return job_usage("--save-on, --output and --requeue are for start and restore");
        if (a->requeue && strcmp(a->sub, "start") == 0 && !a->save)
                return job_usage("--requeue needs --save");
        if (strcmp(a->sub, "start") != 0 && (a->save || a->output || a->argv))
                return job_usage("--save, --output and a COMMAND are for start");
        if (strcmp(a->sub, "save") != 0 && (a->leave_running || a->replace))
                return job_usage("--leave-running and --replace are for save");
        if (strcmp(a->sub, "start") == 0 && (!a->argv || !a->argv[0]))
                return job_usage("start needs a COMMAND after --");
        if (n_operands < want || n_operands > want + (strcmp(a->sub, "save") == 0 || strcmp(a->sub, "saves") == 0))
                return job_usage("wrong number of operands for %s", a->sub);
        if ((a->operand && !ctl_job_name_valid(a->operand)) || (a->operand2 && !ctl_job_name_valid(a->operand2)) ||
            !ctl_job_name_valid(a->name) || (a->save && !ctl_job_name_valid(a->save)))
                return job_usage("invalid name: 1 to %d of A-Z a-z 0-9 _ . -, not first . or -", CTL_JOB_NAME_MAX);
        if (a->output && a->output[0] != '/')
                return job_usage("--output needs an absolute path");
        if (a->timeout_ms && !a->slurm)
                return job_usage("--timeout is for start --slurm");
        if (a->slurm && a->socket)
                return job_usage("--slurm reaches each node's daemon at its default socket: no --socket");
        if (a->slurm && (strcmp(a->sub, "start") != 0 || !a->save || strlen(a->save) > JOBSET_SAVE_MAX || a->json))
                return job_usage("--slurm is for start, with a --save of at most %u characters, without --json",
                                 JOBSET_SAVE_MAX);
        if (a->slurm && !nodes_slurm_job_valid(getenv("SLURM_JOB_ID")))
                return job_usage("--slurm runs in a Slurm job: SLURM_JOB_ID is not set to one");
        if (!a->save_on_given) {
                sigemptyset(&a->save_on);
                sigaddset(&a->save_on, SIGTERM);
                sigaddset(&a->save_on, SIGUSR1);
        }
        return -1;
}

static int job_parse(int argc, char **argv, job_args *a) {
        const char *operands[3];
        int c, n = 0, n_words = 0, r;

        optind = 1;
        opterr = 0;
        /* "-": the words in order ("job" first); the command after "--". */
        while ((c = getopt_long(argc, argv, "-:h", job_options, NULL)) != -1) {
                if (c == 1 && n_words++ == 0)
                        continue;
                if (c == 1) {
                        if (n == 3)
                                return job_usage("unexpected '%s'", optarg);
                        operands[n++] = optarg;
                        continue;
                }
                r = job_option(a, c);
                if (r >= 0)
                        return r;
        }
        a->argv = argv[optind] ? argv + optind : NULL;
        if (n == 0)
                return job_usage("no subcommand: start, restore, save, list, saves or rm");
        a->sub = operands[0];
        a->operand = n > 1 ? operands[1] : NULL;
        a->operand2 = n > 2 ? operands[2] : NULL;
        if (strcmp(a->sub, "start") && strcmp(a->sub, "restore") && strcmp(a->sub, "save") && strcmp(a->sub, "list") &&
            strcmp(a->sub, "saves") && strcmp(a->sub, "rm"))
                return job_usage("unknown subcommand '%s'", a->sub);
        return job_check(a, n - 1);
}

/* One call: its params, or NULL (out of memory, said). */
static int job_oom(void) {
        fputs(JOB_PREFIX "out of memory\n", stderr);
        return CUDACKPT_EXIT_FAILURE;
}

/* The exit status for a failed call; CommandFailed earns the root
 * command's own (a dump's 29, run's 125, ...). */
static int job_failed(const job_args *a, int r, const cudackpt_reply *reply) {
        int status = ctl_call_failed(JOB_PREFIX, r, reply, a->json);
        cJSON *p;
        long long v;

        if (r == 0 && reply->error && strcmp(reply->error, CUDACKPT_ERROR_COMMAND_FAILED) == 0) {
                p = cJSON_Parse(reply->parameters_json);
                if (json_get_integer(p, "exit_status", 1, 255, &v))
                        status = (int) v;
                cJSON_Delete(p);
        }
        return status;
}

/* How a waited job ended. */
typedef enum job_end { JOB_END_FAILED, JOB_END_NO_SAVE, JOB_END_ENDED, JOB_END_SAVED } job_end;

/* A job waited on: start's or restore's.  Returns the exit status and
 * *ret_end; JOB_END_NO_SAVE (the reply said NoSuchSave) is not said. */
static int job_wait(const job_args *a, const char *method, const char *params, const char *save, job_end *ret_end) {
        ctl_job_wait w = { .socket = ctl_socket_path(a->socket), .prefix = JOB_PREFIX, .method = method,
                           .params = params, .save = save, .save_on = a->save_on, .json = a->json };
        cudackpt_reply reply;
        ctl_job_event last;
        int r, status, saved_by = 0;

        *ret_end = JOB_END_FAILED;
        cudackpt_reply_init(&reply);
        r = ctl_job_wait_run(&w, &last, &saved_by, &reply);
        if (r > 0)
                status = r;
        else if (r == 0 && reply.error && strcmp(reply.error, CUDACKPT_ERROR_NO_SUCH_SAVE) == 0 &&
                 strcmp(method, CUDACKPT_METHOD_RESTORE_JOB) == 0 && save) {
                *ret_end = JOB_END_NO_SAVE;
                status = CUDACKPT_EXIT_OK;
        } else if (r < 0 || reply.error)
                status = job_failed(a, r, &reply);
        else if (strcmp(last.event, "saved") == 0) {
                *ret_end = JOB_END_SAVED;
                status = CUDACKPT_EXIT_OK;
                if (a->requeue)
                        ctl_job_requeue_after(JOB_PREFIX, saved_by);
        } else {
                *ret_end = JOB_END_ENDED;
                status = last.exit_status < 0 ? CUDACKPT_EXIT_FAILURE : last.exit_status;
        }
        cudackpt_reply_clear(&reply);
        return status;
}

/* One call that answers once, taking params (NULL: out of memory); its
 * reply in *reply (to clear).  The exit status: 0, or the failure's
 * (said). */
static int job_call(const job_args *a, const char *method, char *params, cudackpt_reply *reply) {
        cudackpt_client *client = NULL;
        int r;

        cudackpt_reply_init(reply);
        if (!params)
                return job_oom();
        r = ctl_connect_daemon(JOB_PREFIX, ctl_socket_path(a->socket), &client);
        if (r == 0) {
                r = cudackpt_call(client, method, params, reply);
                r = r < 0 || reply->error ? job_failed(a, r, reply) : CUDACKPT_EXIT_OK;
        }
        cudackpt_client_free(client);
        free(params);
        return r;
}

/* start --save: the save is gone once the job has done its work (it holds
 * a state the job has gone past); a job that failed or was killed (a
 * crash, the OOM killer, a time limit's SIGKILL after a save that did not
 * come) keeps it, to be restored by the next start or removed by hand. */
static void job_forget_save(const job_args *a, int status) {
        cudackpt_reply reply;
        char *params;
        cudackpt_client *client = NULL;

        if (status != 0) {
                if (!a->json)
                        fprintf(stderr, JOB_PREFIX "save %s kept: the job ended with status %d (job rm %s "
                                "removes it)\n", a->save, status, a->save);
                return;
        }
        params = ctl_job_save_param(a->save);
        cudackpt_reply_init(&reply);
        if (params && ctl_connect_daemon(JOB_PREFIX, ctl_socket_path(a->socket), &client) == 0 &&
            cudackpt_call(client, CUDACKPT_METHOD_REMOVE_SAVE, params, &reply) == 0 && !reply.error && !a->json)
                fprintf(stderr, JOB_PREFIX "save %s removed: the job ended\n", a->save);
        cudackpt_reply_clear(&reply);
        cudackpt_client_free(client);
        free(params);
}

static int job_start(job_args *a) {
        char out[PATH_MAX], cwd[PATH_MAX];
        char *params;
        job_end end;
        int status;

        if (a->slurm) {
                ctl_job_check_slurm_task(JOB_PREFIX);
                return ctl_jobnodes_run(&(ctl_jobnodes_op){ .prefix = JOB_PREFIX, .name = a->name, .save = a->save,
                                                            .output = ctl_job_output(a->output, true, JOB_PREFIX,
                                                                                     out, sizeof(out)),
                                                            .argv = a->argv, .save_on = a->save_on,
                                                            .requeue = a->requeue, .timeout_ms = a->timeout_ms });
        }
        if (a->save) {
                ctl_job_check_slurm_task(JOB_PREFIX);
                params = ctl_job_save_param(a->save);
                if (!params)
                        return job_oom();
                status = job_wait(a, CUDACKPT_METHOD_RESTORE_JOB, params, a->save, &end);
                free(params);
                if (end == JOB_END_ENDED)
                        job_forget_save(a, status);
                if (end != JOB_END_NO_SAVE)
                        return status;
        }
        if (!getcwd(cwd, sizeof(cwd))) {
                perror(JOB_PREFIX "the working directory");
                return CUDACKPT_EXIT_FAILURE;
        }
        params = ctl_job_start_params(a->name, a->argv, environ, cwd,
                                      ctl_job_output(a->output, false, JOB_PREFIX, out, sizeof(out)));
        if (!params)
                return job_oom();
        status = job_wait(a, CUDACKPT_METHOD_START_JOB, params, a->save, &end);
        free(params);
        if (end == JOB_END_ENDED && a->save)
                job_forget_save(a, status);
        return status;
}

static int job_restore(job_args *a) {
        char *params = ctl_job_save_param(a->operand);
        job_end end;
        int status;

        if (!params)
                return job_oom();
        ctl_job_check_slurm_task(JOB_PREFIX);
        /* The save signals save it back where it came from. */
        status = job_wait(a, CUDACKPT_METHOD_RESTORE_JOB, params, a->operand, &end);
        free(params);
        if (end == JOB_END_NO_SAVE) {
                fprintf(stderr, JOB_PREFIX "NoSuchSave: you have no save %s\n", a->operand);
                status = CUDACKPT_EXIT_NO_SUCH_JOB;
        }
        return status;
}

/* A SaveInfo's line: SAVE JOB BYTES CREATED. */
static void job_print_save(const cJSON *s) {
        const char *save = json_get_string(s, "save"), *job = json_get_string(s, "job");
        long long bytes = -1, created = -1;

        (void) json_get_integer(s, "bytes", 0, JSON_MAX_EXACT, &bytes);
        (void) json_get_integer(s, "created", 0, JSON_MAX_EXACT, &created);
        ctl_fputs_safe(save ? save : "?", stdout);
        putchar('\t');
        ctl_fputs_safe(job ? job : "?", stdout);
        printf("\t%lld\t%lld\n", bytes, created);
}

static int job_save(job_args *a) {
        const char *save = a->operand2 ? a->operand2 : a->operand;
        cudackpt_reply reply;
        cJSON *p;
        int status = job_call(a, CUDACKPT_METHOD_SAVE_JOB,
                              ctl_job_save_params(a->operand, save, a->leave_running, a->replace), &reply);

        if (status == CUDACKPT_EXIT_OK && a->json)
                puts(reply.parameters_json);
        else if (status == CUDACKPT_EXIT_OK) {
                p = cJSON_Parse(reply.parameters_json);
                fputs("SAVE\tJOB\tBYTES\tCREATED\n", stdout);
                job_print_save(cJSON_GetObjectItemCaseSensitive(p, "save"));
                cJSON_Delete(p);
        }
        cudackpt_reply_clear(&reply);
        return status;
}

/* list and saves: a table, or the reply with --json.  saves SAVE: only
 * that one, CUDACKPT_EXIT_NO_SUCH_JOB when there is none. */
static int job_list(job_args *a, bool saves) {
        const char *key = saves ? "saves" : "jobs";
        const cJSON *item;
        cudackpt_reply reply;
        cJSON *p;
        bool found = false;
        int status = job_call(a, saves ? CUDACKPT_METHOD_LIST_SAVES : CUDACKPT_METHOD_LIST_JOBS, strdup("{}"),
                              &reply);

        if (status != CUDACKPT_EXIT_OK)
                goto out;
        p = cJSON_Parse(reply.parameters_json);
        if (!a->json)
                fputs(saves ? "SAVE\tJOB\tBYTES\tCREATED\n" : "NAME\tPID\n", stdout);
        cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(p, key)) {
                const char *name = json_get_string(item, saves ? "save" : "name");
                long long pid = -1;

                if (a->operand && (!name || strcmp(name, a->operand) != 0))
                        continue;
                found = true;
                if (a->json) {
                        char *text = json_print_dup(item);

                        if (text)
                                puts(text);
                        free(text);
                } else if (saves)
                        job_print_save(item);
                else {
                        (void) json_get_integer(item, "pid", 1, INT_MAX, &pid);
                        ctl_fputs_safe(name ? name : "?", stdout);
                        printf("\t%lld\n", pid);
                }
        }
        cJSON_Delete(p);
        if (a->operand && !found)
                status = CUDACKPT_EXIT_NO_SUCH_JOB;
out:
        cudackpt_reply_clear(&reply);
        return status;
}

static int job_rm(job_args *a) {
        cudackpt_reply reply;
        int status = job_call(a, CUDACKPT_METHOD_REMOVE_SAVE, ctl_job_save_param(a->operand), &reply);

        cudackpt_reply_clear(&reply);
        return status;
}

int ctl_jobcmd_main(int argc, char **argv) {
        job_args a = { 0 };
        int r = job_parse(argc, argv, &a);

        if (r >= 0)
                return r;
        if (strcmp(a.sub, "start") == 0)
                return job_start(&a);
        if (strcmp(a.sub, "restore") == 0)
                return job_restore(&a);
        if (strcmp(a.sub, "save") == 0)
                return job_save(&a);
        if (strcmp(a.sub, "rm") == 0)
                return job_rm(&a);
        return job_list(&a, strcmp(a.sub, "saves") == 0);
}
