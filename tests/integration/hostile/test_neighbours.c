/* Integration tests: hostile neighbours.  One unprivileged user cannot
 * manage another's lease, learn of another's processes through events or
 * errors, or stall the others by taking every worker thread or group slot;
 * the metrics time every call from its real start.
 *
 * The other users' connections are made by processes of their own uid
 * (itest_connect_as), so SO_PEERCRED names them as it would a real tenant. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cudackpt/protocol.h"

#define B ITEST_OTHER_UID      /* a tenant */
#define C (ITEST_OTHER_UID + 1) /* another tenant */
#define SIM "CUDACKPT_SIM=1"
#define SMALL "CUDACKPT_SIM_MEM_MIB=8"

static long long lease_id(const cJSON *reply)
{
        const cJSON *l = itest_get(reply, "lease");
        const cJSON *id = cJSON_IsObject(l) ? cJSON_GetObjectItemCaseSensitive(l, "id") : NULL;

        ck_assert_msg(cJSON_IsNumber(id) && id->valuedouble >= 1, "no lease in %s", itest_dump(reply));
        return (long long)id->valuedouble;
}

static cJSON *lease_call(struct itest_conn *c, const char *method, long long id, const char *more)
{
        return itest_call(c, method, itest_strdupf("{\"lease\":%lld%s}", id, more ? more : ""));
}

static void assert_error(const cJSON *r, const char *name)
{
        ck_assert_msg(itest_error(r) && strcmp(itest_error(r), name) == 0, "expected %s, got %s", name,
                      itest_dump(r));
}

/* ---- leases: who may manage them ------------------------------------------- */

/* The real uid of a setuid process (uids B,0,0) may not Unlock it, so it
 * may neither release nor renew root's lease on it; root may, and the
 * audit line names who did. */
START_TEST(lease_not_managed_by_setuid_real_uid)
{
        if (itest_need_root())
                return;
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t suid = itest_target_uids(B, 0, 0);
        struct itest_conn *root = itest_connect(d);
        struct itest_conn *b = itest_connect_as(d, B);
        long long id = lease_id(itest_callf(root, "{\"method\":\"%s\",\"parameters\":{\"pid\":%d,\"lease_ms\":60000}}",
                                            CUDACKPT_METHOD_LOCK, (int)suid));

        assert_error(lease_call(b, CUDACKPT_METHOD_RENEW_LEASE, id, ",\"lease_ms\":4294967295"),
                     CUDACKPT_ERROR_NO_SUCH_LEASE);
        assert_error(lease_call(b, CUDACKPT_METHOD_RELEASE_LEASE, id, NULL), CUDACKPT_ERROR_NO_SUCH_LEASE);
        /* Each refusal is in the audit trail, saying no more than the reply. */
        ck_assert_ptr_nonnull(itest_await_log(d, itest_strdupf("caller_uid=%u caller_pid=", (unsigned)B), 2000));
        ck_assert_ptr_nonnull(itest_await_log(d, itest_strdupf("method=RenewLease target_pid=0 result=NoSuchLease "
                                                               "detail=\"lease %lld\"", id), 2000));
        ck_assert_ptr_nonnull(itest_await_log(d, itest_strdupf("method=ReleaseLease target_pid=0 result=NoSuchLease "
                                                               "detail=\"lease %lld\"", id), 2000));
        itest_assert_state(itest_call_pid(root, CUDACKPT_METHOD_GET_STATE, suid), suid, "locked");
        /* Still root's: renewed and released by root. */
        itest_assert_ok(lease_call(root, CUDACKPT_METHOD_RENEW_LEASE, id, ",\"lease_ms\":60000"));
        itest_assert_ok(lease_call(root, CUDACKPT_METHOD_RELEASE_LEASE, id, NULL));
        ck_assert_ptr_nonnull(itest_await_log(d, "method=ReleaseLease", 2000));
        ck_assert_ptr_nonnull(itest_await_log(d, itest_strdupf("detail=\"lease %lld of uid 0 ", id), 2000));
}
END_TEST

/* A tenant manages root's lease on a process wholly its own (it could
 * unlock it anyway), and the audit line names the tenant. */
START_TEST(lease_managed_by_owner_of_every_member)
{
        if (itest_need_root())
                return;
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t own = itest_target_as(B, SIM, SMALL, NULL);
        struct itest_conn *root = itest_connect(d);
        struct itest_conn *b = itest_connect_as(d, B);
        long long id = lease_id(itest_callf(root, "{\"method\":\"%s\",\"parameters\":{\"pid\":%d,\"lease_ms\":60000}}",
                                            CUDACKPT_METHOD_LOCK, (int)own));

        itest_assert_ok(lease_call(b, CUDACKPT_METHOD_RELEASE_LEASE, id, NULL));
        ck_assert_ptr_nonnull(itest_await_log(d, itest_strdupf("caller_uid=%d", B), 2000));
        ck_assert_ptr_nonnull(itest_await_log(d, itest_strdupf("detail=\"lease %lld of uid 0 ", id), 2000));
        itest_assert_ok(itest_call_pid(root, CUDACKPT_METHOD_UNLOCK, own));
}
END_TEST

/* ---- Watch: only what the watcher may know ---------------------------------- */

static struct itest_conn *watch_as(struct itest_daemon *d, uid_t uid)
{
        struct itest_conn *w = uid ? itest_connect_as(d, uid) : itest_connect(d);
        itest_send(w, "{\"method\":\"" CUDACKPT_METHOD_WATCH "\",\"parameters\":{},\"more\":true}");
        const cJSON *e = itest_get(itest_recv(w), "event");
        ck_assert_msg(e && strcmp(cJSON_GetObjectItemCaseSensitive(e, "type")->valuestring, "watching") == 0,
                      "no watching event");
        return w;
}

static long long ev_pid(const cJSON *e)
{
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "pid");
        return cJSON_IsNumber(p) ? (long long)p->valuedouble : -1;
}

static const char *ev_type(const cJSON *e)
{
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "type");
        return cJSON_IsString(t) ? t->valuestring : "";
}

/* Root leases a setuid process (B,0,0) and then one of B's own: B's
 * watcher sees the second's lease events (so it was listening) and none
 * of the first's. */
START_TEST(lease_events_hidden_from_setuid_real_uid)
{
        if (itest_need_root())
                return;
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t suid = itest_target_uids(B, 0, 0);
        pid_t own = itest_target_as(B, SIM, SMALL, NULL);
        struct itest_conn *root = itest_connect(d);
        struct itest_conn *w = watch_as(d, B);

        for (int i = 0; i < 2; i++) {
                pid_t p = i == 0 ? suid : own;
                lease_id(itest_callf(root, "{\"method\":\"%s\",\"parameters\":{\"pid\":%d,\"lease_ms\":60000}}",
                                     CUDACKPT_METHOD_LOCK, (int)p));
                itest_assert_ok(itest_call_pid(root, CUDACKPT_METHOD_UNLOCK, p));
        }
        bool taken = false, ended = false;
        double deadline = itest_now_ms() + 5000;
        while (!ended && itest_now_ms() < deadline) {
                const cJSON *e = itest_get(itest_recv_within(w, 5000), "event");
                ck_assert_msg(e, "not an event");
                ck_assert_msg(ev_pid(e) != suid, "uid %d was told of the setuid process: %s", B, itest_dump(e));
                taken |= ev_pid(e) == own && strcmp(ev_type(e), "lease-taken") == 0;
                ended |= ev_pid(e) == own && strcmp(ev_type(e), "lease-ended") == 0;
        }
        ck_assert_msg(taken && ended, "the watcher missed its own process's lease events");
}
END_TEST

/* B opens the watchers its share allows; the next is refused with the
 * limit it hit, and root still watches. */
START_TEST(watchers_per_uid)
{
        if (itest_need_root())
                return;
        struct itest_daemon_opts o = { .config_json = "{\"max_watchers\":8,\"max_watchers_per_uid\":2,"
                                                      "\"max_watchers_reserved\":2}" };
        struct itest_daemon *d = itest_daemon_start(&o);

        watch_as(d, B);
        watch_as(d, B);
        struct itest_conn *w = itest_connect_as(d, B);
        itest_send(w, "{\"method\":\"" CUDACKPT_METHOD_WATCH "\",\"parameters\":{},\"more\":true}");
        cJSON *r = itest_recv(w);
        long long limit = 0;
        assert_error(r, CUDACKPT_ERROR_QUEUE_FULL);
        ck_assert_str_eq(itest_str(r, "resource"), "max_watchers_per_uid");
        ck_assert_msg(itest_int(r, "limit", &limit) && limit == 2, "%s", itest_dump(r));
        watch_as(d, C);
        watch_as(d, 0);
}
END_TEST

/* B holds the leases its share allows; a Lock asking for one more is
 * refused before it acts, one without a lease is not, and root's are not
 * counted against B. */
START_TEST(leases_per_uid)
{
        if (itest_need_root())
                return;
        struct itest_daemon_opts o = { .config_json = "{\"max_leases\":8,\"max_leases_per_uid\":1,"
                                                      "\"max_leases_reserved\":2}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        pid_t p1 = itest_target_as(B, SIM, SMALL, NULL), p2 = itest_target_as(B, SIM, SMALL, NULL);
        struct itest_conn *b = itest_connect_as(d, B), *root = itest_connect(d);
#define LOCK_LEASED "{\"method\":\"%s\",\"parameters\":{\"pid\":%d,\"lease_ms\":60000}}"
        long long limit = 0;

        lease_id(itest_callf(b, LOCK_LEASED, CUDACKPT_METHOD_LOCK, (int)p1));
        cJSON *r = itest_callf(b, LOCK_LEASED, CUDACKPT_METHOD_LOCK, (int)p2);
        assert_error(r, CUDACKPT_ERROR_QUEUE_FULL);
        ck_assert_str_eq(itest_str(r, "resource"), "max_leases_per_uid");
        ck_assert_msg(itest_int(r, "limit", &limit) && limit == 1, "%s", itest_dump(r));
        itest_assert_state(itest_call_pid(b, CUDACKPT_METHOD_GET_STATE, p2), p2, "running");
        r = itest_call(b, CUDACKPT_METHOD_SUSPEND_GROUP,
                       itest_strdupf("{\"selector\":{\"pids\":[{\"pid\":%d}]},\"lease_on_close\":true}", (int)p2));
        assert_error(r, CUDACKPT_ERROR_QUEUE_FULL);
        itest_assert_state(itest_call_pid(b, CUDACKPT_METHOD_GET_STATE, p2), p2, "running");
        lease_id(itest_callf(root, LOCK_LEASED, CUDACKPT_METHOD_LOCK, (int)p2));
        itest_assert_ok(itest_call_pid(b, CUDACKPT_METHOD_UNLOCK, p1));
        /* p1's lease ended with its unlock: B's share is free again. */
        lease_id(itest_callf(b, LOCK_LEASED, CUDACKPT_METHOD_LOCK, (int)p1));
}
END_TEST

/* ---- errors: a selection names no process the caller may not know ---------- */

static bool names_pid(const cJSON *j, pid_t pid)
{
        const char *text = itest_dump(j);
        return strstr(text, itest_strdupf("\"pid\":%d,", (int)pid)) ||
               strstr(text, itest_strdupf("\"pid\":%d}", (int)pid));
}

/* B's LockGroup of a tree and of a cgroup that hold root's CUDA process:
 * GroupFailed says how many were refused, never which, as B's listing
 * hides it; B's own CUDA process is a member, acted on by nobody. */
START_TEST(group_error_names_no_foreign_pid)
{
        if (itest_need_root())
                return;
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t roots = itest_mapped_target();
        pid_t own = itest_target_as(B, itest_sim_preload_for_others(d), SIM, SMALL, NULL);
        struct itest_conn *b = itest_connect_as(d, B);
        const char *sels[] = { itest_strdupf("{\"tree\":%d}", (int)getpid()), "{\"cgroup\":\"/\"}" };

        for (size_t i = 0; i < 2; i++) {
                cJSON *r = itest_call(b, CUDACKPT_METHOD_LOCK_GROUP, itest_strdupf("{\"selector\":%s}", sels[i]));
                long long refused = 0;
                assert_error(r, CUDACKPT_ERROR_GROUP_FAILED);
                ck_assert_msg(itest_int(r, "refused", &refused) && refused >= 1, "%s", itest_dump(r));
                ck_assert_msg(!itest_has(r, "pid"), "a refused member named: %s", itest_dump(r));
                ck_assert_msg(!names_pid(r, roots), "root's process named: %s", itest_dump(r));
                /* The test's own process (root's, not CUDA) is not named either. */
                ck_assert_msg(!names_pid(r, getpid()), "root's process named: %s", itest_dump(r));
                ck_assert_msg(names_pid(r, own), "B's own member missing: %s", itest_dump(r));
                ck_assert_str_eq(itest_str(r, "error"), CUDACKPT_ERROR_PERMISSION_DENIED);
        }
        cJSON *l = itest_call(b, CUDACKPT_METHOD_LIST_PROCESSES, "{}");
        ck_assert_msg(!itest_error(l) && !names_pid(l, roots) && names_pid(l, own), "%s", itest_dump(l));
        itest_assert_state(itest_call_pid(itest_connect(d), CUDACKPT_METHOD_GET_STATE, own), own, "running");
}
END_TEST

/* ---- fair shares ------------------------------------------------------------- */

enum { BUSY_MS = 2000, HOLD = 8 };

/* B holds as many Locks as it can on its own processes, whose kernels run
 * for BUSY_MS: it gets workers_per_uid threads, no more. */
static void hog_workers(struct itest_daemon *d, struct itest_conn **conns)
{
        for (int i = 0; i < HOLD; i++) {
                pid_t p = itest_target_as(B, SIM, SMALL, itest_strdupf("CUDACKPT_SIM_BUSY_MS=%d", BUSY_MS), NULL);
                conns[i] = itest_connect_as(d, B);
                itest_sendf(conns[i], "{\"method\":\"%s\",\"parameters\":{\"pid\":%d,\"timeout_ms\":0}}",
                            CUDACKPT_METHOD_LOCK, (int)p);
        }
        /* B's share is taken: the next of its Locks waits for it. */
        ck_assert_ptr_nonnull(itest_await_log(d, "waits for the worker share of uid", 5000));
}

static const char *const fair_config =
        "{\"workers\":8,\"workers_per_uid\":2,\"workers_reserved\":2,"
        "\"max_groups_in_flight\":8,\"max_groups_per_uid\":2,\"max_groups_reserved\":2}";

/* While B holds every worker it may, C's lease on its own process is
 * undone within 200 ms of its expiry, and C's ListProcesses is answered. */
START_TEST(workers_shared_fairly)
{
        if (itest_need_root())
                return;
        struct itest_daemon_opts o = { .config_json = fair_config };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct itest_conn *hogs[HOLD];
        pid_t own = itest_target_as(C, itest_sim_preload_for_others(d), SIM, SMALL, NULL);

        hog_workers(d, hogs);
        /* B also queues a call on C's process, which waits for B's share:
         * it holds up none of C's calls there. */
        struct itest_conn *nosy = itest_connect_as(d, B);
        itest_send_call(nosy, CUDACKPT_METHOD_CHECKPOINT, itest_strdupf("{\"pid\":%d}", (int)own));
        ck_assert_ptr_nonnull(itest_await_log(d, itest_strdupf("Checkpoint on pid %d waits for the worker share", (int)own),
                                              3000));
        struct itest_conn *c = itest_connect_as(d, C);
        enum { LEASE_MS = 300 };
        double t0 = itest_now_ms();
        cJSON *r = itest_callf(c, "{\"method\":\"%s\",\"parameters\":{\"pid\":%d,\"lease_ms\":%d}}",
                               CUDACKPT_METHOD_LOCK, (int)own, LEASE_MS);
        double granted = itest_now_ms();
        lease_id(r);
        ck_assert_msg(granted - t0 < 1000, "C's Lock waited %.0f ms behind B's", granted - t0);
        cJSON *l = itest_call(c, CUDACKPT_METHOD_LIST_PROCESSES, "{}");
        ck_assert_msg(!itest_error(l) && names_pid(l, own), "%s", itest_dump(l));
        struct itest_conn *root = itest_connect(d);
        double running = 0;
        while (itest_now_ms() < granted + LEASE_MS + 2000) {
                cJSON *s = itest_call_pid(root, CUDACKPT_METHOD_GET_STATE, own);
                if (!itest_error(s) && strcmp(itest_str(s, "state"), "running") == 0 && !itest_has(s, "in_flight")) {
                        running = itest_now_ms();
                        break;
                }
                usleep(5000);
        }
        ck_assert_msg(running > 0, "C's lease was not undone within 2 s of its expiry");
        ck_assert_msg(running - (granted + LEASE_MS) < 200, "C's lease undone %.0f ms after its expiry",
                      running - (granted + LEASE_MS));
        /* B's Locks all end in time, each in its turn; its Checkpoint of
         * C's process is refused when its turn comes. */
        for (int i = 0; i < HOLD; i++)
                itest_assert_ok(itest_recv_within(hogs[i], 4 * BUSY_MS + 5000));
        assert_error(itest_recv_within(nosy, 4 * BUSY_MS + 5000), CUDACKPT_ERROR_PERMISSION_DENIED);
}
END_TEST

/* B's groups take at most max_groups_per_uid slots; the next is refused
 * with the limit it hit, and C's calls are served meanwhile. */
START_TEST(group_slots_shared_fairly)
{
        if (itest_need_root())
                return;
        struct itest_daemon_opts o = { .config_json = fair_config };
        struct itest_daemon *d = itest_daemon_start(&o);
        pid_t own = itest_target_as(C, itest_sim_preload_for_others(d), SIM, SMALL, NULL);
        struct itest_conn *g[4];
        pid_t busy[4];

        for (int i = 0; i < 4; i++) {
                busy[i] = itest_target_as(B, SIM, SMALL, itest_strdupf("CUDACKPT_SIM_BUSY_MS=%d", BUSY_MS), NULL);
                g[i] = itest_connect_as(d, B);
        }
        for (int i = 0; i < 2; i++)
                itest_sendf(g[i], "{\"method\":\"%s\",\"parameters\":{\"selector\":{\"pids\":[{\"pid\":%d}]},\"timeout_ms\":0}}",
                            CUDACKPT_METHOD_LOCK_GROUP, (int)busy[i]);
        itest_await_in_flight(itest_connect(d), busy[1], "Lock", 5000);
        for (int i = 2; i < 4; i++) {
                cJSON *r = itest_call(g[i], CUDACKPT_METHOD_LOCK_GROUP,
                                      itest_strdupf("{\"selector\":{\"pids\":[{\"pid\":%d}]}}", (int)busy[i]));
                long long limit = 0;
                assert_error(r, CUDACKPT_ERROR_QUEUE_FULL);
                ck_assert_str_eq(itest_str(r, "resource"), "max_groups_per_uid");
                ck_assert_msg(itest_int(r, "limit", &limit) && limit == 2, "%s", itest_dump(r));
        }
        struct itest_conn *c = itest_connect_as(d, C);
        double t0 = itest_now_ms();
        cJSON *l = itest_call(c, CUDACKPT_METHOD_LIST_PROCESSES, "{}");
        ck_assert_msg(!itest_error(l) && names_pid(l, own), "%s", itest_dump(l));
        itest_assert_ok(itest_call(c, CUDACKPT_METHOD_SUSPEND_GROUP, itest_strdupf("{\"selector\":{\"pids\":[{\"pid\":%d}]}}", (int)own)));
        itest_assert_ok(itest_call(c, CUDACKPT_METHOD_RESUME_GROUP, itest_strdupf("{\"selector\":{\"pids\":[{\"pid\":%d}]}}", (int)own)));
        ck_assert_msg(itest_now_ms() - t0 < 2000, "C waited %.0f ms", itest_now_ms() - t0);
        for (int i = 0; i < 2; i++)
                itest_assert_ok(itest_recv_within(g[i], 2 * BUSY_MS + 5000));
}
END_TEST

/* ---- metrics ----------------------------------------------------------------- */

/* sum and count of a method's duration histogram in GetMetrics. */
static void histogram(struct itest_conn *c, const char *method, double *ret_sum, double *ret_count)
{
        const char *text = itest_str(itest_call(c, CUDACKPT_METHOD_GET_METRICS, "{}"), "text");
        const char *s = strstr(text, itest_strdupf("cudackpt_operation_duration_seconds_sum{method=\"%s\"} ", method));
        const char *n = strstr(text, itest_strdupf("cudackpt_operation_duration_seconds_count{method=\"%s\"} ", method));
        ck_assert_msg(s && n, "no %s histogram in %s", method, text);
        *ret_sum = strtod(strchr(s, '}') + 2, NULL);
        *ret_count = strtod(strchr(n, '}') + 2, NULL);
}

/* GetStates answered while a Lock runs on the same process (before and
 * after it has learnt the state): the histogram's sum is no more than the
 * calls' real durations, as the client measured them. */
START_TEST(metrics_time_concurrent_calls)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t p = itest_target(SIM, SMALL, "CUDACKPT_SIM_BUSY_MS=150", NULL);
        struct itest_conn *a = itest_connect(d), *b = itest_connect(d);
        double measured = 0;
        enum { ROUNDS = 10 };

        for (int i = 0; i < ROUNDS; i++) {
                itest_send_call(a, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d}", (int)p));
                for (int k = 0; k < 3; k++) {
                        double t0 = itest_now_ms();
                        itest_assert_ok(itest_call_pid(b, CUDACKPT_METHOD_GET_STATE, p));
                        measured += itest_now_ms() - t0;
                }
                itest_assert_ok(itest_recv(a));
                itest_assert_ok(itest_call_pid(a, CUDACKPT_METHOD_UNLOCK, p));
        }
        double sum, count;
        histogram(a, "GetState", &sum, &count);
        ck_assert_msg(count >= 3 * ROUNDS, "%.0f GetStates counted", count);
        ck_assert_msg(sum * 1000 <= measured + 5, "GetState histogram sum %.3f s, the calls took %.3f s", sum,
                      measured / 1000);
}
END_TEST

int main(int argc, char **argv)
{
        const TTest *tests[] = { lease_not_managed_by_setuid_real_uid, lease_managed_by_owner_of_every_member,
                lease_events_hidden_from_setuid_real_uid, watchers_per_uid, leases_per_uid,
                group_error_names_no_foreign_pid, workers_shared_fairly, group_slots_shared_fairly,
                metrics_time_concurrent_calls, NULL };

        if (argc == 5 && strcmp(argv[1], "--itest-hold-uids") == 0)
                return itest_hold_uids(argv);
        return itest_run("integration.neighbours", "neighbours", 60, tests);
}
