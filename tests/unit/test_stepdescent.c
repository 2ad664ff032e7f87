/* Unit tests: client/ctl/nodes/stepdescent.c, whether a process descends
 * from a slurmstepd of job J: which command lines are a slurmstepd's (of
 * the job, of another); outside any Slurm step there is no reference; and
 * (as root) the walk itself, on a real tree: a process under a root
 * process titled "slurmstepd: [J.0]" (sh's argv[0]) descends from J's, not
 * from another job's, not when its start time is not the one given, not
 * when the reference is another program, and not under a process of
 * another user with the same title; one exactly STEPDESCENT_MAX_DEPTH
 * links below it does, one link more does not. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runner.h"

#include "procfs.h"
#include "stepdescent.h"

#define JOB "9999999998"

static stepdescent_kind kind(const char *s, size_t len) {
        return stepdescent_cmdline_kind(s, len, "42");
}

START_TEST(cmdline_kinds) {
        static const char padded[] = "slurmstepd: [42.batch]\0\0\0\0";

        ck_assert_int_eq(kind("slurmstepd: [42.0]", 19), STEPDESCENT_JOB);
        ck_assert_int_eq(kind("slurmstepd: [42.0]", 18), STEPDESCENT_JOB); /* no NUL at the end */
        ck_assert_int_eq(kind(padded, sizeof(padded) - 1), STEPDESCENT_JOB);
        ck_assert_int_eq(kind("slurmstepd: [42.extern]", 24), STEPDESCENT_JOB);
        ck_assert_int_eq(kind("slurmstepd: [42.interactive]", 29), STEPDESCENT_JOB);
        ck_assert_int_eq(kind("slurmstepd: [42.4294967294]", 28), STEPDESCENT_JOB);
        ck_assert_int_eq(kind("slurmstepd: [43.0]", 19), STEPDESCENT_OTHER);
        ck_assert_int_eq(kind("slurmstepd: [420.0]", 20), STEPDESCENT_OTHER);
        ck_assert_int_eq(kind("slurmstepd: [4.batch]", 22), STEPDESCENT_OTHER);
        /* More than the title, or not the title's form. */
        ck_assert_int_eq(kind("slurmstepd: [42.0]\0-c", 21), STEPDESCENT_NONE);
        ck_assert_int_eq(kind("slurmstepd: [42.0] ", 20), STEPDESCENT_NONE);
        ck_assert_int_eq(kind("slurmstepd: [42]", 17), STEPDESCENT_NONE);
        ck_assert_int_eq(kind("slurmstepd: [42.]", 18), STEPDESCENT_NONE);
        ck_assert_int_eq(kind("slurmstepd: [.0]", 17), STEPDESCENT_NONE);
        ck_assert_int_eq(kind("slurmstepd: [4x.0]", 19), STEPDESCENT_NONE);
        ck_assert_int_eq(kind("slurmstepd: [42.bat]", 21), STEPDESCENT_NONE);
        ck_assert_int_eq(kind("slurmstepd: [42.0+1]", 21), STEPDESCENT_NONE);
        ck_assert_int_eq(kind("slurmstepd: [42.12345678901]", 28), STEPDESCENT_NONE);
        ck_assert_int_eq(kind("/usr/sbin/slurmstepd", 21), STEPDESCENT_NONE);
        ck_assert_int_eq(kind("", 0), STEPDESCENT_NONE);
}
END_TEST

START_TEST(no_reference_outside_a_step) {
        stepdescent d;

        ck_assert_int_eq(stepdescent_init(&d, "4x"), -EINVAL);
        ck_assert_int_eq(stepdescent_init(&d, ""), -EINVAL);
        /* No slurmstepd of this job above the test. */
        ck_assert_int_eq(stepdescent_init(&d, JOB), -ESRCH);
        ck_assert(!stepdescent_of(&d, getpid(), 0));
}
END_TEST

static uint64_t start_of(int pid) {
        char path[64], buf[1024];
        uint64_t start = 0;
        ssize_t n;
        int fd;

        snprintf(path, sizeof(path), "/proc/%d/stat", pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        ck_assert_int_gt(n, 0);
        buf[n] = '\0';
        ck_assert_int_eq(procfs_stat_u64(buf, 22, &start), 0);
        return start;
}

static int ppid_of(int pid) {
        char path[64], buf[1024];
        ssize_t n;
        int fd, ppid;

        snprintf(path, sizeof(path), "/proc/%d/stat", pid);
        if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
                return -1;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        buf[n > 0 ? n : 0] = '\0';
        return n > 0 && strstr(buf, "(sleep)") && procfs_stat_ppid(buf, &ppid) == 0 ? ppid : -1;
}

/* A sleep below pid (at most 200 links down), its links up to pid into
 * *ret_depth; or 0. */
static int sleep_below(int pid, int *ret_depth) {
        DIR *proc = opendir("/proc");
        struct dirent *e;
        int found = 0;

        ck_assert_ptr_nonnull(proc);
        while (!found && (e = readdir(proc))) {
                int p = atoi(e->d_name), up = ppid_of(p);
                char path[64], buf[1024];

                for (int depth = 1; up > 0 && depth <= 200; depth++) {
                        if (up == pid) {
                                found = p;
                                *ret_depth = depth;
                                break;
                        }
                        /* The links above the sleep: any process's parent. */
                        snprintf(path, sizeof(path), "/proc/%d/stat", up);
                        int fd = open(path, O_RDONLY | O_CLOEXEC);
                        ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
                        if (fd >= 0)
                                close(fd);
                        buf[n > 0 ? n : 0] = '\0';
                        if (n <= 0 || procfs_stat_ppid(buf, &up) < 0)
                                break;
                }
        }
        closedir(proc);
        return found;
}

/* A new sh titled title (as uid) running script, which starts a sleep:
 * the sh's pid into *ret_sh, its input into *ret_in, the sleep's links up
 * to sh into *ret_depth (when not NULL); the sleep's pid returned. */
static int titled_tree(const char *title, uid_t uid, const char *script, int *ret_sh, int *ret_in, int *ret_depth) {
        int fds[2], depth;
        pid_t sh;

        /* Close-on-exec: another tree's shells must not hold this input open. */
        ck_assert_int_eq(pipe2(fds, O_CLOEXEC), 0);
        sh = fork();
        ck_assert_int_ge(sh, 0);
        if (sh == 0) {
                int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

                /* sh's word of its child killed goes nowhere. */
                dup2(fds[0], 0);
                dup2(null, 2);
                close(fds[0]);
                close(fds[1]);
                if (uid && (setgid(uid) < 0 || setuid(uid) < 0))
                        _exit(127);
                execl("/bin/sh", title, (char *)NULL);
                _exit(127);
        }
        close(fds[0]);
        ck_assert_int_eq(write(fds[1], script, strlen(script)), (ssize_t)strlen(script));
        *ret_sh = sh;
        *ret_in = fds[1];
        for (int i = 0; i < 500; i++) {
                int found = sleep_below(sh, &depth);
                if (found > 0) {
                        if (ret_depth)
                                *ret_depth = depth;
                        return found;
                }
                usleep(10000);
        }
        ck_abort_msg("no sleep below the titled sh");
        return -1;
}

static void end_tree(int sh, int in, int child) {
        kill(child, SIGKILL);
        close(in);
        waitpid(sh, NULL, 0);
}

static void reference(stepdescent *d, const char *job) {
        ssize_t n;

        memset(d, 0, sizeof(*d));
        snprintf(d->job, sizeof(d->job), "%s", job);
        n = readlink("/proc/self/ns/uts", d->uts, sizeof(d->uts) - 1);
        ck_assert_int_gt(n, 0);
        d->uts[n] = '\0';
}

START_TEST(walk_to_a_root_slurmstepd) {
        stepdescent d;
        struct stat st;
        char path[64];
        int sh, in, child;

        if (geteuid() != 0)
                return; /* only root makes a process of uid 0 */
        child = titled_tree("slurmstepd: [" JOB ".0]", 0, "sleep 30\n", &sh, &in, NULL);
        reference(&d, JOB);
        ck_assert(stepdescent_of(&d, child, start_of(child)));
        ck_assert(!stepdescent_of(&d, child, start_of(child) + 1));
        ck_assert(!stepdescent_of(&d, sh, start_of(sh)));
        /* Another job's slurmstepd ends the walk. */
        reference(&d, "9999999997");
        ck_assert(!stepdescent_of(&d, child, start_of(child)));
        /* The same program as the reference, where the reference's is known. */
        reference(&d, JOB);
        snprintf(path, sizeof(path), "/proc/%d/exe", sh);
        ck_assert_int_eq(stat(path, &st), 0);
        d.exe_known = true;
        d.exe_dev = st.st_dev;
        d.exe_ino = st.st_ino;
        ck_assert(stepdescent_of(&d, child, start_of(child)));
        d.exe_ino++;
        ck_assert(!stepdescent_of(&d, child, start_of(child)));
        /* Another host name's namespace. */
        reference(&d, JOB);
        snprintf(d.uts, sizeof(d.uts), "uts:[1]");
        ck_assert(!stepdescent_of(&d, child, start_of(child)));
        end_tree(sh, in, child);
}
END_TEST

START_TEST(no_walk_to_a_user_titled_slurmstepd) {
        stepdescent d;
        int sh, in, child;

        if (geteuid() != 0)
                return;
        child = titled_tree("slurmstepd: [" JOB ".0]", 65534, "sleep 30\n", &sh, &in, NULL);
        reference(&d, JOB);
        ck_assert(!stepdescent_of(&d, child, start_of(child)));
        end_tree(sh, in, child);
}
END_TEST

/* A chain of n + 1 shells below the titled sh (each its own program: a
 * subshell would keep the title), a sleep at its end. */
static int deep_tree(int n, int *ret_sh, int *ret_in, int *ret_depth) {
        char script[200];

        snprintf(script, sizeof(script),
                 "s='if [ $1 -gt 0 ]; then sh -c \"$s\" sh $(($1 - 1)); true; else sleep 30; true; fi'; "
                 "export s; sh -c \"$s\" sh %d\n", n);
        return titled_tree("slurmstepd: [" JOB ".0]", 0, script, ret_sh, ret_in, ret_depth);
}

START_TEST(walk_bounded) {
        stepdescent d;
        int sh, in, child, depth, sh2, in2, child2, depth2;

        if (geteuid() != 0)
                return;
        reference(&d, JOB);
        child = deep_tree(STEPDESCENT_MAX_DEPTH - 2, &sh, &in, &depth);
        child2 = deep_tree(STEPDESCENT_MAX_DEPTH - 1, &sh2, &in2, &depth2);
        /* The titled sh exactly at the bound, and one link past it. */
        ck_assert_int_eq(depth, STEPDESCENT_MAX_DEPTH);
        ck_assert_int_eq(depth2, STEPDESCENT_MAX_DEPTH + 1);
        ck_assert(stepdescent_of(&d, child, start_of(child)));
        ck_assert(!stepdescent_of(&d, child2, start_of(child2)));
        end_tree(sh, in, child);
        end_tree(sh2, in2, child2);
}
END_TEST

const char unit_suite_name[] = "stepdescent";

void unit_tests(TCase *tc) {
        /* The deep chains start 130 shells. */
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, cmdline_kinds);
        tcase_add_test(tc, no_reference_outside_a_step);
        tcase_add_test(tc, walk_to_a_root_slurmstepd);
        tcase_add_test(tc, no_walk_to_a_user_titled_slurmstepd);
        tcase_add_test(tc, walk_bounded);
}
