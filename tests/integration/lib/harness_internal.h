/* harness_internal.h: what the harness's own files share (harness.c,
 * harness_targets.c, harness_run.c, harness_varlink.c); the tests use
 * harness.h only. */
#ifndef CUDACKPT_ITEST_HARNESS_INTERNAL_H
#define CUDACKPT_ITEST_HARNESS_INTERNAL_H

#include "harness.h"

/* How long a daemon or a target may take to say it is ready. */
#define ITEST_READY_TIMEOUT_MS 10000

/* ---- harness.c ---------------------------------------------------------------- */

/* Keeps p until teardown, which frees it with free_fn (see itest_keep()). */
void itest_keep_with(void *p, void (*free_fn)(void *p));
/* The free_fn of kept JSON, client library connections and raw
 * connections (teardown closes the connections first). */
void itest_free_json(void *p);
void itest_free_client(void *p);
void itest_free_conn(void *p);
/* Milliseconds left until deadline, for poll(); 0 once past. */
int itest_left_ms(double deadline);
/* pidfd_open(2); asserts it works. */
int itest_pidfd_open(pid_t pid);
/* fork(), asserted; in the child, /dev/null is stdin and out and err are
 * stdout and stderr.  Returns what fork() does. */
pid_t itest_fork_stdio(int out, int err);
/* Waits up to timeout_ms for the process behind pidfd to exit.  Returns
 * true once it has (it is then a zombie for waitpid to reap). */
bool itest_pidfd_wait(int pidfd, int timeout_ms);
/* The environment a child gets: PATH and sanitizer options only, so that a
 * developer's CUDACKPT_SIM_* variables cannot change what a test sees. */
size_t itest_base_env(const char **env, size_t max);
/* Frees p now when it is the last thing kept (a reply a loop passes over),
 * so that polling loops do not pile up replies until teardown. */
void itest_unkeep_last(void *p);

/* ---- harness_skip.c --------------------------------------------------------- */

/* Where the run's skips are recorded: in root, the run's directory. */
void itest_skips_begin(const char *root);
/* Prints every recorded skip ("SKIP: TEST: why") and returns main()'s exit
 * status: 1 when a test failed, else 77 when every test of the n_run
 * skipped, else 0. */
int itest_skips_report(int n_run, int failed);

/* ---- harness_targets.c ------------------------------------------------------ */

/* Drops to uid/gid `uid` with exactly the supplementary groups given;
 * -errno on failure. */
int itest_become_with(uid_t uid, const gid_t *groups, size_t n_groups);
/* The same with no supplementary groups. */
int itest_become(uid_t uid);
/* Forgets the targets (a test starts) / kills and reaps every target of
 * the current test (it ends). */
void itest_targets_reset(void);
void itest_targets_kill_all(void);

#endif
