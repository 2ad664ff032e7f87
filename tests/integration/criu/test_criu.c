/* test_criu.c: CRIU's CUDA plugin, routed through cudackptd.
 *
 * CRIU (4.x) with its CUDA plugin runs "cuda-checkpoint" from $PATH for
 * every process it dumps or restores.  Here that is a symlink to cudackptctl
 * (its drop-in mode, client/ctl/main/compat.c) in a directory put first on criu's
 * PATH, talking to the test's daemon on the simulator through
 * CUDACKPT_SOCKET; CRIU_FAULT=138 turns the plugin on without a GPU.  The
 * targets are criu_target processes (see there) that CRIU really dumps,
 * kills and restores: same pids, new start times, memory checked on
 * SIGUSR1.  The daemon's audit lines (its log) must show the plugin's
 * Lock, Checkpoint, Restore and Unlock, so a criu that used some other
 * cuda-checkpoint, or none, fails.
 *
 * The plugin asks for the restore thread id while every thread of the
 * target is ptrace-stopped, as the real driver's callers do; an operation
 * that waits for the target there hangs the dump.  Every criu run is
 * bounded (CRIU_TIMEOUT_MS): past it criu and its children are killed and
 * the test fails with criu's log, before Check's own timeout.
 *
 * Skips (exit 77, one line) without a criu >= 4 ($CUDACKPT_CRIU, else
 * criu on PATH), when not root, or when `criu check` fails.
 *
 * The test process is a child subreaper: it reaps what criu dump killed,
 * and criu restore -d leaves the restored tree with it. */
#include "criu_itest.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void run_criu(struct citest_ctx *x, const char *log, const char *verb, ...)
{
        const char *argv[32];
        size_t n = 0;
        argv[n++] = citest_criu_path;
        argv[n++] = verb;
        va_list ap;
        va_start(ap, verb);
        for (const char *a = va_arg(ap, const char *); a && n < 24; a = va_arg(ap, const char *))
                argv[n++] = a;
        va_end(ap);
        argv[n++] = "-D";
        argv[n++] = x->img;
        argv[n++] = "-o";
        argv[n++] = log;
        argv[n++] = "-v4";
        argv[n] = NULL;
        struct citest_run *res = itest_keep(calloc(1, sizeof(*res)));
        ck_assert(res);
        double t0 = itest_now_ms();
        int r = citest_run_bounded(argv, x->env, CRIU_TIMEOUT_MS, res);
        ck_assert_msg(r == 0, "cannot run %s: %s", citest_criu_path, strerror(-r));
        if (res->timed_out || res->status != 0) {
                const char *path = itest_strdupf("%s/%s", x->img, log);
                fprintf(stderr, "criu %s output: %s\n", verb, res->out);
                citest_print_log_tail(itest_strdupf("criu %s log", verb), path);
                ck_assert_msg(!res->timed_out,
                              "criu %s did not finish within %d ms (killed; a cuda-checkpoint call hanging? "
                              "see the log above)",
                              verb, CRIU_TIMEOUT_MS);
                ck_abort_msg("criu %s failed with exit status %d after %.0f ms (see the log above)", verb,
                             res->status, itest_now_ms() - t0);
        }
}

static void assert_no_citest_plugin_failure(struct citest_ctx *x, const char *log)
{
        const char *path = itest_strdupf("%s/%s", x->img, log);
        const char *bad = citest_plugin_failure(path);
        if (bad)
                citest_print_log_tail(log, path);
        ck_assert_msg(!bad, "criu exited 0 but its CUDA plugin failed: %s", bad);
}

/* Asserts that the daemon audited method on pid as done ("result=ok"):
 * the call came through our cuda-checkpoint and was carried out. */
static void check_before(struct citest_ctx *x, pid_t pid)
{
        citest_assert_state(x, pid, "running");
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        itest_assert_reply_ok(cudackpt_get_restore_thread_id(x->c, pid, &r), &r);
        char task[64];
        snprintf(task, sizeof(task), "/proc/%d/task/%d", (int)pid, r.restore_thread_id);
        ck_assert_msg(r.restore_thread_id > 0 && access(task, F_OK) == 0,
                      "restore thread id %d of %d is not one of its threads", r.restore_thread_id, (int)pid);
        cudackpt_reply_clear(&r);

        const char *argv[] = { itest_strdupf("%s/cuda-checkpoint", x->bin), "--get-state", "--pid",
                               itest_strdupf("%d", (int)pid), NULL };
        struct itest_proc_result *pr = itest_keep(calloc(1, sizeof(*pr)));
        ck_assert(pr);
        itest_run_proc((uid_t)-1, argv, x->env, AWAIT_MS, pr);
        ck_assert_msg(pr->status == 0 && strcmp(pr->out, "running\n") == 0,
                      "cuda-checkpoint --get-state --pid %d: exit status %d, stdout \"%s\", stderr \"%s\"",
                      (int)pid, pr->status, pr->out, pr->err);
}

/* After a restore: the same pid, a new process, ours to reap (the root,
 * reparented to us; the others the root's children), running for the
 * daemon, which did Restore and Unlock for the plugin. */
static void check_restored(struct citest_ctx *x, pid_t pid, uint64_t old_start, pid_t want_ppid)
{
        char st = 0;
        pid_t ppid = 0;
        ck_assert_msg(citest_proc_stat(pid, &st, &ppid), "pid %d did not come back", (int)pid);
        ck_assert_msg(st != 'Z' && st != 'X', "restored pid %d is dead (state %c)", (int)pid, st);
        ck_assert_msg(ppid == want_ppid, "restored pid %d has parent %d, expected %d", (int)pid, (int)ppid,
                      (int)want_ppid);
        uint64_t start = itest_start_time(pid);
        ck_assert_msg(start != old_start, "pid %d still has start time %llu: not a restored process", (int)pid,
                      (unsigned long long)start);
        citest_await_audit(x, "Restore", pid);
        citest_await_audit(x, "Unlock", pid);
        citest_assert_state(x, pid, "running");
}

/* ---- the tests ----------------------------------------------------------- */

/* Sets x up with a target of one process, checked as before a dump. */
static pid_t start_single(struct citest_ctx *x)
{
        pid_t pids[1];

        citest_setup(x);
        ck_assert_int_eq(citest_start_target(x, "single", pids, 1), 1);
        check_before(x, pids[0]);
        return pids[0];
}

START_TEST(criu_dump_restore)
{
        struct citest_ctx x;
        pid_t pid = start_single(&x);
        citest_check_memory(&x, pid, 1);
        uint64_t start = itest_start_time(pid);

        run_criu(&x, "dump.log", "dump", "-t", itest_strdupf("%d", (int)pid), NULL);
        citest_await_gone(pid, AWAIT_MS);
        citest_await_audit(&x, "Lock", pid);
        citest_await_audit(&x, "Checkpoint", pid);

        run_criu(&x, "restore.log", "restore", "-d", NULL);
        assert_no_citest_plugin_failure(&x, "restore.log");
        check_restored(&x, pid, start, getpid());
        /* The check counter came back with the memory. */
        citest_check_memory(&x, pid, 2);
        citest_kill_all(&pid, 1);
}
END_TEST

START_TEST(criu_tree)
{
        struct citest_ctx x;
        citest_setup(&x);
        pid_t pids[3];
        ck_assert_int_eq(citest_start_target(&x, "tree", pids, 3), 3);
        uint64_t start[3];
        for (int i = 0; i < 3; i++) {
                check_before(&x, pids[i]);
                start[i] = itest_start_time(pids[i]);
                char st;
                pid_t ppid;
                ck_assert(citest_proc_stat(pids[i], &st, &ppid));
                ck_assert_int_eq(ppid, i == 0 ? getpid() : pids[0]);
        }

        run_criu(&x, "dump.log", "dump", "-t", itest_strdupf("%d", (int)pids[0]), NULL);
        for (int i = 0; i < 3; i++)
                citest_await_gone(pids[i], AWAIT_MS);
        for (int i = 0; i < 3; i++) {
                citest_await_audit(&x, "Lock", pids[i]);
                citest_await_audit(&x, "Checkpoint", pids[i]);
        }

        run_criu(&x, "restore.log", "restore", "-d", NULL);
        assert_no_citest_plugin_failure(&x, "restore.log");
        for (int i = 0; i < 3; i++)
                check_restored(&x, pids[i], start[i], i == 0 ? getpid() : pids[0]);
        for (int i = 0; i < 3; i++)
                citest_check_memory(&x, pids[i], 1);
        citest_kill_all(pids, 3);
}
END_TEST

START_TEST(criu_leave_running)
{
        struct citest_ctx x;
        pid_t pid = start_single(&x);
        uint64_t start = itest_start_time(pid);

        run_criu(&x, "dump.log", "dump", "--leave-running", "-t", itest_strdupf("%d", (int)pid), NULL);
        assert_no_citest_plugin_failure(&x, "dump.log");
        /* The same process, never stopped for good: the plugin restored and
         * unlocked it after the dump. */
        char st = 0;
        pid_t ppid = 0;
        ck_assert_msg(citest_proc_stat(pid, &st, &ppid) && st != 'Z', "pid %d did not survive --leave-running", (int)pid);
        ck_assert_int_eq(waitpid(pid, NULL, WNOHANG), 0);
        ck_assert_msg(itest_start_time(pid) == start, "pid %d is another process", (int)pid);
        citest_await_audit(&x, "Lock", pid);
        citest_await_audit(&x, "Checkpoint", pid);
        citest_await_audit(&x, "Restore", pid);
        citest_await_audit(&x, "Unlock", pid);
        citest_assert_state(&x, pid, "running");
        citest_check_memory(&x, pid, 1);
        citest_kill_all(&pid, 1);
}
END_TEST

int main(void)
{
        const TTest *tests[] = { criu_dump_restore, criu_tree, criu_leave_running, NULL };

        /* Two criu runs at most, each bounded by CRIU_TIMEOUT_MS. */
        return citest_main("criu", 3.0 * CRIU_TIMEOUT_MS / 1000, tests);
}
