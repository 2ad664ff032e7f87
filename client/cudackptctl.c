/* cudackptctl.c: the command-line client of cudackptd.
 *
 * Parses the command line, makes one call through libcudackpt and prints
 * its result: a bare value for scripts ("running", a tid), "STATE (D.D ms)"
 * for operations, or with --json the reply's parameters.  Errors go to
 * stderr as one line and map to distinct exit statuses (see --help).
 * The operations also take a set of processes (--pids, --cgroup, --tree)
 * in place of the PID, and ps lists CUDA processes: see group.c.
 *
 * Started under the name "cuda-checkpoint" (a symlink), it speaks the
 * command line of NVIDIA's utility instead, for CRIU's CUDA plugin: see
 * compat.c. */
#include "ctl.h"
#include "doctor.h"
#include "job.h"

#include <cJSON.h>

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef CUDACKPT_VERSION
#error "CUDACKPT_VERSION must be defined by the build"
#endif

#define CTL_NAME "cudackptctl"

/* metrics --listen: a scrape's limit without --timeout (Prometheus's
 * default scrape_timeout is 10 s). */
#define CTL_SCRAPE_TIMEOUT_MS 10000

#ifdef CUDACKPT_HAVE_MICROHTTPD
#define CTL_LISTEN_NOTE "                             (see docs/operations.md)\n"
#else
#define CTL_LISTEN_NOTE "                             (NOT in this build: no libmicrohttpd when it was\n" \
                        "                             configured)\n"
#endif

typedef enum ctl_command_id {
        CTL_STATE,
        CTL_RESTORE_TID,
        CTL_LOCK,
        CTL_CHECKPOINT,
        CTL_RESTORE,
        CTL_UNLOCK,
        CTL_SUSPEND,
        CTL_RESUME,
        CTL_INFO,
        CTL_PS,
        CTL_WATCH,
        CTL_METRICS,
        CTL_RELEASE,
        CTL_RENEW,
        CTL_DOCTOR,
        CTL_STATUS,
} ctl_command_id;

/* What each command takes. */
enum {
        CTL_TAKES_PID = 1 << 0,
        CTL_TAKES_LOCK_TIMEOUT = 1 << 1,
        CTL_TAKES_MAP = 1 << 2,
        CTL_TAKES_GROUP = 1 << 3,     /* a selector in place of the PID */
        CTL_TAKES_SELECTOR = 1 << 4,  /* an optional selector (ps) */
        CTL_TAKES_LEASE = 1 << 5,     /* --lease-ms, --hold (lock, suspend) */
        CTL_TAKES_LEASE_ID = 1 << 6,  /* a lease id in place of the PID */
};

typedef struct ctl_command {
        const char *name;
        ctl_command_id id;
        unsigned flags;
        const char *group_method;     /* with CTL_TAKES_GROUP */
} ctl_command;

static const ctl_command ctl_commands[] = {
        { "state", CTL_STATE, CTL_TAKES_PID, NULL },
        { "restore-tid", CTL_RESTORE_TID, CTL_TAKES_PID, NULL },
        { "lock", CTL_LOCK, CTL_TAKES_PID | CTL_TAKES_LOCK_TIMEOUT | CTL_TAKES_GROUP | CTL_TAKES_LEASE,
          CUDACKPT_METHOD_LOCK_GROUP },
        { "checkpoint", CTL_CHECKPOINT, CTL_TAKES_PID | CTL_TAKES_GROUP, CUDACKPT_METHOD_CHECKPOINT_GROUP },
        { "restore", CTL_RESTORE, CTL_TAKES_PID | CTL_TAKES_MAP | CTL_TAKES_GROUP, CUDACKPT_METHOD_RESTORE_GROUP },
        { "unlock", CTL_UNLOCK, CTL_TAKES_PID | CTL_TAKES_GROUP, CUDACKPT_METHOD_UNLOCK_GROUP },
        { "suspend", CTL_SUSPEND, CTL_TAKES_PID | CTL_TAKES_LOCK_TIMEOUT | CTL_TAKES_GROUP | CTL_TAKES_LEASE,
          CUDACKPT_METHOD_SUSPEND_GROUP },
        { "resume", CTL_RESUME, CTL_TAKES_PID | CTL_TAKES_MAP | CTL_TAKES_GROUP, CUDACKPT_METHOD_RESUME_GROUP },
        { "info", CTL_INFO, 0, NULL },
        { "ps", CTL_PS, CTL_TAKES_SELECTOR, NULL },
        { "watch", CTL_WATCH, CTL_TAKES_SELECTOR, NULL },
        { "metrics", CTL_METRICS, 0, NULL },
        { "release", CTL_RELEASE, CTL_TAKES_LEASE_ID, NULL },
        { "renew", CTL_RENEW, CTL_TAKES_LEASE_ID, NULL },
        { "doctor", CTL_DOCTOR, 0, NULL },
        { "status", CTL_STATUS, 0, NULL },
};

/* The parsed command line. */
typedef struct ctl_args {
        const char *socket;       /* --socket, NULL for the environment/default */
        bool json;                /* --json */
        int timeout_ms;           /* --timeout: client I/O limit, 0 = none */
        long long lock_timeout;   /* --lock-timeout, -1 when not given */
        ctl_map map;              /* every --map, merged */
        const ctl_command *command;
        int pid;                  /* when the command takes one */
        ctl_selector selector;    /* --pids, --cgroup or --tree; CTL_SELECT_NONE when not given */
        int progress;             /* --progress 1, --no-progress 0, else -1: on a terminal */
        long long lease_ms;       /* --lease-ms, -1 when not given */
        bool hold;                /* --hold */
        char **command_argv;      /* --hold: what follows "--", NULL-terminated; NULL: none */
        long long lease;          /* release, renew: the lease id */
        const char *output;       /* metrics --output */
        const char *listen;       /* metrics --listen */
        const char *driver;       /* doctor --driver */
        char *prefix;             /* "cudackptctl: COMMAND ...: ", for errors */
} ctl_args;

static void ctl_help(void) {
        printf("Usage: " CTL_NAME " [OPTIONS] COMMAND [ARGUMENTS]\n"
               "\n"
               "Ask cudackptd to checkpoint or restore the CUDA state of a process.\n"
               "\n"
               "Commands:\n"
               "  state PID                  print the CUDA state: running, locked, checkpointed,\n"
               "                             failed (or unknown-N)\n"
               "  restore-tid PID            print the thread id a restore must be made from\n"
               "  lock PID                   running -> locked, once submitted GPU work is done\n"
               "  checkpoint PID             locked -> checkpointed (GPU memory to host memory)\n"
               "  restore PID                checkpointed -> locked\n"
               "  unlock PID                 locked -> running\n"
               "  suspend PID                lock, then checkpoint; unlocked again if that fails\n"
               "  resume PID                 restore, then unlock\n"
               "  info                       print the daemon's vendor, product, version, url\n"
               "                             and interfaces (it answers whatever its driver)\n"
               "  status                     print the daemon's health: its CUDA driver (and\n"
               "                             whether it is the simulator), how it finds CUDA\n"
               "                             processes, workers busy, operations queued,\n"
               "                             groups, leases, watchers, connections.  Exit\n"
               "                             status 18 when it has no usable driver\n"
               "  ps [SELECTOR]              list the CUDA processes you may act on (or those of\n"
               "                             SELECTOR): PID, USER, STATE, CGROUP, GPU MEM (with\n"
               "                             NVML), COMMAND\n"
               "  doctor                     check this node: the CUDA driver, persistence mode,\n"
               "                             the daemon, kernel features, cgroups, CRIU and\n"
               "                             transparent huge pages; one line each: ok, warn,\n"
               "                             fail or skip, what was found and what to do.  Exit\n"
               "                             status 1 when a check failed, else 0\n"
               "  watch [SELECTOR]           follow operations, states, leases and CUDA processes\n"
               "                             appearing and exiting, one line per event\n"
               "  metrics [--output=PATH]    print the daemon's Prometheus metrics (or write\n"
               "                             PATH, replacing it whole)\n"
               "  metrics --listen=ADDR      serve them over HTTP at ADDR (:PORT, IPV4:PORT or\n"
               "                             [IPV6]:PORT; PORT 0 picks a free one): GET /metrics\n"
               "                             calls the daemon per scrape (503 with the reason\n"
               "                             when it cannot be reached in time), other paths\n"
               "                             404; until SIGTERM or SIGINT.  Needs no privilege\n"
               CTL_LISTEN_NOTE
               "  release LEASE              end a lease, leaving its processes as they are\n"
               "  renew LEASE --lease-ms=MS  make a lease expire MS ms from now\n"
               "  dump SELECTOR --images=DIR [--leave-running] [-- CRIU-OPTIONS]\n"
               "                             a whole job to disk: suspend it as one group\n"
               "                             (GPU memory free), CRIU dumps each process tree\n"
               "                             into DIR; resumed if CRIU fails (or with\n"
               "                             --leave-running)\n"
               "  restore --images=DIR [--device-map=OLD=NEW,...] [-- CRIU-OPTIONS]\n"
               "                             the job back: CRIU restores every tree with its\n"
               "                             CUDA plugin aside, then one group resume\n"
               "                             (\"cudackptctl dump --help\" for both)\n"
               "Operations print the new state and the time taken: \"checkpointed (812.3 ms)\".\n"
               "\n"
               "Groups: lock, checkpoint, restore, unlock, suspend and resume take a SELECTOR in\n"
               "place of the PID and act on every process of it together: every member locked\n"
               "before any is checkpointed, restored before any is unlocked.  If one fails,\n"
               "lock, checkpoint and suspend bring every member back to running; restore and\n"
               "resume unlock none.  They print each member's state and the total time.\n"
               "  --pids=PID[:START][,...]   these processes; START pins one to its start time\n"
               "                             (field 22 of /proc/PID/stat)\n"
               "  --cgroup=PATH              the CUDA processes of a cgroup v2 and below it, as\n"
               "                             /proc/PID/cgroup names it (/kubepods/pod42)\n"
               "  --tree=PID                 the CUDA processes among PID and its descendants\n"
               "  --progress, --no-progress  show each member's progress on stderr, or not (and\n"
               "                             for one PID, how much memory a checkpoint has\n"
               "                             moved)\n"
               "                             (default: when stderr is a terminal)\n"
               "\n"
               "Options:\n"
               "  --socket=PATH              the daemon's socket\n"
               "  --json                     print the reply's parameters as JSON on stdout;\n"
               "                             an error as {\"error\":NAME,\"parameters\":{...}}\n"
               "  --timeout=MS               stop waiting for the daemon after MS milliseconds\n"
               "                             (0, the default: wait as long as it takes; the\n"
               "                             daemon finishes the operation regardless);\n"
               "                             metrics --listen: each scrape's (default 10000)\n"
               "  --lock-timeout=MS          lock, suspend: how long to wait for the process's\n"
               "                             GPU work, 0..4294967295, 0 = no limit (default:\n"
               "                             the daemon's configured default)\n"
               "  --map=OLD=NEW[,OLD=NEW...] restore, resume: restore onto other GPUs, mapping\n"
               "                             each old GPU UUID to a new one (GPU-xxxxxxxx-xxxx-\n"
               "                             xxxx-xxxx-xxxxxxxxxxxx); may be repeated\n"
               "  --driver=PATH              doctor: the CUDA driver library to check (default\n"
               "                             libcuda.so.1)\n"
               "  --lease-ms=MS              lock, suspend: undo the operation (back to running)\n"
               "                             MS ms after the reply unless released first\n"
               "  --hold                     lock, suspend (a PID or a group): hold a lease while\n"
               "                             COMMAND (after --) runs, or until SIGINT/SIGTERM,\n"
               "                             then unlock or resume; killed, the daemon undoes it\n"
               "  -h, --help                 show this help\n"
               "  -V, --version              show the version\n"
               "Options may also follow the command.\n"
               "\n"
               "Environment:\n"
               "  " CUDACKPT_SOCKET_ENV "            the daemon's socket when --socket is not given\n"
               "                             (default " CUDACKPT_DEFAULT_SOCKET ")\n"
               "\n"
               "Exit status:\n"
               "   0 success                     14 Timeout\n"
               "   1 other error                 15 InvalidGpuMapping\n"
               "   2 bad command line            16 NotSupported\n"
               "   3 cannot reach the daemon,    17 ProcessGone\n"
               "     or no reply from it         18 DriverUnavailable\n"
               "  10 NoSuchProcess               19 DriverError\n"
               "  11 NotCudaProcess              20 ProcessChanged\n"
               "  12 PermissionDenied            21 QueueFull\n"
               "  13 InvalidState                22 ShuttingDown\n"
               "  23 protocol error (InvalidRequest, MessageTooLarge, InvalidParameter,\n"
               "     MethodNotFound, ...)\n"
               "  24 ProcessStopped (every thread of the process is stopped)\n"
               "  25 GroupTooLarge (the selection holds more processes than the daemon allows)\n"
               "  A group that failed (GroupFailed) exits with the status of the error of its\n"
               "  failing member.  A selection with no CUDA process succeeds.\n"
               "  status exits 18 when the daemon has no usable CUDA driver, as every command\n"
               "  that needs the driver (ps and the groups included) does then; info does not.\n"
               "\n"
               "cuda-checkpoint compatibility:\n"
               "  Started as \"cuda-checkpoint\" (through a symlink of that name), this program\n"
               "  accepts the command line of NVIDIA's cuda-checkpoint utility (--get-state,\n"
               "  --get-restore-tid, --action, --toggle, --pid, --timeout, --device-map) and\n"
               "  carries it out through cudackptd, so that CRIU's CUDA plugin can use the\n"
               "  daemon.  Run \"cuda-checkpoint --help\" for that mode.\n");
}

__attribute__((format(printf, 1, 2)))
static int ctl_usage_error(const char *fmt, ...) {
        va_list ap;

        fputs(CTL_NAME ": ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputs("\nTry '" CTL_NAME " --help' for more information.\n", stderr);
        return CUDACKPT_EXIT_USAGE;
}

static const ctl_command *ctl_find_command(const char *name) {
        for (size_t i = 0; i < sizeof(ctl_commands) / sizeof(ctl_commands[0]); i++)
                if (strcmp(ctl_commands[i].name, name) == 0)
                        return &ctl_commands[i];
        return NULL;
}

/* Fill *a from argv.  Returns -1 to go on, else the exit status. */
static int ctl_parse_args(int argc, char **argv, ctl_args *a) {
        enum {
                OPT_SOCKET = 0x100,
                OPT_JSON,
                OPT_TIMEOUT,
                OPT_LOCK_TIMEOUT,
                OPT_MAP,
                OPT_PIDS,
                OPT_CGROUP,
                OPT_TREE,
                OPT_PROGRESS,
                OPT_NO_PROGRESS,
                OPT_LEASE_MS,
                OPT_HOLD,
                OPT_OUTPUT,
                OPT_DRIVER,
                OPT_LISTEN,
        };
        static const struct option options[] = {
                { "socket", required_argument, NULL, OPT_SOCKET },
                { "json", no_argument, NULL, OPT_JSON },
                { "timeout", required_argument, NULL, OPT_TIMEOUT },
                { "lock-timeout", required_argument, NULL, OPT_LOCK_TIMEOUT },
                { "map", required_argument, NULL, OPT_MAP },
                { "pids", required_argument, NULL, OPT_PIDS },
                { "cgroup", required_argument, NULL, OPT_CGROUP },
                { "tree", required_argument, NULL, OPT_TREE },
                { "progress", no_argument, NULL, OPT_PROGRESS },
                { "no-progress", no_argument, NULL, OPT_NO_PROGRESS },
                { "lease-ms", required_argument, NULL, OPT_LEASE_MS },
                { "hold", no_argument, NULL, OPT_HOLD },
                { "output", required_argument, NULL, OPT_OUTPUT },
                { "driver", required_argument, NULL, OPT_DRIVER },
                { "listen", required_argument, NULL, OPT_LISTEN },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                { NULL, 0, NULL, 0 },
        };
        const char *positional[3] = { NULL };
        size_t n_positional = 0;
        bool saw_lock_timeout = false, saw_map = false;
        ctl_selector_kind kind;
        unsigned long long v;
        int c, r;

        /* "-": positional arguments come back in order as 1, so options may
         * follow the command even under POSIXLY_CORRECT; ":" lets us word
         * the errors ourselves. */
        opterr = 0;
        while ((c = getopt_long(argc, argv, "-:hV", options, NULL)) != -1) {
                switch (c) {
                case 1:
                        if (n_positional == sizeof(positional) / sizeof(positional[0]))
                                return ctl_usage_error("unexpected argument '%s'", optarg);
                        positional[n_positional++] = optarg;
                        break;
                case OPT_SOCKET:
                        if (!*optarg)
                                return ctl_usage_error("--socket needs a path");
                        a->socket = optarg;
                        break;
                case OPT_JSON:
                        a->json = true;
                        break;
                case OPT_TIMEOUT:
                        if (ctl_parse_uint(optarg, INT_MAX, &v) < 0)
                                return ctl_usage_error("invalid --timeout '%s': expected milliseconds, "
                                                       "0..2147483647", optarg);
                        a->timeout_ms = (int) v;
                        break;
                case OPT_LOCK_TIMEOUT:
                        if (ctl_parse_uint(optarg, 4294967295ULL, &v) < 0)
                                return ctl_usage_error("invalid --lock-timeout '%s': expected milliseconds, "
                                                       "0..4294967295", optarg);
                        a->lock_timeout = (long long) v;
                        saw_lock_timeout = true;
                        break;
                case OPT_MAP:
                        r = ctl_map_add(&a->map, optarg);
                        if (r == -EEXIST)
                                return ctl_usage_error("invalid --map '%s': a GPU is mapped twice", optarg);
                        if (r == -ENOMEM) {
                                fputs(CTL_NAME ": out of memory\n", stderr);
                                return CUDACKPT_EXIT_FAILURE;
                        }
                        if (r < 0)
                                return ctl_usage_error("invalid --map '%s': expected OLD=NEW[,OLD=NEW...]",
                                                       optarg);
                        saw_map = true;
                        break;
                case OPT_PIDS:
                case OPT_CGROUP:
                case OPT_TREE:
                        kind = c == OPT_PIDS ? CTL_SELECT_PIDS : c == OPT_CGROUP ? CTL_SELECT_CGROUP : CTL_SELECT_TREE;
                        if (a->selector.kind != CTL_SELECT_NONE)
                                return ctl_usage_error("%s and %s: give one of --pids, --cgroup and --tree, once",
                                                       ctl_selector_option(a->selector.kind),
                                                       ctl_selector_option(kind));
                        r = ctl_selector_parse(&a->selector, kind, optarg);
                        if (r == -ENOMEM) {
                                fputs(CTL_NAME ": out of memory\n", stderr);
                                return CUDACKPT_EXIT_FAILURE;
                        }
                        if (r == -EEXIST)
                                return ctl_usage_error("invalid --pids '%s': a pid is listed twice", optarg);
                        if (r < 0 && kind == CTL_SELECT_PIDS)
                                return ctl_usage_error("invalid --pids '%s': expected PID[:START_TIME][,...], "
                                                       "pids 1..2147483647", optarg);
                        if (r < 0 && kind == CTL_SELECT_CGROUP)
                                return ctl_usage_error("invalid --cgroup '%s': expected an absolute cgroup path "
                                                       "without empty, '.' or '..' components", optarg);
                        if (r < 0)
                                return ctl_usage_error("invalid --tree '%s': expected a number 1..2147483647",
                                                       optarg);
                        break;
                case OPT_PROGRESS:
                        a->progress = 1;
                        break;
                case OPT_NO_PROGRESS:
                        a->progress = 0;
                        break;
                case OPT_LEASE_MS:
                        if (ctl_parse_uint(optarg, 4294967295ULL, &v) < 0 || v == 0)
                                return ctl_usage_error("invalid --lease-ms '%s': expected milliseconds, "
                                                       "1..4294967295", optarg);
                        a->lease_ms = (long long) v;
                        break;
                case OPT_HOLD:
                        a->hold = true;
                        break;
                case OPT_OUTPUT:
                        if (!*optarg)
                                return ctl_usage_error("--output needs a path");
                        a->output = optarg;
                        break;
                case OPT_LISTEN:
                        if (!*optarg)
                                return ctl_usage_error("--listen needs an address (:PORT)");
                        a->listen = optarg;
                        break;
                case OPT_DRIVER:
                        if (!*optarg)
                                return ctl_usage_error("--driver needs a path");
                        a->driver = optarg;
                        break;
                case 'h':
                        ctl_help();
                        return CUDACKPT_EXIT_OK;
                case 'V':
                        printf(CTL_NAME " " CUDACKPT_VERSION "\n");
                        return CUDACKPT_EXIT_OK;
                case ':':
                        return ctl_usage_error("option '%s' needs an argument", argv[optind - 1]);
                default:
                        /* getopt sets optopt to a known option given an argument it does not take. */
                        if (optopt == 'h' || optopt == 'V' || optopt == OPT_JSON || optopt == OPT_PROGRESS ||
                            optopt == OPT_NO_PROGRESS || optopt == OPT_HOLD)
                                return ctl_usage_error("option '%s' takes no argument", argv[optind - 1]);
                        return ctl_usage_error("unknown option '%s'", argv[optind - 1]);
                }
        }
        /* After "--" the rest is positional, or with --hold the command to run. */
        if (a->hold && optind < argc) {
                a->command_argv = argv + optind;
                optind = argc;
        }
        for (; optind < argc; optind++) {
                if (n_positional == sizeof(positional) / sizeof(positional[0]))
                        return ctl_usage_error("unexpected argument '%s'", argv[optind]);
                positional[n_positional++] = argv[optind];
        }

        if (n_positional == 0)
                return ctl_usage_error("no command given");
        a->command = ctl_find_command(positional[0]);
        if (!a->command)
                return ctl_usage_error("unknown command '%s'", positional[0]);
        if (a->selector.kind != CTL_SELECT_NONE) {
                const char *opt = ctl_selector_option(a->selector.kind);

                if (!(a->command->flags & (CTL_TAKES_GROUP | CTL_TAKES_SELECTOR)))
                        return ctl_usage_error("%s is for lock, checkpoint, restore, unlock, suspend, resume "
                                               "and ps, not %s", opt, a->command->name);
                if (n_positional > 1 && (a->command->flags & CTL_TAKES_GROUP))
                        return ctl_usage_error("%s takes a PID or %s, not both", a->command->name, opt);
                if (n_positional > 1)
                        return ctl_usage_error("unexpected argument '%s'", positional[1]);
        } else if (a->command->flags & CTL_TAKES_PID) {
                if (n_positional < 2 && (a->command->flags & CTL_TAKES_GROUP))
                        return ctl_usage_error("%s needs a PID, or --pids, --cgroup or --tree", a->command->name);
                if (n_positional < 2)
                        return ctl_usage_error("%s needs a PID", a->command->name);
                if (n_positional > 2)
                        return ctl_usage_error("unexpected argument '%s'", positional[2]);
                if (ctl_parse_pid(positional[1], &a->pid) < 0)
                        return ctl_usage_error("invalid PID '%s': expected a number 1..2147483647",
                                               positional[1]);
        } else if (a->command->flags & CTL_TAKES_LEASE_ID) {
                if (n_positional != 2)
                        return ctl_usage_error("%s needs a LEASE (the id lock or suspend printed)", a->command->name);
                if (ctl_parse_uint(positional[1], 9007199254740992ULL, &v) < 0 || v == 0)
                        return ctl_usage_error("invalid LEASE '%s': expected a number", positional[1]);
                a->lease = (long long) v;
        } else if (n_positional > 1)
                return ctl_usage_error("unexpected argument '%s'", positional[1]);
        if (a->command->id == CTL_RENEW && a->lease_ms < 0)
                return ctl_usage_error("renew needs --lease-ms");
        if ((a->lease_ms >= 0 || a->hold) && !(a->command->flags & CTL_TAKES_LEASE) && a->command->id != CTL_RENEW)
                return ctl_usage_error("--lease-ms and --hold are for lock and suspend, not %s", a->command->name);
        if (a->output && a->command->id != CTL_METRICS)
                return ctl_usage_error("--output is for metrics, not %s", a->command->name);
        if (a->listen && a->command->id != CTL_METRICS)
                return ctl_usage_error("--listen is for metrics, not %s", a->command->name);
        if (a->listen && a->output)
                return ctl_usage_error("metrics takes --listen or --output, not both");
        if (a->driver && a->command->id != CTL_DOCTOR)
                return ctl_usage_error("--driver is for doctor, not %s", a->command->name);
        if (saw_lock_timeout && !(a->command->flags & CTL_TAKES_LOCK_TIMEOUT))
                return ctl_usage_error("--lock-timeout is for lock and suspend, not %s", a->command->name);
        if (saw_map && !(a->command->flags & CTL_TAKES_MAP))
                return ctl_usage_error("--map is for restore and resume, not %s", a->command->name);
        if (a->progress >= 0 && !(a->command->flags & CTL_TAKES_GROUP))
                return ctl_usage_error("--%s is for operations, not %s",
                                       a->progress ? "progress" : "no-progress", a->command->name);
        /* Of one PID, only a checkpoint or restore has progress to show. */
        if (a->progress >= 0 && a->selector.kind == CTL_SELECT_NONE &&
            (a->command->id == CTL_LOCK || a->command->id == CTL_UNLOCK))
                return ctl_usage_error("--%s is for checkpoint, restore, suspend and resume of a PID, "
                                       "and for the group forms",
                                       a->progress ? "progress" : "no-progress");
        return -1;
}

/* "cudackptctl: suspend 1234: ", "cudackptctl: suspend --cgroup /pod42: " */
static int ctl_make_prefix(ctl_args *a) {
        char *copy = NULL;
        int k;

        if (a->selector.kind != CTL_SELECT_NONE) {
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
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(params, key);

        if (!cJSON_IsString(item) || !item->valuestring)
                return;
        printf("%s: ", key);
        ctl_fputs_safe(item->valuestring, stdout);
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
                return cudackpt_restore(client, a->pid, map, reply);
        case CTL_UNLOCK:
                return cudackpt_unlock(client, a->pid, reply);
        case CTL_SUSPEND:
                return cudackpt_suspend(client, a->pid, a->lock_timeout, reply);
        case CTL_RESUME:
                return cudackpt_resume(client, a->pid, map, reply);
        case CTL_INFO:
                return cudackpt_call(client, "org.varlink.service.GetInfo", NULL, reply);
        case CTL_PS:
        case CTL_WATCH:
        case CTL_METRICS:
        case CTL_RELEASE:
        case CTL_RENEW:
        case CTL_DOCTOR:
        case CTL_STATUS:
                break; /* run in ctl_run() */
        }
        return -EINVAL;
}

/* A group's --hold: the lease lives as long as this client's connection
 * (claimed again across a daemon restart); the undo is made here on
 * exactly the members, so its result shows.  Frees client. */
static int ctl_group_hold(const ctl_args *a, cudackpt_client *client, ctl_group *gp, const char *path) {
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
        status = ctl_group_run(client, &g);
        if (status == CUDACKPT_EXIT_OK) {
                int held = ctl_hold_keep(&keep, &client, &h);
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
                        status = members ? ctl_group_run(client, &u) : CUDACKPT_EXIT_OK;
                        if (status == CUDACKPT_EXIT_OK)
                                status = held;
                }
        }
        cJSON_Delete(members);
        cudackpt_client_free(client);
        return status;
}

static int ctl_run(const ctl_args *a) {
        const char *path = ctl_socket_path(a->socket);
        cudackpt_client *client = NULL;
        cudackpt_reply reply;
        int r, status;

        cudackpt_reply_init(&reply);
        if (!a->prefix) {
                fputs(CTL_NAME ": out of memory\n", stderr);
                return CUDACKPT_EXIT_FAILURE;
        }
        if (a->command->id == CTL_DOCTOR) {
                ctl_doctor d = {
                        .socket = a->socket,
                        .driver = a->driver,
                        .json = a->json,
                        .timeout_ms = a->timeout_ms,
                };

                return ctl_doctor_run(&d);
        }
        if (a->command->id == CTL_METRICS && a->listen) {
                ctl_exporter e = {
                        .prefix = a->prefix,
                        .socket = path,
                        .listen = a->listen,
                        .timeout_ms = a->timeout_ms > 0 ? a->timeout_ms : CTL_SCRAPE_TIMEOUT_MS,
                };

                return ctl_exporter_run(&e);
        }
        r = cudackpt_client_connect(path, &client);
        if (r < 0) {
                ctl_error_prefix(a);
                fputs("cannot reach cudackptd at ", stderr);
                ctl_fputs_safe(path, stderr);
                fprintf(stderr, ": %s\n", strerror(-r));
                return CUDACKPT_EXIT_UNREACHABLE;
        }
        /* Cannot fail: timeout_ms was parsed as 0..INT_MAX. */
        (void) cudackpt_client_set_timeout(client, a->timeout_ms);

        if (a->command->id == CTL_WATCH) {
                ctl_watch w = { .prefix = a->prefix, .selector = &a->selector, .json = a->json };

                status = ctl_watch_run(client, &w);
                cudackpt_client_free(client);
                return status;
        }
        if (a->command->id == CTL_METRICS || a->command->id == CTL_RELEASE || a->command->id == CTL_RENEW ||
            a->command->id == CTL_STATUS) {
                status = a->command->id == CTL_METRICS  ? ctl_metrics_run(client, a->prefix, a->output)
                         : a->command->id == CTL_STATUS ? ctl_status_run(client, a->prefix, a->json)
                                                        : ctl_lease_manage(client, a->prefix, a->lease,
                                                                           a->command->id == CTL_RENEW ? a->lease_ms
                                                                                                       : -1,
                                                                           a->json);
                cudackpt_client_free(client);
                return status;
        }
        if (a->selector.kind == CTL_SELECT_NONE && (a->lease_ms > 0 || a->hold)) {
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

                status = ctl_lease_run(&client, &o);
                cudackpt_client_free(client);
                return status;
        }
        if (a->command->id == CTL_PS) {
                ctl_ps ps = { .prefix = a->prefix, .selector = &a->selector, .json = a->json };

                status = ctl_ps_run(client, &ps);
                cudackpt_client_free(client);
                return status;
        }
        if (a->selector.kind != CTL_SELECT_NONE) {
                bool tty = isatty(STDERR_FILENO);
                ctl_group g = {
                        .prefix = a->prefix,
                        .method = a->command->group_method,
                        .selector = &a->selector,
                        .lock_timeout = a->lock_timeout,
                        .map = (const char *const *) a->map.items,
                        .json = a->json,
                        .progress = a->progress < 0 ? tty : a->progress > 0,
                        .progress_tty = tty,
                        .lease_ms = a->lease_ms,
                };

                if (!a->hold) {
                        status = ctl_group_run(client, &g);
                        cudackpt_client_free(client);
                        return status;
                }
                return ctl_group_hold(a, client, &g, path);
        }

        /* A checkpoint or restore of a GPU's memory takes seconds: show how far it is. */
        ctl_progress *progress = NULL;
        if ((a->command->id == CTL_SUSPEND || a->command->id == CTL_CHECKPOINT) &&
            (a->progress > 0 || (a->progress < 0 && isatty(STDERR_FILENO))))
                (void)ctl_progress_start(path, a->pid, isatty(STDERR_FILENO), &progress);
        r = ctl_call(client, a, &reply);
        ctl_progress_stop(progress);
        if (r < 0) {
                ctl_error_prefix(a);
                fprintf(stderr, "%s\n", ctl_describe_call_failure(r));
                status = ctl_call_failure_exit_code(r);
        } else if (reply.error) {
                char *text = ctl_describe_error(&reply);

                ctl_error_prefix(a);
                fprintf(stderr, "%s\n", text ? text : reply.error);
                free(text);
                if (a->json) {
                        text = ctl_error_json(&reply);
                        if (text)
                                puts(text);
                        free(text);
                }
                status = cudackpt_reply_exit_code(&reply);
        } else
                status = ctl_print_result(a, &reply);

        cudackpt_reply_clear(&reply);
        cudackpt_client_free(client);
        return status;
}

int main(int argc, char **argv) {
        ctl_args args = { .lock_timeout = -1, .progress = -1, .lease_ms = -1 };
        const char *base;
        int status;

        if (argc > 0 && argv[0]) {
                base = strrchr(argv[0], '/');
                base = base ? base + 1 : argv[0];
                if (strcmp(base, "cuda-checkpoint") == 0)
                        return compat_main(argc, argv);
        }
        if (ctl_job_wanted(argc, argv))
                return ctl_job_main(argc, argv);

        status = ctl_parse_args(argc, argv, &args);
        if (status < 0) {
                (void) ctl_make_prefix(&args); /* ctl_run() says when it failed */
                status = ctl_run(&args);
        }
        ctl_map_done(&args.map);
        ctl_selector_done(&args.selector);
        free(args.prefix);

        /* Output that could not be written (a full disk, a closed pipe) is a failure. */
        if (fflush(stdout) != 0 && status == CUDACKPT_EXIT_OK)
                status = CUDACKPT_EXIT_FAILURE;
        return status;
}
