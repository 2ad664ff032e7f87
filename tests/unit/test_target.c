/* Unit tests: /proc parsing and pidfd pinning of real processes. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runner.h"

#include "host/target.h"
#include "kernel-abi.h"
#include "read_file.h"

START_TEST(test_parse_stat)
{
        uint64_t st = 0;
        char state = 0;
        const char *line =
                "1234 (we ird) (name)) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10\n";

        ck_assert_int_eq(target_parse_start_time(line, &st, &state), 0);
        ck_assert_uint_eq(st, 987654);
        ck_assert_int_eq(state, 'S');
        ck_assert_int_lt(target_parse_start_time("1234 (x) S 1 2 3", &st, &state), 0);
        ck_assert_int_lt(target_parse_start_time("garbage", &st, &state), 0);
        ck_assert_int_lt(target_parse_start_time(
                                 "1 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 12x 1 1", &st, &state),
                         0);
}
END_TEST

START_TEST(test_parse_flags)
{
        uint64_t flags = 0;

        ck_assert_int_eq(target_parse_flags("1234 (we ird) (name)) S 1 1234 1234 0 -1 4194564 100 0\n", &flags),
                         0);
        ck_assert_uint_eq(flags, 4194564);
        ck_assert_int_eq(target_parse_flags("1 (x) R 1 1 1 0 -1 0", &flags), 0);
        ck_assert_uint_eq(flags, 0);
        ck_assert_int_lt(target_parse_flags("1 (x) R 1 1 1 0 -1", &flags), 0);
        ck_assert_int_lt(target_parse_flags("1 (x) R 1 1 1 0 -1 -4 0", &flags), 0);
        ck_assert_int_lt(target_parse_flags("1 (x) R 1 1 1 0 -1 12x 0", &flags), 0);
        ck_assert_int_lt(target_parse_flags("garbage", &flags), 0);
}
END_TEST

START_TEST(test_parse_uids)
{
        uid_t r, e, s;

        ck_assert_int_eq(target_parse_uids("Name:\tx\nUid:\t1000\t0\t1001\t1000\nGid:\t1\t1\t1\t1\n", &r,
                                           &e, &s),
                         0);
        ck_assert_uint_eq(r, 1000);
        ck_assert_uint_eq(e, 0);
        ck_assert_uint_eq(s, 1001);
        ck_assert_int_lt(target_parse_uids("Name:\tx\nGid:\t1\n", &r, &e, &s), 0);
}
END_TEST

START_TEST(test_pin_and_exit)
{
        struct target_identity id;
        pid_t child = fork();

        ck_assert_int_ge(child, 0);
        if (child == 0) {
                pause();
                _exit(0);
        }
        ck_assert_int_eq(target_open(child, &id), 0);
        ck_assert_int_eq(id.pid, child);
        ck_assert_uint_eq(id.ruid, getuid());
        ck_assert_int_eq(target_alive(&id), 1);
        kill(child, SIGKILL);
        /* Gone as soon as it is a zombie, before it is reaped. */
        siginfo_t si;
        ck_assert_int_eq(waitid(P_PID, (id_t)child, &si, WEXITED | WNOWAIT), 0);
        ck_assert_int_eq(target_alive(&id), 0);
        ck_assert_int_eq(target_open(child, &(struct target_identity){ 0 }), -ESRCH);
        waitpid(child, NULL, 0);
        ck_assert_int_eq(target_alive(&id), 0);
        target_close(&id);
        ck_assert_int_eq(target_open(child, &id), -ESRCH);
        ck_assert_int_eq(target_open(0, &id), -ESRCH);
        ck_assert_int_eq(target_open(-5, &id), -ESRCH);
}
END_TEST

static double now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static char stat_state(pid_t pid)
{
        uint64_t st;
        char state = 0;

        return target_read_stat(pid, &st, &state) == 0 ? state : 0;
}

static int go_pipe[2], exit_pipe[2];

static void *last_thread(void *arg)
{
        char c;

        (void)arg;
        (void)!read(exit_pipe[0], &c, 1);
        _exit(0);
}

/* A process whose main thread has exited while another thread runs: the
 * main thread is a zombie with PF_EXITING and the pidfd is not readable, as
 * during any exit between its start and its end.  target_alive_settled()
 * waits for its end, at most exit_wait_ms. */
START_TEST(test_settled_exit)
{
        struct target_identity id;
        double t0, waited;
        pid_t child;

        ck_assert_int_eq(pipe(go_pipe), 0);
        ck_assert_int_eq(pipe(exit_pipe), 0);
        child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0) {
                pthread_t t;
                char c;

                if (pthread_create(&t, NULL, last_thread, NULL) != 0 || read(go_pipe[0], &c, 1) != 1)
                        _exit(1);
                pthread_exit(NULL);
        }
        close(go_pipe[0]);
        close(exit_pipe[0]);
        ck_assert_int_eq(target_open(child, &id), 0);
        /* A live process, not exiting: no wait. */
        t0 = now_ms();
        ck_assert_int_eq(target_alive_settled(&id, 60000), 1);
        ck_assert_msg(now_ms() - t0 < 30000, "waited for a process that was not exiting");
        ck_assert_int_eq(write(go_pipe[1], "x", 1), 1);
        close(go_pipe[1]);
        t0 = now_ms();
        while (stat_state(child) != 'Z')
                ck_assert_msg(now_ms() - t0 < 10000, "the child's main thread did not exit");
        ck_assert_int_eq(target_alive(&id), 1);
        ck_assert_int_eq(target_alive_settled(&id, 0), 1);
        t0 = now_ms();
        ck_assert_int_eq(target_alive_settled(&id, 100), 1);
        waited = now_ms() - t0;
        ck_assert_msg(waited >= 90, "waited %.1f ms, not 100", waited);
        /* Ends during the wait: gone as soon as it has. */
        ck_assert_int_eq(write(exit_pipe[1], "x", 1), 1);
        t0 = now_ms();
        ck_assert_int_eq(target_alive_settled(&id, 60000), 0);
        ck_assert_msg(now_ms() - t0 < 30000, "the wait outlasted the exit");
        close(exit_pipe[1]);
        waitpid(child, NULL, 0);
        target_close(&id);
}
END_TEST

/* Whether this kernel answers PIDFD_GET_INFO (Linux 6.13). */
static bool kernel_has_pidfd_info(void)
{
        struct cudackpt_pidfd_info info = { .mask = CUDACKPT_PIDFD_INFO_CREDS };
        int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
        bool has;

        ck_assert_int_ge(fd, 0);
        has = ioctl(fd, CUDACKPT_PIDFD_GET_INFO, &info) == 0;
        close(fd);
        return has;
}

static unsigned long long status_value(pid_t pid, const char *key)
{
        char path[64], *buf = NULL;
        unsigned long long v = 0;
        const char *p;

        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        ck_assert_int_gt(test_read_file(path, &buf), 0);
        p = strstr(buf, key);
        ck_assert_ptr_nonnull(p);
        ck_assert_int_eq(sscanf(p + strlen(key), " %llu", &v), 1);
        free(buf);
        return v;
}

/* A child that waits for a byte on fd, then (as root) takes the real,
 * effective and saved uids 4241, 4242 and 4243 and says so with a byte
 * back, then waits to be killed. */
static pid_t uid_child(int go_fd, int done_fd)
{
        pid_t child = fork();

        ck_assert_int_ge(child, 0);
        if (child == 0) {
                char c;
                if (read(go_fd, &c, 1) != 1 || setresuid(4241, 4242, 4243) < 0 || write(done_fd, "x", 1) != 1)
                        _exit(1);
                for (;;)
                        pause();
        }
        return child;
}

/* The user ids, the state and the resident memory of a pinned process,
 * read both ways: through the pidfd and the stat file, and through the
 * status file as on kernels before 6.13; a change of uid is seen by the
 * next refresh either way. */
static void check_identity_reads(bool pidfd_info)
{
        struct target_identity id;
        int go[2], done[2];
        uint64_t rss;
        char c;

        target_use_pidfd_info(pidfd_info);
        ck_assert_int_eq(pipe(go), 0);
        ck_assert_int_eq(pipe(done), 0);
        pid_t child = uid_child(go[0], done[1]);
        ck_assert_int_eq(target_open(child, &id), 0);
        ck_assert_int_ge(id.stat_fd, 0);
        ck_assert_int_ge(id.status_fd, 0);
        ck_assert_uint_eq(id.ruid, getuid());
        ck_assert_uint_eq(id.euid, geteuid());
        ck_assert_int_eq(target_refresh(&id), 0);
        ck_assert_msg(id.state == 'S' || id.state == 'R', "state %c", id.state);
        /* Through the ioctl the status file is not read: a refresh with it
         * closed still works, and fails without the ioctl. */
        if (kernel_has_pidfd_info()) {
                int keep = id.status_fd;
                id.status_fd = -1;
                ck_assert_int_eq(target_refresh(&id), pidfd_info ? 0 : -ESRCH);
                id.status_fd = keep;
        }
        ck_assert_int_eq(target_stopped_after_refresh(&id), 0);
        /* The child may still be touching pages after fork(): compare once
         * its VmRSS holds still around the reading. */
        unsigned long long before, after;
        int tries = 0;
        do {
                before = status_value(child, "\nVmRSS:");
                ck_assert_int_eq(target_rss(&id, &rss), 0);
                after = status_value(child, "\nVmRSS:");
        } while (before != after && ++tries < 1000);
        ck_assert_uint_eq(before, after);
        ck_assert_uint_eq(rss, after * 1024);
        /* Stopped by a signal, then running again. */
        ck_assert_int_eq(kill(child, SIGSTOP), 0);
        siginfo_t si;
        ck_assert_int_eq(waitid(P_PID, (id_t)child, &si, WSTOPPED), 0);
        ck_assert_int_eq(target_stopped(&id), TARGET_STOPPED_SIGNAL);
        ck_assert_int_eq(target_refresh(&id), 0);
        ck_assert_int_eq(target_stopped_after_refresh(&id), TARGET_STOPPED_SIGNAL);
        ck_assert_int_eq(kill(child, SIGCONT), 0);
        ck_assert_int_eq(waitid(P_PID, (id_t)child, &si, WCONTINUED), 0);
        ck_assert_int_eq(target_stopped(&id), 0);
        if (getuid() == 0) {
                ck_assert_int_eq(write(go[1], "x", 1), 1);
                ck_assert_int_eq(read(done[0], &c, 1), 1);
                ck_assert_int_eq(target_refresh(&id), 0);
                ck_assert_uint_eq(id.ruid, 4241);
                ck_assert_uint_eq(id.euid, 4242);
                ck_assert_uint_eq(id.suid, 4243);
        }
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        ck_assert_int_eq(target_refresh(&id), -ESRCH);
        ck_assert_int_lt(target_rss(&id, &rss), 0);
        target_close(&id);
        target_use_pidfd_info(true);
        close(go[0]);
        close(go[1]);
        close(done[0]);
        close(done[1]);
}

START_TEST(test_identity_pidfd_info)
{
        check_identity_reads(true);
}
END_TEST

START_TEST(test_identity_status_file)
{
        check_identity_reads(false);
}
END_TEST

/* The ids through the pidfd count only when the pidfd names the process
 * the files were opened by; otherwise (and whenever the ioctl refuses a
 * process that lives) the pinned status file answers. */
START_TEST(test_identity_pidfd_of_another_process)
{
        struct target_identity a, b;
        int go[2], done[2];
        char c;

        if (getuid() != 0)
                return; /* needs setresuid() */
        ck_assert_int_eq(pipe(go), 0);
        ck_assert_int_eq(pipe(done), 0);
        pid_t pa = uid_child(go[0], done[1]);
        pid_t pb = uid_child(go[0], done[1]);
        ck_assert_int_eq(target_open(pa, &a), 0);
        ck_assert_int_eq(target_open(pb, &b), 0);
        ck_assert_int_eq(write(go[1], "x", 1), 1); /* one of them takes the uids */
        ck_assert_int_eq(read(done[0], &c, 1), 1);
        ck_assert_int_eq(target_refresh(&a), 0);
        ck_assert_int_eq(target_refresh(&b), 0);
        struct target_identity *changed = a.ruid == 4241 ? &a : &b, *kept = changed == &a ? &b : &a;
        ck_assert_uint_eq(changed->ruid, 4241);
        ck_assert_uint_eq(kept->ruid, 0);
        /* The kept one's files with the changed one's pidfd: its own ids. */
        int swap = kept->pidfd;
        kept->pidfd = changed->pidfd;
        ck_assert_int_eq(target_refresh(kept), 0);
        ck_assert_uint_eq(kept->ruid, 0);
        ck_assert_uint_eq(kept->suid, 0);
        kept->pidfd = swap;
        kill(pa, SIGKILL);
        kill(pb, SIGKILL);
        waitpid(pa, NULL, 0);
        waitpid(pb, NULL, 0);
        target_close(&a);
        target_close(&b);
        close(go[0]);
        close(go[1]);
        close(done[0]);
        close(done[1]);
}
END_TEST

const char unit_suite_name[] = "target";

void unit_tests(TCase *tc)
{
        tcase_add_test(tc, test_parse_stat);
        tcase_add_test(tc, test_parse_flags);
        tcase_add_test(tc, test_parse_uids);
        tcase_add_test(tc, test_pin_and_exit);
        tcase_add_test(tc, test_settled_exit);
        tcase_add_test(tc, test_identity_pidfd_info);
        tcase_add_test(tc, test_identity_status_file);
        tcase_add_test(tc, test_identity_pidfd_of_another_process);
}
