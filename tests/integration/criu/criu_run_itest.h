/* criu_run_itest.h: what the suites of jobs started with `cudackptctl
 * run` share (criu_run_itest.c): the run command, the job's name record,
 * its pids (host and namespace), its targets' memory checks, and processes
 * that hold a given pid. */
#ifndef CUDACKPT_CRIU_RUN_ITEST_H
#define CUDACKPT_CRIU_RUN_ITEST_H

#include "criu_job_itest.h"

#include <stdint.h>
#include <sys/types.h>

#define JOB_PROCS 4 /* the init and three targets */

/* cudackptctl's environment for x with the names kept in x's directory. */
const char *const *crun_env(struct citest_ctx *x);
/* crun_env(x) and one more "K=V". */
const char *const *crun_env_plus(struct citest_ctx *x, const char *extra);
/* A cgroup v2 hierarchy mounted at DIR/cg2 (this machine may have none at
 * /sys/fs/cgroup): its path, or NULL (why said on stderr, for what). */
const char *crun_cgroup2(struct citest_ctx *x, const char *what);
/* `cudackptctl run ARGS` started with env, fd 3 the write end of pipe_w
 * (-1: none), its output into out; its pid. */
pid_t crun_start(const char *const *env, const char *out, int pipe_w, const char *const *args);
/* `cudackptctl VERB ARGS` started with env (in a session of its own, stdin
 * /dev/null, stdout and stderr into out), with fds[i] of ours as its fd
 * 3 + i (n of them, none else); its pid. */
pid_t crun_spawn_fds(const char *const *env, const char *out, const char *verb, const char *const *args,
                     const int *fds, size_t n);
/* What is written on fd (a pipe's read end) until its EOF, awaited
 * within AWAIT_MS; "" when nothing. */
const char *crun_read_all(int fd);
/* A ready line (runready.h) of the job NAME: its pid, its start time
 * checked against /proc (the process is alive) and returned in *ret_start. */
pid_t crun_ready_pid(const char *line, const char *name, uint64_t *ret_start);
/* The job's init as its name's record in x's directory says (pid and
 * start time); ended (SIGKILL) when the test process exits. */
pid_t crun_init_of(struct citest_ctx *x, const char *name, uint64_t *ret_start);
/* pid's pids from our namespace down (NSpid); how many. */
int crun_ns_pids(pid_t pid, int *v, int max);
/* The host pids of init and every descendant (init first), by parent. */
size_t crun_job_pids(pid_t init, pid_t *out, size_t max);
/* The target whose pid in the namespace is ns: SIGUSR1 to host, and its
 * "ok NS N" (its memory checked for the N-th time) awaited in x's result. */
void crun_check_memory_ns(struct citest_ctx *x, pid_t host, int ns, unsigned long n);
/* After crun_check_memory_ns(x, ..., ns, n): the target saw itself as
 * /proc/<ns> then ("proc NS N own" in x's result). */
void crun_check_proc_ns(struct citest_ctx *x, int ns, unsigned long n);
/* A process that holds pid (clone3 with set_tid) until killed. */
pid_t crun_hold_pid(pid_t pid);
/* The log of a user's job NAME in x's directory (its directory made). */
const char *crun_log(struct citest_ctx *x, const char *name);
/* Starts the job NAME (criu_target tree) with cgroup (run's --no-cgroup
 * or --cgroup-parent=DIR), user (--user=..., or NULL: root) and sim_env
 * (one more "K=V" of the targets', or NULL); its run command in *ret_run,
 * the host pids (init first) in pids, each one's pid in the namespace in
 * ns.  A user's job writes its output to crun_log(x, NAME). */
void crun_start_job(struct citest_ctx *x, const char *const *env, const char *name, const char *cgroup,
                    const char *user, const char *sim_env, pid_t *ret_run, pid_t *pids, int *ns);

/* path's text holds line, awaited (AWAIT_MS). */
void crun_await_text(const char *path, const char *line);

#endif
