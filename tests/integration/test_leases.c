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
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIM "CUDACKPT_SIM=1"
#define SMALL "CUDACKPT_SIM_MEM_MIB=8"

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
        pid_t pid = itest_small_target();
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
        pid_t pid = itest_small_target();
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
        pid_t b = itest_small_target();

        itest_assert_state(itest_call(c, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"lease_ms\":%u}", (int)b, ms)),
                           b, "locked");
        itest_await_state(c, b, "running", (int)ms + 5000);
}

START_TEST(lease_released)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t pid = itest_small_target();
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
        pid_t pid = itest_small_target();
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
        pid_t pid = itest_small_target();

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
        pid_t pid = itest_small_target();

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
        pid_t a = itest_small_target(), b = itest_small_target();
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
        pid_t a = itest_small_target(), b = itest_small_target();
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
        pid_t pid = itest_small_target();

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

/* What a stopping daemon does with its leases (it keeps them for the next
 * start) is in test_leases_restart.c, with the restarts. */

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
        pid_t pid = itest_small_target(), other = itest_small_target();
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
        pid_t pid = itest_small_target();
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
        pid_t pid = itest_mapped_target();
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
        itest_sendf(c, "{\"method\":\"" CUDACKPT_METHOD_WATCH "\",\"parameters\":{\"selector\":{\"bogus\":1}},\"more\":true}");
        itest_assert_error(itest_recv(c), CUDACKPT_VARLINK_INVALID_PARAMETER);
        itest_sendf(c, "{\"method\":\"" CUDACKPT_METHOD_WATCH "\",\"parameters\":{\"selector\":{\"tree\":%d}},\"more\":true}",
                    (int)itest_dead_pid());
        itest_assert_error(itest_recv(c), CUDACKPT_ERROR_NO_SUCH_PROCESS);
}
END_TEST

static bool metric_is(struct itest_conn *c, const char *line)
{
        const char *text = itest_str(itest_call(c, CUDACKPT_METHOD_GET_METRICS, NULL), "text");

        ck_assert(text);
        return strstr(text, line) != NULL;
}

/* A watcher's hang-up ends it, even with no event to send; one that hangs
 * up while its cgroup selector is still being read is let go too. */
START_TEST(watch_hangup)
{
        struct itest_daemon_opts o = { .config_json = "{\"workers\":1}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct itest_conn *c = itest_connect(d);
        pid_t pid = itest_small_target();
        pid_t slow = itest_target(SIM, "CUDACKPT_SIM_MEM_MIB=256", "CUDACKPT_SIM_CKPT_MIBPS=256", NULL);
        struct itest_conn *w = watcher(d, itest_strdupf("{\"pids\":[{\"pid\":%d}]}", (int)pid));
        struct itest_conn *busy = itest_connect(d);

        ck_assert(metric_is(c, "\ncudackpt_watchers 1\n"));
        itest_conn_close(w);
        for (int i = 0; !metric_is(c, "\ncudackpt_watchers 0\n"); i++) {
                ck_assert_msg(i < 200, "the watcher outlived its client");
                usleep(10000);
        }
        /* The one worker checkpoints for a second: the cgroup's root is read
         * after the client has gone. */
        itest_sendf(busy, "{\"method\":\"" CUDACKPT_METHOD_SUSPEND "\",\"parameters\":{\"pid\":%d}}", (int)slow);
        itest_await_in_flight(c, slow, "Suspend", 5000);
        w = itest_connect(d);
        itest_send(w, "{\"method\":\"" CUDACKPT_METHOD_WATCH "\",\"parameters\":{\"selector\":{\"cgroup\":\"/\"}},"
                      "\"more\":true}");
        itest_conn_close(w);
        itest_assert_state(itest_recv(busy), slow, "checkpointed");
        for (int i = 0; !metric_is(c, "\ncudackpt_watchers 0\n"); i++) {
                ck_assert_msg(i < 200, "the watcher outlived its client");
                usleep(10000);
        }
        itest_assert_state(state_of(c, pid), pid, "running");
}
END_TEST

static bool slow_reader_cut(struct itest_conn *c)
{
        cJSON *j = itest_call(c, CUDACKPT_METHOD_GET_METRICS, NULL);
        const char *text = itest_str(j, "text");

        ck_assert_msg(text, "%s", itest_dump(j));
        return strstr(text, "cudackpt_disconnects_total{reason=\"slow_reader\"} 1") != NULL;
}

/* Lock and Unlock inside and outside a selection until the watcher has
 * an event of inside (cgroup and tree selections follow the scan, every
 * 50 ms here); none may be of outside. */
static void assert_selection(struct itest_conn *c, struct itest_conn *w, pid_t inside, pid_t outside)
{
        bool seen = false;

        for (int round = 0; round < 200 && !seen; round++) {
                itest_assert_ok(itest_call_pid(c, CUDACKPT_METHOD_LOCK, outside));
                itest_assert_ok(itest_call_pid(c, CUDACKPT_METHOD_UNLOCK, outside));
                itest_assert_ok(itest_call_pid(c, CUDACKPT_METHOD_LOCK, inside));
                itest_assert_ok(itest_call_pid(c, CUDACKPT_METHOD_UNLOCK, inside));
                struct pollfd p = { .fd = w->fd, .events = POLLIN };
                while (itest_conn_readable(w) || poll(&p, 1, round < 5 ? 20 : 50) == 1) {
                        const cJSON *e = next_event(w, 1000);
                        const cJSON *pid = cJSON_GetObjectItemCaseSensitive(e, "pid");
                        ck_assert_msg(cJSON_IsNumber(pid) && pid->valueint == inside, "event of another process: %s",
                                      cJSON_PrintUnformatted(e));
                        seen = true;
                        if (!itest_conn_readable(w) && poll(&p, 1, 50) != 1)
                                break;
                }
        }
        ck_assert_msg(seen, "no event of the selection");
}

START_TEST(watch_tree)
{
        struct itest_daemon_opts o = { .config_json = "{\"watch_scan_ms\":50}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct itest_conn *c = itest_connect(d);
        pid_t in = itest_mapped_target();
        pid_t out = itest_mapped_target();
        struct itest_conn *w = watcher(d, itest_strdupf("{\"tree\":%d}", (int)in));

        assert_selection(c, w, in, out);
        /* The test itself is the parent of both: its tree holds both. */
        struct itest_conn *all = watcher(d, itest_strdupf("{\"tree\":%d}", (int)getpid()));
        bool seen_in = false, seen_out = false;
        for (int round = 0; round < 200 && !(seen_in && seen_out); round++) {
                itest_assert_ok(itest_call_pid(c, CUDACKPT_METHOD_LOCK, round % 2 ? in : out));
                itest_assert_ok(itest_call_pid(c, CUDACKPT_METHOD_UNLOCK, round % 2 ? in : out));
                struct pollfd p = { .fd = all->fd, .events = POLLIN };
                while (itest_conn_readable(all) || poll(&p, 1, 20) == 1) {
                        const cJSON *pid = cJSON_GetObjectItemCaseSensitive(next_event(all, 1000), "pid");
                        seen_in = seen_in || (cJSON_IsNumber(pid) && pid->valueint == in);
                        seen_out = seen_out || (cJSON_IsNumber(pid) && pid->valueint == out);
                }
        }
        ck_assert_msg(seen_in && seen_out, "the test's tree: in %d, out %d", seen_in, seen_out);
}
END_TEST

static void move_to(const char *dir, pid_t pid)
{
        FILE *f = fopen(itest_strdupf("%s/cgroup.procs", dir), "we");

        ck_assert_msg(f && fprintf(f, "%d\n", (int)pid) > 0 && fclose(f) == 0, "move %d to %s: %s", (int)pid, dir,
                      strerror(errno));
}

START_TEST(watch_cgroup)
{
        if (itest_need_root())
                return;
        char *mnt = itest_strdupf("/tmp/itest-cg2-%d-XXXXXX", (int)getpid());
        ck_assert(mkdtemp(mnt));
        if (mount("none", mnt, "cgroup2", 0, NULL) < 0) {
                fprintf(stderr, "watch_cgroup: skipped, cannot mount cgroup2: %s\n", strerror(errno));
                rmdir(mnt);
                return;
        }
        struct itest_daemon_opts o = { .config_json = "{\"watch_scan_ms\":50}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct itest_conn *c = itest_connect(d);
        const char *name = itest_strdupf("itest-watch-%d", (int)getpid());
        const char *top = itest_strdupf("%s/%s", mnt, name);
        pid_t in = itest_mapped_target();
        pid_t out = itest_mapped_target();

        ck_assert_msg(mkdir(top, 0755) == 0, "mkdir %s: %s", top, strerror(errno));
        move_to(top, in);
        struct itest_conn *w = watcher(d, itest_strdupf("{\"cgroup\":\"/%s\"}", name));
        assert_selection(c, w, in, out);
        itest_conn_close(w);
        move_to(mnt, in);
        ck_assert_msg(rmdir(top) == 0, "rmdir %s: %s", top, strerror(errno));
        ck_assert_msg(umount(mnt) == 0, "umount %s: %s", mnt, strerror(errno));
        rmdir(mnt);
}
END_TEST

/* A watcher that never reads is cut off; operations go on meanwhile. */
START_TEST(watch_slow_watcher_cut)
{
        struct itest_daemon_opts o = { .config_json = "{\"max_write_queue_bytes\":4096}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct itest_conn *c = itest_connect(d);
        pid_t pid = itest_small_target();
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

static int count(const char *hay, const char *needle)
{
        int n = 0;

        for (const char *p = hay; (p = strstr(p, needle)); p++)
                n++;
        return n;
}

/* An undo that fails is logged, reported to watchers and counted, once:
 * the process stays as the failure left it. */
START_TEST(lease_undo_fails_once)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t pid = itest_target(SIM, SMALL, "CUDACKPT_SIM_FAIL=restore:CUDA_ERROR_UNKNOWN", NULL);
        struct itest_conn *w = watcher(d, itest_strdupf("{\"pids\":[{\"pid\":%d}]}", (int)pid));
        bool ended = false;

        (void)lease_id(itest_call(c, CUDACKPT_METHOD_SUSPEND, itest_strdupf("{\"pid\":%d,\"lease_ms\":100}", (int)pid)));
        for (int i = 0; i < 64 && !ended; i++) {
                const cJSON *e = next_event(w, 5000);
                if (strcmp(ev_str(e, "type"), "lease-ended") == 0) {
                        ck_assert_msg(strcmp(ev_str(e, "reason"), "expired") == 0 && strcmp(ev_str(e, "undo"), "failed") == 0,
                                      "%s", cJSON_PrintUnformatted(e));
                        ended = true;
                }
        }
        ck_assert(ended);
        barrier(c, 300);
        itest_assert_state(state_of(c, pid), pid, "checkpointed");
        const char *text = itest_str(itest_call(c, CUDACKPT_METHOD_GET_METRICS, NULL), "text");
        ck_assert_msg(strstr(text, "cudackpt_lease_undos_total{result=\"failed\"} 1\n"), "%s", text);
        const char *log = itest_daemon_log(d);
        ck_assert_msg(strstr(log, "the undo failed in restore: io.cudackpt.Process.DriverError"), "no undo failure logged");
        int restores = count(log, itest_strdupf("method=Restore target_pid=%d ", (int)pid));
        ck_assert_msg(restores == 1, "%d restores of the process (one undo, never retried)", restores);
}
END_TEST

/* ---- progress ---------------------------------------------------------------- */

/* --itest-grow MIB_PER_S: a target whose resident memory grows at that
 * rate (up to 1 GiB), as a real one's does while the driver checkpoints
 * it; the simulator moves no memory. */
static int grow_mode(char **argv)
{
        size_t cap = (size_t)1 << 30, step = (size_t)1 << 20, done = 0;
        long rate = strtol(argv[2], NULL, 10);
        char *p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

        if (p == MAP_FAILED || rate <= 0 || write(3, "r", 1) != 1)
                return 1;
        close(3);
        for (;;) {
                if (done + step <= cap) {
                        memset(p + done, 1, step);
                        done += step;
                }
                usleep((useconds_t)(1000000 / rate));
        }
}

static const cJSON *ev_num(const cJSON *e, const char *key)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, key);
        return cJSON_IsNumber(v) ? v : NULL;
}

/* Collects the progress events of one Suspend of pid until its finished
 * event; returns how many, the last bytes and total_bytes (-1 absent). */
static int suspend_progress(struct itest_conn *c, struct itest_conn *w, pid_t pid, double *ret_bytes,
                            double *ret_total)
{
        int n = 0;
        double last = -1;

        itest_sendf(c, "{\"method\":\"" CUDACKPT_METHOD_SUSPEND "\",\"parameters\":{\"pid\":%d}}", (int)pid);
        *ret_total = -1;
        for (int i = 0; i < 1000; i++) {
                const cJSON *e = next_event(w, 10000), *b, *t;
                if (strcmp(ev_str(e, "type"), "finished") == 0 && strcmp(ev_str(e, "method"), "Suspend") == 0)
                        break;
                /* A restore reports none (the Resume before). */
                if (strcmp(ev_str(e, "type"), "progress") != 0)
                        continue;
                ck_assert_msg(strcmp(ev_str(e, "step"), "checkpoint") == 0 && strcmp(ev_str(e, "method"), "Suspend") == 0 &&
                                      (b = ev_num(e, "bytes")) && b->valuedouble >= last,
                              "progress %s after %.0f bytes", cJSON_PrintUnformatted(e), last);
                last = b->valuedouble;
                t = ev_num(e, "total_bytes");
                *ret_total = t ? t->valuedouble : -1;
                n++;
        }
        itest_assert_state(itest_recv(c), pid, "checkpointed");
        *ret_bytes = last;
        return n;
}

/* A watcher sees a long checkpoint's progress: the resident memory it
 * gained, growing; from the second checkpoint on, against what the first
 * one moved. */
START_TEST(watch_progress)
{
        struct itest_daemon_opts o = { .config_json = "{\"progress_interval_ms\":100}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        const char *argv[] = { itest_self_exe(), "--itest-grow", "200", NULL };
        /* Checkpoints of 1.5 s. */
        const char *env[] = { "CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=384", "CUDACKPT_SIM_CKPT_MIBPS=256", NULL };
        pid_t pid = itest_target_exec((uid_t)-1, itest_self_exe(), argv, env);
        struct itest_conn *c = itest_connect(d);
        struct itest_conn *w = watcher(d, itest_strdupf("{\"pids\":[{\"pid\":%d}]}", (int)pid));
        double bytes, total;
        int n;

        itest_assert_state(state_of(c, pid), pid, "running");
        n = suspend_progress(c, w, pid, &bytes, &total);
        ck_assert_msg(n >= 3 && bytes >= 50.0 * 1024 * 1024, "%d progress events, the last at %.0f bytes", n, bytes);
        ck_assert_msg(total < 0, "a first checkpoint's total is unknown, got %.0f", total);
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_RESUME, pid), pid, "running");
        n = suspend_progress(c, w, pid, &bytes, &total);
        ck_assert_msg(n >= 3 && total >= 100.0 * 1024 * 1024, "%d progress events against %.0f bytes", n, total);
        printf("progress: %d events, %.0f MiB of %.0f MiB\n", n, bytes / 1048576, total / 1048576);
}
END_TEST

/* ---- cudackptctl -------------------------------------------------------------- */

static const char *ctl_path(void)
{
        return itest_need_env("CUDACKPT_TEST_CTL");
}

/* cudackptctl --socket=D's args... into argv (NULL-terminated). */
static void ctl_argv(struct itest_daemon *d, const char *const *args, const char *argv[16])
{
        size_t n = 0;

        argv[n++] = ctl_path();
        argv[n++] = itest_strdupf("--socket=%s", d->sock);
        for (; args[n - 2]; n++) {
                ck_assert(n < 15);
                argv[n] = args[n - 2];
        }
        argv[n] = NULL;
}

static void run_ctl(struct itest_daemon *d, struct itest_proc_result *r, const char *const *args)
{
        const char *argv[16];

        ctl_argv(d, args, argv);
        itest_run_proc((uid_t)-1, argv, NULL, 20000, r);
}

/* Starts cudackptctl with args in the background, stdout to *ret_out_fd
 * (a pipe's reading end) when not NULL. */
static pid_t spawn_ctl(struct itest_daemon *d, const char *const *args, int *ret_out_fd)
{
        const char *argv[16];
        int p[2] = { -1, -1 };
        pid_t pid;

        ctl_argv(d, args, argv);
        if (ret_out_fd)
                ck_assert(pipe(p) == 0);
        pid = fork();
        ck_assert(pid >= 0);
        if (pid == 0) {
                if (ret_out_fd) {
                        dup2(p[1], 1);
                        close(p[0]);
                        close(p[1]);
                }
                execv(argv[0], (char *const *)argv);
                _exit(127);
        }
        if (ret_out_fd) {
                close(p[1]);
                *ret_out_fd = p[0];
        }
        return pid;
}

START_TEST(cli_hold_command)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t pid = itest_small_target();
        struct itest_proc_result r;
        const char *args[] = { "suspend", "--hold", itest_strdupf("%d", (int)pid), "--", "sh", "-c",
                               itest_strdupf("test \"$(%s --socket=%s state %d)\" = checkpointed && exit 3", ctl_path(),
                                             d->sock, (int)pid),
                               NULL };

        run_ctl(d, &r, args);
        ck_assert_msg(r.status == 3, "exit %d (the command's 3 expected); out %s err %s", r.status, r.out, r.err);
        ck_assert_msg(strstr(r.out, "checkpointed (") && strstr(r.out, ", lease 1\nrunning ("), "out: %s", r.out);
        itest_assert_state(state_of(c, pid), pid, "running");
}
END_TEST

START_TEST(cli_hold_killed)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t pid = itest_small_target();
        const char *args[] = { "lock", "--hold", itest_strdupf("%d", (int)pid), NULL };
        pid_t h = spawn_ctl(d, args, NULL);

        itest_await_state(c, pid, "locked", 10000);
        kill_holder(h);
        itest_await_state(c, pid, "running", 1000);
}
END_TEST

/* A group under --hold: a killed client's members all run again; with a
 * command, the members are resumed once it ends. */
START_TEST(cli_hold_group)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t a = itest_small_target(), b = itest_small_target();
        const char *pids = itest_strdupf("--pids=%d,%d", (int)a, (int)b);
        const char *args[] = { "suspend", "--hold", pids, NULL };
        pid_t h = spawn_ctl(d, args, NULL);

        itest_await_state(c, a, "checkpointed", 10000);
        itest_await_state(c, b, "checkpointed", 10000);
        kill_holder(h);
        itest_await_state(c, a, "running", 1000);
        itest_await_state(c, b, "running", 1000);

        struct itest_proc_result r;
        const char *cmd[] = { "lock", "--hold", pids, "--", "sh", "-c", "exit 5", NULL };
        run_ctl(d, &r, cmd);
        ck_assert_msg(r.status == 5 && strstr(r.out, "2 processes locked") && strstr(r.out, "2 processes running"),
                      "exit %d, out %s err %s", r.status, r.out, r.err);
        itest_assert_state(state_of(c, a), a, "running");
}
END_TEST

/* Without a command, --hold lasts until a signal, then undoes it itself. */
START_TEST(cli_hold_signal)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t pid = itest_small_target();
        const char *args[] = { "suspend", "--hold", itest_strdupf("%d", (int)pid), NULL };
        int out, st;
        pid_t h = spawn_ctl(d, args, &out);
        char buf[512];
        ssize_t n = 0, k;

        itest_await_state(c, pid, "checkpointed", 10000);
        ck_assert(kill(h, SIGTERM) == 0);
        ck_assert(waitpid(h, &st, 0) == h);
        while (n < (ssize_t)sizeof(buf) - 1 && (k = read(out, buf + n, sizeof(buf) - 1 - (size_t)n)) > 0)
                n += k;
        buf[n > 0 ? n : 0] = '\0';
        close(out);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x, out %s", st, buf);
        ck_assert_msg(strstr(buf, "\nrunning ("), "out: %s", buf);
        itest_assert_state(state_of(c, pid), pid, "running");
}
END_TEST

START_TEST(cli_release_and_metrics)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_small_target();
        struct itest_proc_result r;
        long long id = 0;
        const char *lock[] = { "lock", "--lease-ms=600000", itest_strdupf("%d", (int)pid), NULL };

        run_ctl(d, &r, lock);
        ck_assert_msg(r.status == 0 && sscanf(r.out, "locked (%*f ms), lease %lld", &id) == 1, "out %s", r.out);
        const char *release[] = { "release", itest_strdupf("%lld", id), NULL };
        run_ctl(d, &r, release);
        ck_assert_msg(r.status == 0 && strstr(r.out, "released"), "out %s err %s", r.out, r.err);
        run_ctl(d, &r, release);
        ck_assert_msg(r.status == 1 && strstr(r.err, "NoSuchLease: no such lease"), "status %d err %s", r.status, r.err);
        const char *metrics[] = { "metrics", itest_strdupf("--output=%s/m.prom", d->dir), NULL };
        run_ctl(d, &r, metrics);
        ck_assert_msg(r.status == 0, "err %s", r.err);
        FILE *f = fopen(itest_strdupf("%s/m.prom", d->dir), "r");
        char line[256];
        bool granted = false;
        ck_assert(f);
        while (fgets(line, sizeof(line), f))
                granted = granted || strcmp(line, "cudackpt_leases_granted_total 1\n") == 0;
        fclose(f);
        ck_assert_msg(granted, "no cudackpt_leases_granted_total 1 in the file");
        const char *bad[] = { "state", "--lease-ms=5", itest_strdupf("%d", (int)pid), NULL };
        run_ctl(d, &r, bad);
        ck_assert_int_eq(r.status, 2);
}
END_TEST

START_TEST(cli_watch_json)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t pid = itest_small_target();
        const char *args[] = { "--json", "watch", itest_strdupf("--pids=%d", (int)pid), NULL };
        int out;
        pid_t w = spawn_ctl(d, args, &out);
        char buf[8192];
        size_t n = 0;

        /* The watch is set up once the daemon counts a watcher. */
        for (int i = 0;; i++) {
                const char *text = itest_str(itest_call(c, CUDACKPT_METHOD_GET_METRICS, NULL), "text");
                if (strstr(text, "\ncudackpt_watchers 1\n"))
                        break;
                ck_assert_msg(i < 500, "the watcher never connected");
                usleep(10000);
        }
        itest_assert_ok(itest_call_pid(c, CUDACKPT_METHOD_LOCK, pid));
        itest_assert_ok(itest_call_pid(c, CUDACKPT_METHOD_UNLOCK, pid));
        while (n < sizeof(buf) - 1 && !strstr(buf, "\"method\":\"Unlock\",\"result\":\"ok\"")) {
                struct pollfd p = { .fd = out, .events = POLLIN };
                ck_assert_msg(poll(&p, 1, 5000) == 1, "no event line; got %s", buf);
                ssize_t k = read(out, buf + n, sizeof(buf) - 1 - n);
                ck_assert(k > 0);
                n += (size_t)k;
                buf[n] = '\0';
        }
        ck_assert_msg(strncmp(buf, "{\"type\":\"watching\",", strlen("{\"type\":\"watching\",")) == 0, "first line: %s", buf);
        kill_holder(w);
        close(out);
}
END_TEST

/* --progress off a terminal: a line per progress event on stderr. */
START_TEST(cli_progress)
{
        struct itest_daemon_opts o = { .config_json = "{\"progress_interval_ms\":100}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        const char *argv[] = { itest_self_exe(), "--itest-grow", "200", NULL };
        const char *env[] = { "CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=384", "CUDACKPT_SIM_CKPT_MIBPS=256", NULL };
        pid_t pid = itest_target_exec((uid_t)-1, itest_self_exe(), argv, env);
        struct itest_proc_result r;
        const char *args[] = { "--progress", "suspend", itest_strdupf("%d", (int)pid), NULL };
        const char *resume[] = { "resume", itest_strdupf("%d", (int)pid), NULL };
        char want[64];
        int lines = 0;

        run_ctl(d, &r, args);
        ck_assert_msg(r.status == 0 && strncmp(r.out, "checkpointed (", 14) == 0, "out %s err %s", r.out, r.err);
        snprintf(want, sizeof(want), "checkpoint of %d: ", (int)pid);
        for (const char *p = r.err; (p = strstr(p, want)); p++)
                lines++;
        ck_assert_msg(lines >= 3, "%d progress lines: %s", lines, r.err);
        run_ctl(d, &r, resume);
        ck_assert_int_eq(r.status, 0);
        run_ctl(d, &r, args);
        ck_assert_msg(strstr(r.err, " GiB of ") && strstr(r.err, "%)\n"), "no total in %s", r.err);
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
        tcase_add_test(tc, lease_undo_fails_once);
        tc = itest_tcase(s, "watch", 60);
        tcase_add_test(tc, watch_cycle_in_order);
        tcase_add_test(tc, watch_lease_events);
        tcase_add_test(tc, watch_appear_exit);
        tcase_add_test(tc, watch_needs_more);
        tcase_add_test(tc, watch_slow_watcher_cut);
        tcase_add_test(tc, watch_progress);
        tcase_add_test(tc, watch_tree);
        tcase_add_test(tc, watch_hangup);
        tcase_add_test(tc, watch_cgroup);
        tc = itest_tcase(s, "cli", 60);
        tcase_add_test(tc, cli_hold_command);
        tcase_add_test(tc, cli_hold_killed);
        tcase_add_test(tc, cli_hold_signal);
        tcase_add_test(tc, cli_hold_group);
        tcase_add_test(tc, cli_release_and_metrics);
        tcase_add_test(tc, cli_watch_json);
        tcase_add_test(tc, cli_progress);
        return s;
}

int main(int argc, char **argv)
{
        if (argc >= 3 && strcmp(argv[1], "--itest-grow") == 0)
                return grow_mode(argv);
        return itest_main(leases_suite());
}
