/* test_watch.c: the Watch stream (its events in order, leases, exits,
 * selections by pids, tree and cgroup, slow and vanished watchers) and
 * checkpoint progress through the protocol, on the simulator, against the
 * real daemon; cudackptctl watch and --progress are test_cli.c's.
 *
 * The binary doubles as a target: --itest-grow (see harness.h). */
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

START_TEST(watch_cycle_in_order)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t pid = itest_small_target(), other = itest_small_target();
        struct itest_conn *w = itest_watcher(d, itest_strdupf("{\"pids\":[{\"pid\":%d}]}", (int)pid));
        struct itest_conn *w2 = itest_watcher(d, itest_strdupf("{\"pids\":[{\"pid\":%d}]}", (int)other));
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
                const cJSON *e = itest_next_event(w, 5000);
                const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "pid");
                ck_assert_msg(strcmp(itest_event_str(e, "type"), want[i][0]) == 0 && strcmp(itest_event_str(e, "method"), want[i][1]) == 0 &&
                                      strcmp(itest_event_str(e, "state"), want[i][2]) == 0 && cJSON_IsNumber(p) &&
                                      p->valueint == pid,
                              "event %zu: want %s %s %s, got %s", i, want[i][0], want[i][1], want[i][2],
                              cJSON_PrintUnformatted(e));
                if (strcmp(want[i][0], "finished") == 0)
                        ck_assert_msg(strcmp(itest_event_str(e, "result"), "ok") == 0 &&
                                              cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(e, "duration_ms")),
                                      "%s", cJSON_PrintUnformatted(e));
        }
        /* The other watcher saw none of it: its first event is about its pid. */
        itest_assert_ok(itest_call_pid(c, CUDACKPT_METHOD_LOCK, other));
        const cJSON *e = itest_next_event(w2, 5000);
        ck_assert_msg(cJSON_GetObjectItemCaseSensitive(e, "pid")->valueint == other, "%s", cJSON_PrintUnformatted(e));
        ck_assert(!itest_conn_readable(w));
}
END_TEST

START_TEST(watch_lease_events)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t pid = itest_small_target();
        struct itest_conn *w = itest_watcher(d, NULL);
        bool taken = false, ended = false;
        long long id = itest_lease_id(
                itest_call(c, CUDACKPT_METHOD_SUSPEND, itest_strdupf("{\"pid\":%d,\"lease_ms\":200}", (int)pid)));

        for (int i = 0; i < 64 && !ended; i++) {
                const cJSON *e = itest_next_event(w, 5000);
                const cJSON *l = cJSON_GetObjectItemCaseSensitive(e, "lease");
                if (strcmp(itest_event_str(e, "type"), "lease-taken") == 0) {
                        ck_assert(cJSON_IsNumber(l) && (long long)l->valuedouble == id);
                        taken = true;
                } else if (strcmp(itest_event_str(e, "type"), "lease-ended") == 0) {
                        ck_assert_msg(taken && strcmp(itest_event_str(e, "reason"), "expired") == 0 &&
                                              strcmp(itest_event_str(e, "undo"), "ok") == 0,
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
        struct itest_conn *w = itest_watcher(d, NULL);
        struct itest_conn *c = itest_connect(d);
        bool appeared = false, exited = false;

        /* The first scan is the baseline: a process started after it appears.
         * ListProcesses is a barrier of the same pool. */
        itest_assert_ok(itest_call(c, CUDACKPT_METHOD_LIST_PROCESSES, NULL));
        usleep(300 * 1000); /* past the baseline scan, which has no event to await */
        pid_t pid = itest_mapped_target();
        for (int i = 0; i < 200 && !appeared; i++) {
                const cJSON *e = itest_next_event(w, 5000);
                const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "pid");
                if (strcmp(itest_event_str(e, "type"), "appeared") == 0 && cJSON_IsNumber(p) && p->valueint == pid) {
                        ck_assert_str_eq(itest_event_str(e, "command"), "sleep");
                        appeared = true;
                }
        }
        ck_assert(appeared);
        itest_target_kill(pid);
        for (int i = 0; i < 200 && !exited; i++) {
                const cJSON *e = itest_next_event(w, 5000);
                const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "pid");
                exited = strcmp(itest_event_str(e, "type"), "exited") == 0 && cJSON_IsNumber(p) && p->valueint == pid;
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
        struct itest_conn *w = itest_watcher(d, itest_strdupf("{\"pids\":[{\"pid\":%d}]}", (int)pid));
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
                        const cJSON *e = itest_next_event(w, 1000);
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
        struct itest_conn *w = itest_watcher(d, itest_strdupf("{\"tree\":%d}", (int)in));

        assert_selection(c, w, in, out);
        /* The test itself is the parent of both: its tree holds both. */
        struct itest_conn *all = itest_watcher(d, itest_strdupf("{\"tree\":%d}", (int)getpid()));
        bool seen_in = false, seen_out = false;
        for (int round = 0; round < 200 && !(seen_in && seen_out); round++) {
                itest_assert_ok(itest_call_pid(c, CUDACKPT_METHOD_LOCK, round % 2 ? in : out));
                itest_assert_ok(itest_call_pid(c, CUDACKPT_METHOD_UNLOCK, round % 2 ? in : out));
                struct pollfd p = { .fd = all->fd, .events = POLLIN };
                while (itest_conn_readable(all) || poll(&p, 1, 20) == 1) {
                        const cJSON *pid = cJSON_GetObjectItemCaseSensitive(itest_next_event(all, 1000), "pid");
                        seen_in = seen_in || (cJSON_IsNumber(pid) && pid->valueint == in);
                        seen_out = seen_out || (cJSON_IsNumber(pid) && pid->valueint == out);
                }
        }
        ck_assert_msg(seen_in && seen_out, "the test's tree: in %d, out %d", seen_in, seen_out);
}
END_TEST

START_TEST(watch_cgroup)
{
        char *mnt = itest_cgroup2_or_skip();
        if (!mnt)
                return;
        struct itest_daemon_opts o = { .config_json = "{\"watch_scan_ms\":50}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct itest_conn *c = itest_connect(d);
        const char *name = itest_strdupf("itest-watch-%d", (int)getpid());
        const char *top = itest_strdupf("%s/%s", mnt, name);
        pid_t in = itest_mapped_target();
        pid_t out = itest_mapped_target();

        ck_assert_msg(mkdir(top, 0755) == 0, "mkdir %s: %s", top, strerror(errno));
        itest_cgroup_move(top, in);
        struct itest_conn *w = itest_watcher(d, itest_strdupf("{\"cgroup\":\"/%s\"}", name));
        assert_selection(c, w, in, out);
        itest_conn_close(w);
        itest_cgroup_move(mnt, in);
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
        struct itest_conn *w = itest_watcher(d, NULL);
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

/* ---- progress ---------------------------------------------------------------- */

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
                const cJSON *e = itest_next_event(w, 10000), *b, *t;
                if (strcmp(itest_event_str(e, "type"), "finished") == 0 && strcmp(itest_event_str(e, "method"), "Suspend") == 0)
                        break;
                /* A restore reports none (the Resume before). */
                if (strcmp(itest_event_str(e, "type"), "progress") != 0)
                        continue;
                ck_assert_msg(strcmp(itest_event_str(e, "step"), "checkpoint") == 0 && strcmp(itest_event_str(e, "method"), "Suspend") == 0 &&
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
        struct itest_conn *w = itest_watcher(d, itest_strdupf("{\"pids\":[{\"pid\":%d}]}", (int)pid));
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

int main(int argc, char **argv)
{
        const TTest *tests[] = { watch_cycle_in_order, watch_lease_events, watch_appear_exit,
                watch_needs_more, watch_slow_watcher_cut, watch_progress, watch_tree, watch_hangup,
                watch_cgroup, NULL };

        if (argc >= 3 && strcmp(argv[1], "--itest-grow") == 0)
                return itest_grow_mode(argv);
        return itest_run("integration.watch", "watch", 60, tests);
}
