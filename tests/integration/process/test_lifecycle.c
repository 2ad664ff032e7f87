/* test_lifecycle.c: processes that exit, stop or are traced while the
 * daemon works on them (ProcessGone, ProcessStopped and the stall warning),
 * with the parameters the IDL gives those errors and the state the
 * process is left in afterwards.
 *
 * The binary doubles as a target (started through itest_target_exec()):
 *   --itest-slow-exit MS  on SIGUSR1 its main thread exits, and the process
 *                         MS milliseconds later: an exit that takes time,
 *                         as a CUDA process's does while the driver
 *                         releases its GPU memory. */
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- ProcessGone ----------------------------------------------------------- */

START_TEST(process_gone_during_checkpoint)
{
        struct itest_daemon *d = itest_daemon_start_default();
        /* 4096 MiB at 512 MiB/s: an 8 s checkpoint. */
        pid_t pid = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=4096", "CUDACKPT_SIM_CKPT_MIBPS=512", NULL);
        struct itest_conn *op = itest_connect(d);
        struct itest_conn *watch = itest_connect(d);
        itest_assert_state(itest_call_pid(op, CUDACKPT_METHOD_LOCK, pid), pid, "locked");
        itest_sendf(op, "{\"method\":\"" CUDACKPT_METHOD_CHECKPOINT "\",\"parameters\":{\"pid\":%d}}", (int)pid);
        itest_await_in_flight(watch, pid, "Checkpoint", 3000);
        itest_target_kill(pid);
        cJSON *j = itest_recv(op);
        itest_assert_error(j, CUDACKPT_ERROR_PROCESS_GONE);
        itest_assert_int(j, "pid", pid);
        itest_assert_str(j, "method", "Checkpoint");
        itest_assert_error(itest_call_pid(watch, CUDACKPT_METHOD_GET_STATE, pid), CUDACKPT_ERROR_NO_SUCH_PROCESS);
}
END_TEST

START_TEST(process_gone_during_suspend)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=4096", "CUDACKPT_SIM_CKPT_MIBPS=512", NULL);
        struct itest_conn *op = itest_connect(d);
        struct itest_conn *watch = itest_connect(d);
        itest_sendf(op, "{\"method\":\"" CUDACKPT_METHOD_SUSPEND "\",\"parameters\":{\"pid\":%d}}", (int)pid);
        itest_await_in_flight(watch, pid, "Suspend", 3000);
        itest_target_kill(pid);
        cJSON *j = itest_recv(op);
        itest_assert_error(j, CUDACKPT_ERROR_PROCESS_GONE);
        itest_assert_int(j, "pid", pid);
        itest_assert_str(j, "method", "Suspend");
}
END_TEST

/* A process's exit first releases its memory and files, then makes its
 * pidfd readable; the driver already fails in between (the simulator does
 * too: it can no longer read the process).  The daemon waits for such an
 * exit to end (exit_wait_ms) and says ProcessGone, not DriverError.  Once
 * flaky: the window is microseconds for /bin/sleep (55-85 ms for a CUDA
 * process on an H200), and here stretched to 4 s, past the end of the 2 s
 * checkpoint. */
static pid_t slow_exit_target(void)
{
        const char *argv[] = { "itest-slow-exit", "--itest-slow-exit", "4000", NULL };
        static const char *const env[] = { "CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=1024",
                                           "CUDACKPT_SIM_CKPT_MIBPS=512", NULL };
        return itest_target_exec((uid_t)-1, itest_self_exe(), argv, env);
}

/* Locks pid and starts its Checkpoint; returns the connection whose reply
 * is pending. */
static struct itest_conn *checkpoint_in_flight(struct itest_daemon *d, pid_t pid)
{
        struct itest_conn *op = itest_connect(d);
        struct itest_conn *watch = itest_connect(d);
        itest_assert_state(itest_call_pid(op, CUDACKPT_METHOD_LOCK, pid), pid, "locked");
        itest_sendf(op, "{\"method\":\"" CUDACKPT_METHOD_CHECKPOINT "\",\"parameters\":{\"pid\":%d}}", (int)pid);
        itest_await_in_flight(watch, pid, "Checkpoint", 3000);
        return op;
}

START_TEST(process_gone_while_exiting)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = slow_exit_target();
        struct itest_conn *op = checkpoint_in_flight(d, pid);
        ck_assert_int_eq(kill(pid, SIGUSR1), 0);
        cJSON *j = itest_recv(op);
        itest_assert_error(j, CUDACKPT_ERROR_PROCESS_GONE);
        itest_assert_int(j, "pid", pid);
        itest_assert_str(j, "method", "Checkpoint");
}
END_TEST

/* The wait is bounded: a process still exiting after exit_wait_ms is
 * still there, and the driver's failure is reported as it is. */
START_TEST(exit_wait_is_bounded)
{
        struct itest_daemon_opts o = { .config_json = "{\"exit_wait_ms\": 100}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        pid_t pid = slow_exit_target();
        struct itest_conn *op = checkpoint_in_flight(d, pid);
        double t0 = itest_now_ms();
        ck_assert_int_eq(kill(pid, SIGUSR1), 0);
        cJSON *j = itest_recv(op);
        double waited = itest_now_ms() - t0;
        itest_assert_error(j, CUDACKPT_ERROR_DRIVER_ERROR);
        itest_assert_str(j, "cuda_error", "CUDA_ERROR_OPERATING_SYSTEM");
        ck_assert_msg(waited < 4000, "the reply came after the process's exit (%.0f ms)", waited);
}
END_TEST

/* ---- ProcessStopped -------------------------------------------------------- */

/* Every call but GetRestoreThreadId on a stopped process would wait in the
 * driver until it runs again: refused at once, naming the stop. */
static void assert_stopped(struct itest_conn *c, const char *method, pid_t pid, const char *stop)
{
        double t0 = itest_now_ms();
        cJSON *j = itest_call_pid(c, method, pid);
        double took = itest_now_ms() - t0;
        itest_assert_error(j, CUDACKPT_ERROR_PROCESS_STOPPED);
        itest_assert_int(j, "pid", pid);
        itest_assert_str(j, "method", strrchr(method, '.') + 1);
        itest_assert_str(j, "stop", stop);
        ck_assert_msg(took < 2000, "%s on a stopped process took %.0f ms", method, took);
}

static void assert_restore_tid_answers(struct itest_conn *c, pid_t pid)
{
        double t0 = itest_now_ms();
        cJSON *j = itest_call_pid(c, CUDACKPT_METHOD_GET_RESTORE_THREAD_ID, pid);
        double took = itest_now_ms() - t0;
        itest_assert_ok(j);
        itest_assert_int(j, "pid", pid);
        long long tid = 0;
        ck_assert_msg(itest_int(j, "restore_thread_id", &tid) && tid > 0, "no restore_thread_id in %s",
                      itest_dump(j));
        ck_assert_msg(took < 2000, "GetRestoreThreadId on a stopped process took %.0f ms", took);
}

/* SIGSTOP (stop) or SIGCONT to pid, and waits until /proc shows it so. */
static void group_stop(pid_t pid, bool stop)
{
        ck_assert_int_eq(kill(pid, stop ? SIGSTOP : SIGCONT), 0);
        itest_await_proc_state(pid, 'T', stop);
}

START_TEST(stopped_target_refused)
{
        struct itest_conn *c;
        pid_t pid = itest_sim_conn(NULL, &c);
        itest_assert_state_now(c, pid, "running");

        group_stop(pid, true);
        assert_restore_tid_answers(c, pid);
        for (size_t i = 0; itest_process_methods[i]; i++)
                if (strcmp(itest_process_methods[i], CUDACKPT_METHOD_GET_RESTORE_THREAD_ID) != 0)
                        assert_stopped(c, itest_process_methods[i], pid, "signal");
        cJSON *j = itest_call_pid(c, CUDACKPT_METHOD_SUSPEND, pid);
        itest_assert_str(j, "step", "lock");
        itest_assert_absent(j, "rolled_back");
        j = itest_call_pid(c, CUDACKPT_METHOD_RESUME, pid);
        itest_assert_str(j, "step", "restore");

        /* Nothing was asked of the driver: once running again, the process
         * is as it was and the cycle works. */
        group_stop(pid, false);
        itest_assert_state_now(c, pid, "running");
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_SUSPEND, pid), pid, "checkpointed");
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_RESUME, pid), pid, "running");
}
END_TEST

/* A process stopped while locked, as a dumper would leave it: nothing but
 * GetRestoreThreadId is made, the state is kept, and Unlock works after
 * SIGCONT. */
START_TEST(stopped_while_locked)
{
        struct itest_conn *c;
        pid_t pid = itest_sim_conn(NULL, &c);
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_LOCK, pid), pid, "locked");
        group_stop(pid, true);
        assert_restore_tid_answers(c, pid);
        assert_stopped(c, CUDACKPT_METHOD_CHECKPOINT, pid, "signal");
        assert_stopped(c, CUDACKPT_METHOD_UNLOCK, pid, "signal");
        assert_stopped(c, CUDACKPT_METHOD_GET_STATE, pid, "signal");
        group_stop(pid, false);
        itest_assert_state_now(c, pid, "locked");
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_UNLOCK, pid), pid, "running");
}
END_TEST

/* A tracing stop (a debugger's, CRIU's seize) is named "traced". */
START_TEST(traced_target_refused)
{
        struct itest_conn *c;
        pid_t pid = itest_sim_conn(NULL, &c);
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_LOCK, pid), pid, "locked");
        ck_assert_msg(ptrace(PTRACE_SEIZE, pid, NULL, NULL) == 0, "PTRACE_SEIZE: %s", strerror(errno));
        ck_assert_msg(ptrace(PTRACE_INTERRUPT, pid, NULL, NULL) == 0, "PTRACE_INTERRUPT: %s", strerror(errno));
        int status;
        ck_assert_int_eq(waitpid(pid, &status, __WALL), pid);
        ck_assert_msg(WIFSTOPPED(status), "not stopped: status %#x", status);
        itest_await_proc_state(pid, 't', true);
        assert_restore_tid_answers(c, pid);
        assert_stopped(c, CUDACKPT_METHOD_CHECKPOINT, pid, "traced");
        assert_stopped(c, CUDACKPT_METHOD_GET_STATE, pid, "traced");
        ck_assert_msg(ptrace(PTRACE_DETACH, pid, NULL, NULL) == 0, "PTRACE_DETACH: %s", strerror(errno));
        itest_await_proc_state(pid, 't', false);
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_CHECKPOINT, pid), pid, "checkpointed");
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_RESUME, pid), pid, "running");
}
END_TEST

/* The state letter of thread tid of pid (field 3 of its stat line). */
static char thread_state(pid_t pid, pid_t tid)
{
        char path[64], buf[512];
        snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
        FILE *f = fopen(path, "re");
        size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
        if (f)
                fclose(f);
        buf[n] = '\0';
        const char *p = strrchr(buf, ')');
        return p && p[1] == ' ' ? p[2] : 0;
}

/* The process is stopped only when EVERY thread is: a process whose main
 * thread alone is in a tracing stop (a debugger that seized one thread)
 * still runs, its driver calls return, and nothing refuses them.  The
 * slow-exit target has a second thread, blocked in read(). */
START_TEST(partly_stopped_target_served)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = slow_exit_target();
        struct itest_conn *c = itest_connect(d);
        pid_t other = 0;
        DIR *dir = opendir(itest_strdupf("/proc/%d/task", (int)pid));
        struct dirent *de;
        int n = 0, status;

        while (dir && (de = readdir(dir)))
                if (de->d_name[0] != '.' && ++n && atoi(de->d_name) != pid)
                        other = atoi(de->d_name);
        if (dir)
                closedir(dir);
        ck_assert_msg(n == 2 && other > 0, "the target has %d threads, not 2", n);
        /* PTRACE_SEIZE attaches to the one thread named, the main one. */
        ck_assert_msg(ptrace(PTRACE_SEIZE, pid, NULL, NULL) == 0, "PTRACE_SEIZE: %s", strerror(errno));
        ck_assert_msg(ptrace(PTRACE_INTERRUPT, pid, NULL, NULL) == 0, "PTRACE_INTERRUPT: %s", strerror(errno));
        ck_assert_int_eq(waitpid(pid, &status, __WALL), pid);
        ck_assert_msg(WIFSTOPPED(status), "not stopped: status %#x", status);
        itest_await_proc_state(pid, 't', true);
        /* The other thread may not have reached its read() yet (a loaded
         * machine): it is awaited there, never seen stopped. */
        double deadline = itest_now_ms() + 5000;
        char st;
        while ((st = thread_state(pid, other)) != 'S') {
                ck_assert_msg(st != 't' && st != 'T', "thread %d is stopped too", (int)other);
                ck_assert_msg(itest_now_ms() < deadline, "thread %d stays in state %c, not S", (int)other, st);
                usleep(1000);
        }

        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, pid), pid, "running");
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_LOCK, pid), pid, "locked");
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, pid), pid, "locked");
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_UNLOCK, pid), pid, "running");
        /* All along, the main thread was stopped and the other was not. */
        ck_assert_int_eq(thread_state(pid, pid), 't');
        ck_assert_int_eq(thread_state(pid, other), 'S');
        ck_assert_msg(ptrace(PTRACE_DETACH, pid, NULL, NULL) == 0, "PTRACE_DETACH: %s", strerror(errno));
}
END_TEST

/* A process stopped after the daemon's check, while its driver call runs,
 * holds that call: the daemon's log says so once stall_warning_ms has
 * passed, and the call completes once the process runs again.
 *
 * The stop must land after the daemon's own check (a stop before it is
 * refused with ProcessStopped, no call made): once the Lock has reached
 * the driver, where the simulator's step slot reads 'L' (for the 200 ms
 * the simulator pauses there, then while it waits for the stopped
 * process).  Not once the daemon shows the Lock in flight, which it does
 * before that check.  And it must land before the daemon's stall check,
 * made once, stall_warning_ms after the Lock went to a worker (so after
 * it was sent): asserted, not assumed. */
START_TEST(stall_warning_names_the_stop)
{
        enum { STALL_MS = 300 };
        struct itest_daemon_opts o = { .config_json = itest_strdupf("{\"stall_warning_ms\": %d}", STALL_MS) };
        struct itest_daemon *d = itest_daemon_start(&o);
        /* The lock pauses 200 ms in the driver, then waits for a stopped
         * process. */
        pid_t pid = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_PRE_WAIT_MS=200", "CUDACKPT_SIM_STEP=-", NULL);
        struct itest_conn *op = itest_connect(d);
        double sent = itest_now_ms();
        itest_sendf(op, "{\"method\":\"" CUDACKPT_METHOD_LOCK "\",\"parameters\":{\"pid\":%d,\"timeout_ms\":0}}",
                    (int)pid);
        itest_await_sim_step(pid, 'L', 5000);
        group_stop(pid, true);
        /* 50 ms to spare: the daemon dates the Lock's start by libuv's
         * clock, in whole milliseconds and possibly coarse. */
        double stopped = itest_now_ms() - sent;
        ck_assert_msg(stopped < STALL_MS - 50,
                      "the process was stopped %.0f ms after the Lock was sent: the daemon's stall check, %d ms "
                      "after, may have come first",
                      stopped, STALL_MS);

        itest_await_log(d, itest_strdupf("every thread of process %d is stopped (signal)", (int)pid), 5000);
        ck_assert_msg(!itest_conn_readable(op), "the Lock ended while its process was stopped");
        group_stop(pid, false);
        itest_assert_state(itest_recv_within(op, 10000), pid, "locked");
        itest_assert_state(itest_call_pid(op, CUDACKPT_METHOD_UNLOCK, pid), pid, "running");
}
END_TEST

static int slow_exit_pipe[2];
static unsigned slow_exit_ms;

static void *slow_exit_last_thread(void *arg)
{
        char c;
        (void)arg;
        if (read(slow_exit_pipe[0], &c, 1) == 1) {
                struct timespec ts = { slow_exit_ms / 1000, (long)(slow_exit_ms % 1000) * 1000000L };
                while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                        ;
        }
        _exit(0);
}

/* --itest-slow-exit MS: see the top of the file. */
static int slow_exit(const char *ms)
{
        sigset_t usr1;
        pthread_t t;
        int sig;

        slow_exit_ms = (unsigned)strtoul(ms, NULL, 10);
        sigemptyset(&usr1);
        sigaddset(&usr1, SIGUSR1);
        /* Blocked in both threads, taken by sigwait() in this one. */
        if (pthread_sigmask(SIG_BLOCK, &usr1, NULL) != 0 || pipe(slow_exit_pipe) < 0 ||
            pthread_create(&t, NULL, slow_exit_last_thread, NULL) != 0)
                return 1;
        if (write(3, "1", 1) != 1)
                return 1;
        close(3);
        if (sigwait(&usr1, &sig) != 0 || write(slow_exit_pipe[1], "x", 1) != 1)
                return 1;
        pthread_exit(NULL);
}

int main(int argc, char **argv)
{
        const TTest *tests[] = { stopped_target_refused, stopped_while_locked, traced_target_refused,
                partly_stopped_target_served, stall_warning_names_the_stop, process_gone_during_checkpoint,
                process_gone_during_suspend, process_gone_while_exiting, exit_wait_is_bounded, NULL };

        if (argc == 3 && strcmp(argv[1], "--itest-slow-exit") == 0)
                return slow_exit(argv[2]);
        return itest_run("integration.lifecycle", "lifecycle", 40, tests);
}
