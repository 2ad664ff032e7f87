/* cmdline.c: cudackptctl's native command line into a ctl_args
 * (cmdline.h): the options through getopt_long, then the command and its
 * operands, then which options go with which command.  Every error is a
 * usage error (exit status 2) said in one line. */
#include "cmdline.h"

#include "args.h"
#include "compat.h"
#include "describe.h"
#include "exitcode.h"
#include "job.h"
#include "jobcmd.h"
#include "jobpart.h"
#include "run.h"
#include "selector.h"
#include "nodepart.h"
#include "phases.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef CUDACKPT_VERSION
#error "CUDACKPT_VERSION must be defined by the build"
#endif

/* The verb table.  A row with a main() parses its own command line; of
 * two rows of one name, the one with CTL_WITH_IMAGES is taken when
 * --images (or --archive) is given. */
static const ctl_command ctl_commands[] = {
        { "dump", CTL_DUMP, 0, NULL, ctl_job_main },
        { "restore", CTL_RESTORE_IMAGES, CTL_WITH_IMAGES, NULL, ctl_job_main },
        { "criu-barrier", CTL_CRIU_BARRIER, CTL_HIDDEN, NULL, ctl_job_main },
        { "run", CTL_RUN, 0, NULL, ctl_run_main },
        { "job", CTL_JOB, 0, NULL, ctl_jobcmd_main },
        { "verify", CTL_VERIFY, 0, NULL, ctl_job_main },
        { "cuda-checkpoint", CTL_CUDA_CHECKPOINT, CTL_HIDDEN | CTL_ALIAS, NULL, compat_main },
        { "node-part", CTL_NODE_PART, CTL_HIDDEN, NULL, ctl_nodepart_main },
        { "job-part", CTL_JOB_PART, CTL_HIDDEN, NULL, ctl_jobpart_main },
        { "state", CTL_STATE, CTL_TAKES_PID, NULL, NULL },
        { "restore-tid", CTL_RESTORE_TID, CTL_TAKES_PID, NULL, NULL },
        { "lock", CTL_LOCK, CTL_TAKES_PID | CTL_TAKES_LOCK_TIMEOUT | CTL_TAKES_GROUP | CTL_TAKES_LEASE,
          CUDACKPT_METHOD_LOCK_GROUP, NULL },
        { "checkpoint", CTL_CHECKPOINT, CTL_TAKES_PID | CTL_TAKES_GROUP, CUDACKPT_METHOD_CHECKPOINT_GROUP, NULL },
        { "restore", CTL_RESTORE, CTL_TAKES_PID | CTL_TAKES_MAP | CTL_TAKES_GROUP, CUDACKPT_METHOD_RESTORE_GROUP, NULL },
        { "unlock", CTL_UNLOCK, CTL_TAKES_PID | CTL_TAKES_GROUP, CUDACKPT_METHOD_UNLOCK_GROUP, NULL },
        { "suspend", CTL_SUSPEND, CTL_TAKES_PID | CTL_TAKES_LOCK_TIMEOUT | CTL_TAKES_GROUP | CTL_TAKES_LEASE,
          CUDACKPT_METHOD_SUSPEND_GROUP, NULL },
        { "resume", CTL_RESUME, CTL_TAKES_PID | CTL_TAKES_MAP | CTL_TAKES_GROUP, CUDACKPT_METHOD_RESUME_GROUP, NULL },
        { "info", CTL_INFO, 0, NULL, NULL },
        { "ps", CTL_PS, CTL_TAKES_SELECTOR, NULL, NULL },
        { "watch", CTL_WATCH, CTL_TAKES_SELECTOR, NULL, NULL },
        { "metrics", CTL_METRICS, 0, NULL, NULL },
        { "release", CTL_RELEASE, CTL_TAKES_LEASE_ID, NULL, NULL },
        { "renew", CTL_RENEW, CTL_TAKES_LEASE_ID, NULL, NULL },
        { "doctor", CTL_DOCTOR, 0, NULL, NULL },
        { "status", CTL_STATUS, 0, NULL, NULL },
        { "gpus", CTL_GPUS, 0, NULL, NULL },
};

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
        OPT_REQUEST_DEADLINE,   /* in ctl_listen_option's order */
        OPT_MAX_PER_ADDRESS,
        OPT_IPV4_PREFIX,
        OPT_IPV6_PREFIX,
        OPT_FORCE,
        OPT_SLURM_JOB,
};

static const struct option ctl_options[] = {
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
        { "request-deadline", required_argument, NULL, OPT_REQUEST_DEADLINE },
        { "max-per-address", required_argument, NULL, OPT_MAX_PER_ADDRESS },
        { "ipv4-prefix", required_argument, NULL, OPT_IPV4_PREFIX },
        { "ipv6-prefix", required_argument, NULL, OPT_IPV6_PREFIX },
        { "force", no_argument, NULL, OPT_FORCE },
        { "slurm-job", required_argument, NULL, OPT_SLURM_JOB },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
};

/* What the parse has seen besides *a. */
typedef struct ctl_cmdline_state {
        const char *positional[3];      /* the command and its operands */
        size_t n_positional;
        bool saw_lock_timeout;          /* --lock-timeout given */
        bool saw_map;                   /* --map given */
        bool help;                      /* --help given: the command's, if one is named */
} ctl_cmdline_state;

static int ctl_out_of_memory(void) {
        fputs(CTL_NAME ": out of memory\n", stderr);
        return CUDACKPT_EXIT_FAILURE;
}

/* The row of name; images: whether --images was given. */
static const ctl_command *ctl_find_row(const char *name, bool images) {
        for (size_t i = 0; i < sizeof(ctl_commands) / sizeof(ctl_commands[0]); i++)
                if (strcmp(ctl_commands[i].name, name) == 0 &&
                    (images || !(ctl_commands[i].flags & CTL_WITH_IMAGES)))
                        return &ctl_commands[i];
        return NULL;
}

static size_t ctl_option_count(const struct option *o) {
        size_t n = 0;

        while (o[n].name)
                n++;
        return n;
}

const ctl_command *ctl_cmdline_find(int argc, char **argv, const ctl_command **ret_help) {
        enum { FIND_IMAGES = 0x10000 };
        size_t n_native = ctl_option_count(ctl_options), n_job = ctl_option_count(ctl_job_options);
        struct option all[n_native + n_job + 1];
        const char *words[2] = { NULL, NULL }, *base;
        const ctl_command *c;
        bool images = false;
        int opt;

        *ret_help = NULL;
        base = argc > 0 && argv[0] ? strrchr(argv[0], '/') : NULL;
        base = base ? base + 1 : argc > 0 && argv[0] ? argv[0] : "";
        c = ctl_find_row(base, false);
        if (c && (c->flags & CTL_ALIAS))
                return c;
        /* Every row's options, each with what it takes: getopt finds the words. */
        for (size_t i = 0; i < n_native + n_job; i++) {
                all[i] = i < n_native ? ctl_options[i] : ctl_job_options[i - n_native];
                all[i].flag = NULL;
                all[i].val = strcmp(all[i].name, "images") == 0 || strcmp(all[i].name, "archive") == 0 ? FIND_IMAGES
                                                                                                     : 0x100;
        }
        all[n_native + n_job] = (struct option) { NULL, 0, NULL, 0 };
        opterr = 0;
        while ((opt = getopt_long(argc, argv, "-:hV", all, NULL)) != -1) {
                if (opt == 1 && !words[1])
                        words[words[0] ? 1 : 0] = optarg;
                images |= opt == FIND_IMAGES;
        }
        optind = 0; /* the row's parser starts afresh */
        if (!words[0])
                return NULL;
        if (strcmp(words[0], "help") == 0 && words[1]) {
                c = ctl_find_row(words[1], false);
                *ret_help = c && !(c->flags & CTL_HIDDEN) ? c : NULL;
        }
        return ctl_find_row(words[0], images);
}

/* The row of a native command. */
static const ctl_command *ctl_find_command(const char *name) {
        for (size_t i = 0; i < sizeof(ctl_commands) / sizeof(ctl_commands[0]); i++)
                if (strcmp(ctl_commands[i].name, name) == 0 && !ctl_commands[i].main)
                        return &ctl_commands[i];
        return NULL;
}

static int ctl_add_positional(ctl_cmdline_state *st, const char *arg) {
        if (st->n_positional == sizeof(st->positional) / sizeof(st->positional[0]))
                return ctl_usage_error("unexpected argument '%s'", arg);
        st->positional[st->n_positional++] = arg;
        return -1;
}

static int ctl_option_map(ctl_args *a, ctl_cmdline_state *st, const char *arg) {
        int r = ctl_map_add(&a->map, arg);

        if (r == -EEXIST)
                return ctl_usage_error("invalid --map '%s': a GPU is mapped twice", arg);
        if (r == -ENOMEM)
                return ctl_out_of_memory();
        if (r < 0)
                return ctl_usage_error("invalid --map '%s': expected OLD=NEW[,OLD=NEW...]", arg);
        st->saw_map = true;
        return -1;
}

/* --pids, --cgroup, --tree. */
static int ctl_option_selector(ctl_args *a, int c, const char *arg) {
        ctl_selector_kind kind = c == OPT_PIDS     ? CTL_SELECT_PIDS
                                 : c == OPT_CGROUP ? CTL_SELECT_CGROUP
                                                   : CTL_SELECT_TREE;
        int r;

        if (a->selector.kind != CTL_SELECT_NONE)
                return ctl_usage_error("%s and %s: give one of --pids, --cgroup and --tree, once",
                                       ctl_selector_option(a->selector.kind), ctl_selector_option(kind));
        r = ctl_selector_parse(&a->selector, kind, arg);
        if (r == -ENOMEM)
                return ctl_out_of_memory();
        if (r == -EEXIST)
                return ctl_usage_error("invalid --pids '%s': a pid is listed twice", arg);
        if (r < 0 && kind == CTL_SELECT_PIDS)
                return ctl_usage_error("invalid --pids '%s': expected PID[:START_TIME][,...], "
                                       "pids 1..2147483647", arg);
        if (r < 0 && kind == CTL_SELECT_CGROUP)
                return ctl_usage_error("invalid --cgroup '%s': expected an absolute cgroup path "
                                       "without empty, '.' or '..' components", arg);
        if (r < 0)
                return ctl_usage_error("invalid --tree '%s': expected a number 1..2147483647", arg);
        return -1;
}

/* The options with a number: --timeout, --lock-timeout, --lease-ms (those
 * of metrics --listen: cmdlisten.c). */
static int ctl_option_number(ctl_args *a, ctl_cmdline_state *st, int c, const char *arg) {
        unsigned long long v;

        switch (c) {
        case OPT_TIMEOUT:
                if (ctl_parse_uint(arg, INT_MAX, &v) < 0)
                        return ctl_usage_error("invalid --timeout '%s': expected milliseconds, "
                                               "0..2147483647", arg);
                a->timeout_ms = (int) v;
                break;
        case OPT_LOCK_TIMEOUT:
                if (ctl_parse_uint(arg, 4294967295ULL, &v) < 0)
                        return ctl_usage_error("invalid --lock-timeout '%s': expected milliseconds, "
                                               "0..4294967295", arg);
                a->lock_timeout = (long long) v;
                st->saw_lock_timeout = true;
                break;
        default: /* OPT_LEASE_MS */
                if (ctl_parse_uint(arg, 4294967295ULL, &v) < 0 || v == 0)
                        return ctl_usage_error("invalid --lease-ms '%s': expected milliseconds, "
                                               "1..4294967295", arg);
                a->lease_ms = (long long) v;
                break;
        }
        return -1;
}

/* The options with a path or an address: --socket, --output, --listen,
 * --driver. */
static int ctl_option_path(ctl_args *a, int c, const char *arg) {
        switch (c) {
        case OPT_SOCKET:
                if (!*arg)
                        return ctl_usage_error("--socket needs a path");
                a->socket = arg;
                break;
        case OPT_OUTPUT:
                if (!*arg)
                        return ctl_usage_error("--output needs a path");
                a->output = arg;
                break;
        case OPT_LISTEN:
                if (!*arg)
                        return ctl_usage_error("--listen needs an address (:PORT)");
                a->listen = arg;
                break;
        default: /* OPT_DRIVER */
                if (!*arg)
                        return ctl_usage_error("--driver needs a path");
                a->driver = arg;
                break;
        }
        return -1;
}

/* One getopt_long() result.  Returns -1 to go on, else the exit status. */
static int ctl_option(ctl_args *a, ctl_cmdline_state *st, int c, char **argv) {
        switch (c) {
        case 1:
                return ctl_add_positional(st, optarg);
        case OPT_SOCKET:
        case OPT_OUTPUT:
        case OPT_LISTEN:
        case OPT_DRIVER:
                return ctl_option_path(a, c, optarg);
        case OPT_TIMEOUT:
        case OPT_LOCK_TIMEOUT:
        case OPT_LEASE_MS:
                return ctl_option_number(a, st, c, optarg);
        case OPT_REQUEST_DEADLINE:
        case OPT_MAX_PER_ADDRESS:
        case OPT_IPV4_PREFIX:
        case OPT_IPV6_PREFIX:
                return ctl_option_listen(a, (ctl_listen_option) (c - OPT_REQUEST_DEADLINE), optarg);
        case OPT_MAP:
                return ctl_option_map(a, st, optarg);
        case OPT_PIDS:
        case OPT_CGROUP:
        case OPT_TREE:
                return ctl_option_selector(a, c, optarg);
        case OPT_JSON:
                a->json = true;
                return -1;
        case OPT_PROGRESS:
        case OPT_NO_PROGRESS:
                a->progress = c == OPT_PROGRESS;
                return -1;
        case OPT_HOLD:
                a->hold = true;
                return -1;
        case OPT_FORCE:
                a->force = true;
                return -1;
        case OPT_SLURM_JOB:
                a->slurm_job = optarg;
                return -1;
        case 'h':
                st->help = true; /* whose help: the command's, once it is known */
                return -1;
        case 'V':
                printf(CTL_NAME " " CUDACKPT_VERSION "\n");
                return CUDACKPT_EXIT_OK;
        case ':':
                return ctl_usage_error("option '%s' needs an argument", argv[optind - 1]);
        default:
                /* getopt sets optopt to a known option given an argument it does not take. */
                if (optopt == 'h' || optopt == 'V' || optopt == OPT_JSON || optopt == OPT_PROGRESS ||
                    optopt == OPT_NO_PROGRESS || optopt == OPT_HOLD || optopt == OPT_FORCE)
                        return ctl_usage_error("option '%s' takes no argument", argv[optind - 1]);
                return ctl_usage_error("unknown option '%s'", argv[optind - 1]);
        }
}

/* The command and its operands: a PID, a selector, a LEASE or nothing. */
static int ctl_operands(ctl_args *a, const ctl_cmdline_state *st) {
        const char *const *positional = st->positional;
        size_t n_positional = st->n_positional;
        unsigned long long v;

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
        } else if ((a->command->flags & CTL_TAKES_PID) && !a->slurm_job) {
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
        return -1;
}

/* Which options go with the command. */
static int ctl_check_options(const ctl_args *a, const ctl_cmdline_state *st) {
        if (a->slurm_job && ctl_phases_usage(a->slurm_job, a->command->name, a->selector.kind != CTL_SELECT_NONE,
                                             a->lease_ms >= 0 || a->hold || st->saw_map || a->force))
                return CUDACKPT_EXIT_USAGE;
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
        if (ctl_listen_options_given(a) && !a->listen)
                return ctl_usage_error("--request-deadline, --max-per-address, --ipv4-prefix and --ipv6-prefix are "
                                       "for metrics --listen");
        if (a->driver && a->command->id != CTL_DOCTOR)
                return ctl_usage_error("--driver is for doctor, not %s", a->command->name);
        if (st->saw_lock_timeout && !(a->command->flags & CTL_TAKES_LOCK_TIMEOUT))
                return ctl_usage_error("--lock-timeout is for lock and suspend, not %s", a->command->name);
        if (st->saw_map && !(a->command->flags & CTL_TAKES_MAP))
                return ctl_usage_error("--map is for restore and resume, not %s", a->command->name);
        if (a->force && !(a->command->flags & CTL_TAKES_MAP))
                return ctl_usage_error("--force is for restore and resume, not %s", a->command->name);
        if (a->progress >= 0 && !(a->command->flags & CTL_TAKES_GROUP))
                return ctl_usage_error("--%s is for operations, not %s",
                                       a->progress ? "progress" : "no-progress", a->command->name);
        /* Of one PID, only a checkpoint or restore has progress to show. */
        if (a->progress >= 0 && a->selector.kind == CTL_SELECT_NONE && !a->slurm_job &&
            (a->command->id == CTL_LOCK || a->command->id == CTL_UNLOCK))
                return ctl_usage_error("--%s is for checkpoint, restore, suspend and resume of a PID, "
                                       "and for the group forms",
                                       a->progress ? "progress" : "no-progress");
        return -1;
}

/* --help, COMMAND --help, help, help COMMAND: the help asked for. */
static int ctl_help(const ctl_cmdline_state *st) {
        const char *const *positional = st->positional;
        size_t n = st->n_positional;
        const ctl_command *c;

        if (n > 0 && strcmp(positional[0], "help") == 0) {
                positional++;
                n--;
        }
        if (n == 0) {
                ctl_cmdline_help();
                return CUDACKPT_EXIT_OK;
        }
        c = ctl_find_command(positional[0]);
        if (!c)
                return ctl_usage_error("unknown command '%s'", positional[0]);
        ctl_cmdline_help_command(c);
        return CUDACKPT_EXIT_OK;
}

int ctl_cmdline_parse(int argc, char **argv, ctl_args *a) {
        ctl_cmdline_state st = { .n_positional = 0 };
        int c, r;

        /* "-": positional arguments come back in order as 1, so options may
         * follow the command even under POSIXLY_CORRECT; ":" lets us word
         * the errors ourselves. */
        opterr = 0;
        while ((c = getopt_long(argc, argv, "-:hV", ctl_options, NULL)) != -1) {
                r = ctl_option(a, &st, c, argv);
                if (r >= 0)
                        return r;
        }
        /* After "--" the rest is positional, or with --hold the command to run. */
        if (a->hold && optind < argc) {
                a->command_argv = argv + optind;
                optind = argc;
        }
        for (; optind < argc; optind++) {
                r = ctl_add_positional(&st, argv[optind]);
                if (r >= 0)
                        return r;
        }
        if (st.help || (st.n_positional > 0 && strcmp(st.positional[0], "help") == 0))
                return ctl_help(&st);
        r = ctl_operands(a, &st);
        if (r >= 0)
                return r;
        return ctl_check_options(a, &st);
}

void ctl_cmdline_free(ctl_args *a) {
        ctl_map_free(&a->map);
        ctl_selector_free(&a->selector);
        free(a->prefix);
        a->prefix = NULL;
}
