/* criu_itest.h: what the CRIU suites share (test_criu.c, test_criu_job.c):
 * running criu bounded in time, the daemon and the drop-in on criu's PATH,
 * the criu_target processes, and the checks made on them.
 *
 * The suite's process is a child subreaper (citest_setup): it reaps what
 * criu dump killed, and criu restore -d leaves the restored trees with it. */
#ifndef CUDACKPT_CRIU_ITEST_H
#define CUDACKPT_CRIU_ITEST_H

#include "harness.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Bound on one criu run; a dump or restore on the simulator takes well
 * under a second. */
#define CRIU_TIMEOUT_MS 60000
/* Bound on the version and check runs of citest_probe(). */
#define CRIU_PROBE_TIMEOUT_MS 30000
/* Bound on the target's start, its end after a dump, a result line, ... */
#define AWAIT_MS 10000
/* Lines of a criu log shown with a failure. */
#define LOG_TAIL_LINES 60
/* The targets' pattern buffer. */
#define TARGET_MIB "4"
/* The simulator's per-process state slot: a one-character variable the sim
 * rewrites in the target's memory, so that a restored process (same pid,
 * new start time) is still known to be checkpointed. */
#define SIM_STATE_SLOT "CUDACKPT_SIM_STATE=r"

/* The criu to run, found by citest_probe(). */
extern char citest_criu_path[4096];

/* ---- running programs (no Check assertions: citest_probe() uses it too) -- */

struct citest_run {
        int status;                  /* exit status, 128+N for signal N, -1: not run */
        bool timed_out;              /* killed after timeout_ms */
        char out[16384];             /* stdout and stderr together (the start of it) */
};

/* Runs argv (argv[0] a path) with env, stdin /dev/null, stdout and stderr
 * into res->out, in a process group of its own: when it runs past
 * timeout_ms, the whole group is killed.  0, or -errno when it could not
 * be started. */
int citest_run_bounded(const char *const *argv, const char *const *env, int timeout_ms, struct citest_run *res);

/* ---- files ---- */

/* The whole file, NUL-terminated, to free(); NULL when it cannot be read. */
char *citest_slurp_raw(const char *path);
/* The same, owned by the harness. */
char *citest_slurp(const char *path);
/* Whether text holds line as a whole line. */
bool citest_has_line(const char *text, const char *line);
void citest_print_log_tail(const char *what, const char *path);
/* The first line of a criu log that says the CUDA plugin failed, or NULL. */
const char *citest_plugin_failure(const char *path);

/* ---- the setup ---- */

struct citest_ctx {
        struct itest_daemon *d;
        cudackpt_client *c;
        const char *bin;             /* DIR/bin, holding cuda-checkpoint */
        const char *img;             /* DIR/img, the images */
        const char *result;          /* DIR/result, the targets' reports */
        const char *env[16];         /* criu's environment */
};

const char *citest_need_env(const char *name);
/* The daemon on the simulator, DIR/bin/cuda-checkpoint (the drop-in), criu's
 * environment (the drop-in first on PATH, the daemon's socket,
 * CRIU_FAULT=138). */
void citest_setup(struct citest_ctx *x);
/* The same with the daemon's options. */
void citest_setup_with(struct citest_ctx *x, const struct itest_daemon_opts *opts);
/* Starts criu_target MODE in a session of its own; pids[0] the one
 * started, then its children.  Returns how many. */
size_t citest_start_target(struct citest_ctx *x, const char *mode, pid_t *pids, size_t max);
/* The same with one more "K=V" in its environment (NULL: none). */
size_t citest_start_target_env(struct citest_ctx *x, const char *mode, const char *extra, pid_t *pids, size_t max);
/* Field 3 (state) and field 4 (ppid) of /proc/PID/stat; false when gone. */
bool citest_proc_stat(pid_t pid, char *state, pid_t *ppid);
/* Waits until no process has pid any more, reaping it when it is ours. */
void citest_await_gone(pid_t pid, int timeout_ms);
void citest_kill_all(const pid_t *pids, size_t n);
/* Asserts that the daemon audited method on pid as done ("result=ok"). */
void citest_await_audit(struct citest_ctx *x, const char *method, pid_t pid);
void citest_assert_state(struct citest_ctx *x, pid_t pid, const char *state);
/* Sends SIGUSR1 and awaits the target's "ok PID N" line. */
void citest_check_memory(struct citest_ctx *x, pid_t pid, unsigned long n);

/* main()'s first step: 0 to run the suite, or 77 (one line on stderr) when
 * there is no criu >= 4, no root, or `criu check` fails. */
int citest_probe(const char *suite);
/* The whole of a criu suite's main(): citest_probe(), then itest_run() of
 * the suite "integration.NAME" of one case NAME holding tests (ended by
 * NULL), each bounded by timeout_s. */
int citest_main(const char *name, double timeout_s, const TTest *const tests[]);

#endif
