/* test_permissions.c: who may act on which process.  A caller that is not
 * root may act only on processes whose real, effective and saved uids all
 * equal its own; root may act on any.  The callers here are children that
 * switch to ITEST_OTHER_UID and use the client library.
 *
 * Needs root (to switch uids); exits 77, which ctest reports as skipped,
 * otherwise.  The binary doubles as a target whose uids differ from each
 * other (exec'd with --itest-hold-uids R E S): exec would reset the saved
 * uid of a plain /bin/sleep, so the ids are set after the exec. */
#include "harness.h"

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

static Suite *permissions_suite(void)
{
        Suite *s = suite_create("integration.permissions");
        TCase *tc = itest_tcase(s, "permissions", 30);
        tcase_add_test(tc, socket_reachable_by_all);
        tcase_add_test(tc, other_uid_refused_on_root_target);
        tcase_add_test(tc, other_uid_refused_on_third_uid_target);
        tcase_add_test(tc, other_uid_allowed_on_own_target);
        tcase_add_test(tc, root_allowed_on_other_uid_target);
        tcase_add_test(tc, other_uid_refused_on_mixed_uids);
        return s;
}

int main(int argc, char **argv)
{
        if (argc == 5 && strcmp(argv[1], "--itest-hold-uids") == 0)
                return itest_hold_uids(argv);
        if (geteuid() != 0) {
                fprintf(stderr, "integration.permissions: skipped, needs root to switch uids\n");
                return 77;
        }
        return itest_main(permissions_suite());
}
