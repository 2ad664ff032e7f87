/* test_criu_runflags.c: the options cudackptd starts a user's job with
 * (cudackptctl run --env-fd, --chdir, --output-as-user, --ready-fd,
 * --die-with-parent, --cgroups-of): the command gets exactly the given
 * environment, in the given directory, its output opened as the user; the
 * ready line names the job's init; the job ends with the process that
 * started run, or on SIGRTMIN+2; it joins the cgroups of a pidfd's
 * process, and a pidfd of a process that has ended fails the start.
 *
 * Skips as integration.criu does (citest_probe). */
#include "criu_run_itest.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The environment cudackptd gives the command (the last entry without
 * its NUL, as allowed). */
static const char job_env[] = "A=1\0PATH=/usr/bin:/bin\0B=x y";

/* A pipe holding text, its write end closed: the read end. */
static int pipe_of(const char *text, size_t len)
{
        int p[2];
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        ck_assert_int_eq(write(p[1], text, len), (ssize_t)len);
        close(p[1]);
        return p[0];
}

/* A directory DIR/name of mode, its path. */
static const char *dir_of(struct citest_ctx *x, const char *name, mode_t mode)
{
        const char *d = itest_strdupf("%s/%s", x->d->dir, name);
        ck_assert_int_eq(mkdir(d, 0700), 0);
        ck_assert_int_eq(chmod(d, mode), 0);
        return d;
}

START_TEST(run_env_chdir_output_ready)
{
        struct citest_ctx x;
        citest_setup(&x);
        const char *const *env = crun_env_plus(&x, "ROOT_SECRET=hunter2");
        /* The user's directory (its own), and one it writes its output in. */
        const char *work = dir_of(&x, "work", 0755), *out_dir = dir_of(&x, "out", 01777);
        ck_assert_int_eq(chown(work, 65534, 65534), 0);
        const char *log = itest_strdupf("%s/job.log", out_dir);
        int ready[2];
        ck_assert_int_eq(pipe2(ready, O_CLOEXEC), 0);
        int fds[] = { pipe_of(job_env, sizeof(job_env) - 1), ready[1] };
        /* sh's environment as it was exec'd, then it holds on. */
        const char *const args[] = { "--name", "envjob", "--no-cgroup", "--user=65534:65534", "--env-fd=3",
                                     itest_strdupf("--chdir=%s", work), itest_strdupf("--output-as-user=%s", log),
                                     "--ready-fd=4", "--die-with-parent", "--", "/bin/sh", "-c",
                                     "pwd; tr '\\0' '\\n' < /proc/$$/environ; echo end; exec sleep 1000", NULL };
        pid_t run = crun_spawn_fds(env, itest_strdupf("%s/run.out", x.d->dir), "run", args, fds, 2);
        close(fds[0]);
        close(ready[1]);
        uint64_t start = 0, rec_start = 0;
        pid_t init = crun_ready_pid(crun_read_all(ready[0]), "envjob", &start);
        close(ready[0]);
        ck_assert_int_eq(crun_init_of(&x, "envjob", &rec_start), init);
        ck_assert(rec_start == start);
        double deadline = itest_now_ms() + AWAIT_MS;
        char *out;
        while (!(out = citest_slurp_raw(log)) || !strstr(out, "\nend\n")) {
                free(out);
                ck_assert_msg(itest_now_ms() < deadline, "no output in %s within %d ms", log, AWAIT_MS);
                poll(NULL, 0, 5);
        }
        itest_keep(out);
        const char *want = itest_strdupf("%s\nA=1\nPATH=/usr/bin:/bin\nB=x y\nend\n", work);
        ck_assert_msg(strcmp(out, want) == 0, "the job printed \"%s\", not \"%s\"", out, want);
        struct stat s;
        ck_assert_int_eq(stat(log, &s), 0);
        ck_assert_msg(s.st_uid == 65534 && (s.st_mode & 07777) == 0644, "%s: uid %u mode %o", log,
                      (unsigned)s.st_uid, (unsigned)(s.st_mode & 07777));
        /* --die-with-parent's signal, as cudackptd sends it. */
        ck_assert_int_eq(kill(run, SIGRTMIN + 2), 0);
        int st = cjob_wait(run);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 137, "run ended with wait status %#x", st);
        citest_await_gone(init, AWAIT_MS);
}
END_TEST

/* run ARGS (--ready-fd=3 among them; fds[1..n) its fd 4 on) refused:
 * exit status 125, said (stderr holds said), no ready line. */
static void expect_refused(struct citest_ctx *x, const char *const *args, int *fds, size_t n, const char *said)
{
        int ready[2];
        ck_assert_int_eq(pipe2(ready, O_CLOEXEC), 0);
        fds[0] = ready[1];
        const char *out = itest_strdupf("%s/run-refused.out", x->d->dir);
        pid_t run = crun_spawn_fds(crun_env(x), out, "run", args, fds, n);
        close(ready[1]);
        const char *line = crun_read_all(ready[0]);
        close(ready[0]);
        int st = cjob_wait(run);
        char *text = citest_slurp(out);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 125 && text && strstr(text, said),
                      "run ended with wait status %#x: %s", st, text ? text : "");
        ck_assert_msg(!*line, "a ready line for a job that did not start: %s", line);
}

/* --chdir to a directory the user may not enter: the start fails (125),
 * said, and no ready line is written. */
START_TEST(run_chdir_refused)
{
        struct citest_ctx x;
        citest_setup(&x);
        const char *closed = dir_of(&x, "closed", 0700);
        int fds[1];
        const char *const args[] = { "--name", "closed", "--no-cgroup", "--user=65534:65534",
                                     itest_strdupf("--chdir=%s", closed), "--ready-fd=3", "--", "/bin/true", NULL };
        expect_refused(&x, args, fds, 1, "--chdir");
}
END_TEST

/* --env-fd's bounds and form: each refused before the job starts. */
START_TEST(run_env_refused)
{
        struct citest_ctx x;
        citest_setup(&x);
        size_t big = 256 * 1024 + 1, many = 4097 * 4;
        char *huge = itest_keep(malloc(big)), *lots = itest_keep(malloc(many));
        ck_assert(huge && lots);
        memset(huge, 'v', big);
        memcpy(huge, "K=", 2);
        for (size_t i = 0; i < many; i += 4)
                memcpy(lots + i, "K=v", 4);
        const struct {
                const char *text;
                size_t len;
                const char *said;
        } cases[] = {
                { "A=1\0NOEQUALS", 12, "entry 2 is not KEY=VALUE" },
                { "=x\0", 3, "entry 1 is not KEY=VALUE" },
                { "A=1\0\0B=2", 8, "entry 2 is not KEY=VALUE" },
                { lots, many, "more than 4096 entries" },
                { huge, big, "more than 262144 bytes" },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                const char *path = itest_strdupf("%s/env-%zu", x.d->dir, i);
                int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
                ck_assert(fd >= 0 && write(fd, cases[i].text, cases[i].len) == (ssize_t)cases[i].len &&
                          lseek(fd, 0, SEEK_SET) == 0);
                int fds[] = { -1, fd };
                const char *const args[] = { "--name", "badenv", "--no-cgroup", "--user=65534:65534", "--ready-fd=3",
                                             "--env-fd=4", "--", "/bin/true", NULL };
                expect_refused(&x, args, fds, 2, cases[i].said);
                close(fd);
        }
}
END_TEST

/* A process that waits to be killed; its pid. */
static pid_t start_pauser(void)
{
        pid_t c = fork();
        ck_assert_int_ge(c, 0);
        if (c == 0) {
                for (;;)
                        pause();
        }
        return c;
}

/* The process that starts run (as cudackptd's loop does) is killed: the
 * job's init ends, within a bound. */
START_TEST(run_die_with_parent)
{
        struct citest_ctx x;
        citest_setup(&x);
        const char *const *env = crun_env(&x);
        int ready[2];
        ck_assert_int_eq(pipe2(ready, O_CLOEXEC), 0);
        pid_t parent = fork();
        ck_assert_int_ge(parent, 0);
        if (parent == 0) {
                int fds[] = { ready[1] };
                const char *const args[] = { "--name", "orphan", "--no-cgroup", "--ready-fd=3", "--die-with-parent",
                                             "--", "/bin/sleep", "1000", NULL };
                crun_spawn_fds(env, itest_strdupf("%s/run.out", x.d->dir), "run", args, fds, 1);
                close(ready[1]);
                for (;;)
                        pause();
        }
        close(ready[1]);
        pid_t init = crun_ready_pid(crun_read_all(ready[0]), "orphan", NULL);
        close(ready[0]);
        ck_assert_int_eq(kill(parent, SIGKILL), 0);
        ck_assert_int_eq(waitpid(parent, NULL, 0), parent);
        citest_await_gone(init, AWAIT_MS);
}
END_TEST

/* --cgroups-of: the job's init and command in every cgroup of a process
 * (a cgroup v2 one made here, and this machine's v1 ones); a pidfd of a
 * process that has ended fails the start. */
START_TEST(run_cgroups_of)
{
        struct citest_ctx x;
        citest_setup(&x);
        const char *mnt = crun_cgroup2(&x, "run_cgroups_of");
        if (!mnt) {
                itest_skip("no cgroup2");
                return;
        }
        const char *cg = itest_strdupf("%s/slurmjob-%d", mnt, (int)getpid());
        ck_assert_int_eq(mkdir(cg, 0755), 0);
        pid_t step = start_pauser();
        FILE *f = fopen(itest_strdupf("%s/cgroup.procs", cg), "we");
        ck_assert(f && fprintf(f, "%d\n", (int)step) > 0 && fclose(f) == 0);
        int pidfd = (int)syscall(SYS_pidfd_open, step, 0), ready[2];
        ck_assert_int_ge(pidfd, 0);
        ck_assert_int_eq(pipe2(ready, O_CLOEXEC), 0);
        int fds[] = { pidfd, ready[1] };
        const char *const args[] = { "--name", "joined", "--cgroups-of=3", "--ready-fd=4", "--", "/bin/sleep",
                                     "1000", NULL };
        pid_t run = crun_spawn_fds(crun_env(&x), itest_strdupf("%s/run.out", x.d->dir), "run", args, fds, 2);
        close(ready[1]);
        pid_t init = crun_ready_pid(crun_read_all(ready[0]), "joined", NULL), pids[3];
        close(ready[0]);
        ck_assert_int_eq(crun_job_pids(init, pids, 3), 2);
        const char *want = citest_slurp(itest_strdupf("/proc/%d/cgroup", (int)step));
        ck_assert_msg(want && strstr(want, itest_strdupf("0::/slurmjob-%d\n", (int)getpid())), "the step's cgroups: %s",
                      want ? want : "");
        for (int i = 0; i < 2; i++) {
                const char *got = citest_slurp(itest_strdupf("/proc/%d/cgroup", (int)pids[i]));
                ck_assert_msg(got && strcmp(got, want) == 0, "pid %d of the job is in\n%s\nnot in the step's\n%s",
                              (int)pids[i], got ? got : "", want);
        }
        ck_assert_int_eq(kill(init, SIGKILL), 0);
        cjob_wait(run);

        /* The step has ended (reaped): its pidfd names no process. */
        ck_assert_int_eq(kill(step, SIGKILL), 0);
        ck_assert_int_eq(waitpid(step, NULL, 0), step);
        int dead_fds[] = { -1, pidfd };
        const char *const dead[] = { "--name", "dead", "--ready-fd=3", "--cgroups-of=4", "--", "/bin/true", NULL };
        expect_refused(&x, dead, dead_fds, 2, "ended");
        rmdir(cg);
        umount2(mnt, MNT_DETACH);
}
END_TEST

int main(void)
{
        const TTest *tests[] = { run_env_chdir_output_ready, run_chdir_refused, run_env_refused, run_die_with_parent,
                                 run_cgroups_of, NULL };

        return citest_main("criu_runflags", 4.0 * JOB_TIMEOUT_MS / 1000, tests);
}
