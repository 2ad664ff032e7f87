/* cmdline.h: cudackptctl's verb table and its native command line.
 *
 * Every way in goes through the table: a verb named on the command line,
 * or the program's own name (cuda-checkpoint, as git's git-foo names are
 * git foo).  A row either runs on the native command line (the options in
 * one struct, the parser that fills it and checks what goes with what,
 * --help; cudackptctl.c runs the command) or parses its own: dump and
 * restore --images (job.c), cuda-checkpoint's (compat.c) and the dump's
 * barrier. */
#ifndef CUDACKPT_CMDLINE_H
#define CUDACKPT_CMDLINE_H

#include "args.h"
#include "selector.h"

#define CTL_NAME "cudackptctl"

/* A usage error said (the message, then where to read more): its exit
 * status. */
#define ctl_usage_error(...)                                                                      \
        ctl_usage_fail(CUDACKPT_EXIT_USAGE, CTL_NAME, "\nTry '" CTL_NAME " --help' for more information.\n", \
                       __VA_ARGS__)

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
        CTL_GPUS,
        CTL_DUMP,
        CTL_RESTORE_IMAGES,
        CTL_CRIU_BARRIER,
        CTL_RUN,
        CTL_VERIFY,
        CTL_CUDA_CHECKPOINT,
        CTL_NODE_PART,
        CTL_JOB_PART,
        CTL_JOB,
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
        CTL_WITH_IMAGES = 1 << 7,     /* the row of its name when --images is given */
        CTL_HIDDEN = 1 << 8,          /* no command for people: not in --help */
        CTL_ALIAS = 1 << 9,           /* also the program's name; its main() gets the words
                                       * after the name */
};

typedef struct ctl_command {
        const char *name;
        ctl_command_id id;
        unsigned flags;
        const char *group_method;     /* with CTL_TAKES_GROUP */
        /* A row with a command line of its own: run with the whole argv
         * (its own options found by its own parser); NULL: the native one. */
        int (*main)(int argc, char **argv);
} ctl_command;

/* The row argv asks for, from the program's name (argv[0]'s base name) or
 * its first word that is not an option (the options of every row told
 * apart by their own tables, so that an option's value is never taken for
 * the verb); NULL when it names none (the native parser says why).  For
 * "help VERB", *ret_help is VERB's row. */
const ctl_command *ctl_cmdline_find(int argc, char **argv, const ctl_command **ret_help);

/* Runs a row with a command line of its own: the alias's words after its
 * name, or the whole argv; help: its --help. */
int ctl_cmdline_run_own(const ctl_command *c, int argc, char **argv, bool help);

/* The parsed command line. */
typedef struct ctl_args {
        const char *socket;       /* --socket, NULL for the environment/default */
        bool json;                /* --json */
        int timeout_ms;           /* --timeout: client I/O limit, 0 = none */
        long long lock_timeout;   /* --lock-timeout, -1 when not given */
        ctl_map map;              /* every --map, merged */
        bool force;               /* --force: restore even where it seems not to fit */
        const ctl_command *command;
        int pid;                  /* when the command takes one */
        ctl_selector selector;    /* --pids, --cgroup or --tree; CTL_SELECT_NONE when not given */
        const char *slurm_job;    /* --slurm-job: the job's nodes through Slurm, NULL when not given */
        int progress;             /* --progress 1, --no-progress 0, else -1: on a terminal */
        long long lease_ms;       /* --lease-ms, -1 when not given */
        bool hold;                /* --hold */
        char **command_argv;      /* --hold: what follows "--", NULL-terminated; NULL: none */
        long long lease;          /* release, renew: the lease id */
        const char *output;       /* metrics --output */
        const char *listen;       /* metrics --listen */
        long long request_deadline; /* metrics --listen: --request-deadline, 0 when not given */
        unsigned max_per_address; /* metrics --listen: --max-per-address, 0 when not given */
        int ipv4_prefix, ipv6_prefix; /* metrics --listen: --ipv4-prefix, --ipv6-prefix, -1 when not given */
        const char *driver;       /* doctor --driver */
        char *prefix;             /* "cudackptctl: COMMAND ...: ", for errors */
} ctl_args;

/* Fill *a from argv (a zeroed but for lock_timeout, progress, lease_ms,
 * ipv4_prefix and ipv6_prefix, which start at -1).  Returns -1 to go on, else the exit status, having
 * printed --help, --version or the usage error. */
int ctl_cmdline_parse(int argc, char **argv, ctl_args *a);

/* Frees what the parser allocated in *a (map, selector, prefix). */
void ctl_cmdline_free(ctl_args *a);

/* The options of metrics --listen with a number (cmdlisten.c), in the
 * order of their OPT_ values: parsed into *a (-1 to go on, else the exit
 * status of a usage error); whether any was given. */
typedef enum ctl_listen_option {
        CTL_LISTEN_REQUEST_DEADLINE,
        CTL_LISTEN_MAX_PER_ADDRESS,
        CTL_LISTEN_IPV4_PREFIX,
        CTL_LISTEN_IPV6_PREFIX,
} ctl_listen_option;
int ctl_option_listen(ctl_args *a, ctl_listen_option o, const char *arg);
bool ctl_listen_options_given(const ctl_args *a);

/* --help (help.c). */
void ctl_cmdline_help(void);
/* The help of one command: COMMAND --help, help COMMAND (help.c). */
void ctl_cmdline_help_command(const ctl_command *c);

#endif
