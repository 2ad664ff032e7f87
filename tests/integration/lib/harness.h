/* harness.h: what the integration tests share.
 *
 * Each test starts the real cudackptd binary on a socket in a fresh temp
 * directory, with the simulated driver, and talks to it through the client
 * library or through raw Varlink bytes.  Targets are ordinary processes
 * (/bin/sleep) whose environment tells the simulator how to behave.
 *
 * The harness runs inside Check's forked test child.  A failed ck_assert
 * ends that child with _exit(), so nothing of ours runs afterwards: Check
 * itself kills the child's process group (daemon and targets are in it),
 * and itest_main() prints the daemon log of every test directory left
 * behind (only a test that did not reach its teardown leaves one) and
 * removes it.  On success the checked teardown stops the daemon with
 * SIGTERM, asserts a clean exit, kills the targets and removes the dir.
 *
 * The harness is harness.c (the daemon, fixtures, runner),
 * harness_targets.c (targets, /proc), harness_run.c (other uids, other
 * programs), harness_varlink.c (connections, replies, fake servers),
 * harness_features.c (leases, Watch, cudackptctl) and harness_skip.c
 * (tests that skip themselves).
 *
 * Paths of the programs under test come from the environment, set by ctest:
 *   CUDACKPT_TEST_DAEMON  cudackptd
 *   CUDACKPT_TEST_SIM     libcudackpt-sim.so
 *   CUDACKPT_TEST_CTL     cudackptctl */
#ifndef CUDACKPT_ITEST_HARNESS_H
#define CUDACKPT_ITEST_HARNESS_H

#include <check.h>
#include <cJSON.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include <cudackpt/client.h>
#include <cudackpt/protocol.h>

/* cudackptctl's exit statuses, which the tests of the command check. */
#include "ctl/exitcode.h"

/* An unused uid/gid for the "another user" tests. */
#define ITEST_OTHER_UID 4242

/* UUIDs of the simulated GPUs (CUDACKPT_SIM_DEVICE_COUNT=N gives 1..N). */
#define ITEST_GPU0 "GPU-00000000-5157-4000-8000-000000000001"
#define ITEST_GPU0_PLAIN "00000000515740008000000000000001"
#define ITEST_GPU1 "GPU-00000000-5157-4000-8000-000000000002"
#define ITEST_GPU_NONE "GPU-ffffffff-ffff-ffff-ffff-ffffffffffff"

/* Generous bound on any single reply; a test asserts tighter ones itself. */
#define ITEST_REPLY_TIMEOUT_MS 20000

/* ---- the daemon ---------------------------------------------------------- */

struct itest_daemon_opts {
        const char *config_json;     /* written to DIR/config.json; NULL: "{}" */
        const char *driver;          /* --driver=; NULL: the simulator */
        const char *const *env;      /* extra "K=V" for the daemon, NULL-terminated */
};

/* The running daemon of this test (one per test). */
struct itest_daemon {
        char dir[96];                /* the test's temp dir (mode 0755) */
        char sock[128];              /* DIR/sock, the Varlink socket */
        pid_t pid;                   /* the daemon; 0 once stopped */
        int pidfd;                   /* pidfd of pid, to await its exit */
};

/* Starts the daemon and waits for READY=1; asserts it comes within 10 s. */
struct itest_daemon *itest_daemon_start(const struct itest_daemon_opts *opts);
/* The same with default options. */
struct itest_daemon *itest_daemon_start_default(void);
/* SIGTERM, then asserts exit status 0 within 10 s.  Called by teardown too. */
void itest_daemon_stop(struct itest_daemon *d);
/* Whether the daemon has exited (without reaping it). */
bool itest_daemon_exited(struct itest_daemon *d);
/* For tests that end the daemon themselves (signals sent by the test):
 * asserts it exits within timeout_ms, reaps it and returns its wait status
 * (for WIFEXITED() and friends).  The daemon then counts as stopped, so
 * the teardown does not stop it again. */
int itest_daemon_await_exit(struct itest_daemon *d, int timeout_ms);
/* SIGKILLs the daemon (asserts it was alive) and reaps it: it leaves its
 * socket file and lease store behind, as a crash would. */
void itest_daemon_kill(struct itest_daemon *d);
/* Starts the daemon again after it was stopped or killed: the same
 * directory (its runtime directory: the lease store), socket, and
 * configuration unless opts gives one (opts NULL: as before, the
 * simulator, no extra environment); the log goes on in the same file.
 * Waits for READY=1 as itest_daemon_start() does.  Returns d. */
struct itest_daemon *itest_daemon_restart(struct itest_daemon *d, const struct itest_daemon_opts *opts);
/* Prints the daemon's log to stderr. */
void itest_daemon_print_log(const struct itest_daemon *d);
/* The daemon's log so far, whole (kept until teardown). */
const char *itest_daemon_log(const struct itest_daemon *d);
/* Waits until the log holds text, which it returns the line of (kept);
 * fails after timeout_ms. */
const char *itest_await_log(const struct itest_daemon *d, const char *text, int timeout_ms);

/* Checked fixtures: add to every TCase with tcase_add_checked_fixture(). */
void itest_setup(void);
void itest_teardown(void);

/* A test case of s with the fixtures above and a per-test timeout. */
TCase *itest_tcase(Suite *s, const char *name, double timeout_s);

/* Runs the suite (forked, per-test timeouts set by the caller), prints the
 * logs of failed tests, returns the exit status for main(). */
int itest_main(Suite *s);

/* A suite of one test case, made by itest_tcase(), holding tests (a list
 * ended by NULL) in their order; *ret_tc, where given, is that case, for
 * tests added some other way. */
Suite *itest_suite(const char *name, const char *tcase, double timeout_s, const TTest *const tests[],
                   TCase **ret_tc);

/* itest_main() of itest_suite(): the whole of a one-case suite's main(). */
int itest_run(const char *name, const char *tcase, double timeout_s, const TTest *const tests[]);

/* ---- targets ------------------------------------------------------------- */

/* Starts /bin/sleep 3600 with exactly the given environment ("K=V"...,
 * NULL-terminated), as uid/gid `uid` when uid != (uid_t)-1, and returns
 * once its exec is over (itest_await_exec).  Killed and reaped at teardown. */
pid_t itest_target_env(uid_t uid, const char *const *env);
/* Variadic forms: itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=8", NULL). */
pid_t itest_target(const char *first, ...) __attribute__((sentinel));
pid_t itest_target_as(uid_t uid, const char *first, ...) __attribute__((sentinel));
/* The targets most tests want: a simulated CUDA process with the
 * simulator's default memory; one with 8 MiB (quick operations); and a
 * small one that maps the driver library too (LD_PRELOAD of the
 * simulator), as cgroup and tree selections, ListProcesses and the
 * process index look for. */
pid_t itest_sim_target(void);
pid_t itest_small_target(void);
pid_t itest_mapped_target(void);
/* Starts path with argv and env as a target (root, or uid when not -1)
 * and returns once it has written a byte to fd 3, its "ready" signal (it
 * may change its own ids first).  Killed and reaped at teardown. */
pid_t itest_target_exec(uid_t uid, const char *path, const char *const *argv, const char *const *env);
/* The path of the running test program, for targets that are this very
 * program in a helper mode. */
const char *itest_self_exe(void);
/* Starts this test program as a simulated CUDA target whose real, effective
 * and saved uids are r, e and s (gid ITEST_OTHER_UID, no groups): a
 * set-user-id program half way, say.  The program's main() must hand
 * "--itest-hold-uids R E S" to itest_hold_uids(). */
pid_t itest_target_uids(uid_t r, uid_t e, uid_t s);
/* The --itest-hold-uids mode: set the ids, say so on fd 3, wait to be killed. */
int itest_hold_uids(char **argv);
/* The --itest-grow MIB_PER_S mode: a target whose resident memory grows
 * at that rate (up to 1 GiB), as a real one's does while the driver
 * checkpoints it (the simulator moves no memory); it says ready on fd 3
 * first.  Started with argv { self, "--itest-grow", RATE }. */
int itest_grow_mode(char **argv);
/* For a helper-mode target: says "ready" on fd 3 (itest_target_exec waits
 * for it) and waits to be killed; returns 1 only when fd 3 fails. */
int itest_ready_and_wait(void);
/* Waits until pid's exec, already begun (a close-on-exec pipe saw EOF), is
 * over: /proc/PID/environ holds its new environment, which the kernel sets up
 * a little after that EOF, and a library that env preloads (LD_PRELOAD=) is
 * mapped.  A loaded machine can take many milliseconds for either, during
 * which the process is rightly no CUDA process yet.  Safe outside Check (no
 * assertions); false if pid died or 10 s went by. */
bool itest_await_exec(pid_t pid, const char *const *env);
/* SIGKILL and reap now. */
void itest_target_kill(pid_t pid);
/* A pid that belonged to a child that has been reaped, so no process has it. */
pid_t itest_dead_pid(void);
/* Field 22 of /proc/PID/stat. */
uint64_t itest_start_time(pid_t pid);

/* ---- raw Varlink --------------------------------------------------------- */

struct itest_conn {
        int fd;
        char *buf;                   /* bytes read but not yet returned */
        size_t len, cap;
};

/* Connect to the daemon's socket (asserts success). */
struct itest_conn *itest_connect(struct itest_daemon *d);
/* A connection made by a process of uid (gid uid, no supplementary
 * groups), which stays alive as the peer until the test ends; the test
 * reads and writes it as any other. */
struct itest_conn *itest_connect_as(struct itest_daemon *d, uid_t uid);
/* A connection of the unprivileged uid u: itest_connect_as(d, u), or, where
 * u is (uid_t)-1, the test's own (a test not run as root). */
struct itest_conn *itest_connect_unprivileged(struct itest_daemon *d, uid_t u);
void itest_conn_close(struct itest_conn *c);
/* Writes all of buf (MSG_NOSIGNAL); one byte per write when bytewise.
 * Returns 0 or -errno (EPIPE/ECONNRESET when the daemon closed first). */
int itest_send_bytes(struct itest_conn *c, const void *buf, size_t len, bool bytewise);
/* Sends text followed by a NUL; asserts the write worked. */
void itest_send(struct itest_conn *c, const char *json);
void itest_sendf(struct itest_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Reads one NUL-terminated message within timeout_ms.  Returns 0 and the
 * parsed reply (owned by the harness, freed at teardown), -ENODATA on EOF
 * (or ECONNRESET: a peer that closes with unread input resets), -ETIMEDOUT,
 * -EPROTO when the message is not a JSON object, other -errno. */
int itest_recv_raw(struct itest_conn *c, int timeout_ms, cJSON **ret_reply);
/* Asserting forms. */
cJSON *itest_recv(struct itest_conn *c);
cJSON *itest_recv_within(struct itest_conn *c, int timeout_ms);
cJSON *itest_callf(struct itest_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* {"method":method,"parameters":params} (params a JSON text; NULL: none). */
void itest_send_call(struct itest_conn *c, const char *method, const char *params);
cJSON *itest_call(struct itest_conn *c, const char *method, const char *params);
/* The same with parameters {"pid":pid}. */
cJSON *itest_call_pid(struct itest_conn *c, const char *method, int pid);
/* Calls GetState on c until it names `method` in in_flight; asserts that
 * happens within timeout_ms.  Returns that reply. */
cJSON *itest_await_in_flight(struct itest_conn *c, pid_t pid, const char *method, int timeout_ms);
/* Asserts that the daemon closes the connection within timeout_ms, with no
 * further message. */
void itest_assert_eof(struct itest_conn *c, int timeout_ms);
/* Whether a whole message is already buffered or the fd is readable now. */
bool itest_conn_readable(struct itest_conn *c);

/* Reply accessors (NULL / false when absent or of another type). */
const char *itest_error(const cJSON *reply);
const cJSON *itest_params(const cJSON *reply);
const char *itest_str(const cJSON *reply, const char *key);
bool itest_has(const cJSON *reply, const char *key);
bool itest_int(const cJSON *reply, const char *key, long long *ret);
/* JSON text of a reply, for messages (owned by the harness). */
const char *itest_dump(const cJSON *reply);
/* GPU UUID without "GPU-" and hyphens, lowercased (owned by the harness). */
const char *itest_uuid_norm(const char *uuid);

/* Assertions on raw replies; the message always shows the whole reply. */
#define itest_assert_ok(reply) do { \
        const cJSON *r_ = (reply); \
        ck_assert_msg(r_ && itest_error(r_) == NULL && cJSON_IsObject(itest_params(r_)), \
                      "expected a successful reply, got %s", itest_dump(r_)); \
} while (0)
#define itest_assert_error(reply, name) do { \
        const cJSON *r_ = (reply); \
        const char *e_ = r_ ? itest_error(r_) : NULL; \
        ck_assert_msg(e_ && strcmp(e_, (name)) == 0 && \
                      (!itest_params(r_) || cJSON_IsObject(itest_params(r_))), \
                      "expected error %s, got %s", (name), itest_dump(r_)); \
} while (0)
#define itest_assert_str(reply, key, value) do { \
        const cJSON *r_ = (reply); \
        const char *s_ = itest_str(r_, (key)); \
        ck_assert_msg(s_ && strcmp(s_, (value)) == 0, "expected parameter %s = \"%s\" in %s", \
                      (key), (value), itest_dump(r_)); \
} while (0)
#define itest_assert_int(reply, key, value) do { \
        const cJSON *r_ = (reply); \
        long long v_ = 0; \
        ck_assert_msg(itest_int(r_, (key), &v_) && v_ == (long long)(value), \
                      "expected parameter %s = %lld in %s", (key), (long long)(value), \
                      itest_dump(r_)); \
} while (0)
#define itest_assert_absent(reply, key) do { \
        const cJSON *r_ = (reply); \
        ck_assert_msg(!itest_has(r_, (key)), "expected no parameter %s in %s", (key), \
                      itest_dump(r_)); \
} while (0)
/* Optional parameter: absent, or equal to value. */
#define itest_assert_str_opt(reply, key, value) do { \
        const cJSON *ro_ = (reply); \
        if (itest_has(ro_, (key))) \
                itest_assert_str(ro_, (key), (value)); \
} while (0)
#define itest_assert_bool(reply, key, value) do { \
        const cJSON *r_ = (reply); \
        const cJSON *p_ = itest_params(r_); \
        const cJSON *b_ = p_ ? cJSON_GetObjectItemCaseSensitive(p_, (key)) : NULL; \
        ck_assert_msg(cJSON_IsBool(b_) && (bool)cJSON_IsTrue(b_) == (bool)(value), \
                      "expected parameter %s = %s in %s", (key), (value) ? "true" : "false", \
                      itest_dump(r_)); \
} while (0)
/* Success with the given pid and state. */
#define itest_assert_state(reply, pid, state) do { \
        const cJSON *rr_ = (reply); \
        itest_assert_ok(rr_); \
        itest_assert_int(rr_, "pid", (pid)); \
        itest_assert_str(rr_, "state", (state)); \
} while (0)
/* GetState of pid now: state, and no operation in flight. */
void itest_assert_state_now(struct itest_conn *c, pid_t pid, const char *state);
/* A GetInfo reply j whose interfaces list io.cudackpt.Process. */
void itest_assert_lists_interface(const cJSON *j);
/* The methods of io.cudackpt.Process that name one process, NULL-ended. */
extern const char *const itest_process_methods[];

/* ---- client library ------------------------------------------------------ */

/* Connect with the library (asserts), with a 20 s timeout per call. */
cudackpt_client *itest_client(struct itest_daemon *d);

/* The start many tests share: the default daemon (in *ret_d unless NULL),
 * a simulated target (itest_sim_target()), then a connection to the
 * daemon in *ret_c, raw (itest_connect()) or the library's
 * (itest_client()); the target's pid. */
pid_t itest_sim_conn(struct itest_daemon **ret_d, struct itest_conn **ret_c);
pid_t itest_sim_client(struct itest_daemon **ret_d, cudackpt_client **ret_c);

#define itest_assert_reply_ok(rc, r) do { \
        int rc_ = (rc); \
        const cudackpt_reply *rp_ = (r); \
        ck_assert_msg(rc_ == 0, "call failed: %s", strerror(-rc_)); \
        ck_assert_msg(rp_->error == NULL, "expected success, got %s %s", rp_->error, \
                      rp_->parameters_json ? rp_->parameters_json : "(null)"); \
} while (0)
#define itest_assert_reply_error(rc, r, name) do { \
        int rc_ = (rc); \
        const cudackpt_reply *rp_ = (r); \
        ck_assert_msg(rc_ == 0, "call failed: %s", strerror(-rc_)); \
        ck_assert_msg(rp_->error && strcmp(rp_->error, (name)) == 0, "expected %s, got %s %s", \
                      (name), rp_->error ? rp_->error : "success", \
                      rp_->parameters_json ? rp_->parameters_json : "(null)"); \
} while (0)
#define itest_assert_reply_state(rc, r, want_pid, want_state) do { \
        const cudackpt_reply *rs_ = (r); \
        itest_assert_reply_ok((rc), rs_); \
        ck_assert_int_eq(rs_->pid, (want_pid)); \
        ck_assert_msg(rs_->state && strcmp(rs_->state, (want_state)) == 0, \
                      "expected state %s, got %s", (want_state), rs_->parameters_json); \
} while (0)
/* Sets c's timeout to timeout_ms and asserts that a Suspend of pid (one
 * that takes far longer) returns -ETIMEDOUT after timeout_ms to max_ms,
 * and that c refuses calls afterwards (-ENOTCONN). */
void itest_assert_suspend_times_out(cudackpt_client *c, pid_t pid, int timeout_ms, double max_ms);
/* The parameters of a library reply, parsed (owned by the harness). */
cJSON *itest_reply_json(const cudackpt_reply *r);

/* ---- files and cgroups (harness_files.c) ---------------------------------- */

/* A cgroup2 mount of the test's own under /tmp (the daemon finds groups
 * through its mounts; this machine's v2 hierarchy is empty), or NULL with
 * errno where the kernel refuses one.  Needs root; the test unmounts it. */
char *itest_cgroup2_mount(void);
/* itest_cgroup2_mount() for a test that needs it: NULL when the test
 * skipped itself (not root, or no mount; itest_skip() says why). */
char *itest_cgroup2_or_skip(void);
/* Moves pid into the cgroup dir (its cgroup.procs), asserting it moved. */
void itest_cgroup_move(const char *dir, pid_t pid);
/* The text of the file at path (its first MiB), "" when it cannot be read;
 * owned by the harness. */
const char *itest_read_text(const char *path);

/* ---- other uids and processes -------------------------------------------- */

/* Records that the running test skips itself and why (printf-style), for
 * itest_main() to report ("SKIP: TEST: why", and exit 77 when every test
 * of the suite skipped); the test then returns at once. */
void itest_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Skips (itest_skip(), then returns true) unless running as root. */
bool itest_need_root(void);

/* Runs fn(ctx, msg, msg_size) in a child with uid/gid `uid` and no
 * supplementary groups.  fn returns 0 for success or writes why it failed
 * into msg.  Returns fn's result (or -1 when the child died), with the
 * child's message in msg. */
typedef int (*itest_as_fn)(void *ctx, char *msg, size_t msg_size);
int itest_run_as(uid_t uid, itest_as_fn fn, void *ctx, char *msg, size_t msg_size);
/* The same with exactly the supplementary groups given. */
int itest_run_as_groups(uid_t uid, const gid_t *groups, size_t n_groups, itest_as_fn fn, void *ctx, char *msg,
                        size_t msg_size);
/* "exit status N", "killed by signal N (NAME)", ...: a wait status in words. */
const char *itest_describe_status(int status);

/* Runs argv (argv[0] a path) with environment env (NULL: PATH only) as uid
 * (or unchanged for (uid_t)-1), capturing stdout and stderr; asserts it
 * exits within timeout_ms.  Returns the exit status (128+N for signal N). */
struct itest_proc_result {
        int status;
        char out[8192];
        char err[8192];
};
void itest_run_proc(uid_t uid, const char *const *argv, const char *const *env, int timeout_ms,
                    struct itest_proc_result *ret);

/* Copies the program at path into the test's dir (d->dir, mode 0755) as
 * name (NULL: path's own name), mode 0755, and returns the copy's path
 * (owned by the harness); a second call for the same name returns the
 * same copy.  For programs a process of another uid must exec: the build
 * tree may be closed to it (a checkout in root's 0700 home), and a
 * symbolic link would not open it. */
const char *itest_stage_exe(struct itest_daemon *d, const char *path, const char *name);

/* ---- groups, process trees, other uids ------------------------------------ */

/* "LD_PRELOAD=<CUDACKPT_TEST_SIM>" (owned by the harness): a target whose
 * environment holds it maps the daemon's driver library, as a real CUDA
 * process maps libcuda.so, which is what cgroup and tree selections and
 * ListProcesses look for.  In a sanitizer build the sanitizer's runtime
 * comes first in the list (it must be the first library loaded). */
const char *itest_sim_preload(void);
/* "LD_PRELOAD=<lib>", the sanitizer's runtime first in a sanitizer build
 * (owned by the harness): for the daemon too (itest_daemon_opts.env). */
const char *itest_preload(const char *lib);
/* The same for a target of another uid or user namespace: the build tree
 * may be closed to it (a checkout in root's 0700 home), so where it is,
 * the simulator is staged into the test's dir (d->dir) as libcuda.so.1,
 * which counts as the driver by its name. */
const char *itest_sim_preload_for_others(struct itest_daemon *d);
/* The children of pid, from /proc/PID/task/TID/children of every thread;
 * at most max.  Returns how many were found (0 when pid is gone). */
size_t itest_children(pid_t pid, pid_t *ret, size_t max);
/* Calls GetState on c until the process is in state, with no operation in
 * flight; asserts that happens within timeout_ms.  Returns that reply. */
cJSON *itest_await_state(struct itest_conn *c, pid_t pid, const char *state, int timeout_ms);

/* The state letter of pid's main thread (field 3 of /proc/PID/stat). */
char itest_proc_state(pid_t pid);

/* Waits (5 s at most) until pid's state letter is want (equal) or is not. */
void itest_await_proc_state(pid_t pid, char want, bool equal);
/* Waits until the simulator's step slot in target pid (its environment
 * carries CUDACKPT_SIM_STEP=-) reads letter: L, C, R or U once a Lock,
 * Checkpoint, Restore or Unlock has reached the driver (past the daemon's
 * own checks) and before its wait for a stopped target; l, c, r or u once
 * past that wait, while it works; '-' when none does (tests/sim/sim.c).
 * Asserts it within timeout_ms. */
void itest_await_sim_step(pid_t pid, char letter, int timeout_ms);
/* The parameter key of a reply (any JSON type), NULL when absent. */
const cJSON *itest_get(const cJSON *reply, const char *key);
/* One Varlink call on a fresh connection to sock, without a single
 * ck_assert (for itest_run_as() children): 0 and the parsed reply
 * (caller frees), or -1 with why in msg. */
int itest_raw_call(const char *sock, const char *json, int timeout_ms, cJSON **ret_reply, char *msg,
                   size_t msg_size);

/* A server on path that answers one connection: it saves the request (up
 * to its NUL) in request_file, sends each of replies (NULL-terminated)
 * with its NUL and closes.  Returns its pid, for itest_await_fake_server(),
 * which asserts it exited 0. */
pid_t itest_fake_server(const char *path, const char *const *replies, const char *request_file);
void itest_await_fake_server(pid_t pid);
/* The same for a client that makes several calls on the connection: it
 * reads one request before each reply, and saves the requests in
 * request_file, one a line. */
pid_t itest_fake_server_calls(const char *path, const char *const *replies, const char *request_file);

/* ---- features: leases, Watch, cudackptctl (harness_features.c) ------------ */

/* The id of the lease a reply grants; asserts there is one. */
long long itest_lease_id(const cJSON *reply);
/* How many times needle stands in hay (without overlaps). */
int itest_count(const char *hay, const char *needle);
/* SIGKILLs pid, a child of the test (a holder, a cudackptctl), and reaps
 * it; asserts both. */
void itest_kill_wait(pid_t pid);

/* Opens a Watch on a new connection, with selector (a JSON object; NULL:
 * every process), and asserts its first event is "watching". */
struct itest_conn *itest_watcher(struct itest_daemon *d, const char *selector);
/* The next event of w within timeout_ms, asserted to continue. */
const cJSON *itest_next_event(struct itest_conn *w, int timeout_ms);
/* An event's string member key, "" when absent. */
const char *itest_event_str(const cJSON *e, const char *key);

/* The cudackptctl under test (CUDACKPT_TEST_CTL). */
const char *itest_ctl_path(void);
/* Runs path [pre] ARGS... (the NULL-terminated rest of ap) as uid with
 * environment env (NULL: the harness's), within 20 s; the result is kept
 * until teardown. */
struct itest_proc_result *itest_run_va(uid_t uid, const char *path, const char *pre, const char *const *env,
                                       const char *first, va_list ap);
/* Runs cudackptctl --socket=D ARGS... (NULL-terminated; d NULL: no
 * --socket) as uid; as another uid, the copy staged in the test's dir. */
struct itest_proc_result *itest_ctl_as(uid_t uid, struct itest_daemon *d, const char *first, ...);
#define itest_ctl(d, ...) itest_ctl_as((uid_t)-1, (d), __VA_ARGS__)
/* The same with the args in an array (NULL-terminated), into *ret. */
void itest_ctl_run(struct itest_daemon *d, struct itest_proc_result *ret, const char *const *args);
/* pid in decimal (kept), an argument of cudackptctl. */
const char *itest_pidstr(pid_t pid);
/* A cudackptctl run's exit status and stdout exactly (out NULL: any);
 * stderr empty on success, one line on a daemon's error. */
void itest_assert_run(const struct itest_proc_result *r, int status, const char *out);
/* An operation's output: "STATE (D.D ms)", exit status 0. */
void itest_assert_op_output(const struct itest_proc_result *r, const char *state);
/* Starts cudackptctl --socket=D args... in the background, its stdout to
 * *ret_out_fd (a pipe's reading end) when not NULL; returns its pid (the
 * test's child: itest_kill_wait() or waitpid() it). */
pid_t itest_ctl_spawn(struct itest_daemon *d, const char *const *args, int *ret_out_fd);

/* The value of an environment variable ctest sets (a path of the build);
 * asserts it is set. */
const char *itest_need_env(const char *name);

/* Monotonic clock in milliseconds. */
double itest_now_ms(void);
/* Waits, through EINTR, until fd is readable or the deadline (on
 * itest_now_ms()'s clock) has passed: 0, -ETIMEDOUT or -errno. */
int itest_wait_readable(int fd, double deadline);

/* Remember p and free() it at teardown (for strings made in tests). */
void *itest_keep(void *p);
/* The same for a cJSON tree (cJSON_Delete at teardown); returns j. */
cJSON *itest_keep_json(cJSON *j);
char *itest_strdupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
