/* test_leases.c: leases on Lock and Suspend (and on groups) through the
 * client protocol, on the simulator, against the real daemon; the Watch
 * stream is test_watch.c's, cudackptctl --hold and release test_cli.c's.
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
        itest_kill_wait(h);
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
        itest_kill_wait(h);
        itest_await_state(q, pid, "running", 10000);
}
END_TEST

/* How late an expired lease may be undone: the timer's wake-up, the
 * Resume of a small process and GetState's polling, on a loaded machine. */
#define LEASE_UNDO_SLACK_MS 500

/* Asserts that pid, paused under a lease of ms granted by a call sent at
 * sent and answered at granted, runs again no sooner than ms after sent
 * (the lease's clock starts at the grant; 2 ms for the loop clock's
 * truncations) and no later than ms + LEASE_UNDO_SLACK_MS after granted. */
static void assert_undone_on_time(struct itest_conn *q, pid_t pid, double sent, double granted, unsigned ms)
{
        itest_await_state(q, pid, "running", (int)ms + 5000);
        double now = itest_now_ms();
        printf("lease of %u ms undone %.0f ms after its grant\n", ms, now - granted);
        ck_assert_msg(now - sent >= ms - 2, "a lease of %u ms undone %.0f ms after the call that took it", ms,
                      now - sent);
        ck_assert_msg(now - granted <= ms + LEASE_UNDO_SLACK_MS, "a lease of %u ms undone %.0f ms after its grant",
                      ms, now - granted);
}

START_TEST(lease_ms_expires)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d), *q = itest_connect(d);
        pid_t pid = itest_small_target();
        double sent = itest_now_ms();
        cJSON *j = itest_call(c, CUDACKPT_METHOD_SUSPEND, itest_strdupf("{\"pid\":%d,\"lease_ms\":1500}", (int)pid));
        double granted = itest_now_ms();

        itest_assert_state(j, pid, "checkpointed");
        const cJSON *l = itest_get(j, "lease");
        ck_assert_msg(cJSON_IsObject(l) && cJSON_GetObjectItemCaseSensitive(l, "lease_ms") &&
                              cJSON_GetObjectItemCaseSensitive(l, "lease_ms")->valuedouble == 1500 &&
                              cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(l, "on_close")),
                      "lease %s", itest_dump(j));
        /* Not tied to the connection: closing it changes nothing. */
        itest_conn_close(c);
        itest_assert_state(state_of(q, pid), pid, "checkpointed");
        assert_undone_on_time(q, pid, sent, granted, 1500);
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
        long long id = itest_lease_id(j);

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
        long long id = itest_lease_id(
                itest_call(c, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"lease_ms\":300}", (int)pid)));
        cJSON *j = itest_call(c, CUDACKPT_METHOD_RENEW_LEASE, itest_strdupf("{\"lease\":%lld,\"lease_ms\":600000}", id));

        itest_assert_int(j, "lease_ms", 600000);
        barrier(c, 300);
        itest_assert_state(state_of(c, pid), pid, "locked");
        /* Renewed again, it runs from the renewal for the new time. */
        double sent = itest_now_ms();
        j = itest_call(c, CUDACKPT_METHOD_RENEW_LEASE, itest_strdupf("{\"lease\":%lld,\"lease_ms\":1000}", id));
        double renewed = itest_now_ms();
        itest_assert_int(j, "lease_ms", 1000);
        assert_undone_on_time(c, pid, sent, renewed, 1000);
}
END_TEST

/* Someone else resumed the process and suspended it again without a
 * lease: the first lease ended with the resume and undoes nothing. */
START_TEST(lease_ended_by_another_resume)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *a = itest_connect(d), *b = itest_connect(d);
        pid_t pid = itest_small_target();

        (void)itest_lease_id(itest_call(a, CUDACKPT_METHOD_SUSPEND, itest_strdupf("{\"pid\":%d,\"lease_ms\":400}", (int)pid)));
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

        (void)itest_lease_id(itest_call(c, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"lease_on_close\":true}", (int)pid)));
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
        itest_kill_wait(h);
        itest_await_state(q, a, "running", 1000);
        itest_await_state(q, b, "running", 1000);
}
END_TEST

/* A RestoreGroup's lease is undone by checkpointing its members again
 * (not by running them): its holder dying before it unlocks leaves the
 * group suspended whole.  An UnlockGroup ends such a lease. */
START_TEST(restore_group_lease_killed_holder)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *q = itest_connect(d);
        pid_t a = itest_small_target(), b = itest_small_target();
        char *sel = itest_strdupf("{\"pids\":[{\"pid\":%d},{\"pid\":%d}]}", (int)a, (int)b), *reply;
        pid_t h;

        itest_assert_ok(itest_call(q, CUDACKPT_METHOD_SUSPEND_GROUP, itest_strdupf("{\"selector\":%s}", sel)));
        h = holder(d,
                   itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_RESTORE_GROUP
                                 "\",\"parameters\":{\"selector\":%s,\"lease_on_close\":true}}",
                                 sel),
                   true, &reply);
        ck_assert_msg(strstr(reply, "\"lease\":{\"id\":"), "no lease in %s", reply);
        itest_assert_state(state_of(q, a), a, "locked");
        itest_assert_state(state_of(q, b), b, "locked");
        itest_kill_wait(h);
        itest_await_state(q, a, "checkpointed", 1000);
        itest_await_state(q, b, "checkpointed", 1000);
        barrier(q, 300);
        itest_assert_state(state_of(q, a), a, "checkpointed");
        itest_assert_state(state_of(q, b), b, "checkpointed");

        /* Restored and unlocked by the holder: the unlock ended the lease,
         * and its closing then changes nothing. */
        struct itest_conn *c = itest_connect(d);
        (void)itest_lease_id(itest_call(c, CUDACKPT_METHOD_RESTORE_GROUP,
                                        itest_strdupf("{\"selector\":%s,\"lease_on_close\":true}", sel)));
        itest_assert_ok(itest_call(c, CUDACKPT_METHOD_UNLOCK_GROUP, itest_strdupf("{\"selector\":%s}", sel)));
        itest_conn_close(c);
        barrier(q, 300);
        itest_assert_state(state_of(q, a), a, "running");
        itest_assert_state(state_of(q, b), b, "running");
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

        (void)itest_lease_id(j);
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

        (void)itest_lease_id(itest_call(c, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"lease_on_close\":true}", (int)pid)));
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

/* An undo that fails is logged, reported to watchers and counted, once:
 * the process stays as the failure left it. */
START_TEST(lease_undo_fails_once)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t pid = itest_target(SIM, SMALL, "CUDACKPT_SIM_FAIL=restore:CUDA_ERROR_UNKNOWN", NULL);
        struct itest_conn *w = itest_watcher(d, itest_strdupf("{\"pids\":[{\"pid\":%d}]}", (int)pid));
        bool ended = false;

        (void)itest_lease_id(itest_call(c, CUDACKPT_METHOD_SUSPEND, itest_strdupf("{\"pid\":%d,\"lease_ms\":100}", (int)pid)));
        for (int i = 0; i < 64 && !ended; i++) {
                const cJSON *e = itest_next_event(w, 5000);
                if (strcmp(itest_event_str(e, "type"), "lease-ended") == 0) {
                        ck_assert_msg(strcmp(itest_event_str(e, "reason"), "expired") == 0 && strcmp(itest_event_str(e, "undo"), "failed") == 0,
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
        int restores = itest_count(log, itest_strdupf("method=Restore target_pid=%d ", (int)pid));
        ck_assert_msg(restores == 1, "%d restores of the process (one undo, never retried)", restores);
}
END_TEST

int main(void)
{
        const TTest *tests[] = { killed_holder_locked, killed_holder_suspended, killed_during_suspend,
                lease_ms_expires, lease_released, lease_renewed, lease_ended_by_another_resume,
                lease_finished_by_cycle, group_lease_killed_holder, restore_group_lease_killed_holder,
                group_lease_expires,
                lease_holder_never_idle, lease_undo_fails_once, NULL };

        return itest_run("integration.leases", "leases", 60, tests);
}
