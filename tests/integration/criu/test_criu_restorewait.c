/* test_criu_restorewait.c: the options cudackptd dumps and restores a
 * user's job with: dump --owner refuses another uid's job before
 * suspending anything (the job runs on); restore --owner refuses another
 * uid's images before restoring anything; restore --wait stays the
 * restored job's parent, forwards SIGTERM to it and ends with its exit
 * status, --ready-fd names the restored init, --cgroups-of leaves the
 * restored job in a pidfd's process's cgroups, --die-with-parent ends it.
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

/* The job: ends with 7 on SIGTERM. */
static const char job_script[] = "trap 'exit 7' TERM; sleep 1000 & echo up; wait";

/* A process in the cgroup v2 cgroup cg (made), as a Slurm step is: its
 * pid; a pidfd of it in *ret_pidfd. */
static pid_t start_step(const char *cg, int *ret_pidfd)
{
        ck_assert_int_eq(mkdir(cg, 0755), 0);
        pid_t c = fork();
        ck_assert_int_ge(c, 0);
        if (c == 0) {
                for (;;)
                        pause();
        }
        FILE *f = fopen(itest_strdupf("%s/cgroup.procs", cg), "we");
        ck_assert(f && fprintf(f, "%d\n", (int)c) > 0 && fclose(f) == 0);
        *ret_pidfd = (int)syscall(SYS_pidfd_open, c, 0);
        ck_assert_int_ge(*ret_pidfd, 0);
        return c;
}

/* restore --images --owner=0 --wait --ready-fd=3 [more]: started, the job
 * restored; its init (from the ready line, checked against its record). */
static pid_t restore_waiting(struct citest_ctx *x, const char *const *more, int extra_fd, pid_t *ret_restore)
{
        int ready[2];
        ck_assert_int_eq(pipe2(ready, O_CLOEXEC), 0);
        int fds[] = { ready[1], extra_fd };
        const char *args[12] = { "--images", x->img, "--owner=0", "--wait", "--ready-fd=3" };
        size_t n = 5;
        for (; more && *more; more++)
                args[n++] = *more;
        args[n] = NULL;
        *ret_restore = crun_spawn_fds(crun_env(x), itest_strdupf("%s/restore.out", x->d->dir), "restore", args,
                                      fds, extra_fd >= 0 ? 2 : 1);
        close(ready[1]);
        const char *line = crun_read_all(ready[0]);
        close(ready[0]);
        if (!*line)
                fprintf(stderr, "restore said: %s\n", citest_slurp(itest_strdupf("%s/restore.out", x->d->dir)));
        uint64_t start = 0, rec_start = 0;
        pid_t init = crun_ready_pid(line, "waited", &start);
        ck_assert_int_eq(crun_init_of(x, "waited", &rec_start), init);
        ck_assert(start == rec_start);
        return init;
}

/* Restored again with --wait --die-with-parent, ended by its signal. */
static void restore_dies(struct citest_ctx *x)
{
        const char *const die[] = { "--die-with-parent", NULL };
        pid_t restore, init = restore_waiting(x, die, -1, &restore);
        ck_assert_int_eq(kill(restore, SIGRTMIN + 2), 0);
        int st = cjob_wait(restore);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 137, "restore --wait ended with wait status %#x", st);
        citest_await_gone(init, AWAIT_MS);
}

START_TEST(owner_and_wait)
{
        struct citest_ctx x;
        citest_setup(&x);
        const char *const *env = crun_env(&x);
        const char *log = crun_log(&x, "waited"), *record = itest_strdupf("%s/runs/waited", x.d->dir);
        /* The job in a cgroup v2 cgroup of its own (criu would restore it
         * there), restored into a Slurm step's. */
        const char *mnt = crun_cgroup2(&x, "owner_and_wait: --cgroups-of part"), *jobs = NULL;
        bool cg2 = mnt != NULL;
        if (cg2)
                jobs = itest_strdupf("%s/jobs-%d", mnt, (int)getpid());
        const char *const args[] = { "--name", "waited", cg2 ? itest_strdupf("--cgroup-parent=%s", jobs) : "--no-cgroup",
                                     "--user=0:0", itest_strdupf("--output=%s", log), "--", "/bin/sh", "-c",
                                     job_script, NULL };
        pid_t run = crun_start(env, itest_strdupf("%s/run.out", x.d->dir), -1, args);
        pid_t init = crun_init_of(&x, "waited", NULL);
        crun_await_text(log, "up\n");

        /* Another uid's job: refused, nothing suspended, nothing dumped. */
        struct citest_run *res = cjob_ctl(env, "dump", "--run", "waited", "--owner=65534", "--images", x.img, NULL);
        assert_run(res->status == 12 && strstr(res->out, "--owner"), res, "dump --owner=65534: %d", res->status);
        ck_assert_int_eq(kill(init, 0), 0);
        ck_assert_int_ne(access(itest_strdupf("%s/manifest.json", x.img), F_OK), 0);
        char state;
        pid_t pids[4], ppid;
        ck_assert_int_eq(crun_job_pids(init, pids, 4), 3);
        for (int i = 0; i < 3; i++)
                ck_assert(citest_proc_stat(pids[i], &state, &ppid) && state != 'T');

        cjob_expect_ok(cjob_ctl(env, "dump", "--run", "waited", "--owner=0", "--images", x.img, NULL), "dump --owner=0");
        cjob_wait(run);
        ck_assert_int_ne(access(record, F_OK), 0);

        /* Another uid's images: refused, nothing restored. */
        res = cjob_ctl(env, "restore", "--images", x.img, "--owner=65534", NULL);
        assert_run(res->status == 12 && strstr(res->out, "--owner"), res, "restore --owner=65534: %d", res->status);
        ck_assert_int_ne(access(record, F_OK), 0);

        /* In a Slurm step's cgroups, this command its parent. */
        int pidfd = -1;
        pid_t step = cg2 ? start_step(itest_strdupf("%s/step-%d", mnt, (int)getpid()), &pidfd) : -1, restore;
        const char *const cg_args[] = { "--cgroups-of=4", NULL };
        init = restore_waiting(&x, cg2 ? cg_args : NULL, pidfd, &restore);
        ck_assert_int_eq(citest_proc_stat(init, &state, &ppid), true);
        ck_assert_int_eq(ppid, restore);
        if (cg2) {
                const char *want = citest_slurp(itest_strdupf("/proc/%d/cgroup", (int)step));
                ck_assert_int_eq(crun_job_pids(init, pids, 4), 3);
                for (int i = 0; i < 3; i++) {
                        const char *got = citest_slurp(itest_strdupf("/proc/%d/cgroup", (int)pids[i]));
                        ck_assert_msg(got && strcmp(got, want) == 0, "restored pid %d is in\n%s\nnot in the step's\n%s",
                                      (int)pids[i], got ? got : "", want);
                }
        }
        ck_assert_int_eq(kill(restore, SIGTERM), 0);
        int st = cjob_wait(restore);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 7, "restore --wait ended with wait status %#x", st);
        citest_await_gone(init, AWAIT_MS);
        ck_assert_int_ne(access(record, F_OK), 0);

        restore_dies(&x);
        if (cg2) {
                kill(step, SIGKILL);
                waitpid(step, NULL, 0);
                rmdir(itest_strdupf("%s/step-%d", mnt, (int)getpid()));
                /* The second restore's, made by criu. */
                rmdir(itest_strdupf("%s/waited", jobs));
                rmdir(jobs);
                umount2(mnt, MNT_DETACH);
        }
}
END_TEST

int main(void)
{
        const TTest *tests[] = { owner_and_wait, NULL };

        return citest_main("criu_restorewait", 8.0 * JOB_TIMEOUT_MS / 1000, tests);
}
