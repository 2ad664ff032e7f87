/* help.c: cudackptctl --help, the commands, the group forms, the options,
 * the environment and the exit statuses, in that order (cmdline.h). */
#include "cmdline.h"

#include <stdio.h>

#ifdef CUDACKPT_HAVE_MICROHTTPD
#define CTL_LISTEN_NOTE "                             (see docs/operations.md)\n"
#else
#define CTL_LISTEN_NOTE "                             (NOT in this build: no libmicrohttpd when it was\n" \
                        "                             configured)\n"
#endif

/* The usage line and one entry per command. */
static void ctl_help_commands(void) {
        fputs("Usage: " CTL_NAME " [OPTIONS] COMMAND [ARGUMENTS]\n"
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
              "\n",
              stdout);
}

/* The group forms: the selector options and --progress. */
static void ctl_help_groups(void) {
        fputs("Groups: lock, checkpoint, restore, unlock, suspend and resume take a SELECTOR in\n"
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
              "\n",
              stdout);
}

/* The options. */
static void ctl_help_options(void) {
        fputs("Options:\n"
              "  --socket=PATH              the daemon's socket\n"
              "  --json                     print the reply's parameters as JSON on stdout;\n"
              "                             an error as {\"error\":NAME,\"parameters\":{...}}\n"
              "  --timeout=MS               stop waiting for the daemon after MS milliseconds\n"
              "                             (0, the default: wait as long as it takes; the\n"
              "                             daemon finishes the operation regardless);\n"
              "                             metrics --listen: each scrape's (default 10000)\n"
              "  --request-deadline=MS      metrics --listen: close a connection whose request\n"
              "                             has not arrived MS ms after it opened (or after\n"
              "                             the previous answer), or is not answered MS ms\n"
              "                             after arriving (default: --timeout + 5000)\n"
              "  --max-per-address=N        metrics --listen: connections at once from one\n"
              "                             address (default 4, at most 32)\n"
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
              "\n",
              stdout);
}

/* The environment, the exit statuses, the cuda-checkpoint mode. */
static void ctl_help_status(void) {
        fputs("Environment:\n"
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
              "  daemon.  Run \"cuda-checkpoint --help\" for that mode.\n",
              stdout);
}

void ctl_cmdline_help(void) {
        ctl_help_commands();
        ctl_help_groups();
        ctl_help_options();
        ctl_help_status();
}
