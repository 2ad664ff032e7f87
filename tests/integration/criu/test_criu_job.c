/* test_criu_job.c: cudackptctl dump and restore --images, a whole job to
 * disk and back, with the real CRIU and the real daemon on the simulator.
 *
 * The same setup as test_criu.c (criu_itest.h): criu_target processes,
 * the drop-in first on criu's PATH and CRIU_FAULT=138, so CRIU's CUDA
 * plugin is on.  cudackptctl finds criu through CUDACKPT_CRIU.  What is
 * checked: the group suspend happens before CRIU and the plugin finds the
 * processes checkpointed (its log says so, and the daemon audits no Lock
 * from it); a restore brings back the pids, new processes, running, their
 * memory intact, the GPU state restored by one ResumeGroup (the plugin
 * aside: no Restore audited from the drop-in); a CRIU that fails early or
 * at post-dump leaves the job running; the dump command SIGKILLed before
 * CRIU leaves it running within a second (its lease); --leave-running;
 * two trees waiting for each other (one failing keeps both); a device map,
 * good and bad.
 *
 * Skips as integration.criu does (citest_probe). */
#include "criu_job_itest.h"

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
#include <sys/wait.h>
#include <unistd.h>

/* ---- the tests ----------------------------------------------------------- */

/* Sets x up with the plain criu, starts a target of n processes of kind
 * (tree or single) into pids with their start times in start; returns
 * cudackptctl's environment. */
static const char *const *job_setup(struct citest_ctx *x, const char *kind, pid_t *pids, uint64_t *start, int n)
{
        citest_setup(x);
        const char *const *env = cjob_env(x, NULL);
        ck_assert_int_eq(citest_start_target(x, kind, pids, n), n);
        cjob_start_times(pids, start, n);
        return env;
}

START_TEST(job_tree_dump_restore)
{
        struct citest_ctx x;
        pid_t pids[3];
        uint64_t start[3];
        const char *const *env = job_setup(&x, "tree", pids, start, 3);
        for (int i = 0; i < 3; i++)
                citest_check_memory(&x, pids[i], 1);

        struct citest_run *d = cjob_ctl(env, "dump", "--tree", itest_strdupf("%d", (int)pids[0]), "--images", x.img,
                                   "--progress", NULL);
        cjob_expect_ok(d, "dump --tree");
        assert_run(strstr(d->out, "dumped 3 CUDA processes in 1 tree"), d, "dump said something else");
        cjob_check_dumped(&x, x.img, pids, 3, 1);
        for (int i = 0; i < 3; i++)
                cjob_check_plugin_skipped(x.img, pids[0], pids[i]);

        struct citest_run *r = cjob_ctl(env, "restore", "--images", x.img, "--json", NULL);
        cjob_expect_ok(r, "restore --images");
        assert_run(strstr(r->out, "\"restored\":true"), r, "restore --json said something else");
        cjob_check_job_restored(&x, pids, start, 3, 2);
        citest_kill_all(pids, 3);
}
END_TEST

START_TEST(job_dump_failures_leave_job_running)
{
        struct citest_ctx x;
        pid_t pids[3];
        uint64_t start[3];
        const char *const *env = job_setup(&x, "tree", pids, start, 3);
        const char *tree = itest_strdupf("%d", (int)pids[0]);

        /* An image directory that cannot be written: refused before anything is suspended. */
        const char *file = itest_strdupf("%s/a-file", x.d->dir);
        int fd = open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        close(fd);
        struct citest_run *res = cjob_ctl(env, "dump", "--tree", tree, "--images", itest_strdupf("%s/img", file), NULL);
        assert_run(res->status != 0 && strstr(res->out, "nothing was suspended"), res, "dump into a file: %d",
                   res->status);
        /* criu's --action-script abbreviated (getopt_long takes prefixes):
         * refused, it would run beside dump's own script. */
        static const char *const abbrev[][2] = { { "--action-scr", "/bin/true" }, { "--act=/bin/true", NULL } };
        for (int k = 0; k < 2; k++) {
                res = cjob_ctl(env, "dump", "--tree", tree, "--images", x.img, "--", abbrev[k][0], abbrev[k][1], NULL);
                assert_run(res->status == 2 && strstr(res->out, "--action-script in full"), res, "dump -- %s: %d",
                           abbrev[k][0], res->status);
        }
        ck_assert_msg(!strstr(citest_slurp(itest_strdupf("%s/daemon.log", x.d->dir)), "method=SuspendGroup"),
                      "the job was suspended for an image directory that cannot be written");

        /* An option criu refuses, then a criu failing at post-dump, after
         * writing every image, with the tasks frozen; then criu exiting 0
         * without dumping anything (-V, --help). */
        const char *late = cjob_script(&x, "fail-post-dump", "test \"$CRTOOLS_SCRIPT_ACTION\" != post-dump");
        const char *const *opts[] = { (const char *const[]){ "--no-such-criu-option", NULL },
                                      (const char *const[]){ "--action-script", late, NULL },
                                      (const char *const[]){ "-V", NULL },
                                      (const char *const[]){ "--help", NULL } };
        for (int k = 0; k < 4; k++) {
                res = cjob_ctl(env, "dump", "--tree", tree, "--images", x.img, "--", opts[k][0], opts[k][1], NULL);
                assert_run(res->status == 1, res, "dump with a failing criu (%s): exit status %d", opts[k][0],
                           res->status);
                assert_run(strstr(res->out, "step 2 of 3 (criu dump) failed; the job was resumed"), res,
                           "dump did not say the job was resumed");
                assert_run(k != 1 || strstr(res->out, "Post dump script"), res,
                           "criu did not fail at post-dump, or its log was not shown");
                assert_run(k < 2 || strstr(res->out, "it dumped nothing"), res,
                           "dump did not say criu %s dumped nothing", opts[k][0]);
                for (int i = 0; i < 3; i++) {
                        ck_assert_msg(itest_start_time(pids[i]) == start[i], "pid %d is gone", (int)pids[i]);
                        citest_assert_state(&x, pids[i], "running");
                        citest_check_memory(&x, pids[i], (unsigned long)k + 1);
                }
                ck_assert_int_ne(access(itest_strdupf("%s/manifest.json", x.img), F_OK), 0);
        }
        citest_kill_all(pids, 3);
}
END_TEST

/* The contents of path, which must be a file. */
static const char *file_text(const char *path)
{
        char *text = citest_slurp(path);
        ck_assert_msg(text, "cannot read %s", path);
        return text;
}

static void write_file(const char *path, const char *text)
{
        FILE *f = fopen(path, "we");
        ck_assert_msg(f, "cannot write %s: %s", path, strerror(errno));
        fputs(text, f);
        ck_assert_int_eq(fclose(f), 0);
}

/* An image directory someone else could have prepared (dump runs as root):
 * refused before anything is suspended, nothing written through a link. */
START_TEST(job_dump_refuses_untrusted_dir)
{
        struct citest_ctx x;
        citest_setup(&x);
        const char *const *env = cjob_env(&x, NULL);
        pid_t pids[1];
        ck_assert_int_eq(citest_start_target(&x, "single", pids, 1), 1);
        const char *pid = itest_strdupf("%d", (int)pids[0]);
        const char *victim = itest_strdupf("%s/victim", x.d->dir);
        write_file(victim, "precious\n");

        /* Another user's directory (with its part file a link to the
         * victim), one writable by its group, a link to ours, then ours in
         * a directory anyone may write (not sticky). */
        const char *other = itest_strdupf("%s/other", x.d->dir), *group = itest_strdupf("%s/group", x.d->dir);
        const char *link = itest_strdupf("%s/link", x.d->dir);
        ck_assert_int_eq(mkdir(other, 0700), 0);
        ck_assert_int_eq(symlink(victim, itest_strdupf("%s/manifest.json.part", other)), 0);
        ck_assert_int_eq(chown(other, 65534, 65534), 0);
        ck_assert_int_eq(mkdir(group, 0700), 0);
        ck_assert_int_eq(chmod(group, 0770), 0);
        ck_assert_int_eq(symlink(x.img, link), 0);
        const char *open_dir = itest_strdupf("%s/open", x.d->dir);
        ck_assert_int_eq(mkdir(open_dir, 0700), 0);
        ck_assert_int_eq(chmod(open_dir, 0777), 0);
        ck_assert_int_eq(mkdir(itest_strdupf("%s/img", open_dir), 0700), 0);
        const char *dirs[] = { other, group, link, itest_strdupf("%s/img", open_dir) };
        const char *why[] = { "another user's", "writable by others", "symbolic link", "a directory on its way" };
        for (int k = 0; k < 4; k++) {
                struct citest_run *res = cjob_ctl(env, "dump", "--pids", pid, "--images", dirs[k], NULL);
                assert_run(res->status == 1 && strstr(res->out, why[k]) && strstr(res->out, "nothing was suspended"),
                           res, "dump into %s: exit status %d", dirs[k], res->status);
        }
        ck_assert_str_eq(file_text(victim), "precious\n");
        ck_assert_msg(!strstr(file_text(itest_strdupf("%s/daemon.log", x.d->dir)), "method=SuspendGroup"),
                      "the job was suspended for an image directory that is not trusted");

        /* DIR/tree-PID a link to another directory: refused at step 2, the job resumed. */
        const char *elsewhere = itest_strdupf("%s/elsewhere", x.d->dir);
        ck_assert_int_eq(mkdir(elsewhere, 0700), 0);
        ck_assert_int_eq(symlink(elsewhere, itest_strdupf("%s/tree-%s", x.img, pid)), 0);
        struct citest_run *res = cjob_ctl(env, "dump", "--pids", pid, "--images", x.img, NULL);
        assert_run(res->status == 1 && strstr(res->out, "not a directory of this user's") &&
                           strstr(res->out, "the job was resumed"),
                   res, "dump with a linked tree directory: exit status %d", res->status);
        ck_assert_int_eq(cjob_dir_entries(elsewhere), 0);
        citest_assert_state(&x, pids[0], "running");
        citest_check_memory(&x, pids[0], 1);
        citest_kill_all(pids, 1);
}
END_TEST

/* A manifest of trees (root: pids...) and members (pid in tree), by hand. */
static void write_manifest(const char *dir, const char *trees, const char *members)
{
        write_file(itest_strdupf("%s/manifest.json", dir),
                   itest_strdupf("{\"format\": \"cudackpt-job\", \"version\": 1, \"trees\": [%s], \"members\": [%s]}",
                                 trees, members));
}

/* Images restore cannot trust (it runs as root and believes the manifest):
 * refused before criu runs. */
START_TEST(job_restore_refuses_untrusted_images)
{
        struct citest_ctx x;
        citest_setup(&x);
        /* A criu that notes a restore (and fails it); --version as the real one. */
        const char *ran = itest_strdupf("%s/criu-ran", x.d->dir);
        const char *criu = cjob_script(&x, "criu-notes", itest_strdupf("[ \"$1\" = restore ] && { touch '%s'; exit 1; }\n"
                                                                   "exec '%s' \"$@\"", ran, citest_criu_path));
        const char *const *env = cjob_env(&x, criu);
        /* Pids above any pid_max: free, and nothing to end. */
        const char *tree = "{\"root\": 2000000001, \"images\": \"tree-2000000001\", \"pids\": [2000000001, 2000000002]}";
        const char *tree2 = "{\"root\": 2000000003, \"images\": \"tree-2000000003\", \"pids\": [2000000003, 2000000002]}";
        ck_assert_int_eq(mkdir(itest_strdupf("%s/tree-2000000001", x.img), 0700), 0);
        ck_assert_int_eq(mkdir(itest_strdupf("%s/tree-2000000003", x.img), 0700), 0);
        const char *bad[][3] = {
                /* a member outside its tree, a member of a tree not there, twice a member */
                { tree, "{\"pid\": 2000000009, \"tree\": 2000000001}", "do not agree" },
                { tree, "{\"pid\": 2000000002, \"tree\": 2000000005}", "do not agree" },
                { tree, "{\"pid\": 2000000002, \"tree\": 2000000001}, {\"pid\": 2000000002, \"tree\": 2000000001}",
                  "do not agree" },
                /* a pid in two trees, a root outside its tree, a pid not whole */
                { itest_strdupf("%s, %s", tree, tree2), "", "do not agree" },
                { "{\"root\": 2000000001, \"images\": \"tree-2000000001\", \"pids\": [2000000002]}", "", "do not agree" },
                { "{\"root\": 2000000001, \"images\": \"tree-2000000001\", \"pids\": [2000000001, 2.5]}", "",
                  "not a manifest" },
        };
        for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
                write_manifest(x.img, bad[k][0], bad[k][1]);
                struct citest_run *res = cjob_ctl(env, "restore", "--images", x.img, NULL);
                assert_run(res->status == 1 && strstr(res->out, bad[k][2]) && strstr(res->out, "nothing was restored"),
                           res, "restore of bad manifest %zu: exit status %d", k, res->status);
                ck_assert_msg(access(ran, F_OK) != 0, "criu ran for bad manifest %zu", k);
        }

        /* The manifest a FIFO, a link to a good one, another user's; the
         * directory another user's; a tree's directory a link. */
        const char *good = itest_strdupf("%s/good", x.d->dir), *manifest = itest_strdupf("%s/manifest.json", x.img);
        ck_assert_int_eq(mkdir(good, 0700), 0);
        write_manifest(good, tree, "{\"pid\": 2000000002, \"tree\": 2000000001}");
        ck_assert_int_eq(unlink(manifest), 0);
        ck_assert_int_eq(mkfifo(manifest, 0600), 0);
        struct citest_run *res = cjob_ctl(env, "restore", "--images", x.img, NULL);
        assert_run(res->status == 1 && strstr(res->out, "not a regular file"), res, "FIFO manifest: %d", res->status);
        ck_assert_int_eq(unlink(manifest), 0);
        ck_assert_int_eq(symlink(itest_strdupf("%s/manifest.json", good), manifest), 0);
        res = cjob_ctl(env, "restore", "--images", x.img, NULL);
        assert_run(res->status == 1 && strstr(res->out, "symbolic link"), res, "linked manifest: %d", res->status);
        ck_assert_int_eq(unlink(manifest), 0);
        write_manifest(x.img, tree, "{\"pid\": 2000000002, \"tree\": 2000000001}");
        ck_assert_int_eq(chown(manifest, 65534, 65534), 0);
        res = cjob_ctl(env, "restore", "--images", x.img, NULL);
        assert_run(res->status == 1 && strstr(res->out, "not a regular file of uid"), res, "another's manifest: %d",
                   res->status);
        ck_assert_int_eq(chown(manifest, 0, 0), 0);
        ck_assert_int_eq(chown(x.img, 65534, 65534), 0);
        res = cjob_ctl(env, "restore", "--images", x.img, NULL);
        assert_run(res->status == 1 && strstr(res->out, "another user's"), res, "another's DIR: %d", res->status);
        ck_assert_int_eq(chown(x.img, 0, 0), 0);
        const char *tdir = itest_strdupf("%s/tree-2000000001", x.img);
        ck_assert_int_eq(rmdir(tdir), 0);
        ck_assert_int_eq(symlink(good, tdir), 0);
        res = cjob_ctl(env, "restore", "--images", x.img, NULL);
        assert_run(res->status == 1 && strstr(res->out, "is not a directory of uid"), res, "linked tree: %d",
                   res->status);
        ck_assert_msg(access(ran, F_OK) != 0, "criu ran for untrusted images");

        /* The same, good: criu runs (and fails, as this one does); the
         * manifest, written by hand, has no digests of images to check. */
        ck_assert_int_eq(unlink(tdir), 0);
        ck_assert_int_eq(mkdir(tdir, 0700), 0);
        res = cjob_ctl(env, "restore", "--images", x.img, "--no-verify", NULL);
        assert_run(res->status == 1 && strstr(res->out, "step 1 of 2 (criu restore) failed"), res, "good: %d",
                   res->status);
        ck_assert_msg(access(ran, F_OK) == 0, "criu did not run for good images");
}
END_TEST

/* A criu that, at dump or restore, creates DIR/criu.VERB and waits for
 * DIR/go.VERB before it goes on as the real one. */
static const char *waiting_criu(struct citest_ctx *x)
{
        const char *d = x->d->dir;
        return cjob_script(x, "criu-waits",
                      itest_strdupf("case \"$1\" in dump|restore)\n  touch '%s/criu.'\"$1\"\n"
                                    "  while [ ! -e '%s/go.'\"$1\" ]; do sleep 0.01; done;;\nesac\nexec '%s' \"$@\"",
                                    d, d, citest_criu_path));
}

/* cudackptctl VERB ... sent every signal it holds while its criu runs:
 * neither stopped nor ended, it waits for criu and succeeds. */
static void signals_during_criu(struct citest_ctx *x, const char *const *env, const char *verb,
                                const char *const *args)
{
        const char *out = itest_strdupf("%s/ctl-%s.out", x->d->dir, verb);
        const char *started = itest_strdupf("%s/criu.%s", x->d->dir, verb);
        pid_t c = cjob_start(env, out, args);
        int st = 0;
        double deadline = itest_now_ms() + AWAIT_MS;
        while (access(started, F_OK) != 0) {
                ck_assert_msg(itest_now_ms() < deadline, "cudackptctl %s did not start criu %s", verb, verb);
                ck_assert_msg(waitpid(c, &st, WNOHANG) == 0, "cudackptctl %s ended before criu: %s", verb,
                              citest_slurp(out));
                poll(NULL, 0, 5);
        }
        static const int sigs[] = { SIGTSTP, SIGTTIN, SIGTTOU, SIGQUIT, SIGINT, SIGTERM, SIGHUP };
        for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
                ck_assert_int_eq(kill(c, sigs[i]), 0);
                poll(NULL, 0, 50);
                pid_t w = waitpid(c, &st, WNOHANG | WUNTRACED);
                ck_assert_msg(w == 0, "cudackptctl %s %s on signal %d while criu ran", verb,
                              w == c && WIFSTOPPED(st) ? "stopped" : "ended", sigs[i]);
        }
        write_file(itest_strdupf("%s/go.%s", x->d->dir, verb), "");
        st = cjob_wait(c);
        const char *text = citest_slurp(out);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(text, "got signal"),
                      "cudackptctl %s: status 0x%x, it printed: %s", verb, st, text);
}

START_TEST(job_signals_wait_for_criu)
{
        struct citest_ctx x;
        citest_setup(&x);
        const char *const *env = cjob_env(&x, waiting_criu(&x));
        pid_t pids[1];
        uint64_t start[1];
        ck_assert_int_eq(citest_start_target(&x, "single", pids, 1), 1);
        cjob_start_times(pids, start, 1);
        citest_check_memory(&x, pids[0], 1);

        const char *const dump[] = { "dump", "--pids", itest_strdupf("%d", (int)pids[0]), "--images", x.img, NULL };
        signals_during_criu(&x, env, "dump", dump);
        cjob_check_dumped(&x, x.img, pids, 1, 1);
        const char *const restore[] = { "restore", "--images", x.img, NULL };
        signals_during_criu(&x, env, "restore", restore);
        cjob_check_job_restored(&x, pids, start, 1, 2);
        citest_kill_all(pids, 1);
}
END_TEST

/* A criu that blocks at "dump" (after answering --version as the real one):
 * cudackptctl is then between the group suspend and CRIU's work. */
static const char *blocking_criu(struct citest_ctx *x, const char *pidfile)
{
        const char *path = itest_strdupf("%s/criu-blocks", x->bin);
        FILE *f = fopen(path, "we");
        ck_assert(f);
        fprintf(f, "#!/bin/sh\nif [ \"$1\" = dump ]; then echo $$ > '%s.tmp'; mv '%s.tmp' '%s'; exec sleep 600; fi\n"
                   "exec '%s' \"$@\"\n",
                pidfile, pidfile, pidfile, citest_criu_path);
        ck_assert_int_eq(fclose(f), 0);
        ck_assert_int_eq(chmod(path, 0755), 0);
        return path;
}

START_TEST(job_dump_killed_leaves_job_running)
{
        struct citest_ctx x;
        citest_setup(&x);
        const char *pidfile = itest_strdupf("%s/criu.pid", x.d->dir);
        const char *const *env = cjob_env(&x, blocking_criu(&x, pidfile));
        pid_t pids[3];
        ck_assert_int_eq(citest_start_target(&x, "tree", pids, 3), 3);

        const char *argv[] = { citest_need_env("CUDACKPT_TEST_CTL"), "dump", "--tree", itest_strdupf("%d", (int)pids[0]),
                               "--images", x.img, NULL };
        pid_t c = fork();
        ck_assert_int_ge(c, 0);
        if (c == 0) {
                int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
                dup2(devnull, 0);
                dup2(devnull, 1);
                execve(argv[0], (char *const *)argv, (char *const *)env);
                _exit(127);
        }
        double deadline = itest_now_ms() + AWAIT_MS;
        while (access(pidfile, F_OK) != 0) {
                ck_assert_msg(itest_now_ms() < deadline, "cudackptctl dump did not start criu dump");
                ck_assert_int_eq(waitpid(c, NULL, WNOHANG), 0);
                poll(NULL, 0, 5);
        }
        char *text = citest_slurp(pidfile);
        pid_t criu = (pid_t)atoi(text);
        for (int i = 0; i < 3; i++)
                citest_assert_state(&x, pids[i], "checkpointed");

        ck_assert_int_eq(kill(c, SIGKILL), 0);
        double t0 = itest_now_ms();
        ck_assert_int_eq(waitpid(c, NULL, 0), c);
        for (int i = 0; i < 3; i++) {
                for (;;) {
                        cudackpt_reply r;
                        cudackpt_reply_init(&r);
                        int rc = cudackpt_get_state(x.c, pids[i], &r);
                        bool running = rc == 0 && !r.error && r.state && strcmp(r.state, "running") == 0;
                        cudackpt_reply_clear(&r);
                        if (running)
                                break;
                        ck_assert_msg(itest_now_ms() - t0 < LEASE_UNDO_MS,
                                      "pid %d not running %d ms after cudackptctl dump was killed", (int)pids[i],
                                      LEASE_UNDO_MS);
                        poll(NULL, 0, 5);
                }
        }
        kill(criu > 0 ? -criu : 0, SIGKILL);
        for (int i = 0; i < 3; i++)
                citest_check_memory(&x, pids[i], 1);
        citest_kill_all(pids, 3);
}
END_TEST

START_TEST(job_leave_running_then_restore)
{
        struct citest_ctx x;
        pid_t pids[1];
        uint64_t start[1];
        const char *const *env = job_setup(&x, "single", pids, start, 1);

        struct citest_run *d = cjob_ctl(env, "dump", "--pids", itest_strdupf("%d", (int)pids[0]), "--images", x.img,
                                   "--leave-running", NULL);
        cjob_expect_ok(d, "dump --leave-running");
        ck_assert_int_eq(itest_start_time(pids[0]), start[0]);
        citest_assert_state(&x, pids[0], "running");
        citest_check_memory(&x, pids[0], 1);
        cjob_check_plugin_skipped(x.img, pids[0], pids[0]);
        const char *manifest = citest_slurp(itest_strdupf("%s/manifest.json", x.img));
        ck_assert_msg(manifest && strstr(manifest, "\"left_running\":\ttrue"), "manifest: %s", manifest);

        /* A restore while the job still runs is refused, untouched. */
        struct citest_run *r = cjob_ctl(env, "restore", "--images", x.img, NULL);
        assert_run(r->status != 0 && strstr(r->out, "is in use"), r, "restore over a running job: %d", r->status);
        citest_check_memory(&x, pids[0], 2);

        /* The images are good: the job, ended, comes back from them (the counter as dumped). */
        citest_kill_all(pids, 1);
        r = cjob_ctl(env, "restore", "--images", x.img, NULL);
        cjob_expect_ok(r, "restore of a --leave-running dump");
        cjob_check_job_restored(&x, pids, start, 1, 1);
        citest_kill_all(pids, 1);
}
END_TEST

START_TEST(job_two_trees_all_or_nothing)
{
        struct citest_ctx x;
        citest_setup(&x);
        const char *const *env = cjob_env(&x, NULL);
        pid_t pids[2];
        ck_assert_int_eq(citest_start_target(&x, "single", &pids[0], 1), 1);
        ck_assert_int_eq(citest_start_target(&x, "single", &pids[1], 1), 1);
        uint64_t start[2];
        cjob_start_times(pids, start, 2);
        const char *list = itest_strdupf("%d,%d", (int)pids[0], (int)pids[1]);

        /* The second tree's criu fails at post-dump, after the first's is done
         * too: neither tree may end. */
        const char *fail_second = cjob_script(&x, "fail-second-tree",
                                         itest_strdupf("[ \"$CRTOOLS_SCRIPT_ACTION\" = post-dump ] || exit 0\n"
                                                       "case \"$(readlink \"$CRTOOLS_IMAGE_DIR\")\" in\n"
                                                       "*/tree-%d) exit 1;;\nesac",
                                                       (int)pids[1]));
        struct citest_run *res = cjob_ctl(env, "dump", "--pids", list, "--images", x.img, "--", "--action-script",
                                     fail_second, NULL);
        assert_run(res->status == 1 && strstr(res->out, "the job was resumed"), res, "dump: %d", res->status);
        for (int i = 0; i < 2; i++) {
                ck_assert_msg(itest_start_time(pids[i]) == start[i], "tree %d ended while the other failed",
                              (int)pids[i]);
                citest_assert_state(&x, pids[i], "running");
                citest_check_memory(&x, pids[i], 1);
        }

        /* The second tree's criu exits 0 without dumping (-V) while the
         * first waits at post-dump: the dump fails, neither tree ends. */
        const char *early = itest_strdupf("%s/criu-early", x.bin);
        FILE *f = fopen(early, "we");
        ck_assert(f);
        fprintf(f, "#!/bin/sh\nif [ \"$1\" = dump ] && [ \"$3\" = %d ]; then\n"
                   "  for i in $(seq 1000); do grep -q 'Running post-dump' '%s/tree-%d/dump.log' 2>/dev/null && break; "
                   "sleep 0.01; done\n  sleep 0.2\n  exec '%s' -V\nfi\nexec '%s' \"$@\"\n",
                (int)pids[1], x.img, (int)pids[0], citest_criu_path, citest_criu_path);
        ck_assert_int_eq(fclose(f), 0);
        ck_assert_int_eq(chmod(early, 0755), 0);
        res = cjob_ctl(cjob_env(&x, early), "dump", "--pids", list, "--images", x.img, NULL);
        /* (The first's barrier script, when it had not connected yet, is
         * refused instead of let down: either way its criu fails.) */
        assert_run(res->status == 1 && strstr(res->out, "the job was resumed") && strstr(res->out, "dumped nothing") &&
                           strstr(res->out, itest_strdupf("tree %d exited with status", (int)pids[0])),
                   res, "dump with an early criu: %d", res->status);
        for (int i = 0; i < 2; i++) {
                ck_assert_msg(itest_start_time(pids[i]) == start[i], "tree %d ended after a criu dumped nothing",
                              (int)pids[i]);
                citest_assert_state(&x, pids[i], "running");
        }

        /* Both dumped, both back. */
        res = cjob_ctl(env, "dump", "--pids", list, "--images", x.img, NULL);
        cjob_expect_ok(res, "dump of two trees");
        assert_run(strstr(res->out, "in 2 trees"), res, "dump said something else");
        cjob_check_dumped(&x, x.img, pids, 2, 2);
        res = cjob_ctl(env, "restore", "--images", x.img, NULL);
        cjob_expect_ok(res, "restore of two trees");
        cjob_check_job_restored(&x, pids, start, 2, 2);
        citest_kill_all(pids, 2);
}
END_TEST

START_TEST(job_restore_device_map)
{
        static const char *const denv[] = { "CUDACKPT_SIM_DEVICE_COUNT=2", NULL };
        struct itest_daemon_opts o = { .env = denv };
        struct citest_ctx x;
        citest_setup_with(&x, &o);
        const char *const *env = cjob_env(&x, NULL);
        pid_t pids[3];
        ck_assert_int_eq(citest_start_target(&x, "tree", pids, 3), 3);
        uint64_t start[3];
        cjob_start_times(pids, start, 3);
        struct citest_run *res = cjob_ctl(env, "dump", "--tree", itest_strdupf("%d", (int)pids[0]), "--images", x.img,
                                     NULL);
        cjob_expect_ok(res, "dump --tree");
        cjob_check_dumped(&x, x.img, pids, 3, 1);

        /* Onto a GPU this machine does not have: no member unlocked, and said. */
        res = cjob_ctl(env, "restore", "--images", x.img, "--device-map", ITEST_GPU0 "=" ITEST_GPU_NONE, NULL);
        assert_run(res->status == 15 && strstr(res->out, "no process was unlocked"), res, "restore: %d", res->status);
        for (int i = 0; i < 3; i++) {
                cudackpt_reply r;
                cudackpt_reply_init(&r);
                ck_assert_int_eq(cudackpt_get_state(x.c, pids[i], &r), 0);
                ck_assert_msg(r.state && strcmp(r.state, "running") != 0, "pid %d runs after a failed resume",
                              (int)pids[i]);
                cudackpt_reply_clear(&r);
        }
        citest_kill_all(pids, 3);

        /* Onto the other GPU: every member. */
        res = cjob_ctl(env, "restore", "--images", x.img, "--device-map", ITEST_GPU0 "=" ITEST_GPU1, NULL);
        cjob_expect_ok(res, "restore --device-map");
        cjob_check_job_restored(&x, pids, start, 3, 1);
        citest_kill_all(pids, 3);
}
END_TEST

int main(void)
{
        const TTest *tests[] = { job_tree_dump_restore, job_dump_failures_leave_job_running,
                job_dump_refuses_untrusted_dir, job_restore_refuses_untrusted_images,
                job_dump_killed_leaves_job_running, job_signals_wait_for_criu,
                job_leave_running_then_restore, job_two_trees_all_or_nothing, job_restore_device_map, NULL };

        /* Up to six cudackptctl runs, each bounded by JOB_TIMEOUT_MS. */
        return citest_main("criu_job", 6.0 * JOB_TIMEOUT_MS / 1000, tests);
}
