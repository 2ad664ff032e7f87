/* criu_job_itest.h: the helpers of test_criu_job.c (criu_job_itest.c):
 * cudackptctl dump and restore runs with a chosen criu, and the checks of
 * what they left (images, audits, restored processes). */
#ifndef CUDACKPT_CRIU_JOB_ITEST_H
#define CUDACKPT_CRIU_JOB_ITEST_H

#include "criu_itest.h"

/* Bound on one cudackptctl dump or restore (each runs criu once per tree). */
#define JOB_TIMEOUT_MS (2 * CRIU_TIMEOUT_MS)
/* The lease's promise: killed, the job runs again within this. */
#define LEASE_UNDO_MS 1000

/* Asserts cond about a cudackptctl run; its output goes to stderr first
 * (too long for Check's message). */
#define assert_run(cond, res, ...) do { \
        if (!(cond)) \
                fprintf(stderr, "----- cudackptctl printed -----\n%s----- end -----\n", (res)->out); \
        ck_assert_msg((cond), __VA_ARGS__); \
} while (0)

/* An executable script DIR/bin/NAME holding body (criu runs an action
 * script's path as it is given); its path. */
const char *cjob_script(struct citest_ctx *x, const char *name, const char *body);
/* x's environment plus CUDACKPT_CRIU (what cudackptctl runs as criu). */
const char *const *cjob_env(struct citest_ctx *x, const char *criu);
/* Runs cudackptctl ARGS... (NULL-terminated) with env; the result. */
struct citest_run *cjob_ctl(const char *const *env, ...);
void cjob_expect_ok(const struct citest_run *res, const char *what);
/* The daemon's log holds no audit of a single call of method on pid (any
 * result): a group's own steps carry detail="...Group". */
void cjob_assert_no_audit(struct citest_ctx *x, const char *method, pid_t pid);
/* After a dump: the pids gone, the manifest there, the plugin having left
 * every member alone. */
void cjob_check_dumped(struct citest_ctx *x, const char *img, const pid_t *pids, size_t n, size_t trees);
/* The plugin saw pid checkpointed at the dump (tree dir DIR/tree-ROOT). */
void cjob_check_plugin_skipped(const char *img, pid_t root, pid_t pid);
/* After a restore: the same pids, new processes, running, memory intact
 * (the check counter as it was dumped, plus one), and the GPU state
 * restored by the group, not by the plugin. */
void cjob_check_job_restored(struct citest_ctx *x, const pid_t *pids, const uint64_t *start, size_t n,
                               unsigned long check);
void cjob_start_times(const pid_t *pids, uint64_t *start, size_t n);
/* Fills argv (room for max pointers) with cudackptctl, verb (unless
 * NULL) and args (NULL-terminated), ended by NULL; asserts they fit. */
void cjob_argv(const char **argv, size_t max, const char *verb, const char *const *args);
/* out_fd of cjob_spawn(): stdout into the file err too. */
#define CJOB_OUT_TO_ERR (-2)
/* Runs cudackptctl ARGS (NULL-terminated) with env in a process group of
 * its own, stdin in_fd and stdout out_fd (-1: /dev/null), stderr into the
 * file err; its pid (cjob_wait() it). */
pid_t cjob_spawn(const char *const *env, int in_fd, int out_fd, const char *err, const char *const *args);
/* Runs cudackptctl ARGS (NULL-terminated) with env in a process group of
 * its own, its output into the file out; its pid. */
pid_t cjob_start(const char *const *env, const char *out, const char *const *args);
/* Waits for cudackptctl c (cjob_start) to end; its wait status. */
int cjob_wait(pid_t c);
/* Entries of a directory, . and .. aside. */
int cjob_dir_entries(const char *path);
/* The directory a failed restore --archive - kept, as its output names it
 * in the retry it prints ("cudackptctl restore --images DIR"); asserts
 * that it says so and that DIR holds a manifest. */
const char *cjob_kept_dir(const struct citest_run *res);

#endif
