/* test_criu_restoreaccess.c: restore --owner (what cudackptd's RestoreJob
 * runs) refuses a job whose files were swapped after its dump for ones its
 * owner may not open.  CRIU reopens a job's files and working directory by
 * their paths, as root, comparing only a file's size and mode: the job's
 * own file, replaced by a symlink to another uid's file of the same size
 * and mode, came back open in the job; its working directory, replaced by
 * a symlink into a directory the owner may not search, came back as its
 * working directory; a file it mapped, swapped so, came back mapped; its
 * output (O_WRONLY | O_APPEND, whose size CRIU does not compare), swapped
 * for another uid's file of any size, came back open for writing: a
 * user's job so restored could append to /etc/passwd; the directory of
 * a socket it had bound, swapped so, got the socket bound again in it by
 * CRIU, as root: a file made where its user may not write (which CRIU
 * leaves there: the check can only keep the job from running so); a
 * file it had sent over a unix socket and not received, swapped so, came
 * back in flight, for the job to receive.  Each
 * is refused (exit status 12, the path said),
 * the restored processes ended before they ran, and the same images,
 * their files put back, restore.
 *
 * The job is root's (here criu cannot dump another uid's job without
 * CAP_SYS_RESOURCE); the check takes the owner's uid with no capability,
 * so uid 0 may no more open another uid's 0600 file than any user may.
 *
 * Skips as integration.criu does (citest_probe). */
#include "criu_run_itest.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A file of uid's, mode 0600, of these 11 bytes. */
static void make_file(const char *path, uid_t uid, const char *text)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, text, 11), 11);
        ck_assert_int_eq(fchown(fd, uid, uid), 0);
        ck_assert_int_eq(fchmod(fd, 0600), 0);
        close(fd);
}

/* Whether any process of the job "acc" holds path open, mapped or as its
 * working directory (a job restored against the check). */
static bool job_holds(struct citest_ctx *x, const char *path)
{
        char *rec = citest_slurp_raw(itest_strdupf("%s/runs/acc", x->d->dir));
        if (!rec)
                return false;
        free(rec);
        pid_t pids[8];
        size_t n = crun_job_pids(crun_init_of(x, "acc", NULL), pids, 8);
        for (size_t i = 0; i < n; i++) {
                char got[PATH_MAX];
                ssize_t k = readlink(itest_strdupf("/proc/%d/cwd", (int)pids[i]), got, sizeof(got) - 1);
                if (k > 0 && (got[k] = '\0', strcmp(got, path) == 0))
                        return true;
                for (int fd = 1; fd <= 3; fd++) {
                        k = readlink(itest_strdupf("/proc/%d/fd/%d", (int)pids[i], fd), got, sizeof(got) - 1);
                        if (k > 0 && (got[k] = '\0', strcmp(got, path) == 0))
                                return true;
                }
                char *maps = citest_slurp_raw(itest_strdupf("/proc/%d/maps", (int)pids[i]));
                bool mapped = maps && strstr(maps, path);
                free(maps);
                if (mapped)
                        return true;
        }
        return false;
}

/* restore --owner=0 of x's images: refused for naming what, nothing of
 * the job left running. */
static void restore_refused(struct citest_ctx *x, const char *what)
{
        struct citest_run *res = cjob_ctl(crun_env(x), "restore", "--images", x->img, "--owner=0", NULL);
        bool leaked = job_holds(x, what);
        assert_run(res->status == 12 && strstr(res->out, what) && !leaked, res,
                   "restore --owner=0 with %s swapped in: exit %d, the restored job %s it", what, res->status,
                   leaked ? "holds" : "does not hold");
        ck_assert_int_ne(access(itest_strdupf("%s/runs/acc", x->d->dir), F_OK), 0);
}

/* path replaced by a link to target, the restore refused for naming
 * named, path put back. */
static void swapped_refused(struct citest_ctx *x, const char *path, const char *target, const char *named)
{
        const char *was = itest_strdupf("%s.was", path);
        ck_assert_int_eq(rename(path, was), 0);
        ck_assert_int_eq(symlink(target, path), 0);
        restore_refused(x, named);
        ck_assert_int_eq(unlink(path), 0);
        ck_assert_int_eq(rename(was, path), 0);
}

/* In d: the job's f, m, wd, out, sd; another uid's secret (11 bytes, as
 * f), vdir/log (5 bytes), closed (only it may search, inner below it) and
 * theirs (only it may write to). */
static void make_tree(const char *d)
{
        static const char *const dirs[] = { "", "wd", "out", "sd", "vdir", "closed", "closed/inner", "theirs" };
        for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
                ck_assert_int_eq(mkdir(itest_strdupf("%s/%s", d, dirs[i]), 0755), 0);
        make_file(itest_strdupf("%s/f", d), 0, "user data\n\n");
        make_file(itest_strdupf("%s/m", d), 0, "user map\n\n\n");
        make_file(itest_strdupf("%s/secret", d), ITEST_OTHER_UID, "the secret\n");
        int vfd = open(itest_strdupf("%s/vdir/log", d), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        ck_assert(vfd >= 0 && write(vfd, "root\n", 5) == 5 && fchown(vfd, ITEST_OTHER_UID, ITEST_OTHER_UID) == 0);
        close(vfd);
        ck_assert_int_eq(chmod(itest_strdupf("%s/closed", d), 0700), 0);
        ck_assert_int_eq(chown(itest_strdupf("%s/closed", d), ITEST_OTHER_UID, ITEST_OTHER_UID), 0);
        ck_assert_int_eq(chown(itest_strdupf("%s/theirs", d), ITEST_OTHER_UID, ITEST_OTHER_UID), 0);
}

START_TEST(swapped_files_refused)
{
        struct citest_ctx x;
        citest_setup(&x);
        const char *const *env = crun_env(&x);
        const char *d = itest_strdupf("%s/acc", x.d->dir), *f = itest_strdupf("%s/f", d);
        const char *secret = itest_strdupf("%s/secret", d), *pids = itest_strdupf("%s/pids", d);
        make_tree(d);

        /* A shell holding f, in wd, its output out/log; criu_target mapping
         * m (its descriptor closed) and listening on sd/sock, its pid
         * written to pids once it did, watching the job's init (pid 1 of
         * the job's namespace). */
        const char *script = itest_strdupf("exec 3<%s; cd %s/wd; sleep 1000 & "
                                           "CRIU_TARGET_BIND=%s/sd/sock %s single 1 %s/result 1 %s/m 3>>%s & wait",
                                           f, d, d, citest_need_env("CUDACKPT_TEST_CRIU_TARGET"), d, d, pids);
        const char *const args[] = { "--name", "acc", "--no-cgroup", "--user=0:0",
                                     itest_strdupf("--output=%s/out/log", d), "--", "/bin/sh", "-c", script, NULL };
        pid_t run = crun_start(env, itest_strdupf("%s/run.out", x.d->dir), -1, args);
        (void)crun_init_of(&x, "acc", NULL);
        crun_await_text(pids, "\n");
        cjob_expect_ok(cjob_ctl(env, "dump", "--run", "acc", "--owner=0", "--images", x.img, NULL), "dump --owner=0");
        cjob_wait(run);

        /* The job's file: another uid's in its place. */
        swapped_refused(&x, f, secret, secret);
        /* Its working directory: one below a directory it may not search. */
        swapped_refused(&x, itest_strdupf("%s/wd", d), itest_strdupf("%s/closed/inner", d),
                        itest_strdupf("%s/closed/inner", d));
        /* Its output's directory (run opens the output O_NOFOLLOW; the
         * daemon's --output-as-user does not), for another uid's file of
         * another size. */
        swapped_refused(&x, itest_strdupf("%s/out", d), itest_strdupf("%s/vdir", d), itest_strdupf("%s/vdir/log", d));
        /* Its mapping. */
        swapped_refused(&x, itest_strdupf("%s/m", d), secret, secret);
        /* Its socket's directory: one it may not write to. */
        swapped_refused(&x, itest_strdupf("%s/sd", d), itest_strdupf("%s/theirs", d), itest_strdupf("%s/theirs", d));

        /* The files back: the same images restore. */
        cjob_expect_ok(cjob_ctl(env, "restore", "--images", x.img, "--owner=0", NULL), "restore --owner=0");
        ck_assert(job_holds(&x, f));
        pid_t init = crun_init_of(&x, "acc", NULL);
        ck_assert_int_eq(kill(init, SIGKILL), 0);
        citest_await_gone(init, AWAIT_MS);
}
END_TEST

/* A file the job had sent over a unix socket and not yet received (in
 * flight), swapped so: criu opens it again by its path, as root, and sends
 * it again, where no process holds it until the job receives it. */
START_TEST(swapped_file_in_flight_refused)
{
        struct citest_ctx x;
        citest_setup(&x);
        const char *const *env = crun_env(&x);
        const char *d = itest_strdupf("%s/acc", x.d->dir), *f = itest_strdupf("%s/f", d);
        const char *secret = itest_strdupf("%s/secret", d), *pids = itest_strdupf("%s/pids", d);
        make_tree(d);
        const char *script = itest_strdupf("CRIU_TARGET_SCM=%s %s single 1 %s/result 1 3>>%s & wait", f,
                                           citest_need_env("CUDACKPT_TEST_CRIU_TARGET"), d, pids);
        const char *const args[] = { "--name", "acc", "--no-cgroup", "--user=0:0", "--", "/bin/sh", "-c", script, NULL };
        pid_t run = crun_start(env, itest_strdupf("%s/run.out", x.d->dir), -1, args);
        (void)crun_init_of(&x, "acc", NULL);
        crun_await_text(pids, "\n");
        cjob_expect_ok(cjob_ctl(env, "dump", "--run", "acc", "--owner=0", "--images", x.img, NULL), "dump --owner=0");
        cjob_wait(run);

        swapped_refused(&x, f, secret, secret);
        /* Put back: the same images restore. */
        cjob_expect_ok(cjob_ctl(env, "restore", "--images", x.img, "--owner=0", NULL), "restore --owner=0");
        pid_t init = crun_init_of(&x, "acc", NULL);
        ck_assert_int_eq(kill(init, SIGKILL), 0);
        citest_await_gone(init, AWAIT_MS);
}
END_TEST

int main(void)
{
        const TTest *tests[] = { swapped_files_refused, swapped_file_in_flight_refused, NULL };

        return citest_main("criu_restoreaccess", 8.0 * JOB_TIMEOUT_MS / 1000, tests);
}
