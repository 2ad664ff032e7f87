/* cli_hold.c: cudackptctl's --hold (a lease for as long as the command
 * runs), release, metrics, watch and --progress, run as a process against
 * the daemon; a part of integration.cli (test_cli.c). */
#include "cli_hold.h"
#include "harness.h"

#include <errno.h>
#include <poll.h>
#include <pwd.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static cJSON *state_of(struct itest_conn *c, pid_t pid)
{
        return itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, pid);
}

START_TEST(cli_hold_command)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t pid = itest_small_target();
        struct itest_proc_result r;
        const char *args[] = { "suspend", "--hold", itest_strdupf("%d", (int)pid), "--", "sh", "-c",
                               itest_strdupf("test \"$(%s --socket=%s state %d)\" = checkpointed && exit 3", itest_ctl_path(),
                                             d->sock, (int)pid),
                               NULL };

        itest_ctl_run(d, &r, args);
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
        pid_t h = itest_ctl_spawn(d, args, NULL);

        itest_await_state(c, pid, "locked", 10000);
        itest_kill_wait(h);
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
        pid_t h = itest_ctl_spawn(d, args, NULL);

        itest_await_state(c, a, "checkpointed", 10000);
        itest_await_state(c, b, "checkpointed", 10000);
        itest_kill_wait(h);
        itest_await_state(c, a, "running", 1000);
        itest_await_state(c, b, "running", 1000);

        struct itest_proc_result r;
        const char *cmd[] = { "lock", "--hold", pids, "--", "sh", "-c", "exit 5", NULL };
        itest_ctl_run(d, &r, cmd);
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
        pid_t h = itest_ctl_spawn(d, args, &out);
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

        itest_ctl_run(d, &r, lock);
        ck_assert_msg(r.status == 0 && sscanf(r.out, "locked (%*f ms), lease %lld", &id) == 1, "out %s", r.out);
        const char *release[] = { "release", itest_strdupf("%lld", id), NULL };
        itest_ctl_run(d, &r, release);
        ck_assert_msg(r.status == 0 && strstr(r.out, "released"), "out %s err %s", r.out, r.err);
        itest_ctl_run(d, &r, release);
        ck_assert_msg(r.status == 1 && strstr(r.err, "NoSuchLease: no such lease"), "status %d err %s", r.status, r.err);
        const char *metrics[] = { "metrics", itest_strdupf("--output=%s/m.prom", d->dir), NULL };
        itest_ctl_run(d, &r, metrics);
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
        itest_ctl_run(d, &r, bad);
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
        pid_t w = itest_ctl_spawn(d, args, &out);
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
        itest_kill_wait(w);
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

        itest_ctl_run(d, &r, args);
        ck_assert_msg(r.status == 0 && strncmp(r.out, "checkpointed (", 14) == 0, "out %s err %s", r.out, r.err);
        snprintf(want, sizeof(want), "checkpoint of %d: ", (int)pid);
        for (const char *p = r.err; (p = strstr(p, want)); p++)
                lines++;
        ck_assert_msg(lines >= 3, "%d progress lines: %s", lines, r.err);
        itest_ctl_run(d, &r, resume);
        ck_assert_int_eq(r.status, 0);
        itest_ctl_run(d, &r, args);
        ck_assert_msg(strstr(r.err, " GiB of ") && strstr(r.err, "%)\n"), "no total in %s", r.err);
}
END_TEST

void cli_hold_add_tests(TCase *tc)
{
        tcase_add_test(tc, cli_hold_command);
        tcase_add_test(tc, cli_hold_killed);
        tcase_add_test(tc, cli_hold_signal);
        tcase_add_test(tc, cli_hold_group);
        tcase_add_test(tc, cli_release_and_metrics);
        tcase_add_test(tc, cli_watch_json);
        tcase_add_test(tc, cli_progress);
}
