/* test_criu_runio.c: what a job of `cudackptctl run --user` gets of
 * root's run command: none of its terminal, descriptors, environment,
 * ignored signals or session keyring; its output in --output's file,
 * which must be a regular file of one link, root's or the user's, in a
 * directory only root may write; CRIU dumps such a job and restores it
 * with its log reopened by path.
 *
 * Root's terminal is a pty of the test's, the controlling terminal of the
 * run command's session, on its fds 0-2 and on fd 4 besides; root has
 * typed a line ahead on it, has a variable the job must not see, SIGINT
 * ignored (as a shell's `&` leaves it) and a key in its session keyring.
 *
 * Skips as integration.criu does (citest_probe). */
#include "criu_run_itest.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/keyctl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROOT_KEY "cudackpt-itest-root-key"
#define ROOT_SECRET "ROOT_SECRET_X"
/* keyutils.h's KEY_POS_ALL: every right, to its possessors only. */
#define POSSESSOR_ALL 0x3f000000

/* The job, as the user: what it holds, reads and sees, into its output. */
static const char job_script[] =
        "ls -l /proc/self/fd/; "
        "read line; echo \"read0:[$line]\"; "
        "read line4 <&4; echo \"read4:[$line4]\"; "
        "env; grep SigIgn /proc/self/status; "
        "echo \"keys:$(grep -c " ROOT_KEY " /proc/keys)\"; echo end";

/* `cudackptctl run ARGS` on the pty slave as root's terminal (see above);
 * its pid. */
static pid_t start_on_tty(const char *const *env, int slave, const char *const *args)
{
        const char *argv[24];
        cjob_argv(argv, 24, "run", args);
        pid_t c = fork();
        ck_assert_int_ge(c, 0);
        if (c == 0) {
                if (setsid() < 0 || ioctl(slave, TIOCSCTTY, 0) < 0 || dup2(slave, 0) < 0 || dup2(slave, 1) < 0 ||
                    dup2(slave, 2) < 0 || dup2(slave, 4) < 0 || chdir("/") < 0)
                        _exit(127);
                close_range(5, ~0u, 0);
                /* Root's own key: its possessor may read it. */
                if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, "cudackpt-itest") < 0 ||
                    syscall(SYS_add_key, "user", ROOT_KEY, "hunter2", 7, KEY_SPEC_SESSION_KEYRING) < 0)
                        _exit(126);
                signal(SIGINT, SIG_IGN);
                /* And glibc's own two (32, 33), which its sigaction()
                 * refuses: a CI runner was seen ignoring them. */
                unsigned long ign[4] = { (unsigned long) SIG_IGN };
                for (int sig = 32; sig <= 33; sig++)
                        if (syscall(SYS_rt_sigaction, sig, ign, NULL, (size_t) 8) < 0)
                                _exit(125);
                execve(argv[0], (char *const *)argv, (char *const *)env);
                _exit(127);
        }
        return c;
}

/* What of root's the job's output shows it had, "" when nothing. */
static const char *roots_in(const char *out, const char *pts)
{
        const char *got = "";
        if (strstr(out, pts))
                got = itest_strdupf("%s [a descriptor of root's terminal %s]", got, pts);
        if (!strstr(out, "read0:[]\n") || !strstr(out, "read4:[]\n"))
                got = itest_strdupf("%s [read what root typed]", got);
        if (strstr(out, ROOT_SECRET))
                got = itest_strdupf("%s [root's variable " ROOT_SECRET "]", got);
        if (!strstr(out, "SigIgn:\t0000000000000000\n"))
                got = itest_strdupf("%s [an ignored signal]", got);
        if (!strstr(out, "keys:0\n"))
                got = itest_strdupf("%s [root's session keyring]", got);
        return got;
}

START_TEST(run_user_nothing_of_roots)
{
        struct citest_ctx x;
        citest_setup(&x);
        const char **env = itest_keep(calloc(40, sizeof(char *)));
        const char *const *base = crun_env(&x);
        size_t n = 0;
        for (; base[n]; n++)
                env[n] = base[n];
        env[n++] = ROOT_SECRET "=hunter2";
        int master, slave;
        ck_assert_int_eq(openpty(&master, &slave, NULL, NULL, NULL), 0);
        const char *pts = itest_strdupf("%s", ptsname(master));
        /* Root types ahead (a line for each read): the job must not read it. */
        ck_assert_int_eq(write(master, "typed-by-root\ntyped-again\n", 26), 26);
        const char *log = crun_log(&x, "tty");
        const char *const args[] = { "--name", "tty", "--no-cgroup", "--user=65534:65534",
                                     itest_strdupf("--output=%s", log), "--", "/bin/sh", "-c", job_script, NULL };
        pid_t run = start_on_tty(env, slave, args);
        close(slave);
        int st = cjob_wait(run);
        char *out = citest_slurp(log);
        ck_assert_msg(out && strstr(out, "\nend\n"), "the job's output in %s: %s", log, out ? out : "(none)");
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "run ended with wait status %#x", st);
        const char *got = roots_in(out, pts);
        ck_assert_msg(!*got, "the job as 65534 had of root's:%s\n%s", got, out);
        ck_assert_msg(strstr(out, "\nPATH=") && strstr(out, "\nUSER=nobody\n"), "the job's environment: %s", out);
        /* Its output is the user's own: made 0600 and given to it. */
        struct stat s;
        ck_assert_int_eq(stat(log, &s), 0);
        ck_assert_msg(s.st_uid == 65534 && (s.st_mode & 07777) == 0600, "%s: uid %u mode %o", log,
                      (unsigned)s.st_uid, (unsigned)(s.st_mode & 07777));
        close(master);
}
END_TEST

/* A line of path's starting with line, after the text from, awaited;
 * the text from that line on. */
static const char *await_line(const char *path, const char *from, const char *line)
{
        const char *want = itest_strdupf("\n%s", line);
        double deadline = itest_now_ms() + AWAIT_MS;
        for (;;) {
                char *text = citest_slurp(path);
                const char *at = text ? strstr(itest_strdupf("\n%s", text), from) : NULL;
                at = at ? strstr(at, want) : NULL;
                if (at)
                        return at + 1;
                ck_assert_msg(itest_now_ms() < deadline, "no \"%s\" after \"%s\" in %s within %d ms: %s", line,
                              from, path, AWAIT_MS, text ? text : "(none)");
                poll(NULL, 0, 5);
        }
}

/* line appended to path, as root writes to a job's log meanwhile. */
static void append_line(const char *path, const char *line)
{
        FILE *f = fopen(path, "ae");
        ck_assert(f);
        fprintf(f, "%s\n", line);
        ck_assert_int_eq(fclose(f), 0);
}

/* Whether pid's fd n is path. */
static bool fd_is(pid_t pid, int n, const char *path)
{
        char link[PATH_MAX];
        ssize_t k = readlink(itest_strdupf("/proc/%d/fd/%d", (int)pid, n), link, sizeof(link) - 1);
        if (k < 0)
                return false;
        link[k] = '\0';
        return strcmp(link, path) == 0;
}

/* A --user job (uid 0 here: criu needs CAP_SYS_RESOURCE for another
 * uid's, which run_user_dump_restore has where it can) whose output is
 * its --output log: dumped, the log grown by root meanwhile (O_APPEND:
 * CRIU does not hold it to its size at the dump), restored with the log
 * reopened by its path, and written to again. */
START_TEST(run_output_dump_restore)
{
        struct citest_ctx x;
        citest_setup(&x);
        const char *const *env = crun_env(&x);
        const char *log = crun_log(&x, "logged");
        pid_t run, pids[JOB_PROCS], now[JOB_PROCS + 1];
        int ns[JOB_PROCS];
        crun_start_job(&x, env, "logged", "--no-cgroup", "--user=0:0", NULL, &run, pids, ns);
        ck_assert(fd_is(pids[1], 0, "/dev/null") && fd_is(pids[1], 1, log) && fd_is(pids[1], 2, log));
        crun_check_memory_ns(&x, pids[1], ns[1], 1);
        cjob_expect_ok(cjob_ctl(env, "dump", "--run", "logged", "--images", x.img, NULL), "dump --run (--output)");
        cjob_wait(run);
        append_line(log, "root was here");
        cjob_expect_ok(cjob_ctl(env, "restore", "--images", x.img, NULL), "restore --images (--output)");
        pid_t init = crun_init_of(&x, "logged", NULL);
        ck_assert_int_eq(crun_job_pids(init, now, JOB_PROCS + 1), JOB_PROCS);
        for (int i = 1; i < JOB_PROCS; i++)
                ck_assert_msg(fd_is(now[i], 0, "/dev/null") && fd_is(now[i], 1, log),
                              "restored pid %d: not /dev/null and %s", (int)now[i], log);
        crun_check_memory_ns(&x, now[1], ns[1], 1 + 1);
        const char *out = citest_slurp(log), *mine = strstr(out, "root was here\n");
        ck_assert_msg(mine && strstr(mine, itest_strdupf("\nok %d 2\n", ns[1])),
                      "the restored job did not append to %s after root: %s", log, out);
        ck_assert_int_eq(kill(init, SIGKILL), 0);
        for (int i = 0; i < JOB_PROCS; i++)
                citest_await_gone(now[i], AWAIT_MS);
}
END_TEST

/* A restored job is the child of the criu that root's restore command
 * ran: it must not possess that command's session keyring either (CRIU
 * restores none).  The job runs as uid 0 here (criu needs
 * CAP_SYS_RESOURCE for another uid's), and root's key is made visible to
 * its possessors only; the job says what it sees on each SIGUSR1. */
START_TEST(run_restored_keyring)
{
        struct citest_ctx x;
        citest_setup(&x);
        const char *const *env = crun_env(&x);
        const char *log = crun_log(&x, "keys");
        ck_assert(syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, "cudackpt-itest") >= 0);
        long key = syscall(SYS_add_key, "user", ROOT_KEY, "hunter2", 7, KEY_SPEC_SESSION_KEYRING);
        ck_assert(key >= 0 && syscall(SYS_keyctl, KEYCTL_SETPERM, key, POSSESSOR_ALL) == 0);
        const char *const args[] = { "--name", "keys", "--no-cgroup", "--user=0:0", itest_strdupf("--output=%s", log),
                                     "--", "/bin/sh", "-c", "trap 'echo \"keys:$(grep -c " ROOT_KEY " /proc/keys)\"' "
                                     "USR1; sleep 1000 & echo up; while :; do wait; done", NULL };
        pid_t run = crun_start(env, itest_strdupf("%s/run-keys.out", x.d->dir), -1, args);
        pid_t init = crun_init_of(&x, "keys", NULL);
        await_line(log, "", "up\n");
        ck_assert_int_eq(kill(init, SIGUSR1), 0);
        await_line(log, "up\n", "keys:0\n");
        cjob_expect_ok(cjob_ctl(env, "dump", "--run", "keys", "--images", x.img, NULL), "dump --run (keys)");
        cjob_wait(run);
        append_line(log, "restored");
        cjob_expect_ok(cjob_ctl(env, "restore", "--images", x.img, NULL), "restore --images (keys)");
        init = crun_init_of(&x, "keys", NULL);
        ck_assert_int_eq(kill(init, SIGUSR1), 0);
        const char *after = await_line(log, "restored\n", "keys:");
        ck_assert_msg(strncmp(after, "keys:0\n", 7) == 0, "the restored job possesses root's key: %s", after);
        ck_assert_int_eq(kill(init, SIGKILL), 0);
        citest_await_gone(init, AWAIT_MS);
}
END_TEST

/* A job of root's own keeps root's environment and descriptors, but for
 * --output: /dev/null as its input, FILE (root's, 0600) as its output. */
START_TEST(run_root_output)
{
        struct citest_ctx x;
        citest_setup(&x);
        const char **env = itest_keep(calloc(40, sizeof(char *)));
        const char *const *base = crun_env(&x);
        size_t n = 0;
        for (; base[n]; n++)
                env[n] = base[n];
        env[n++] = ROOT_SECRET "=hunter2";
        const char *log = crun_log(&x, "root");
        const char *const args[] = { "--name", "root", "--no-cgroup", itest_strdupf("--output=%s", log), "--",
                                     "/bin/sh", "-c", "ls -l /proc/self/fd/; echo \"secret:$" ROOT_SECRET "\"", NULL };
        int st = cjob_wait(crun_start(env, itest_strdupf("%s/run-root.out", x.d->dir), -1, args));
        char *out = citest_slurp(log);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "run ended with wait status %#x", st);
        ck_assert_msg(out && strstr(out, " 0 -> /dev/null\n") && strstr(out, itest_strdupf(" 1 -> %s\n", log)) &&
                      strstr(out, itest_strdupf(" 2 -> %s\n", log)) && strstr(out, "\nsecret:hunter2\n"),
                      "the job's output in %s: %s", log, out ? out : "(none)");
        struct stat s;
        ck_assert_int_eq(stat(log, &s), 0);
        ck_assert_msg(s.st_uid == 0 && (s.st_mode & 07777) == 0600, "%s: uid %u mode %o", log, (unsigned)s.st_uid,
                      (unsigned)(s.st_mode & 07777));
}
END_TEST

/* --output refused before anything starts: what a job's user could swap
 * or what is not root's to give; the job never runs, the file untouched. */
START_TEST(run_output_refused)
{
        struct citest_ctx x;
        citest_setup(&x);
        const char *const *env = crun_env(&x);
        const char *dir = itest_strdupf("%s/logs", x.d->dir), *open_dir = itest_strdupf("%s/open", x.d->dir);
        /* Where the job, had it run as 65534, could write. */
        const char *mark = itest_strdupf("%s/ran", open_dir);
        crun_log(&x, "any");
        ck_assert_int_eq(mkdir(open_dir, 0700), 0);
        ck_assert_int_eq(chmod(open_dir, 01777), 0);
        const char *target = itest_strdupf("%s/target", dir), *other = itest_strdupf("%s/other.log", dir);
        ck_assert_int_eq(close(open(target, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)), 0);
        ck_assert_int_eq(symlink(target, itest_strdupf("%s/link.log", dir)), 0);
        ck_assert_int_eq(link(target, itest_strdupf("%s/hard.log", dir)), 0);
        ck_assert_int_eq(close(open(other, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)), 0);
        ck_assert_int_eq(chown(other, 1234, 1234), 0);
        const struct {
                const char *path, *said;
        } cases[] = {
                { itest_strdupf("%s/job.log", open_dir), "writable by others" },
                { itest_strdupf("%s/link.log", dir), "symbolic link" },
                { itest_strdupf("%s/hard.log", dir), "one link" },
                { other, "one link, root's or the user's" },
                { itest_strdupf("%s/", dir), "does not name a file" },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct citest_run *res = cjob_ctl(env, "run", "--no-cgroup", "--user=65534:65534",
                                                  itest_strdupf("--output=%s", cases[i].path), "--", "/bin/sh", "-c",
                                                  itest_strdupf("echo x > %s", mark), NULL);
                assert_run(res->status == 125 && strstr(res->out, cases[i].said), res, "--output=%s: %d",
                           cases[i].path, res->status);
                ck_assert_int_ne(access(mark, F_OK), 0);
        }
        struct stat s;
        ck_assert_int_eq(stat(target, &s), 0);
        ck_assert_int_eq(s.st_size, 0);
        ck_assert_int_ne(access(itest_strdupf("%s/job.log", open_dir), F_OK), 0);
}
END_TEST

int main(void)
{
        const TTest *tests[] = { run_user_nothing_of_roots, run_output_dump_restore, run_restored_keyring,
                run_root_output, run_output_refused, NULL };

        return citest_main("criu_runio", 6.0 * JOB_TIMEOUT_MS / 1000, tests);
}
