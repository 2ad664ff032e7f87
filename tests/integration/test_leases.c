/* test_leases.c: leases on Lock and Suspend, the Watch stream and
 * GetMetrics, on the simulator, against the real daemon.
 *
 * A lease undoes its Lock or Suspend (the process runs again) when its
 * connection closes or lease_ms passes, unless it ended first.  Tests that
 * must show a lease did NOT fire wait for a barrier: a second lease with
 * the same lease_ms, granted after the first, on another process; once the
 * barrier's process runs again, the first would have been undone too. */
#include "harness.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIM "CUDACKPT_SIM=1"
#define SMALL "CUDACKPT_SIM_MEM_MIB=8"

static pid_t sim_target(void)
{
        return itest_target(SIM, SMALL, NULL);
}

static long long lease_id(const cJSON *reply)
{
        const cJSON *l = itest_get(reply, "lease");
        const cJSON *id = cJSON_IsObject(l) ? cJSON_GetObjectItemCaseSensitive(l, "id") : NULL;

        ck_assert_msg(cJSON_IsNumber(id) && id->valuedouble >= 1, "no lease in %s", itest_dump(reply));
        return (long long)id->valuedouble;
}

static cJSON *state_of(struct itest_conn *c, pid_t pid)
{
        return itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, pid);
}

/* ---- a holder in another process, to be killed ------------------------------ */

/* Forks a client that connects, sends json, reads the reply and reports its
 * first bytes on a pipe, then waits to be killed.  With wait_reply false it
 * reports as soon as it has sent.  Returns the child; *ret_reply gets what
 * it read (owned by the harness). */
static pid_t holder(struct itest_daemon *d, const char *json, bool wait_reply, char **ret_reply)
{
        int p[2];
        pid_t pid;
        static char buf[4096];
        ssize_t n;

        ck_assert(pipe(p) == 0);
        pid = fork();
        ck_assert(pid >= 0);
        if (pid == 0) {
                struct sockaddr_un sa = { .sun_family = AF_UNIX };
                int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                char r[4096];
                size_t len = 0;
                close(p[0]);
                if (strlen(d->sock) >= sizeof(sa.sun_path))
                        _exit(1);
                memcpy(sa.sun_path, d->sock, strlen(d->sock) + 1);
                if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
                    send(fd, json, strlen(json) + 1, MSG_NOSIGNAL) != (ssize_t)strlen(json) + 1)
                        _exit(1);
                if (wait_reply)
                        while (len < sizeof(r) - 1) {
                                ssize_t k = read(fd, r + len, sizeof(r) - 1 - len);
                                if (k <= 0)
                                        _exit(1);
                                len += (size_t)k;
                                if (memchr(r, '\0', len))
                                        break;
                        }
                if (!wait_reply)
                        len = (size_t)snprintf(r, sizeof(r), "sent") + 1;
                if (write(p[1], r, len) < 0)
                        _exit(1);
                for (;;)
                        pause();
        }
        close(p[1]);
        n = read(p[0], buf, sizeof(buf) - 1);
        close(p[0]);
        ck_assert_msg(n > 0, "the holder failed");
        buf[n] = '\0';
        *ret_reply = buf;
        return pid;
}

static void kill_holder(pid_t pid)
{
        int st;

        ck_assert(kill(pid, SIGKILL) == 0);
        ck_assert(waitpid(pid, &st, 0) == pid);
}

static void killed_holder(const char *method, const char *held_state)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *q = itest_connect(d);
        pid_t pid = sim_target();
        char *reply;
        pid_t h = holder(d,
                         itest_strdupf("{\"method\":\"%s\",\"parameters\":{\"pid\":%d,\"lease_on_close\":true}}",
                                       method, (int)pid),
                         true, &reply);

        ck_assert_msg(strstr(reply, "\"lease\":{\"id\":") && strstr(reply, "\"on_close\":true"),
                      "no lease in the reply %s", reply);
        itest_assert_state(state_of(q, pid), pid, held_state);
        double t0 = itest_now_ms();
        kill_holder(h);
        itest_await_state(q, pid, "running", 1000);
        printf("%s lease undone %.0f ms after its holder was killed\n", method, itest_now_ms() - t0);
}

START_TEST(killed_holder_locked)
{
        killed_holder(CUDACKPT_METHOD_LOCK, "locked");
}
END_TEST

START_TEST(killed_holder_suspended)
{
        killed_holder(CUDACKPT_METHOD_SUSPEND, "checkpointed");
}
END_TEST

/* Killed while its Suspend runs: the lease is granted when the Suspend
 * ends, to a connection already gone, and undone at once. */
START_TEST(killed_during_suspend)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *q = itest_connect(d);
        pid_t pid = itest_target(SIM, "CUDACKPT_SIM_MEM_MIB=256", "CUDACKPT_SIM_CKPT_MIBPS=256", NULL);
        char *reply;
        pid_t h = holder(d,
                         itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_SUSPEND
                                       "\",\"parameters\":{\"pid\":%d,\"lease_on_close\":true}}",
                                       (int)pid),
                         false, &reply);

        itest_await_in_flight(q, pid, "Suspend", 5000);
        kill_holder(h);
        itest_await_state(q, pid, "running", 10000);
}
END_TEST

START_TEST(lease_ms_expires)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d), *q = itest_connect(d);
        pid_t pid = sim_target();
        cJSON *j = itest_call(c, CUDACKPT_METHOD_SUSPEND, itest_strdupf("{\"pid\":%d,\"lease_ms\":1500}", (int)pid));

        itest_assert_state(j, pid, "checkpointed");
        const cJSON *l = itest_get(j, "lease");
        ck_assert_msg(cJSON_IsObject(l) && cJSON_GetObjectItemCaseSensitive(l, "lease_ms") &&
                              cJSON_GetObjectItemCaseSensitive(l, "lease_ms")->valuedouble == 1500 &&
                              cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(l, "on_close")),
                      "lease %s", itest_dump(j));
        /* Not tied to the connection: closing it changes nothing. */
        itest_conn_close(c);
        itest_assert_state(state_of(q, pid), pid, "checkpointed");
        double t0 = itest_now_ms();
        itest_await_state(q, pid, "running", 6000);
        ck_assert_msg(itest_now_ms() - t0 < 6000, "undone late");
}
END_TEST

/* Takes a barrier lease of ms on a new process and waits until it is undone. */
static void barrier(struct itest_conn *c, unsigned ms)
{
        pid_t b = sim_target();

        itest_assert_state(itest_call(c, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"lease_ms\":%u}", (int)b, ms)),
                           b, "locked");
        itest_await_state(c, b, "running", (int)ms + 5000);
}

START_TEST(lease_released)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t pid = sim_target();
        cJSON *j = itest_call(c, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"lease_ms\":300}", (int)pid));
        long long id = lease_id(j);

        itest_assert_ok(itest_call(c, CUDACKPT_METHOD_RELEASE_LEASE, itest_strdupf("{\"lease\":%lld}", id)));
        barrier(c, 300);
        itest_assert_state(state_of(c, pid), pid, "locked");
        itest_assert_error(itest_call(c, CUDACKPT_METHOD_RELEASE_LEASE, itest_strdupf("{\"lease\":%lld}", id)),
                           CUDACKPT_ERROR_NO_SUCH_LEASE);
        itest_assert_error(itest_call(c, CUDACKPT_METHOD_RELEASE_LEASE, "{\"lease\":0}"),
                           CUDACKPT_VARLINK_INVALID_PARAMETER);
        itest_assert_error(itest_call(c, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"lease_ms\":0}", (int)pid)),
                           CUDACKPT_VARLINK_INVALID_PARAMETER);
}
END_TEST

START_TEST(lease_renewed)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t pid = sim_target();
        long long id = lease_id(
                itest_call(c, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"lease_ms\":300}", (int)pid)));
        cJSON *j = itest_call(c, CUDACKPT_METHOD_RENEW_LEASE, itest_strdupf("{\"lease\":%lld,\"lease_ms\":600000}", id));

        itest_assert_int(j, "lease_ms", 600000);
        barrier(c, 300);
        itest_assert_state(state_of(c, pid), pid, "locked");
        itest_assert_ok(itest_call(c, CUDACKPT_METHOD_RELEASE_LEASE, itest_strdupf("{\"lease\":%lld}", id)));
}
END_TEST

/* Someone else resumed the process and suspended it again without a
 * lease: the first lease ended with the resume and undoes nothing. */
START_TEST(lease_ended_by_another_resume)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *a = itest_connect(d), *b = itest_connect(d);
        pid_t pid = sim_target();

        (void)lease_id(itest_call(a, CUDACKPT_METHOD_SUSPEND, itest_strdupf("{\"pid\":%d,\"lease_ms\":400}", (int)pid)));
        itest_assert_state(itest_call_pid(b, CUDACKPT_METHOD_RESUME, pid), pid, "running");
        itest_assert_state(itest_call_pid(b, CUDACKPT_METHOD_SUSPEND, pid), pid, "checkpointed");
        barrier(b, 400);
        itest_assert_state(state_of(b, pid), pid, "checkpointed");
}
END_TEST

/* The holder's own cycle ends the lease: closing its connection after
 * Unlock changes nothing. */
START_TEST(lease_finished_by_cycle)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d), *q = itest_connect(d);
        pid_t pid = sim_target();

        (void)lease_id(itest_call(c, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"lease_on_close\":true}", (int)pid)));
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_CHECKPOINT, pid), pid, "checkpointed");
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_RESTORE, pid), pid, "locked");
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_UNLOCK, pid), pid, "running");
        /* Paused again by another, without a lease. */
        itest_assert_state(itest_call_pid(q, CUDACKPT_METHOD_LOCK, pid), pid, "locked");
        itest_conn_close(c);
        barrier(q, 200);
        itest_assert_state(state_of(q, pid), pid, "locked");
}
END_TEST

START_TEST(group_lease_killed_holder)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *q = itest_connect(d);
        pid_t a = sim_target(), b = sim_target();
        char *reply;
        pid_t h = holder(d,
                         itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_SUSPEND_GROUP
                                       "\",\"parameters\":{\"selector\":{\"pids\":[{\"pid\":%d},{\"pid\":%d}]},"
                                       "\"lease_on_close\":true}}",
                                       (int)a, (int)b),
                         true, &reply);

        ck_assert_msg(strstr(reply, "\"lease\":{\"id\":"), "no lease in %s", reply);
        itest_assert_state(state_of(q, a), a, "checkpointed");
        itest_assert_state(state_of(q, b), b, "checkpointed");
        kill_holder(h);
        itest_await_state(q, a, "running", 1000);
        itest_await_state(q, b, "running", 1000);
}
END_TEST

START_TEST(group_lease_expires)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t a = sim_target(), b = sim_target();
        cJSON *j = itest_call(c, CUDACKPT_METHOD_LOCK_GROUP,
                              itest_strdupf("{\"selector\":{\"pids\":[{\"pid\":%d},{\"pid\":%d}]},\"lease_ms\":300}",
                                            (int)a, (int)b));

        (void)lease_id(j);
        itest_await_state(c, a, "running", 5000);
        itest_await_state(c, b, "running", 5000);
}
END_TEST

/* A connection holding an on-close lease is not closed as idle. */
START_TEST(lease_holder_never_idle)
{
        struct itest_daemon_opts o = { .config_json = "{\"idle_timeout_ms\":200}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct itest_conn *c = itest_connect(d), *q = itest_connect(d);
        pid_t pid = sim_target();

        (void)lease_id(itest_call(c, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"lease_on_close\":true}", (int)pid)));
        itest_assert_eof(q, 5000); /* the idle timeout works */
        q = itest_connect(d);
        barrier(q, 600);
        itest_assert_state(state_of(q, pid), pid, "locked");
        itest_assert_ok(itest_call(c, "org.varlink.service.GetInfo", NULL));
        itest_conn_close(c);
        itest_await_state(q, pid, "running", 1000);
}
END_TEST

/* ---- Watch ------------------------------------------------------------------- */

static struct itest_conn *watcher(struct itest_daemon *d, const char *selector)
{
        struct itest_conn *w = itest_connect(d);
        cJSON *j;

        itest_sendf(w, "{\"method\":\"" CUDACKPT_METHOD_WATCH "\",\"parameters\":{%s%s},\"more\":true}",
                    selector ? "\"selector\":" : "", selector ? selector : "");
        j = itest_recv(w);
        ck_assert_msg(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "continues")), "%s", itest_dump(j));
        const cJSON *e = itest_get(j, "event");
        ck_assert_msg(cJSON_IsObject(e), "%s", itest_dump(j));
        ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(e, "type")->valuestring, "watching");
        return w;
}

static const char *ev_str(const cJSON *e, const char *key)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, key);
        return cJSON_IsString(v) ? v->valuestring : "";
}

/* The next event of w, asserted to continue. */
static const cJSON *next_event(struct itest_conn *w, int timeout_ms)
{
        cJSON *j = itest_recv_within(w, timeout_ms);
        const cJSON *e = itest_get(j, "event");

        ck_assert_msg(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "continues")) && cJSON_IsObject(e),
                      "not an event: %s", itest_dump(j));
        return e;
}

START_TEST(watch_cycle_in_order)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t pid = sim_target(), other = sim_target();
        struct itest_conn *w = watcher(d, itest_strdupf("{\"pids\":[{\"pid\":%d}]}", (int)pid));
        struct itest_conn *w2 = watcher(d, itest_strdupf("{\"pids\":[{\"pid\":%d}]}", (int)other));
        static const char *const methods[] = { CUDACKPT_METHOD_LOCK, CUDACKPT_METHOD_CHECKPOINT,
                                               CUDACKPT_METHOD_RESTORE, CUDACKPT_METHOD_UNLOCK };
        static const char *const want[][3] = {
                { "started", "Lock", "" },           { "finished", "Lock", "locked" },
                { "state", "Lock", "locked" },       { "started", "Checkpoint", "" },
                { "finished", "Checkpoint", "checkpointed" }, { "state", "Checkpoint", "checkpointed" },
                { "started", "Restore", "" },        { "finished", "Restore", "locked" },
                { "state", "Restore", "locked" },    { "started", "Unlock", "" },
                { "finished", "Unlock", "running" }, { "state", "Unlock", "running" },
        };

        /* The first GetState pins the process: every start below is known. */
        itest_assert_state(state_of(c, pid), pid, "running");
        for (size_t i = 0; i < 4; i++)
                itest_assert_ok(itest_call_pid(c, methods[i], pid));
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
                const cJSON *e = next_event(w, 5000);
                const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "pid");
                ck_assert_msg(strcmp(ev_str(e, "type"), want[i][0]) == 0 && strcmp(ev_str(e, "method"), want[i][1]) == 0 &&
                                      strcmp(ev_str(e, "state"), want[i][2]) == 0 && cJSON_IsNumber(p) &&
                                      p->valueint == pid,
                              "event %zu: want %s %s %s, got %s", i, want[i][0], want[i][1], want[i][2],
                              cJSON_PrintUnformatted(e));
                if (strcmp(want[i][0], "finished") == 0)
                        ck_assert_msg(strcmp(ev_str(e, "result"), "ok") == 0 &&
                                              cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(e, "duration_ms")),
                                      "%s", cJSON_PrintUnformatted(e));
        }
        /* The other watcher saw none of it: its first event is about its pid. */
        itest_assert_ok(itest_call_pid(c, CUDACKPT_METHOD_LOCK, other));
        const cJSON *e = next_event(w2, 5000);
        ck_assert_msg(cJSON_GetObjectItemCaseSensitive(e, "pid")->valueint == other, "%s", cJSON_PrintUnformatted(e));
        ck_assert(!itest_conn_readable(w));
}
END_TEST

START_TEST(watch_lease_events)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t pid = sim_target();
        struct itest_conn *w = watcher(d, NULL);
        bool taken = false, ended = false;
        long long id = lease_id(
                itest_call(c, CUDACKPT_METHOD_SUSPEND, itest_strdupf("{\"pid\":%d,\"lease_ms\":200}", (int)pid)));

        for (int i = 0; i < 64 && !ended; i++) {
                const cJSON *e = next_event(w, 5000);
                const cJSON *l = cJSON_GetObjectItemCaseSensitive(e, "lease");
                if (strcmp(ev_str(e, "type"), "lease-taken") == 0) {
                        ck_assert(cJSON_IsNumber(l) && (long long)l->valuedouble == id);
                        taken = true;
                } else if (strcmp(ev_str(e, "type"), "lease-ended") == 0) {
                        ck_assert_msg(taken && strcmp(ev_str(e, "reason"), "expired") == 0 &&
                                              strcmp(ev_str(e, "undo"), "ok") == 0,
                                      "%s", cJSON_PrintUnformatted(e));
                        ended = true;
                }
        }
        ck_assert_msg(ended, "no lease-ended event");
        itest_await_state(c, pid, "running", 1000);
}
END_TEST

START_TEST(watch_appear_exit)
{
        struct itest_daemon_opts o = { .config_json = "{\"watch_scan_ms\":100}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct itest_conn *w = watcher(d, NULL);
        struct itest_conn *c = itest_connect(d);
        bool appeared = false, exited = false;

        /* The first scan is the baseline: a process started after it appears.
         * ListProcesses is a barrier of the same pool. */
        itest_assert_ok(itest_call(c, CUDACKPT_METHOD_LIST_PROCESSES, NULL));
        usleep(300 * 1000); /* past the baseline scan, which has no event to await */
        pid_t pid = itest_target(itest_sim_preload(), SIM, SMALL, NULL);
        for (int i = 0; i < 200 && !appeared; i++) {
                const cJSON *e = next_event(w, 5000);
                const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "pid");
                if (strcmp(ev_str(e, "type"), "appeared") == 0 && cJSON_IsNumber(p) && p->valueint == pid) {
                        ck_assert_str_eq(ev_str(e, "command"), "sleep");
                        appeared = true;
                }
        }
        ck_assert(appeared);
        itest_target_kill(pid);
        for (int i = 0; i < 200 && !exited; i++) {
                const cJSON *e = next_event(w, 5000);
                const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "pid");
                exited = strcmp(ev_str(e, "type"), "exited") == 0 && cJSON_IsNumber(p) && p->valueint == pid;
        }
        ck_assert(exited);
}
END_TEST

START_TEST(watch_needs_more)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);

        itest_assert_error(itest_call(c, CUDACKPT_METHOD_WATCH, NULL), CUDACKPT_VARLINK_EXPECTED_MORE);
        itest_sendf(c, "{\"method\":\"" CUDACKPT_METHOD_WATCH "\",\"parameters\":{\"selector\":{\"tree\":1}},\"more\":true}");
        itest_assert_error(itest_recv(c), CUDACKPT_VARLINK_INVALID_PARAMETER);
}
END_TEST

static bool slow_reader_cut(struct itest_conn *c)
{
        cJSON *j = itest_call(c, CUDACKPT_METHOD_GET_METRICS, NULL);
        const char *text = itest_str(j, "text");

        ck_assert_msg(text, "%s", itest_dump(j));
        return strstr(text, "cudackpt_disconnects_total{reason=\"slow_reader\"} 1") != NULL;
}

/* A watcher that never reads is cut off; operations go on meanwhile. */
START_TEST(watch_slow_watcher_cut)
{
        struct itest_daemon_opts o = { .config_json = "{\"max_write_queue_bytes\":4096}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct itest_conn *c = itest_connect(d);
        pid_t pid = sim_target();
        struct itest_conn *w = watcher(d, NULL);
        int cycles = 0, got = 0;

        while (!slow_reader_cut(c)) {
                ck_assert_msg(cycles < 5000, "the watcher was never cut off");
                itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_LOCK, pid), pid, "locked");
                itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_UNLOCK, pid), pid, "running");
                cycles++;
        }
        for (;;) {
                cJSON *j = NULL;
                int r = itest_recv_raw(w, 5000, &j);
                if (r == -ENODATA)
                        break;
                ck_assert_msg(r == 0, "watcher: %s", strerror(-r));
                got++;
        }
        ck_assert_msg(got < cycles * 6, "got %d of %d events, yet cut off", got, cycles * 6);
        printf("watcher cut off after %d cycles, %d events read\n", cycles, got);
}
END_TEST

static Suite *leases_suite(void)
{
        Suite *s = suite_create("integration.leases");
        TCase *tc = itest_tcase(s, "leases", 60);
        tcase_add_test(tc, killed_holder_locked);
        tcase_add_test(tc, killed_holder_suspended);
        tcase_add_test(tc, killed_during_suspend);
        tcase_add_test(tc, lease_ms_expires);
        tcase_add_test(tc, lease_released);
        tcase_add_test(tc, lease_renewed);
        tcase_add_test(tc, lease_ended_by_another_resume);
        tcase_add_test(tc, lease_finished_by_cycle);
        tcase_add_test(tc, group_lease_killed_holder);
        tcase_add_test(tc, group_lease_expires);
        tcase_add_test(tc, lease_holder_never_idle);
        tc = itest_tcase(s, "watch", 60);
        tcase_add_test(tc, watch_cycle_in_order);
        tcase_add_test(tc, watch_lease_events);
        tcase_add_test(tc, watch_appear_exit);
        tcase_add_test(tc, watch_needs_more);
        tcase_add_test(tc, watch_slow_watcher_cut);
        return s;
}

int main(void)
{
        return itest_main(leases_suite());
}
