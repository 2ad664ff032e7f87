/* Unit tests: client/ctl/nodes/stepdescent.c, whether a process descends
 * from a slurmstepd of job J: which command lines are a slurmstepd's (of
 * the job, of another); outside any Slurm step there is no reference; and
 * (as root) the walk itself, on a real tree: a process under a root
 * process titled "slurmstepd: [J.0]" (sh's argv[0]) descends from J's, not
 * from another job's, not when its start time is not the one given, not
 * when the reference is another program, and not under a process of
 * another user with the same title. */
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

/* A sleep whose parent is pid, or 0. */
static int child_of(int pid) {
        DIR *proc = opendir("/proc");
        struct dirent *e;
        int found = 0;

        ck_assert_ptr_nonnull(proc);
        while (!found && (e = readdir(proc))) {
                char path[300], buf[1024];
                int fd, ppid;
                ssize_t n;

                snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
                if (e->d_name[0] < '1' || e->d_name[0] > '9' || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
                        continue;
                n = read(fd, buf, sizeof(buf) - 1);
                close(fd);
                buf[n > 0 ? n : 0] = '\0';
                if (n > 0 && procfs_stat_ppid(buf, &ppid) == 0 && ppid == pid && strstr(buf, "(sleep)"))
                        found = atoi(e->d_name);
        }
        closedir(proc);
        return found;
}

/* A child of a new sh titled title (as uid), running sleep: the sh's pid
 * into *ret_sh, the sleep's returned. */
static int titled_tree(const char *title, uid_t uid, int *ret_sh, int *ret_in) {
        int fds[2];
        pid_t sh;

        ck_assert_int_eq(pipe(fds), 0);
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
        ck_assert_int_eq(write(fds[1], "sleep 30\n", 9), 9);
        *ret_sh = sh;
        *ret_in = fds[1];
        /* Its child: the sleep whose parent is sh. */
        for (int i = 0; i < 500; i++) {
                int found = child_of(sh);
                if (found > 0)
                        return found;
                usleep(10000);
        }
        ck_abort_msg("no child of the titled sh");
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
        child = titled_tree("slurmstepd: [" JOB ".0]", 0, &sh, &in);
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
        child = titled_tree("slurmstepd: [" JOB ".0]", 65534, &sh, &in);
        reference(&d, JOB);
        ck_assert(!stepdescent_of(&d, child, start_of(child)));
        end_tree(sh, in, child);
}
END_TEST

const char unit_suite_name[] = "stepdescent";

void unit_tests(TCase *tc) {
        tcase_add_test(tc, cmdline_kinds);
        tcase_add_test(tc, no_reference_outside_a_step);
        tcase_add_test(tc, walk_to_a_root_slurmstepd);
        tcase_add_test(tc, no_walk_to_a_user_titled_slurmstepd);
}
