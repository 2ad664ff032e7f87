/* test_security.c: promises of docs/security.md that no other suite holds
 * the daemon to, against the real daemon on the simulator:
 *   - a lease's secret is sent only in the reply to the call that took the
 *     lease: never logged (not even at log_level debug), never in a Watch
 *     event, before a restart or after its claim;
 *   - every refusal is audited, once ("cudackptd: audit: ... result=R" on
 *     standard error, which the harness keeps as the daemon's log):
 *     PermissionDenied on a mutating and on a read-only call, at once
 *     beside a running operation, in a group; ProcessChanged; QueueFull of
 *     a process's queue and of the leases.
 * The lease store's own limits (links, size) are test_leases_restart.c's. */
#include "harness.h"
#include "groups_itest.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SIM "CUDACKPT_SIM=1"
#define SMALL "CUDACKPT_SIM_MEM_MIB=8"
/* The state in the target's own memory, which a restart of the daemon keeps. */
#define SLOT "CUDACKPT_SIM_STATE=r"

/* ---- the lease secret -------------------------------------------------------- */

/* The secret of the lease a reply grants (32 hex digits, kept). */
static const char *secret_of(const cJSON *reply)
{
        const cJSON *l = itest_get(reply, "lease");
        const cJSON *s = cJSON_IsObject(l) ? cJSON_GetObjectItemCaseSensitive(l, "secret") : NULL;

        ck_assert_msg(cJSON_IsString(s) && strlen(s->valuestring) == 32, "no secret in %s", itest_dump(reply));
        return s->valuestring;
}

/* Asserts that text holds the secret in neither case; shows the line that
 * does. */
static void assert_no_secret(const char *text, const char *secret, const char *where)
{
        char upper[33];
        const char *at, *line;

        for (size_t i = 0; i < sizeof(upper); i++)
                upper[i] = (char)toupper((unsigned char)secret[i]);
        at = strstr(text, secret);
        if (!at)
                at = strstr(text, upper);
        if (!at)
                return;
        for (line = at; line > text && line[-1] != '\n'; line--)
                ;
        ck_abort_msg("the secret %s is in %s: %.300s", secret, where, line);
}

/* Reads w's events until n lease events of type (of any lease) have come,
 * asserting that none holds either secret. */
static void events_without_secrets(struct itest_conn *w, const char *type, int n, const char *const secrets[2])
{
        double deadline = itest_now_ms() + 10000;

        while (n > 0) {
                const cJSON *e = itest_next_event(w, itest_now_ms() < deadline ? (int)(deadline - itest_now_ms()) : 0);
                char *text = itest_keep(cJSON_PrintUnformatted(e));
                for (int i = 0; i < 2; i++)
                        assert_no_secret(text, secrets[i], "a Watch event");
                n -= strcmp(itest_event_str(e, "type"), type) == 0;
        }
}

START_TEST(secret_never_logged_nor_watched)
{
        struct itest_daemon_opts o = { .config_json = "{\"log_level\":\"debug\",\"lease_claim_grace_ms\":5000}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct itest_conn *c = itest_connect(d), *w = itest_watcher(d, NULL);
        pid_t a = itest_target(SIM, SMALL, SLOT, NULL), b = itest_target(SIM, SMALL, SLOT, NULL);
        const char *secrets[2];

        /* One lease of a single call, one of a group. */
        cJSON *j = itest_call(c, CUDACKPT_METHOD_SUSPEND, itest_strdupf("{\"pid\":%d,\"lease_on_close\":true}", (int)a));
        long long ida = itest_lease_id(j);
        secrets[0] = secret_of(j);
        j = gitest_group(c, CUDACKPT_METHOD_LOCK_GROUP, gitest_sel_pids(1, &b), "\"lease_on_close\":true");
        long long idb = itest_lease_id(j);
        secrets[1] = secret_of(j);
        events_without_secrets(w, "lease-taken", 2, secrets);

        /* Read back after a crash, claimed with the secrets, undone when
         * the claiming connection closes. */
        itest_daemon_kill(d);
        d = itest_daemon_restart(d, NULL);
        w = itest_watcher(d, NULL);
        c = itest_connect(d);
        for (int i = 0; i < 2; i++)
                itest_assert_ok(itest_call(c, CUDACKPT_METHOD_CLAIM_LEASE,
                                           itest_strdupf("{\"lease\":%lld,\"secret\":\"%s\"}", i ? idb : ida,
                                                         secrets[i])));
        itest_conn_close(c);
        events_without_secrets(w, "lease-ended", 2, secrets);
        struct itest_conn *q = itest_connect(d);
        itest_await_state(q, a, "running", 5000);
        itest_await_state(q, b, "running", 5000);
        for (int i = 0; i < 2; i++)
                assert_no_secret(itest_daemon_log(d), secrets[i], "the daemon's log");
}
END_TEST

/* ---- refusals audited ---------------------------------------------------------- */

/* Asserts that the log has exactly one audit line of uid's method on pid
 * with result (the line is written before the reply is sent). */
static void assert_audited_once(struct itest_daemon *d, uid_t uid, const char *method, pid_t pid, const char *result)
{
        const char *who = itest_strdupf("cudackptd: audit: caller_uid=%u ", (unsigned)uid);
        const char *what = itest_strdupf(" method=%s target_pid=%d result=%s", method, (int)pid, result);
        int n = 0;

        ck_assert(gitest_log_line_count(d, who, what, &n));
        ck_assert_msg(n == 1, "%d audit lines \"%s...%s\", not 1", n, who, what);
}

/* A caller of another uid is refused a mutating call, a read-only one, one
 * beside a running operation (answered at once, from what that operation
 * learnt), and a group: each refusal is audited once. */
START_TEST(refusals_of_strangers_audited)
{
        if (itest_need_root())
                return;
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d), *x = itest_connect_as(d, ITEST_OTHER_UID);
        pid_t idle = itest_small_target(), busy = itest_target(SIM, SMALL, "CUDACKPT_SIM_BUSY_MS=1500", NULL);

        itest_assert_error(itest_call_pid(x, CUDACKPT_METHOD_LOCK, idle), CUDACKPT_ERROR_PERMISSION_DENIED);
        assert_audited_once(d, ITEST_OTHER_UID, "Lock", idle, "PermissionDenied");
        itest_assert_error(itest_call_pid(x, CUDACKPT_METHOD_GET_STATE, idle), CUDACKPT_ERROR_PERMISSION_DENIED);
        assert_audited_once(d, ITEST_OTHER_UID, "GetState", idle, "PermissionDenied");

        itest_sendf(c, "{\"method\":\"" CUDACKPT_METHOD_LOCK "\",\"parameters\":{\"pid\":%d,\"timeout_ms\":0}}",
                    (int)busy);
        itest_await_in_flight(itest_connect(d), busy, "Lock", 5000);
        itest_assert_error(itest_call_pid(x, CUDACKPT_METHOD_UNLOCK, busy), CUDACKPT_ERROR_PERMISSION_DENIED);
        ck_assert_msg(!itest_conn_readable(c), "the Lock ended before the stranger's Unlock was refused");
        assert_audited_once(d, ITEST_OTHER_UID, "Unlock", busy, "PermissionDenied");
        itest_assert_state(itest_recv_within(c, 10000), busy, "locked");

        cJSON *j = gitest_group(x, CUDACKPT_METHOD_SUSPEND_GROUP, gitest_sel_pids(1, &idle), NULL);
        ck_assert_msg(itest_error(j), "a stranger's SuspendGroup succeeded: %s", itest_dump(j));
        assert_audited_once(d, ITEST_OTHER_UID, "SuspendGroup", idle, "PermissionDenied");
        itest_assert_state_now(c, idle, "running");
}
END_TEST

/* Refusals of limits: a process that is no longer the one
 * named (ProcessChanged), on a read-only call too; a process's queue full;
 * the leases full. */
START_TEST(refusals_of_limits_audited)
{
        struct itest_daemon_opts o = {
                .config_json = "{\"max_queue_per_pid\":2,\"max_leases\":1,\"max_leases_reserved\":0}"
        };
        struct itest_daemon *d = itest_daemon_start(&o);
        /* max_queue_per_pid bounds unprivileged callers only: as root, the
         * queue is filled by another uid, on its own process. */
        uid_t u = geteuid() == 0 ? ITEST_OTHER_UID : (uid_t)-1;
        uid_t qu = u == (uid_t)-1 ? getuid() : u;
        struct itest_conn *c = itest_connect(d), *q = itest_connect(d);
        pid_t pid = itest_small_target();
        pid_t busy = u == (uid_t)-1 ? itest_target(SIM, SMALL, "CUDACKPT_SIM_BUSY_MS=1500", NULL)
                                    : itest_target_as(u, SIM, SMALL, "CUDACKPT_SIM_BUSY_MS=1500", NULL);
        unsigned long long st = itest_start_time(pid);

        for (int i = 0; i < 2; i++) {
                const char *method = i ? CUDACKPT_METHOD_GET_STATE : CUDACKPT_METHOD_LOCK;
                itest_assert_error(itest_call(c, method, itest_strdupf("{\"pid\":%d,\"start_time\":%llu}", (int)pid,
                                                                       st + 1)),
                                   CUDACKPT_ERROR_PROCESS_CHANGED);
                assert_audited_once(d, getuid(), strrchr(method, '.') + 1, pid, "ProcessChanged");
        }

        /* One running, one queued: the third is refused. */
        struct itest_conn *q1 = itest_connect_unprivileged(d, u), *q2 = itest_connect_unprivileged(d, u);
        struct itest_conn *qc = itest_connect_unprivileged(d, u);
        itest_sendf(q1, "{\"method\":\"" CUDACKPT_METHOD_LOCK "\",\"parameters\":{\"pid\":%d,\"timeout_ms\":0}}",
                    (int)busy);
        itest_await_in_flight(q, busy, "Lock", 5000);
        itest_send_call(q2, CUDACKPT_METHOD_UNLOCK, itest_strdupf("{\"pid\":%d}", (int)busy));
        cJSON *j = itest_call_pid(qc, CUDACKPT_METHOD_GET_RESTORE_THREAD_ID, busy);
        itest_assert_error(j, CUDACKPT_ERROR_QUEUE_FULL);
        itest_assert_str(j, "resource", "max_queue_per_pid");
        assert_audited_once(d, qu, "GetRestoreThreadId", busy, "QueueFull");
        itest_assert_state(itest_recv_within(q1, 10000), busy, "locked");
        itest_assert_state(itest_recv_within(q2, 10000), busy, "running");

        /* One lease held: the next call that asks for one is refused. */
        (void)itest_lease_id(itest_call(c, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"lease_ms\":600000}", (int)pid)));
        j = itest_call(c, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"lease_ms\":600000}", (int)busy));
        itest_assert_error(j, CUDACKPT_ERROR_QUEUE_FULL);
        itest_assert_str(j, "resource", "max_leases");
        assert_audited_once(d, getuid(), "Lock", busy, "QueueFull");
}
END_TEST

int main(void)
{
        const TTest *tests[] = { secret_never_logged_nor_watched, refusals_of_strangers_audited,
                refusals_of_limits_audited, NULL };

        return itest_run("integration.security", "security", 60, tests);
}
