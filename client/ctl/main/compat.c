/* compat.c: cudackptctl started as "cuda-checkpoint".
 *
 * CRIU's CUDA plugin (CRIU >= 4.0) runs a program named cuda-checkpoint
 * from $PATH for each process it dumps or restores: "-h" (whose output
 * must mention --action), "--get-restore-tid --pid P" (stdout parsed as a
 * number; a non-zero exit means "not a CUDA process"), "--get-state --pid
 * P" (stdout compared with running/locked/checkpointed), and "--action
 * lock|checkpoint|restore|unlock --pid P [--timeout MS]".  This mode
 * accepts the command line of NVIDIA's utility and carries it out through
 * cudackptd, so that a symlink named cuda-checkpoint put first on CRIU's
 * $PATH routes every GPU operation through the daemon (and its permission
 * checks, queueing and rollback) without changing CRIU.
 *
 * Like NVIDIA's utility: success prints the state or tid for the queries
 * and nothing for actions, exit 0; any failure prints one line on stderr
 * and exits 1.  No client timeout: the utility waits for the driver too.
 *
 * CRIU passes no --device-map, so a restore's GPU mapping may also come
 * from $CUDACKPT_DEVICE_MAP (see compat_env_map()); the native commands
 * do not read it. */
#include "compat.h"

#include "args.h"
#include "describe.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COMPAT_NAME "cuda-checkpoint"
#define COMPAT_DEVICE_MAP_ENV "CUDACKPT_DEVICE_MAP"

typedef enum compat_mode {
        COMPAT_NONE,
        COMPAT_GET_STATE,
        COMPAT_GET_RESTORE_TID,
        COMPAT_ACTION,
        COMPAT_TOGGLE,
} compat_mode;

typedef enum compat_action {
        COMPAT_LOCK,
        COMPAT_CHECKPOINT,
        COMPAT_RESTORE,
        COMPAT_UNLOCK,
} compat_action;

static const char *const compat_action_names[] = {
        [COMPAT_LOCK] = "lock",
        [COMPAT_CHECKPOINT] = "checkpoint",
        [COMPAT_RESTORE] = "restore",
        [COMPAT_UNLOCK] = "unlock",
};

typedef struct compat_args {
        compat_mode mode;
        compat_action action;
        int pid;                /* 0 until --pid */
        long long timeout_ms;   /* -1: the daemon's default */
        ctl_map map;
} compat_args;

static void compat_help(void) {
        printf("Usage: " COMPAT_NAME " --get-state|--get-restore-tid|--action ACTION|--toggle --pid PID\n"
               "                       [--timeout MS] [--device-map OLD=NEW[,OLD=NEW...]]\n"
               "\n"
               "cudackptd's stand-in for NVIDIA's cuda-checkpoint utility: the same command line,\n"
               "carried out by the cudackptd daemon (this is cudackptctl " CUDACKPT_VERSION
               " started as\n"
               "\"" COMPAT_NAME "\"; run it under another name for its own commands).\n"
               "\n"
               "  --get-state                  print the CUDA state of the process: running,\n"
               "                               locked, checkpointed or failed\n"
               "  --get-restore-tid            print the thread id a restore must be made from\n"
               "  --action ACTION              lock (running -> locked), checkpoint (locked ->\n"
               "                               checkpointed), restore (checkpointed -> locked)\n"
               "                               or unlock (locked -> running)\n"
               "  --toggle                     running -> checkpointed (lock and checkpoint), or\n"
               "                               checkpointed -> running (restore and unlock)\n"
               "  -p, --pid PID                the process (required)\n"
               "  -t, --timeout MS             lock, and toggle of a running process: wait at most\n"
               "                               MS ms for its GPU work; 0 = no limit (default: the\n"
               "                               daemon's); ignored by the other actions\n"
               "  -d, --device-map OLD=NEW[,OLD=NEW...]\n"
               "                               restore, and toggle of a checkpointed process:\n"
               "                               restore onto other GPUs, mapping each old GPU UUID\n"
               "                               (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx) to a new\n"
               "                               one; ignored by the other actions; when not given,\n"
               "                               taken from " COMPAT_DEVICE_MAP_ENV "\n"
               "  -h, --help                   show this help\n"
               "\n"
               "Environment:\n"
               "  " CUDACKPT_SOCKET_ENV "              the daemon's socket (default\n"
               "                               " CUDACKPT_DEFAULT_SOCKET ")\n"
               "  " COMPAT_DEVICE_MAP_ENV "          OLD=NEW[,OLD=NEW...]: the mapping of restore, and\n"
               "                               toggle, when --device-map is not given (for CRIU,\n"
               "                               which cannot pass options); empty or unset: none;\n"
               "                               malformed: an error, the daemon is not asked\n"
               "\n"
               "Exit status: 0 on success (actions print nothing), 1 on any failure, with one\n"
               "line on stderr.\n");
}

#define compat_usage_error(...) ctl_usage_fail(1, COMPAT_NAME, " (see --help)\n", __VA_ARGS__)

static int compat_set_mode(compat_args *a, compat_mode mode) {
        if (a->mode != COMPAT_NONE && a->mode != mode)
                return compat_usage_error("give only one of --get-state, --get-restore-tid, --action, --toggle");
        a->mode = mode;
        return 0;
}

/* Whether the command may restore: --action restore, and --toggle (of a
 * checkpointed process, which is not known before the daemon is asked). */
static bool compat_may_restore(const compat_args *a) {
        return a->mode == COMPAT_TOGGLE || (a->mode == COMPAT_ACTION && a->action == COMPAT_RESTORE);
}

/* The mapping from $CUDACKPT_DEVICE_MAP, for programs that run this mode
 * and cannot add options: CRIU's CUDA plugin runs "--action restore --pid
 * P" and nothing more.  Read only by the commands that may restore, and
 * only when no --device-map was given (the command line wins, and is not
 * merged with it); empty or unset means no mapping.  A malformed value
 * fails before the daemon is asked, toggle of a running process included:
 * restoring in place instead of onto the GPUs meant would go unnoticed.
 * Returns -1 to go on, else the exit status. */
static int compat_env_map(compat_args *a) {
        const char *env;
        char *shown;
        int r;

        if (!compat_may_restore(a) || a->map.n_items > 0)
                return -1;
        env = secure_getenv(COMPAT_DEVICE_MAP_ENV);
        if (!env || !*env)
                return -1;
        r = ctl_map_add(&a->map, env);
        if (r == 0)
                return -1;
        if (r == -ENOMEM) {
                fputs(COMPAT_NAME ": out of memory\n", stderr);
                return 1;
        }
        /* Sanitised: a newline in the value must not make a second line. */
        shown = strdup(env);
        if (shown)
                ctl_sanitize(shown);
        r = compat_usage_error("invalid " COMPAT_DEVICE_MAP_ENV " '%s': expected "
                               "OLD=NEW[,OLD=NEW...], each GPU once", shown ? shown : "?");
        free(shown);
        return r;
}

/* Returns -1 to go on, else the exit status. */
/* --action NAME: 0, or the exit status of a usage error. */
static int compat_set_action(compat_args *a, const char *name) {
        size_t i;
        int r = compat_set_mode(a, COMPAT_ACTION);

        if (r != 0)
                return r;
        for (i = 0; i < sizeof(compat_action_names) / sizeof(compat_action_names[0]); i++)
                if (strcmp(name, compat_action_names[i]) == 0)
                        break;
        if (i == sizeof(compat_action_names) / sizeof(compat_action_names[0]))
                return compat_usage_error("unknown action '%s': expected lock, checkpoint, "
                                          "restore or unlock", name);
        a->action = (compat_action) i;
        return 0;
}

/* --device-map OLD=NEW[,...]: 0, or the exit status of the error. */
static int compat_add_map(compat_args *a, const char *arg) {
        int r = ctl_map_add(&a->map, arg);

        if (r == -ENOMEM) {
                fputs(COMPAT_NAME ": out of memory\n", stderr);
                return 1;
        }
        if (r < 0)
                return compat_usage_error("invalid device map '%s': expected "
                                          "OLD=NEW[,OLD=NEW...], each GPU once", arg);
        return 0;
}

enum { OPT_GET_STATE = 0x100, OPT_GET_RESTORE_TID, OPT_ACTION, OPT_TOGGLE };

static const struct option compat_options[] = {
        { "get-state", no_argument, NULL, OPT_GET_STATE },
        { "get-restore-tid", no_argument, NULL, OPT_GET_RESTORE_TID },
        { "action", required_argument, NULL, OPT_ACTION },
        { "toggle", no_argument, NULL, OPT_TOGGLE },
        { "pid", required_argument, NULL, 'p' },
        { "timeout", required_argument, NULL, 't' },
        { "device-map", required_argument, NULL, 'd' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
};

/* One getopt_long() result; -1 to go on, else the exit status. */
static int compat_option(compat_args *a, int c, char **argv) {
        unsigned long long v;
        int r;

        switch (c) {
        case 1:
                return compat_usage_error("unexpected argument '%s'", optarg);
        case OPT_GET_STATE:
        case OPT_GET_RESTORE_TID:
        case OPT_TOGGLE:
                r = compat_set_mode(a, c == OPT_GET_STATE ? COMPAT_GET_STATE
                                       : c == OPT_GET_RESTORE_TID ? COMPAT_GET_RESTORE_TID
                                                                  : COMPAT_TOGGLE);
                return r != 0 ? r : -1;
        case OPT_ACTION:
                r = compat_set_action(a, optarg);
                return r != 0 ? r : -1;
        case 'p':
                if (ctl_parse_pid(optarg, &a->pid) < 0)
                        return compat_usage_error("invalid process ID '%s'", optarg);
                return -1;
        case 't':
                if (ctl_parse_uint(optarg, 4294967295ULL, &v) < 0)
                        return compat_usage_error("invalid timeout '%s': expected milliseconds, "
                                                  "0..4294967295", optarg);
                a->timeout_ms = (long long) v;
                return -1;
        case 'd':
                r = compat_add_map(a, optarg);
                return r != 0 ? r : -1;
        case 'h':
                compat_help();
                return 0;
        case ':':
                return compat_usage_error("option '%s' needs an argument", argv[optind - 1]);
        default:
                if (optopt == 'h' || optopt == OPT_GET_STATE || optopt == OPT_GET_RESTORE_TID ||
                    optopt == OPT_TOGGLE)
                        return compat_usage_error("option '%s' takes no argument", argv[optind - 1]);
                return compat_usage_error("unknown option '%s'", argv[optind - 1]);
        }
}

static int compat_parse_args(int argc, char **argv, compat_args *a) {
        int c, r;

        opterr = 0;
        while ((c = getopt_long(argc, argv, "-:hp:t:d:", compat_options, NULL)) != -1) {
                r = compat_option(a, c, argv);
                if (r >= 0)
                        return r;
        }
        if (optind < argc)
                return compat_usage_error("unexpected argument '%s'", argv[optind]);
        if (a->mode == COMPAT_NONE)
                return compat_usage_error("give one of --get-state, --get-restore-tid, --action, --toggle");
        if (a->pid == 0)
                return compat_usage_error("--pid is required");
        return compat_env_map(a);
}

/* The one failure line, in the words of NVIDIA's utility:
 * Could not lock on process ID 462: "InvalidState: process is locked" */
static void compat_fail_line(const compat_args *a, const char *what) {
        switch (a->mode) {
        case COMPAT_GET_STATE:
                fprintf(stderr, "Error getting process state for process ID %d: ", a->pid);
                break;
        case COMPAT_GET_RESTORE_TID:
                fprintf(stderr, "Error getting restore thread ID for process ID %d: ", a->pid);
                break;
        case COMPAT_TOGGLE:
                fprintf(stderr, "Could not toggle process ID %d: ", a->pid);
                break;
        default:
                fprintf(stderr, "Could not %s on process ID %d: ", compat_action_names[a->action], a->pid);
                break;
        }
        fputc('"', stderr);
        ctl_fputs_safe(what, stderr);
        fputs("\"\n", stderr);
}

/* Report a call that did not succeed: r < 0, or an error reply.  Returns
 * 0 when the call succeeded, else 1 (the exit status). */
static int compat_check(const compat_args *a, int r, const cudackpt_reply *reply) {
        char *text;

        if (r < 0) {
                compat_fail_line(a, ctl_describe_call_failure(r));
                return 1;
        }
        if (!reply->error)
                return 0;
        text = ctl_describe_error(reply);
        compat_fail_line(a, text ? text : reply->error);
        free(text);
        return 1;
}

static int compat_toggle(cudackpt_client *client, const compat_args *a, cudackpt_reply *reply) {
        const char *const *map = (const char *const *) a->map.items;
        int r;

        r = cudackpt_get_state(client, a->pid, reply);
        if (compat_check(a, r, reply) != 0)
                return 1;
        if (reply->state && strcmp(reply->state, CUDACKPT_STATE_RUNNING) == 0) {
                cudackpt_reply_clear(reply);
                r = cudackpt_suspend(client, a->pid, a->timeout_ms, reply);
        } else if (reply->state && strcmp(reply->state, CUDACKPT_STATE_CHECKPOINTED) == 0) {
                cudackpt_reply_clear(reply);
                r = cudackpt_resume(client, a->pid, map, reply);
        } else {
                char *what = NULL;

                if (asprintf(&what, "process is %s; toggle needs a running or checkpointed process",
                             reply->state ? reply->state : "in an unknown state") < 0)
                        what = NULL;
                compat_fail_line(a, what ? what : "process is neither running nor checkpointed");
                free(what);
                return 1;
        }
        return compat_check(a, r, reply);
}

/* --action's call; what it returned. */
static int compat_do_action(cudackpt_client *client, const compat_args *a, cudackpt_reply *reply) {
        switch (a->action) {
        case COMPAT_LOCK:
                return cudackpt_lock(client, a->pid, a->timeout_ms, reply);
        case COMPAT_CHECKPOINT:
                return cudackpt_checkpoint(client, a->pid, reply);
        case COMPAT_RESTORE:
                return cudackpt_restore(client, a->pid, (const char *const *) a->map.items, reply);
        case COMPAT_UNLOCK:
                return cudackpt_unlock(client, a->pid, reply);
        }
        return -EINVAL;
}

static int compat_run(const compat_args *a) {
        const char *path = ctl_socket_path(NULL);
        cudackpt_client *client = NULL;
        cudackpt_reply reply;
        int r, status = 1;

        cudackpt_reply_init(&reply);
        r = cudackpt_client_connect(path, &client);
        if (r < 0) {
                char *what = NULL;

                if (asprintf(&what, "cannot reach cudackptd at %s: %s", path, strerror(-r)) < 0)
                        what = NULL;
                compat_fail_line(a, what ? what : "cannot reach cudackptd");
                free(what);
                return 1;
        }

        switch (a->mode) {
        case COMPAT_GET_STATE:
                r = cudackpt_get_state(client, a->pid, &reply);
                if (compat_check(a, r, &reply) != 0)
                        break;
                if (!reply.state) {
                        compat_fail_line(a, "invalid reply from cudackptd: no state");
                        break;
                }
                ctl_fputs_safe(reply.state, stdout);
                putchar('\n');
                status = 0;
                break;
        case COMPAT_GET_RESTORE_TID:
                r = cudackpt_get_restore_thread_id(client, a->pid, &reply);
                if (compat_check(a, r, &reply) != 0)
                        break;
                if (reply.restore_thread_id < 0) {
                        compat_fail_line(a, "invalid reply from cudackptd: no restore_thread_id");
                        break;
                }
                printf("%d\n", reply.restore_thread_id);
                status = 0;
                break;
        case COMPAT_TOGGLE:
                status = compat_toggle(client, a, &reply);
                break;
        case COMPAT_ACTION:
                status = compat_check(a, compat_do_action(client, a, &reply), &reply);
                break;
        case COMPAT_NONE:
                break;
        }

        cudackpt_reply_clear(&reply);
        cudackpt_client_free(client);
        return status;
}

int compat_main(int argc, char **argv) {
        compat_args args = { .timeout_ms = -1 };
        int status;

        status = compat_parse_args(argc, argv, &args);
        if (status < 0)
                status = compat_run(&args);
        ctl_map_free(&args.map);
        if (fflush(stdout) != 0 && status == 0)
                status = 1;
        return status;
}
