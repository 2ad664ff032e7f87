/* test_criu_guards.c: cudackptctl dump and restore --images, run as root,
 * attacked as a local user would, with the real CRIU and the real daemon on
 * the simulator (the setup of test_criu_job.c).
 *
 *   - the image directory swapped while the command runs: a process
 *     exchanging (renameat2 RENAME_EXCHANGE) DIR with a directory of its
 *     own, in a loop, as the attack did.  In a directory a user owns the
 *     command refuses it; where the swap is done by one who may (root
 *     here), criu still works in the directory that was checked;
 *   - a member's pid taken by another user's checkpointed process between
 *     criu restore and the resume: that process is left alone;
 *   - dump ends the job only after its images and manifest are on disk:
 *     criu ends it only once its post-dump let it go on, so at criu's exit
 *     the manifest is there; the progress lines say synced, written, criu
 *     done, ended in that order; a failure of step 3 (the manifest's name
 *     taken at post-dump) lets no criu go on and the job runs on, neither
 *     ended nor left stopped.
 *
 * Skips as integration.criu does (citest_probe). */
#include "criu_job_itest.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The other user of the attacks. */
#define OTHER_UID 65534
/* Runs of the command against the swapping loop: the attack got through
 * within 7 tries; each try here has about one chance in four. */
#define SWAP_TRIES 40

/* ---- helpers ------------------------------------------------------------- */

static void put_file(const char *path, const char *text)
{
        FILE *f = fopen(path, "we");
        ck_assert_msg(f, "cannot write %s: %s", path, strerror(errno));
        fputs(text, f);
        ck_assert_int_eq(fclose(f), 0);
}

static void await_file(const char *path, pid_t ctl)
{
        double deadline = itest_now_ms() + AWAIT_MS;
        while (access(path, F_OK) != 0) {
                ck_assert_msg(itest_now_ms() < deadline, "%s did not appear within %d ms", path, AWAIT_MS);
                ck_assert_msg(waitpid(ctl, NULL, WNOHANG) == 0, "cudackptctl ended before %s appeared", path);
                poll(NULL, 0, 5);
        }
}

/* A process of uid (0: root) exchanging a and b until it is killed. */
static pid_t swapper_start(const char *a, const char *b, uid_t uid)
{
        pid_t c = fork();
        ck_assert_int_ge(c, 0);
        if (c == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (uid && (setgid(uid) < 0 || setuid(uid) < 0))
                        _exit(126);
                for (;;)
                        syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE);
        }
        return c;
}

static void swapper_stop(pid_t c)
{
        kill(c, SIGKILL);
        ck_assert_int_eq(waitpid(c, NULL, 0), c);
}

/* A criu that, for verb, appends the marker file of the directory it was
 * given with -D to seen, then fails; else the real one. */
static const char *marking_criu(struct citest_ctx *x, const char *verb, const char *seen)
{
        return cjob_script(x, itest_strdupf("criu-marks-%s", verb),
                           itest_strdupf("[ \"$1\" = %s ] || exec '%s' \"$@\"\nd=\n"
                                         "while [ $# -gt 0 ]; do [ \"$1\" = -D ] && d=$2; shift; done\n"
                                         "cat \"$d/marker\" >> '%s' 2>/dev/null\nexit 1",
                                         verb, citest_criu_path, seen));
}

/* P/img (root's, 0700, holding tree-NAME/marker "root") and P/evil
 * (owner's, holding tree-NAME/marker "user"), P of owner; P/img. */
static const char *swap_dirs(struct citest_ctx *x, const char *tree, uid_t owner)
{
        const char *p = itest_strdupf("%s/parent", x->d->dir);
        const char *img = itest_strdupf("%s/img", p), *evil = itest_strdupf("%s/evil", p);
        ck_assert_int_eq(mkdir(p, 0755), 0);
        ck_assert_int_eq(mkdir(img, 0700), 0);
        ck_assert_int_eq(mkdir(itest_strdupf("%s/%s", img, tree), 0700), 0);
        put_file(itest_strdupf("%s/%s/marker", img, tree), "root\n");
        ck_assert_int_eq(mkdir(evil, 0700), 0);
        ck_assert_int_eq(mkdir(itest_strdupf("%s/%s", evil, tree), 0700), 0);
        put_file(itest_strdupf("%s/%s/marker", evil, tree), "user\n");
        const char *own[] = { p, evil, itest_strdupf("%s/%s", evil, tree), itest_strdupf("%s/%s/marker", evil, tree) };
        for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
                ck_assert_int_eq(chown(own[i], owner, owner), 0);
        return img;
}

/* Runs cudackptctl args SWAP_TRIES times while P/img and P/evil are
 * exchanged by uid; asserts criu never got the other directory.  Returns
 * how many runs criu saw "root" in. */
static int swap_attack(const char *const *env, const char *img, const char *const *args, uid_t uid,
                       const char *seen, const char *refusal)
{
        pid_t s = swapper_start(img, itest_strdupf("%.*s/evil", (int)(strrchr(img, '/') - img), img), uid);
        int refused = 0;
        for (int k = 0; k < SWAP_TRIES; k++) {
                struct citest_run *res = cjob_ctl(env, args[0], args[1], args[2], args[3], args[4], args[5], NULL);
                assert_run(res->status != 0, res, "%s against a swapped directory: exit status 0", args[0]);
                refused += refusal && strstr(res->out, refusal) != NULL;
                char *text = citest_slurp_raw(seen);
                bool other = text && strstr(text, "user");
                free(text);
                if (other)
                        swapper_stop(s);
                ck_assert_msg(!other, "try %d: root's criu %s was handed the other user's directory (%s)", k,
                              args[0], refusal ? "its parent is theirs" : "swapped after the check");
        }
        swapper_stop(s);
        char *text = citest_slurp_raw(seen);
        int root = 0;
        for (const char *p = text; p && (p = strstr(p, "root")); p++)
                root++;
        free(text);
        if (refusal)
                ck_assert_msg(refused == SWAP_TRIES, "%s: %d of %d runs refused the directory", args[0], refused,
                              SWAP_TRIES);
        return root;
}

/* ---- A1, A2: the image directory swapped ----------------------------------- */

/* swap_attack() twice: with the parent the user's, refused every time;
 * then with a parent only root may change and the swap done by root:
 * whatever the path names when criu starts, criu gets the directory that
 * was checked (the other has no manifest), at least once. */
static void swap_user_then_root(struct citest_ctx *x, const char *const *env, const char *img,
                                const char *const *args, const char *seen)
{
        swap_attack(env, img, args, OTHER_UID, seen, "a directory on its way");
        const char *parent = itest_strdupf("%s/parent", x->d->dir);
        ck_assert_int_eq(chown(parent, 0, 0), 0);
        ck_assert_int_eq(chmod(parent, 0700), 0);
        int root = swap_attack(env, img, args, 0, seen, NULL);
        ck_assert_msg(root > 0, "criu never ran on the root's directory in %d tries", SWAP_TRIES);
}

START_TEST(guard_restore_dir_swapped)
{
        struct citest_ctx x;
        citest_setup(&x);
        const char *seen = itest_strdupf("%s/seen", x.d->dir);
        const char *const *env = cjob_env(&x, marking_criu(&x, "restore", seen));
        /* Pids above any pid_max: free, and nothing to end. */
        const char *tree = "tree-2000000001";
        const char *img = swap_dirs(&x, tree, OTHER_UID);
        put_file(itest_strdupf("%s/manifest.json", img),
                 "{\"format\": \"cudackpt-job\", \"version\": 1, \"trees\": [{\"root\": 2000000001, \"images\": "
                 "\"tree-2000000001\", \"pids\": [2000000001]}], \"members\": []}");
        /* (The manifest, written by hand, has no digests of images to check.) */
        const char *const args[] = { "restore", "--images", img, "--no-verify", "--", "-v4" };

        swap_user_then_root(&x, env, img, args, seen);
}
END_TEST

START_TEST(guard_dump_dir_swapped)
{
        struct citest_ctx x;
        citest_setup(&x);
        const char *seen = itest_strdupf("%s/seen", x.d->dir);
        const char *const *env = cjob_env(&x, marking_criu(&x, "dump", seen));
        pid_t pids[1];
        ck_assert_int_eq(citest_start_target(&x, "single", pids, 1), 1);
        const char *img = swap_dirs(&x, itest_strdupf("tree-%d", (int)pids[0]), OTHER_UID);
        const char *const args[] = { "dump", "--pids", itest_strdupf("%d", (int)pids[0]), "--images", img, "--" };

        /* Each failed dump leaves its part: none is a manifest. */
        swap_user_then_root(&x, env, img, args, seen);
        citest_assert_state(&x, pids[0], "running");
        citest_check_memory(&x, pids[0], 1);
        citest_kill_all(pids, 1);
}
END_TEST

/* ---- A5: a member's pid taken between criu and the resume ------------------- */

/* criu_target single started with pid want, as uid; returns once it is
 * ready (its pid on the pipe). */
static void start_target_at(struct citest_ctx *x, pid_t want, uid_t uid)
{
        /* Copies uid may run: the build tree may be closed to it (CI's is). */
        const char *exe = itest_stage_exe(x->d, citest_need_env("CUDACKPT_TEST_CRIU_TARGET"), NULL);
        const char *sim = itest_stage_exe(x->d, citest_need_env("CUDACKPT_TEST_SIM"), NULL);
        const char *argv[] = { "criu_target", "single", itest_strdupf("%d", (int)getpid()),
                               itest_strdupf("%s.other", x->result), TARGET_MIB, sim, NULL };
        const char *env[] = { "CUDACKPT_SIM=1", SIM_STATE_SLOT, NULL };
        int p[2];
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        struct clone_args ca = { .exit_signal = SIGCHLD, .set_tid = (uint64_t)(uintptr_t)&want, .set_tid_size = 1 };
        long c = syscall(SYS_clone3, &ca, sizeof(ca));
        ck_assert_msg(c >= 0, "clone3 with pid %d: %s", (int)want, strerror(errno));
        if (c == 0) {
                int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (setsid() < 0 || devnull < 0 || dup2(devnull, 0) < 0 || dup2(devnull, 1) < 0 ||
                    dup2(devnull, 2) < 0 || chdir("/") < 0 || dup2(p[1], 3) < 0 || setgid(uid) < 0 || setuid(uid) < 0)
                        _exit(126);
                close_range(4, ~0u, 0);
                execve(exe, (char *const *)argv, (char *const *)env);
                dprintf(3, "execve %s: %s\n", exe, strerror(errno));
                _exit(127);
        }
        ck_assert_int_eq(c, want);
        close(p[1]);
        char buf[64];
        struct pollfd pf = { .fd = p[0], .events = POLLIN };
        ssize_t n = poll(&pf, 1, AWAIT_MS) == 1 ? read(p[0], buf, sizeof(buf) - 1) : -1;
        buf[n > 0 ? n : 0] = '\0';
        ck_assert_msg(n > 0 && strncmp(buf, "execve ", 7) != 0, "the other target is not ready: %s", buf);
        close(p[0]);
}

/* A criu that, after the real one's verb, creates DIR/criu-done and waits
 * for DIR/go before it exits as the real one did. */
static const char *pausing_criu(struct citest_ctx *x, const char *verb)
{
        const char *d = x->d->dir;
        return cjob_script(x, itest_strdupf("criu-pauses-%s", verb),
                           itest_strdupf("[ \"$1\" = %s ] || exec '%s' \"$@\"\n'%s' \"$@\"\nrc=$?\n"
                                         "touch '%s/criu-done'\nwhile [ ! -e '%s/go' ]; do sleep 0.01; done\n"
                                         "rm -f '%s/criu-done' '%s/go'\nexit $rc",
                                         verb, citest_criu_path, citest_criu_path, d, d, d, d));
}

START_TEST(guard_restore_pid_taken)
{
        struct citest_ctx x;
        citest_setup(&x);
        pid_t pids[1];
        ck_assert_int_eq(citest_start_target(&x, "single", pids, 1), 1);
        struct citest_run *res = cjob_ctl(cjob_env(&x, NULL), "dump", "--pids", itest_strdupf("%d", (int)pids[0]),
                                          "--images", x.img, NULL);
        cjob_expect_ok(res, "dump");
        citest_await_gone(pids[0], AWAIT_MS);

        const char *out = itest_strdupf("%s/restore.out", x.d->dir);
        const char *const args[] = { "restore", "--images", x.img, NULL };
        pid_t c = cjob_start(cjob_env(&x, pausing_criu(&x, "restore")), out, args);
        await_file(itest_strdupf("%s/criu-done", x.d->dir), c);
        /* criu restored the member and exited: it is ours (a subreaper's)
         * now.  It exits; another user's process gets its pid and is
         * checkpointed. */
        ck_assert_int_eq(kill(pids[0], SIGKILL), 0);
        citest_await_gone(pids[0], AWAIT_MS);
        poll(NULL, 0, 30); /* a start time of its own (clock ticks) */
        start_target_at(&x, pids[0], OTHER_UID);
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        ck_assert_int_eq(cudackpt_suspend(x.c, pids[0], -1, &r), 0);
        ck_assert_msg(!r.error, "suspend of the other user's process: %s", r.error);
        cudackpt_reply_clear(&r);
        citest_assert_state(&x, pids[0], "checkpointed");

        put_file(itest_strdupf("%s/go", x.d->dir), "");
        int st = cjob_wait(c);
        const char *text = citest_slurp(out);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(text, "exited after criu restored it"),
                      "restore with the member's pid taken: status 0x%x, it printed: %s", st, text);
        /* The other user's process: untouched, still checkpointed. */
        citest_assert_state(&x, pids[0], "checkpointed");
        char state = 0;
        pid_t ppid = 0;
        ck_assert_msg(citest_proc_stat(pids[0], &state, &ppid) && state != 'Z', "the other process was ended");
        citest_kill_all(pids, 1);
}
END_TEST

/* ---- B9: the images on disk before the job ends ----------------------------- */

/* The positions of the lines in text, in order; fails if one is missing
 * or out of order. */
static void assert_in_order(const char *text, const char *const *lines, size_t n)
{
        const char *at = text;
        for (size_t i = 0; i < n; i++) {
                const char *p = strstr(at, lines[i]);
                ck_assert_msg(p, "\"%s\" missing, or not after \"%s\", in: %s", lines[i], i ? lines[i - 1] : "", text);
                at = p + strlen(lines[i]);
        }
}

START_TEST(guard_dump_syncs_before_end)
{
        struct citest_ctx x;
        citest_setup(&x);
        const char *const *env = cjob_env(&x, pausing_criu(&x, "dump"));
        const char *done = itest_strdupf("%s/criu-done", x.d->dir), *go = itest_strdupf("%s/go", x.d->dir);
        const char *out = itest_strdupf("%s/dump.out", x.d->dir);
        pid_t pids[1];
        ck_assert_int_eq(citest_start_target(&x, "single", pids, 1), 1);
        citest_check_memory(&x, pids[0], 1);

        /* criu has exited 0, having ended the job only once its post-dump
         * (the barrier, where the command did step 3) let it go on: the
         * images were synced and the manifest is in place. */
        const char *const args[] = { "dump", "--pids", itest_strdupf("%d", (int)pids[0]), "--images", x.img,
                                     "--progress", NULL };
        pid_t c = cjob_start(env, out, args);
        await_file(done, c);
        char state = 0;
        pid_t ppid = 0;
        ck_assert_msg(!citest_proc_stat(pids[0], &state, &ppid) || state == 'Z',
                      "at criu's exit the job is in state %c, not ended", state);
        ck_assert_msg(access(itest_strdupf("%s/manifest.json", x.img), F_OK) == 0,
                      "criu exited, having ended the job, before the manifest was written");
        put_file(go, "");
        int st = cjob_wait(c);
        const char *text = citest_slurp(out);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "dump: status 0x%x, it printed: %s", st, text);
        const char *const order[] = { "images synced to disk", "manifest.json written", "done in", "job ended (1 process)" };
        assert_in_order(text, order, 4);
        citest_await_gone(pids[0], AWAIT_MS);

        /* The manifest cannot be put in place (a directory takes its name
         * at post-dump, through the user's own action script): no criu
         * goes on, the job is not ended but resumed, intact. */
        uint64_t start[1];
        ck_assert_int_eq(citest_start_target(&x, "single", pids, 1), 1);
        cjob_start_times(pids, start, 1);
        const char *img2 = itest_strdupf("%s/img2", x.d->dir);
        const char *blocker = cjob_script(&x, "block-manifest",
                                          itest_strdupf("[ \"$CRTOOLS_SCRIPT_ACTION\" = post-dump ] || exit 0\n"
                                                        "exec mkdir '%s/manifest.json'", img2));
        const char *const args2[] = { "dump", "--pids", itest_strdupf("%d", (int)pids[0]), "--images", img2,
                                      "--json", "--", "--action-script", blocker, NULL };
        c = cjob_start(cjob_env(&x, NULL), out, args2);
        st = cjob_wait(c);
        text = citest_slurp(out);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(text, "was not ended but resumed") &&
                              strstr(text, "\"synced\":true") && strstr(text, "\"resumed\":true"),
                      "dump whose manifest fails: status 0x%x, it printed: %s", st, text);
        ck_assert_msg(itest_start_time(pids[0]) == start[0], "the job was ended");
        citest_proc_stat(pids[0], &state, &ppid);
        ck_assert_msg(state != 'T' && state != 't', "the job was left stopped (%c)", state);
        citest_assert_state(&x, pids[0], "running");
        citest_check_memory(&x, pids[0], 1);

        /* --no-sync: said so, and still ended. */
        const char *img3 = itest_strdupf("%s/img3", x.d->dir);
        struct citest_run *res = cjob_ctl(cjob_env(&x, NULL), "dump", "--pids", itest_strdupf("%d", (int)pids[0]),
                                          "--images", img3, "--no-sync", "--json", NULL);
        cjob_expect_ok(res, "dump --no-sync");
        assert_run(strstr(res->out, "\"synced\":false"), res, "dump --no-sync said it synced");
        citest_await_gone(pids[0], AWAIT_MS);
}
END_TEST

/* A criu that exits 3 after the real one, for the dump of tree root only:
 * criu failing once its post-dump let it go on (cr_dump_finish can, after
 * the post-dump script returned 0; or criu killed then). */
static const char *criu_failing_after(struct citest_ctx *x, pid_t root)
{
        return cjob_script(x, "criu-fails-after",
                           itest_strdupf("if [ \"$1\" = dump ] && [ \"$3\" = %d ]; then\n"
                                         "  '%s' \"$@\" || exit\n  echo 'criu-fails-after: failing now'\n  exit 3\nfi\n"
                                         "exec '%s' \"$@\"", (int)root, citest_criu_path, citest_criu_path));
}

START_TEST(guard_dump_criu_fails_after_barrier)
{
        struct citest_ctx x;
        citest_setup(&x);
        pid_t pids[2];
        ck_assert_int_eq(citest_start_target(&x, "single", &pids[0], 1), 1);
        ck_assert_int_eq(citest_start_target(&x, "single", &pids[1], 1), 1);
        const char *const *env = cjob_env(&x, criu_failing_after(&x, pids[1]));

        /* Both trees' images and the manifest were durable before any criu
         * went on, and the first tree's criu ended its tree: the dump
         * stands (the job is ended, the manifest kept, exit 0) and says
         * what criu did, rather than claim a job resumed that is gone. */
        struct citest_run *res = cjob_ctl(env, "dump", "--pids", itest_strdupf("%d,%d", (int)pids[0], (int)pids[1]),
                                          "--images", x.img, "--json", NULL);
        assert_run(res->status == 0 && strstr(res->out, itest_strdupf("tree %d exited with status 3", (int)pids[1])) &&
                           strstr(res->out, "\"dumped\":true") && strstr(res->out, "\"criu_failed_after\":true") &&
                           !strstr(res->out, "was resumed"),
                   res, "dump whose criu failed after its post-dump: status %d", res->status);
        cjob_check_dumped(&x, x.img, pids, 2, 2);
        res = cjob_ctl(env, "verify", "--images", x.img, NULL);
        cjob_expect_ok(res, "verify of the dump whose criu failed after its post-dump");
}
END_TEST

int main(void)
{
        const TTest *tests[] = { guard_restore_dir_swapped, guard_dump_dir_swapped, guard_restore_pid_taken,
                guard_dump_syncs_before_end, guard_dump_criu_fails_after_barrier, NULL };

        /* Up to 2 x SWAP_TRIES short runs (a failing criu), or four dumps. */
        return citest_main("criu_guards", 6.0 * JOB_TIMEOUT_MS / 1000, tests);
}
