/* groups_itest.h: what the integration tests of groups and selections
 * share (test_groups.c, test_group_failures.c, test_selection.c; the
 * helpers are groups_itest.c): selectors, group calls and the assertions
 * on their replies, /proc readers and process trees.
 *
 * cgroup and tree selections and ListProcesses count a process as a CUDA
 * process only when it maps the daemon's driver library: their targets are
 * started with LD_PRELOAD of the simulator (itest_sim_preload()).  pids
 * selections need no mapping: the driver's GetState decides.
 *
 * A test program that starts trees (gitest_start_tree()) doubles as a
 * target: its main() hands "--itest-tree SPEC..." to gitest_tree_mode(),
 * which forks one child per SPEC, waits until each has exec'd, says ready
 * on fd 3 and waits to be killed (its children die with it).  SPEC: "sim"
 * (sleep with LD_PRELOAD and CUDACKPT_SIM=1), "preload" (LD_PRELOAD only:
 * never initialised), "plain" (neither), "node" (this mode again, with one
 * "sim" child).  The node's own environment names the library in
 * LD_PRELOAD. */
#ifndef CUDACKPT_GROUPS_ITEST_H
#define CUDACKPT_GROUPS_ITEST_H

#include "harness.h"

#define SIM "CUDACKPT_SIM=1"
#define SMALL "CUDACKPT_SIM_MEM_MIB=8"
/* A checkpoint of about 2 s (256 MiB at 128 MiB/s). */
#define SLOW_CKPT_MEM "CUDACKPT_SIM_MEM_MIB=256"
#define SLOW_CKPT_RATE "CUDACKPT_SIM_CKPT_MIBPS=128"
/* A restore of about 2 s. */
#define SLOW_RESTORE_RATE "CUDACKPT_SIM_RESTORE_MIBPS=128"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* The six group methods, LockGroup to ResumeGroup. */
extern const char *const gitest_all_groups[6];

/* A call of another uid (gitest_as_call() in itest_run_as()), and what its
 * reply must be. */
struct gitest_as_ctx {
        const char *sock;
        const char *json;       /* the call */
        const char *error;      /* expected error, NULL for success */
        const char *phase;      /* for GroupFailed */
        pid_t pid;              /* GroupFailed's pid; ListProcesses: must be listed */
        pid_t absent;           /* ListProcesses: must not be listed */
        uid_t uid;              /* ListProcesses: every entry's uid */
        bool list;              /* a ListProcesses reply, to check as above */
};

/* The processes of gitest_make_tree(). */
struct gitest_tree {
        pid_t root, sim, node, grandchild, preload, plain;
};

const char *gitest_short_name(const char *method);
const char *gitest_sel_pids(size_t n, const pid_t *pids);
const char *gitest_sel_tree(pid_t root);
const char *gitest_sel_cgroup(const char *path);
const char *gitest_group_params(const char *selector, const char *extra);
void gitest_send_group(struct itest_conn *c, const char *method, const char *selector, const char *extra);
/* The one reply of a call made without "more": never "continues". */
cJSON *gitest_recv_reply(struct itest_conn *c, int timeout_ms);
cJSON *gitest_group(struct itest_conn *c, const char *method, const char *selector, const char *extra);
cJSON *gitest_group_pids(struct itest_conn *c, const char *method, size_t n, const pid_t *pids);
const char *gitest_ostr(const cJSON *o, const char *key);
bool gitest_onum(const cJSON *o, const char *key, double *ret);
bool gitest_in_set(pid_t pid, size_t n, const pid_t *pids);
/* The element of arr (of objects with "pid") for pid; asserts there is at
 * most one.  NULL when none. */
const cJSON *gitest_arr_find(const cJSON *arr, pid_t pid, const cJSON *reply);
/* The whole of /proc/PID/<name> (environ, cgroup), kept; *len its size
 * (asserts it can be read). */
char *gitest_read_proc(pid_t pid, const char *name, size_t *len);
/* Asserts that array key of reply holds exactly the pids given (any order). */
const cJSON *gitest_assert_pid_set(const cJSON *reply, const char *key, size_t n, const pid_t *pids);
/* One Member of a reply: start time, a duration and, when state is not
 * NULL, that state. */
const cJSON *gitest_assert_member(const cJSON *reply, pid_t pid, const char *state);
/* A member whose state the daemon may not know (its own step failed with
 * an error that implies none): the state, when given, is this one. */
const cJSON *gitest_assert_member_opt(const cJSON *reply, pid_t pid, const char *state);
/* A successful group reply whose members are exactly pids, all in state. */
void gitest_assert_group_ok(const cJSON *reply, size_t n, const pid_t *pids, const char *state);
/* skipped holds exactly pids, each with its start time and reason not-cuda. */
void gitest_assert_skipped(const cJSON *reply, size_t n, const pid_t *pids);
/* GroupFailed naming method, phase, the failed member and its error. */
void gitest_assert_group_failed(const cJSON *j, const char *method, const char *phase, pid_t pid, const char *error);
const cJSON *gitest_error_params(const cJSON *j);
void gitest_assert_all_now(struct itest_conn *c, size_t n, const pid_t *pids, const char *state);
/* GetState's state (in flight or not). */
const char *gitest_state_of(struct itest_conn *c, pid_t pid, bool *in_flight);
bool gitest_streq(const char *a, const char *b);
/* Waits until GetState shows an operation in flight on pid (any). */
void gitest_await_any_in_flight(struct itest_conn *c, pid_t pid, int timeout_ms);
/* Waits until GetState shows pid in state, in flight or not (a group's
 * member between its steps shows the group in flight). */
void gitest_await_state_any(struct itest_conn *c, pid_t pid, const char *state, int timeout_ms);
/* Waits until GetState shows pid in state with an operation in flight. */
void gitest_op_ok(struct itest_conn *c, const char *method, pid_t pid, const char *state);
bool gitest_environ_has(pid_t pid, const char *entry);
/* The "0::" path of /proc/PID/cgroup (harness-owned). */
const char *gitest_cgroup_of(pid_t pid);
/* Turns the CUDACKPT_SIM_FAIL of a running target into one the simulator
 * ignores ("restore:..." becomes "xestore:..."), by writing its
 * environment in place (root, our own child): the failure goes away, as a
 * transient one would, without a new process. */
void gitest_disarm_fail(pid_t pid);
bool gitest_log_line_count(const struct itest_daemon *d, const char *a, const char *b, int *ret);
/* In a child of another uid: one call, its reply checked without ck_assert. */
int gitest_as_call(void *p, char *msg, size_t n);
/* The test program in --itest-tree mode with the given child specs (see the
 * top of this file); returns once every child has exec'd. */
pid_t gitest_start_tree(const char *const *specs);
/* A tree: root (CUDA) -> sim (CUDA), node (CUDA) -> grandchild (CUDA),
 * preload (maps the driver, never initialised), plain (neither). */
void gitest_make_tree(struct gitest_tree *t);
int gitest_tree_mode(int argc, char **argv);

#endif
