/* test_permissions.c: who may act on which process.  A caller that is not
 * root may act only on processes whose real, effective and saved uids all
 * equal its own; root may act on any.  The callers here are children that
 * switch to ITEST_OTHER_UID and use the client library.
 *
 * Operator groups and read-only access (docs/security.md, "Who may do
 * what") are attacked here too, with scripts of calls run as other users
 * (attacks_itest.h).
 *
 * Needs root (to switch uids); exits 77, which ctest reports as skipped,
 * otherwise.  The binary doubles as a target whose uids differ from each
 * other (exec'd with --itest-hold-uids R E S): exec would reset the saved
 * uid of a plain /bin/sleep, so the ids are set after the exec. */
#include "attacks_itest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OTHER ITEST_OTHER_UID

struct as_ctx {
        const char *sock;
        pid_t pid;
        uid_t caller;
};

typedef int (*call_fn)(cudackpt_client *c, int pid, cudackpt_reply *r);

static int call_lock(cudackpt_client *c, int pid, cudackpt_reply *r)
{
        return cudackpt_lock(c, pid, -1, r);
}

static int call_suspend(cudackpt_client *c, int pid, cudackpt_reply *r)
{
        return cudackpt_suspend(c, pid, -1, r);
}

static int call_restore(cudackpt_client *c, int pid, cudackpt_reply *r)
{
        return cudackpt_restore(c, pid, NULL, r);
}

static int call_resume(cudackpt_client *c, int pid, cudackpt_reply *r)
{
        return cudackpt_resume(c, pid, NULL, r);
}

static const struct {
        const char *name;
        call_fn fn;
} calls[] = {
        { "GetState", cudackpt_get_state },
        { "GetRestoreThreadId", cudackpt_get_restore_thread_id },
        { "Lock", call_lock },
        { "Checkpoint", cudackpt_checkpoint },
        { "Restore", call_restore },
        { "Unlock", cudackpt_unlock },
        { "Suspend", call_suspend },
        { "Resume", call_resume },
};

static int connect_client(const struct as_ctx *x, cudackpt_client **ret, char *msg, size_t n)
{
        int rc = cudackpt_client_connect(x->sock, ret);
        if (rc < 0) {
                snprintf(msg, n, "connect %s: %s", x->sock, strerror(-rc));
                return 1;
        }
        cudackpt_client_set_timeout(*ret, ITEST_REPLY_TIMEOUT_MS);
        return 0;
}

/* Every method is refused with PermissionDenied{pid, caller_uid}. */
static int as_expect_denied(void *p, char *msg, size_t n)
{
        const struct as_ctx *x = p;
        cudackpt_client *c = NULL;
        if (connect_client(x, &c, msg, n))
                return 1;
        int ret = 0;
        for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]) && ret == 0; i++) {
                cudackpt_reply r;
                cudackpt_reply_init(&r);
                int rc = calls[i].fn(c, x->pid, &r);
                cJSON *j = rc == 0 ? cJSON_Parse(r.parameters_json) : NULL;
                const cJSON *uid = cJSON_GetObjectItemCaseSensitive(j, "caller_uid");
                const cJSON *pid = cJSON_GetObjectItemCaseSensitive(j, "pid");
                if (rc < 0)
                        snprintf(msg, n, "%s: %s", calls[i].name, strerror(-rc));
                else if (!r.error || strcmp(r.error, CUDACKPT_ERROR_PERMISSION_DENIED) != 0)
                        snprintf(msg, n, "%s as uid %d on pid %d: expected PermissionDenied, got %s %s",
                                 calls[i].name, (int)x->caller, (int)x->pid, r.error ? r.error : "success",
                                 r.parameters_json);
                else if (!cJSON_IsNumber(uid) || uid->valuedouble != (double)x->caller || !cJSON_IsNumber(pid) ||
                         pid->valuedouble != (double)x->pid)
                        snprintf(msg, n, "%s: PermissionDenied parameters %s, expected pid %d caller_uid %d",
                                 calls[i].name, r.parameters_json, (int)x->pid, (int)x->caller);
                if (msg[0])
                        ret = 1;
                cJSON_Delete(j);
                cudackpt_reply_clear(&r);
        }
        cudackpt_client_free(c);
        return ret;
}

/* The caller's own process: a whole cycle works. */
static int as_expect_allowed(void *p, char *msg, size_t n)
{
        const struct as_ctx *x = p;
        cudackpt_client *c = NULL;
        if (connect_client(x, &c, msg, n))
                return 1;
        static const struct {
                size_t call;
                const char *state;
        } steps[] = {
                { 0, "running" }, { 1, NULL }, { 2, "locked" }, { 3, "checkpointed" }, { 4, "locked" },
                { 5, "running" }, { 6, "checkpointed" }, { 7, "running" },
        };
        int ret = 0;
        for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]) && ret == 0; i++) {
                cudackpt_reply r;
                cudackpt_reply_init(&r);
                int rc = calls[steps[i].call].fn(c, x->pid, &r);
                if (rc < 0)
                        snprintf(msg, n, "%s: %s", calls[steps[i].call].name, strerror(-rc));
                else if (r.error || r.pid != x->pid || (!steps[i].state) != (!r.state) ||
                         (r.state && strcmp(r.state, steps[i].state) != 0))
                        snprintf(msg, n, "%s as uid %d on its own pid %d: expected %s, got %s %s",
                                 calls[steps[i].call].name, (int)x->caller, (int)x->pid,
                                 steps[i].state ? steps[i].state : "no state",
                                 r.error ? r.error : "success", r.parameters_json);
                if (msg[0])
                        ret = 1;
                cudackpt_reply_clear(&r);
        }
        cudackpt_client_free(c);
        return ret;
}

/* GetInfo needs no permission. */
static int as_get_info(void *p, char *msg, size_t n)
{
        const struct as_ctx *x = p;
        cudackpt_client *c = NULL;
        if (connect_client(x, &c, msg, n))
                return 1;
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        int rc = cudackpt_call(c, "org.varlink.service.GetInfo", NULL, &r);
        if (rc < 0)
                snprintf(msg, n, "GetInfo: %s", strerror(-rc));
        else if (r.error)
                snprintf(msg, n, "GetInfo as uid %d: %s %s", (int)x->caller, r.error, r.parameters_json);
        cudackpt_reply_clear(&r);
        cudackpt_client_free(c);
        return msg[0] ? 1 : 0;
}

static void run_as(uid_t uid, itest_as_fn fn, struct itest_daemon *d, pid_t pid)
{
        struct as_ctx x = { .sock = d->sock, .pid = pid, .caller = uid };
        char msg[1024];
        int rc = itest_run_as(uid, fn, &x, msg, sizeof(msg));
        ck_assert_msg(rc == 0, "as uid %d: %s", (int)uid, msg);
}

static void root_expects_state(struct itest_daemon *d, pid_t pid, const char *state)
{
        struct itest_conn *c = itest_connect(d);
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, pid), pid, state);
        itest_conn_close(c);
}

START_TEST(socket_reachable_by_all)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct stat st;
        ck_assert_int_eq(stat(d->sock, &st), 0);
        ck_assert_msg((st.st_mode & 0777) == 0666, "socket mode %o, expected 0666", (unsigned)(st.st_mode & 0777));
        run_as(OTHER, as_get_info, d, 0);
}
END_TEST

START_TEST(other_uid_refused_on_root_target)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_sim_target();
        run_as(OTHER, as_expect_denied, d, pid);
        /* None of the refused calls acted. */
        root_expects_state(d, pid, "running");
}
END_TEST

START_TEST(other_uid_refused_on_third_uid_target)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_target_as(OTHER + 1, "CUDACKPT_SIM=1", NULL);
        run_as(OTHER, as_expect_denied, d, pid);
        root_expects_state(d, pid, "running");
}
END_TEST

START_TEST(other_uid_allowed_on_own_target)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_target_as(OTHER, "CUDACKPT_SIM=1", NULL);
        run_as(OTHER, as_expect_allowed, d, pid);
        root_expects_state(d, pid, "running");
}
END_TEST

START_TEST(root_allowed_on_other_uid_target)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_target_as(OTHER, "CUDACKPT_SIM=1", NULL);
        struct itest_conn *c = itest_connect(d);
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_LOCK, pid), pid, "locked");
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_CHECKPOINT, pid), pid, "checkpointed");
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_RESUME, pid), pid, "running");
        cJSON *j = itest_call_pid(c, CUDACKPT_METHOD_GET_RESTORE_THREAD_ID, pid);
        itest_assert_ok(j);
        itest_assert_int(j, "pid", pid);
}
END_TEST

/* A process whose ids are not all the caller's, e.g. a setuid-root program
 * run by the caller, is not the caller's. */
START_TEST(other_uid_refused_on_mixed_uids)
{
        struct itest_daemon *d = itest_daemon_start_default();
        const uid_t ids[][3] = {
                { OTHER, OTHER, 0 }, /* saved uid root */
                { OTHER, 0, OTHER }, /* effective uid root */
                { 0, OTHER, OTHER }, /* real uid root */
                { OTHER, OTHER, OTHER + 1 },
        };
        for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
                pid_t pid = itest_target_uids(ids[i][0], ids[i][1], ids[i][2]);
                run_as(OTHER, as_expect_denied, d, pid);
                root_expects_state(d, pid, "running");
        }
}
END_TEST

/* ---- 7: operator groups and read-only access ----------------------------- */

/* A member of an operator group may act on another user's process, not
 * on root's (any of its three uids 0) nor on the daemon; without the group
 * (another group, or none) the same calls are refused. */
START_TEST(operator_group)
{
        if (itest_need_root())
                return;
        struct itest_daemon_opts o = { .config_json = itest_strdupf("{\"operator_groups\":[%d]}", OPERATOR_GID) };
        struct itest_daemon *d = itest_daemon_start(&o);
        pid_t user = itest_target_as(OTHER + 1, "CUDACKPT_SIM=1", NULL);
        pid_t root = itest_sim_target();
        pid_t setuid_root = itest_target_uids(OTHER + 1, OTHER + 1, 0);
        const char *denied = CUDACKPT_ERROR_PERMISSION_DENIED;

        const struct atest_step member[] = {
                { CUDACKPT_METHOD_GET_STATE, user, NULL, "running", NULL },
                { CUDACKPT_METHOD_LOCK, user, NULL, "locked", NULL },
                { CUDACKPT_METHOD_UNLOCK, user, NULL, "running", NULL },
                { CUDACKPT_METHOD_SUSPEND, user, NULL, "checkpointed", NULL },
                { CUDACKPT_METHOD_RESUME, user, NULL, "running", NULL },
                { CUDACKPT_METHOD_LOCK, root, denied, NULL, NULL },
                { CUDACKPT_METHOD_GET_STATE, root, denied, NULL, NULL },
                { CUDACKPT_METHOD_SUSPEND, root, denied, NULL, NULL },
                { CUDACKPT_METHOD_LOCK, setuid_root, denied, NULL, NULL },
                { CUDACKPT_METHOD_LOCK, d->pid, denied, NULL, NULL },
        };
        const gid_t op_groups[] = { NOT_OPERATOR_GID, OPERATOR_GID };
        atest_run_script(OTHER, op_groups, 2, d, member, N_STEPS(member));

        const struct atest_step stranger[] = {
                { CUDACKPT_METHOD_LOCK, user, denied, NULL, NULL },
                { CUDACKPT_METHOD_GET_STATE, user, denied, NULL, NULL },
                { CUDACKPT_METHOD_SUSPEND, user, denied, NULL, NULL },
                { CUDACKPT_METHOD_LOCK, root, denied, NULL, NULL },
        };
        const gid_t other_group[] = { NOT_OPERATOR_GID };
        atest_run_script(OTHER, other_group, 1, d, stranger, N_STEPS(stranger));
        atest_run_script(OTHER, NULL, 0, d, stranger, N_STEPS(stranger));

        struct itest_conn *c = itest_connect(d);
        atest_assert_running(c, user);
        atest_assert_running(c, root);
        atest_assert_running(c, setuid_root);
}
END_TEST

/* operators_may_act_on_root: operators act on root's processes too, still
 * never on the daemon; others still may not. */
START_TEST(operator_may_act_on_root)
{
        if (itest_need_root())
                return;
        /* With CUDACKPT_SIM=1 the simulator would lock the daemon itself if
         * asked to: the refusal must come from the daemon. */
        static const char *const env[] = { "CUDACKPT_SIM=1", NULL };
        struct itest_daemon_opts o = {
                .config_json = itest_strdupf("{\"operator_groups\":[%d],\"operators_may_act_on_root\":true}",
                                             OPERATOR_GID),
                .env = env,
        };
        struct itest_daemon *d = itest_daemon_start(&o);
        pid_t root = itest_sim_target();
        pid_t setuid_root = itest_target_uids(OTHER + 1, OTHER + 1, 0);
        const char *denied = CUDACKPT_ERROR_PERMISSION_DENIED;
        const struct atest_step member[] = {
                { CUDACKPT_METHOD_LOCK, root, NULL, "locked", NULL },
                { CUDACKPT_METHOD_UNLOCK, root, NULL, "running", NULL },
                { CUDACKPT_METHOD_LOCK, setuid_root, NULL, "locked", NULL },
                { CUDACKPT_METHOD_UNLOCK, setuid_root, NULL, "running", NULL },
                { CUDACKPT_METHOD_LOCK, d->pid, denied, NULL, NULL },
                { CUDACKPT_METHOD_SUSPEND, d->pid, denied, NULL, NULL },
        };
        const gid_t op_groups[] = { OPERATOR_GID };
        atest_run_script(OTHER, op_groups, 1, d, member, N_STEPS(member));
        const struct atest_step stranger[] = {
                { CUDACKPT_METHOD_LOCK, root, denied, NULL, NULL },
                { CUDACKPT_METHOD_GET_STATE, root, denied, NULL, NULL },
        };
        atest_run_script(OTHER, NULL, 0, d, stranger, N_STEPS(stranger));
        struct itest_conn *c = itest_connect(d);
        atest_assert_running(c, root);
        atest_assert_running(c, setuid_root);
}
END_TEST

/* read_only_unrestricted: anyone may GetState and GetRestoreThreadId any
 * process, also while an operation runs on it (answered from the running
 * operation), but no operation. */
START_TEST(read_only_unrestricted)
{
        if (itest_need_root())
                return;
        struct itest_daemon_opts o = { .config_json = "{\"read_only_unrestricted\":true}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        /* A checkpoint of about 2 s. */
        pid_t root = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=2048", "CUDACKPT_SIM_CKPT_MIBPS=1024", NULL);
        const char *denied = CUDACKPT_ERROR_PERMISSION_DENIED;
        const struct atest_step stranger[] = {
                { CUDACKPT_METHOD_GET_STATE, root, NULL, "running", NULL },
                { CUDACKPT_METHOD_GET_RESTORE_THREAD_ID, root, NULL, NULL, NULL },
                { CUDACKPT_METHOD_LOCK, root, denied, NULL, NULL },
                { CUDACKPT_METHOD_SUSPEND, root, denied, NULL, NULL },
                { CUDACKPT_METHOD_CHECKPOINT, root, denied, NULL, NULL },
                { CUDACKPT_METHOD_UNLOCK, root, denied, NULL, NULL },
                { CUDACKPT_METHOD_RESTORE, root, denied, NULL, NULL },
                { CUDACKPT_METHOD_RESUME, root, denied, NULL, NULL },
        };
        atest_run_script(OTHER, NULL, 0, d, stranger, N_STEPS(stranger));

        struct itest_conn *c = itest_connect(d);
        struct itest_conn *q = itest_connect(d);
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_LOCK, root), root, "locked");
        atest_send_pid_call(c, CUDACKPT_METHOD_CHECKPOINT, root);
        itest_await_in_flight(q, root, "Checkpoint", 2000);
        const struct atest_step during[] = {
                { CUDACKPT_METHOD_GET_STATE, root, NULL, "locked", "Checkpoint" },
        };
        atest_run_script(OTHER, NULL, 0, d, during, N_STEPS(during));
        ck_assert_msg(!itest_conn_readable(c), "the 2 s checkpoint ended before the stranger's calls");
        itest_assert_state(itest_recv(c), root, "checkpointed");
}
END_TEST

/* Without read_only_unrestricted, GetState on another user's process
 * while an operation runs on it (answered from the running operation,
 * without the driver) is refused too, and leaks neither state nor
 * in_flight. */
START_TEST(stranger_get_state_during_operation)
{
        if (itest_need_root())
                return;
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t root = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=2048", "CUDACKPT_SIM_CKPT_MIBPS=1024", NULL);
        struct itest_conn *c = itest_connect(d);
        struct itest_conn *q = itest_connect(d);
        atest_send_pid_call(c, CUDACKPT_METHOD_SUSPEND, root);
        atest_await_in_flight_state(q, root, "Suspend", "locked", 2000);
        const struct atest_step during[] = {
                { CUDACKPT_METHOD_GET_STATE, root, CUDACKPT_ERROR_PERMISSION_DENIED, NULL, NULL },
        };
        atest_run_script(OTHER, NULL, 0, d, during, N_STEPS(during));
        ck_assert_msg(!itest_conn_readable(c), "the 2 s checkpoint ended before the stranger's calls");
        itest_assert_state(itest_recv(c), root, "checkpointed");
}
END_TEST

/* A user with no right to a process cannot fill its queue: while a long
 * Checkpoint runs, a stranger sends more requests for the process than
 * max_queue_per_pid (64) from as many connections; the requests of those
 * who may act on it are still taken.  (Until the dispatcher refused callers
 * at once from what the running operation learnt of the process, doomed
 * requests were queued against max_queue_per_pid and judged only when they
 * ran, so the process's owner got QueueFull.) */
START_TEST(stranger_cannot_fill_the_queue)
{
        if (itest_need_root())
                return;
        enum { FLOOD = 70, PER_PID = 64 };
        struct itest_daemon *d = itest_daemon_start_default();
        /* Another user's process, with a checkpoint of about 4 s. */
        pid_t pid = itest_target_as(OTHER + 1, "CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=4096",
                                    "CUDACKPT_SIM_CKPT_MIBPS=1024", NULL);
        struct itest_conn *op = itest_connect(d);
        struct itest_conn *q = itest_connect(d);
        itest_assert_state(itest_call_pid(op, CUDACKPT_METHOD_LOCK, pid), pid, "locked");
        atest_send_pid_call(op, CUDACKPT_METHOD_CHECKPOINT, pid);
        itest_await_in_flight(q, pid, "Checkpoint", 2000);

        /* The stranger's flood: at least FLOOD - (PER_PID - 1) answers come
         * at once, refusals of one kind or the other. */
        char *msg = itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_UNLOCK "\",\"parameters\":{\"pid\":%d}}", (int)pid);
        struct atest_client_seen seen;
        pid_t stranger = atest_spawn_clients(OTHER, d->sock, msg, FLOOD, FLOOD - (PER_PID - 1), &seen);
        ck_assert_msg(seen.replies >= FLOOD - (PER_PID - 1) && seen.other == 0,
                      "the stranger's %d Unlocks: %d answered at once (%d QueueFull, %d PermissionDenied, %d other)",
                      FLOOD, seen.replies, seen.queue_full, seen.denied, seen.other);

        /* Root's request is taken (and answered once the Checkpoint is done). */
        cJSON *j = itest_call_pid(q, CUDACKPT_METHOD_UNLOCK, pid);
        ck_assert_msg(!itest_error(j) || strcmp(itest_error(j), CUDACKPT_ERROR_QUEUE_FULL) != 0,
                      "root's Unlock of pid %d got %s: uid %d, who may not act on it, filled its queue (%d of %d "
                      "Unlocks answered at once: %d QueueFull, %d PermissionDenied)",
                      (int)pid, itest_dump(j), OTHER, seen.replies, FLOOD, seen.queue_full, seen.denied);
        itest_assert_error(j, CUDACKPT_ERROR_INVALID_STATE);
        itest_assert_str(j, "state", "checkpointed");
        atest_kill_clients(stranger);
        itest_assert_state(itest_recv(op), pid, "checkpointed");
}
END_TEST

int main(int argc, char **argv)
{
        const TTest *tests[] = { socket_reachable_by_all, other_uid_refused_on_root_target,
                other_uid_refused_on_third_uid_target, other_uid_allowed_on_own_target,
                root_allowed_on_other_uid_target, other_uid_refused_on_mixed_uids, operator_group,
                operator_may_act_on_root, read_only_unrestricted, stranger_get_state_during_operation,
                stranger_cannot_fill_the_queue, NULL };

        if (argc == 5 && strcmp(argv[1], "--itest-hold-uids") == 0)
                return itest_hold_uids(argv);
        if (geteuid() != 0) {
                fprintf(stderr, "integration.permissions: skipped, needs root to switch uids\n");
                return 77;
        }
        return itest_run("integration.permissions", "permissions", 30, tests);
}
