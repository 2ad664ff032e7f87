/* help.c: cudackptctl --help (the commands, the group forms, the options,
 * the environment and the exit statuses, in that order) and the help of
 * one command (VERB --help, help VERB): the same entries, those of that
 * command only (cmdline.h). */

#include "cmdline.h"
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#ifdef CUDACKPT_HAVE_MICROHTTPD
#define CTL_LISTEN_NOTE "(see docs/operations.md)\n"
#else
#define CTL_LISTEN_NOTE "(NOT in this build: no libmicrohttpd when it was\nconfigured)\n"
#endif

/* One entry of a list: what is written ("state PID", "--json"), and what it
 * does, in lines that each end in '\n'.  verbs: the commands it belongs to,
 * space-separated; NULL for every command. */
typedef struct ctl_help_entry {
        const char *synopsis;
        const char *text;
        const char *verbs;
} ctl_help_entry;

/* The commands; an entry's verb is its synopsis's first word. */
static const ctl_help_entry ctl_help_commands[] = {
        { "state PID", "print the CUDA state: running, locked, checkpointed,\nfailed (or unknown-N)\n", NULL },
        { "restore-tid PID", "print the thread id a restore must be made from\n", NULL },
        { "lock PID", "running -> locked, once submitted GPU work is done\n", NULL },
        { "checkpoint PID", "locked -> checkpointed (GPU memory to host memory)\n", NULL },
        { "restore PID", "checkpointed -> locked\n", NULL },
        { "unlock PID", "locked -> running\n", NULL },
        { "suspend PID", "lock, then checkpoint; unlocked again if that fails\n", NULL },
        { "resume PID", "restore, then unlock\n", NULL },
        { "info", "print the daemon's vendor, product, version, url\nand interfaces (it answers whatever its driver)\n",
          NULL },
        { "status",
          "print the daemon's health: its CUDA driver (and\nwhether it is the simulator), how it finds CUDA\n"
          "processes, workers busy, operations queued,\ngroups, leases, watchers, connections.  Exit\n"
          "status 18 when it has no usable driver\n",
          NULL },
        { "gpus", "print this node's GPUs as the daemon's NVML tells\nthem (UUID, PCI bus id, free and total memory,\n"
          "model) and the driver's version: what restore\n--images plans with\n", NULL },
        { "ps [SELECTOR]",
          "list the CUDA processes you may act on (or those of\nSELECTOR): PID, USER, STATE, CGROUP, GPU MEM (with\n"
          "NVML), COMMAND\n",
          NULL },
        { "doctor",
          "check this node: the CUDA driver, persistence mode,\nthe daemon, kernel features, cgroups, CRIU and\n"
          "transparent huge pages; one line each: ok, warn,\nfail or skip, what was found and what to do.  Exit\n"
          "status 1 when a check failed, else 0\n",
          NULL },
        { "watch [SELECTOR]", "follow operations, states, leases and CUDA processes\nappearing and exiting, one line per event\n",
          NULL },
        { "metrics [--output=PATH]", "print the daemon's Prometheus metrics (or write\nPATH, replacing it whole)\n",
          NULL },
        { "metrics --listen=ADDR",
          "serve them over HTTP at ADDR (:PORT, IPV4:PORT or\n[IPV6]:PORT; PORT 0 picks a free one): GET /metrics\n"
          "calls the daemon per scrape (503 with the reason\nwhen it cannot be reached in time), other paths\n"
          "404; until SIGTERM or SIGINT.  Needs no privilege\n" CTL_LISTEN_NOTE,
          NULL },
        { "release LEASE", "end a lease, leaving its processes as they are\n", NULL },
        { "renew LEASE --lease-ms=MS", "make a lease expire MS ms from now\n", NULL },
        { "run [--name=N] [--user=U] -- COMMAND",
          "start COMMAND as a job that can move: its own pid\nnamespace (our init), cgroup and name N, which\n"
          "dump --run=N takes (\"cudackptctl run --help\")\n",
          NULL },
        { "dump SELECTOR --images=DIR [--leave-running] [-- CRIU-OPTIONS]",
          "a whole job to disk: suspend it as one group\n(GPU memory free), CRIU dumps each process tree\n"
          "into DIR; resumed if CRIU fails (or with\n--leave-running)\n",
          NULL },
        { "restore --images=DIR [--device-map=OLD=NEW,...] [--dry-run] [-- CRIU-OPTIONS]",
          "the job back: the device plan (GPUs this node\nlacks mapped, checked), CRIU restores every tree\n"
          "with its CUDA plugin aside, then one group resume\n(\"cudackptctl dump --help\" for both)\n",
          NULL },
        { "job start|restore|save|list|saves|rm ...",
          "your own jobs, run, saved and restored by the\ndaemon in the saves directory its administrator\n"
          "named; any user (\"cudackptctl job --help\")\n",
          NULL },
        { "verify --images=DIR", "check a copy of a dump against its manifest's\ndigests (any user; --archive=FILE|- for an\n"
          "archive, as dump and restore take it)\n",
          NULL },
};

/* The selectors of the group forms and of ps and watch, then --progress. */
#define CTL_HELP_GROUP_VERBS "lock checkpoint restore unlock suspend resume"
static const ctl_help_entry ctl_help_selectors[] = {
        { "--pids=PID[:START][,...]", "these processes; START pins one to its start time\n(field 22 of /proc/PID/stat)\n",
          CTL_HELP_GROUP_VERBS " ps watch" },
        { "--cgroup=PATH", "the CUDA processes of a cgroup v2 and below it, as\n/proc/PID/cgroup names it (/kubepods/pod42)\n",
          CTL_HELP_GROUP_VERBS " ps watch" },
        { "--tree=PID", "the CUDA processes among PID and its descendants\n", CTL_HELP_GROUP_VERBS " ps watch" },
        { "--slurm-job=J",
          "the job's CUDA processes on every node of Slurm job\nJ, as one job (through srun; docs/slurm.md)\n",
          "lock unlock suspend resume" },
        { "--progress, --no-progress",
          "show each member's progress on stderr, or not (and\nfor one PID, how much memory a checkpoint has\n"
          "moved)\n(default: when stderr is a terminal)\n",
          CTL_HELP_GROUP_VERBS },
};

static const ctl_help_entry ctl_help_options[] = {
        { "--socket=PATH", "the daemon's socket\n", NULL },
        { "--json", "print the reply's parameters as JSON on stdout;\nan error as {\"error\":NAME,\"parameters\":{...}}\n",
          NULL },
        { "--timeout=MS",
          "stop waiting for the daemon after MS milliseconds\n(0, the default: wait as long as it takes; the\n"
          "daemon finishes the operation regardless);\nmetrics --listen: each scrape's (default 10000)\n",
          NULL },
        { "--request-deadline=MS",
          "metrics --listen: close a connection whose request\nhas not arrived MS ms after it opened (or after\n"
          "the previous answer), or is not answered MS ms\nafter arriving (default: --timeout + 5000)\n",
          "metrics" },
        { "--max-per-address=N",
          "metrics --listen: connections at once from one\naddress (default 4, at most 32): all of\n"
          "127.0.0.0/8 and ::1 count as one address, an\nIPv4-mapped IPv6 address as its IPv4 address\n",
          "metrics" },
        { "--ipv4-prefix=N",
          "metrics --listen: IPv4 addresses sharing their\nfirst N bits count as one for --max-per-address\n"
          "(0..32, default 32)\n",
          "metrics" },
        { "--ipv6-prefix=N",
          "metrics --listen: IPv6 addresses sharing their\nfirst N bits count as one for --max-per-address\n"
          "(0..128, default 64)\n",
          "metrics" },
        { "--force",
          "restore, resume: restore even where the daemon finds\nthe process would not fit in its GPUs' free memory\n"
          "(a restore that runs out of GPU memory leaves the\nprocess checkpointed for good)\n",
          "restore resume" },
        { "--lock-timeout=MS",
          "lock, suspend: how long to wait for the process's\nGPU work, 0..4294967295, 0 = no limit (default:\n"
          "the daemon's configured default)\n",
          "lock suspend" },
        { "--map=OLD=NEW[,OLD=NEW...]",
          "restore, resume: restore onto other GPUs, mapping\neach old GPU UUID to a new one (GPU-xxxxxxxx-xxxx-\n"
          "xxxx-xxxx-xxxxxxxxxxxx); may be repeated\n",
          "restore resume" },
        { "--driver=PATH", "doctor: the CUDA driver library to check (default\nlibcuda.so.1)\n", "doctor" },
        { "--lease-ms=MS", "lock, suspend: undo the operation (back to running)\nMS ms after the reply unless released first\n",
          "lock suspend" },
        { "--hold",
          "lock, suspend (a PID or a group): hold a lease while\nCOMMAND (after --) runs, or until SIGINT/SIGTERM,\n"
          "then unlock or resume; killed, the daemon undoes it\n",
          "lock suspend" },
        { "-h, --help", "show this help\n", NULL },
        { "-V, --version", "show the version\n", "" },
};

/* Whether an entry belongs to verb (NULL: every entry does). */
static bool ctl_help_for(const ctl_help_entry *e, const char *verb) {
        size_t n;

        if (!verb || !e->verbs)
                return true;
        n = strlen(verb);
        for (const char *p = strstr(e->verbs, verb); p; p = strstr(p + 1, verb))
                if ((p == e->verbs || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
                        return true;
        return false;
}

/* "  SYNOPSIS                   first line", then the other lines under it
 * (a long synopsis on a line of its own). */
static void ctl_help_put(const ctl_help_entry *e) {
        const char *line = e->text;

        if (strlen(e->synopsis) > 26)
                printf("  %s\n", e->synopsis);
        else {
                const char *end = strchr(line, '\n');
                printf("  %-26s %.*s\n", e->synopsis, (int) (end - line), line);
                line = end + 1;
        }
        for (const char *end; *line; line = end + 1) {
                end = strchr(line, '\n');
                printf("%29s%.*s\n", "", (int) (end - line), line);
        }
}

/* The entries of a list that belong to verb; for commands, verb is the
 * synopsis's first word. */
static void ctl_help_list(const ctl_help_entry *list, size_t n, const char *verb, bool commands) {
        for (size_t i = 0; i < n; i++) {
                size_t w = strcspn(list[i].synopsis, " ");
                if (commands ? !verb || (strlen(verb) == w && strncmp(list[i].synopsis, verb, w) == 0)
                             : ctl_help_for(&list[i], verb))
                        ctl_help_put(&list[i]);
        }
}

#define CTL_HELP_LIST(list, verb, commands) \
        ctl_help_list(list, sizeof(list) / sizeof(list[0]), verb, commands)

static const char ctl_help_groups_text[] =
        "Groups: lock, checkpoint, restore, unlock, suspend and resume take a SELECTOR in\n"
        "place of the PID and act on every process of it together: every member locked\n"
        "before any is checkpointed, restored before any is unlocked.  If one fails,\n"
        "lock, checkpoint and suspend bring every member back to running; restore and\n"
        "resume unlock none.  They print each member's state and the total time.\n";

/* The environment, the exit statuses, the cuda-checkpoint mode. */
static void ctl_help_status(void) {
        fputs("Environment:\n"
              "  " CUDACKPT_SOCKET_ENV "            the daemon's socket when --socket is not given\n"
              "                             (default " CUDACKPT_DEFAULT_SOCKET ")\n"
              "  " CUDACKPT_CONNECT_TIMEOUT_ENV " how long to wait for a daemon that is not\n"
              "                             there yet (default 3000; 0: one try)\n"
              "  CUDACKPT_CRIU              dump, restore --images, doctor: the criu to run\n"
              "                             (default: criu on PATH)\n"
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
              "  27 NoSuchCgroup (a --cgroup selection names a cgroup that does not exist)\n"
              "  28 restore --images: no device plan (no GPU of the job's model left, or an\n"
              "     older driver); 26 there: a GPU of the plan has too little free memory\n"
              "  29 images or an archive not as dumped (a file missing, changed or added), or\n"
              "     no digests to check them against; nothing was restored\n"
              "  30 job: no such job or save; 31 the name or save is taken or busy;\n"
              "     32 the daemon has no saves directory\n"
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
              "  daemon.  Run \"cuda-checkpoint --help\" for that mode.\n",
              stdout);
}

void ctl_cmdline_help(void) {
        fputs("Usage: " CTL_NAME " [OPTIONS] COMMAND [ARGUMENTS]\n"
              "\n"
              "Ask cudackptd to checkpoint or restore the CUDA state of a process.\n"
              "\n"
              "Commands:\n",
              stdout);
        CTL_HELP_LIST(ctl_help_commands, NULL, true);
        fputs("Operations print the new state and the time taken: \"checkpointed (812.3 ms)\".\n"
              "\n",
              stdout);
        fputs(ctl_help_groups_text, stdout);
        CTL_HELP_LIST(ctl_help_selectors, NULL, false);
        fputs("\nOptions:\n", stdout);
        CTL_HELP_LIST(ctl_help_options, NULL, false);
        fputs("Options may also follow the command.  \"" CTL_NAME " help COMMAND\" (or\n"
              "\"" CTL_NAME " COMMAND --help\") shows one command's help.\n"
              "\n",
              stdout);
        ctl_help_status();
}

void ctl_cmdline_help_command(const ctl_command *c) {
        bool group = c->flags & CTL_TAKES_GROUP, selector = c->flags & CTL_TAKES_SELECTOR;

        printf("Usage: " CTL_NAME " [OPTIONS] %s%s\n\n", c->name,
               group ? " (PID | SELECTOR)" : selector ? " [SELECTOR]" : c->flags & CTL_TAKES_PID ? " PID"
                                                              : c->flags & CTL_TAKES_LEASE_ID ? " LEASE" : "");
        CTL_HELP_LIST(ctl_help_commands, c->name, true);
        if (group || selector) {
                fputs("\n", stdout);
                if (group)
                        fputs(ctl_help_groups_text, stdout);
                else
                        fputs("SELECTOR, one of:\n", stdout);
                CTL_HELP_LIST(ctl_help_selectors, c->name, false);
        }
        fputs("\nOptions:\n", stdout);
        CTL_HELP_LIST(ctl_help_options, c->name, false);
        fputs("\nThe environment and the exit statuses: \"" CTL_NAME " --help\"; all of it:\n"
              "cudackptctl(1).\n",
              stdout);
}
