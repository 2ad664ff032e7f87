/* test_criu_images.c: images you can trust, and archives, with the real
 * CRIU and the real daemon on the simulator (the setup of test_criu_job.c).
 *
 * What is checked: cudackptctl verify accepts a good copy (another user's
 * too) and names the file of a bad one; restore --images refuses images
 * with a changed byte before any process is made (no criu restore ran, the
 * job's pids stay free), and a manifest without digests unless
 * --no-verify; a job goes through a pipe (dump --archive - | restore
 * --archive -) and runs after with its memory, and when criu fails that
 * restore, the stream's checked copy is kept and restored with --images; an archive file is written
 * durably (no temporary left), verified, refused when damaged, and
 * hostile archives (a "../" name, a symbolic link, a flood of entries)
 * are refused with nothing written outside the private directory, which
 * is gone afterwards; restore refuses an archive file of another user or
 * one others may write (verify reads it).
 *
 * Skips as integration.criu does (citest_probe). */
#include "criu_job_itest.h"

#include <archive.h>
#include <archive_entry.h>
#include <cJSON.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Exit status of images that are not as dumped (client/ctl/exitcode.h). */
#define EXIT_IMAGES_DAMAGED 29

/* Flips one bit of the byte at the middle of path. */
static void flip_byte(const char *path)
{
        struct stat st;
        unsigned char b;
        int fd = open(path, O_RDWR | O_CLOEXEC);
        ck_assert_msg(fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0, "cannot open %s", path);
        ck_assert_int_eq(pread(fd, &b, 1, st.st_size / 2), 1);
        b ^= 0x10;
        ck_assert_int_eq(pwrite(fd, &b, 1, st.st_size / 2), 1);
        close(fd);
}

/* A criu that leaves MARK when it is run to restore; cudackptctl's env. */
static const char *const *marking_env(struct citest_ctx *x, const char **ret_mark)
{
        *ret_mark = itest_strdupf("%s/criu-restore-ran", x->d->dir);
        const char *criu = cjob_script(x, "criu-mark",
                                       itest_strdupf("[ \"$1\" = restore ] && touch '%s'\nexec '%s' \"$@\"",
                                                     *ret_mark, citest_criu_path));
        return cjob_env(x, criu);
}

/* Nothing was restored: no criu restore ran, every pid of the job free. */
static void assert_nothing_restored(const char *mark, const pid_t *pids, size_t n)
{
        ck_assert_msg(access(mark, F_OK) != 0, "criu restore ran");
        for (size_t i = 0; i < n; i++)
                ck_assert_msg(kill(pids[i], 0) < 0 && errno == ESRCH, "pid %d is in use", (int)pids[i]);
}

static const char *start_job(struct citest_ctx *x, pid_t *pids, uint64_t *start)
{
        citest_setup(x);
        ck_assert_int_eq(citest_start_target(x, "tree", pids, 3), 3);
        cjob_start_times(pids, start, 3);
        for (int i = 0; i < 3; i++)
                citest_check_memory(x, pids[i], 1);
        return itest_strdupf("%d", (int)pids[0]);
}

START_TEST(images_changed_byte_refused)
{
        struct citest_ctx x;
        pid_t pids[3];
        uint64_t start[3];
        const char *tree = start_job(&x, pids, start), *mark;
        const char *const *env = cjob_env(&x, NULL), *const *menv = marking_env(&x, &mark);

        struct citest_run *res = cjob_ctl(env, "dump", "--tree", tree, "--images", x.img, "--progress", NULL);
        cjob_expect_ok(res, "dump --tree");
        assert_run(strstr(res->out, "images hashed"), res, "dump did not hash the images");
        cjob_check_dumped(&x, x.img, pids, 3, 1);
        const char *pages = itest_strdupf("%s/tree-%s/pages-1.img", x.img, tree);
        ck_assert_msg(access(pages, F_OK) == 0, "no %s", pages);

        /* verify: the images, then a copy that is another user's. */
        res = cjob_ctl(env, "verify", "--images", x.img, NULL);
        assert_run(res->status == 0 && strstr(res->out, "as dumped"), res, "verify: %d", res->status);
        const char *copy = itest_strdupf("%s/copy", x.d->dir);
        ck_assert_int_eq(system(itest_strdupf("cp -a '%s' '%s' && chown -R 65534:65534 '%s'", x.img, copy, copy)), 0);
        res = cjob_ctl(env, "verify", "--images", copy, "--json", NULL);
        assert_run(res->status == 0 && strstr(res->out, "\"verified\":true"), res, "verify of a copy: %d",
                   res->status);
        flip_byte(itest_strdupf("%s/tree-%s/pages-1.img", copy, tree));
        res = cjob_ctl(env, "verify", "--images", copy, NULL);
        assert_run(res->status == EXIT_IMAGES_DAMAGED &&
                           strstr(res->out, itest_strdupf("tree-%s/pages-1.img was changed", tree)),
                   res, "verify of a bad copy: %d", res->status);

        /* One byte changed: refused before criu, nothing made. */
        flip_byte(pages);
        res = cjob_ctl(menv, "restore", "--images", x.img, NULL);
        assert_run(res->status == EXIT_IMAGES_DAMAGED && strstr(res->out, "pages-1.img was changed") &&
                           strstr(res->out, "nothing was restored"),
                   res, "restore of a changed image: %d", res->status);
        assert_nothing_restored(mark, pids, 3);
        ck_assert_int_ne(access(itest_strdupf("%s/tree-%s/restore.log", x.img, tree), F_OK), 0);

        /* The byte back, the digests gone (a manifest before them): refused
         * unless --no-verify. */
        flip_byte(pages);
        const char *mpath = itest_strdupf("%s/manifest.json", x.img);
        cJSON *m = itest_keep_json(cJSON_Parse(citest_slurp(mpath)));
        ck_assert(m);
        cJSON_DeleteItemFromObject(cJSON_GetArrayItem(cJSON_GetObjectItem(m, "trees"), 0), "files");
        FILE *f = fopen(mpath, "we");
        ck_assert(f);
        fputs(itest_keep(cJSON_Print(m)), f);
        ck_assert_int_eq(fclose(f), 0);
        res = cjob_ctl(menv, "restore", "--images", x.img, NULL);
        assert_run(res->status == EXIT_IMAGES_DAMAGED && strstr(res->out, "no digests") &&
                           strstr(res->out, "--no-verify"),
                   res, "restore without digests: %d", res->status);
        assert_nothing_restored(mark, pids, 3);
        res = cjob_ctl(env, "restore", "--images", x.img, "--no-verify", NULL);
        cjob_expect_ok(res, "restore --no-verify");
        cjob_check_job_restored(&x, pids, start, 3, 2);
        citest_kill_all(pids, 3);
}
END_TEST

/* dump --archive - | restore --archive - of the job (pids, its root tree)
 * in the work directory work, the restore's criu restore_criu (NULL: the
 * real one); what both
 * printed, and "dump=N" and "restore=N" (their exit statuses). */
static struct citest_run *through_a_pipe(struct citest_ctx *x, const pid_t *pids, const char *tree,
                                         const char *restore_criu, const char *work)
{
        const char *ctl = citest_need_env("CUDACKPT_TEST_CTL");
        const char *const *env = cjob_env(x, NULL);
        ck_assert_int_eq(mkdir(work, 0700), 0);

        const char *cmd = itest_strdupf("{ '%s' dump --tree %s --archive - --work-dir '%s' --progress; "
                                        "echo \"dump=$?\" >&2; } | env CUDACKPT_CRIU='%s' '%s' restore --archive - "
                                        "--work-dir '%s' --progress; echo \"restore=$?\"",
                                        ctl, tree, work, restore_criu ? restore_criu : citest_criu_path, ctl, work);
        /* In the background: the test reaps the job's processes when the
         * dump ends them (they are its children), as a shell reaps its
         * job's, so that their pids are free for the restore. */
        const char *out = itest_strdupf("%s/pipe.out", x->d->dir);
        pid_t c = fork();
        ck_assert_int_ge(c, 0);
        if (c == 0) {
                int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                if (setpgid(0, 0) < 0 || fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
                        _exit(127);
                execle("/bin/sh", "sh", "-c", cmd, (char *)NULL, (char *const *)env);
                _exit(127);
        }
        for (int i = 0; i < 3; i++)
                citest_await_gone(pids[i], JOB_TIMEOUT_MS);
        int st = cjob_wait(c);
        struct citest_run *res = itest_keep(calloc(1, sizeof(*res)));
        ck_assert(res);
        snprintf(res->out, sizeof(res->out), "%s", citest_slurp(out));
        assert_run(WIFEXITED(st) && strstr(res->out, "dump=0"), res, "dump --archive - failed");
        return res;
}

START_TEST(archive_through_a_pipe)
{
        struct citest_ctx x;
        pid_t pids[3];
        uint64_t start[3];
        const char *tree = start_job(&x, pids, start);
        const char *work = itest_strdupf("%s/work", x.d->dir);
        struct citest_run *res = through_a_pipe(&x, pids, tree, NULL, work);

        assert_run(strstr(res->out, "restore=0"), res, "dump --archive - | restore --archive - failed");
        assert_run(strstr(res->out, "archive written") && strstr(res->out, "archive unpacked and checked") &&
                           strstr(res->out, "images verified"),
                   res, "the archive was not written, or not checked on the way in");
        cjob_check_job_restored(&x, pids, start, 3, 2);
        ck_assert_int_eq(cjob_dir_entries(work), 0);
        citest_kill_all(pids, 3);
}
END_TEST

/* criu fails the first restore, once the stream is unpacked: the stream is
 * used up, so its checked copy is kept and named, and restore --images of
 * it brings the job back. */
START_TEST(archive_stream_kept_when_restore_fails)
{
        struct citest_ctx x;
        pid_t pids[3];
        uint64_t start[3];
        const char *tree = start_job(&x, pids, start);
        const char *work = itest_strdupf("%s/work", x.d->dir), *flag = itest_strdupf("%s/criu-failed", x.d->dir);
        const char *criu = cjob_script(&x, "criu-fail-once",
                                       itest_strdupf("if [ \"$1\" = restore ] && [ ! -e '%s' ]; then touch '%s'; "
                                                     "echo 'criu: failing once' >&2; exit 1; fi\nexec '%s' \"$@\"",
                                                     flag, flag, citest_criu_path));
        struct citest_run *res = through_a_pipe(&x, pids, tree, criu, work);

        assert_run(strstr(res->out, "restore=1") && access(flag, F_OK) == 0, res, "the restore did not fail");
        ck_assert_int_eq(cjob_dir_entries(work), 1);
        const char *dir = cjob_kept_dir(res);
        ck_assert_msg(strncmp(dir, work, strlen(work)) == 0, "kept outside %s: %s", work, dir);
        for (int i = 0; i < 3; i++)
                ck_assert_msg(kill(pids[i], 0) < 0 && errno == ESRCH, "pid %d still runs", (int)pids[i]);

        res = cjob_ctl(cjob_env(&x, NULL), "restore", "--images", dir, NULL);
        cjob_expect_ok(res, "restore --images of the kept copy");
        cjob_check_job_restored(&x, pids, start, 3, 2);
        citest_kill_all(pids, 3);
}
END_TEST

/* The first entry of the archive at path (its manifest), into *ret_len. */
static char *first_entry(const char *path, size_t *ret_len)
{
        struct archive *a = archive_read_new();
        struct archive_entry *e;
        ck_assert_int_eq(archive_read_support_format_tar(a), ARCHIVE_OK);
        ck_assert_int_eq(archive_read_support_filter_zstd(a), ARCHIVE_OK);
        ck_assert_int_eq(archive_read_open_filename(a, path, 65536), ARCHIVE_OK);
        ck_assert_int_eq(archive_read_next_header(a, &e), ARCHIVE_OK);
        ck_assert_str_eq(archive_entry_pathname(e), "manifest.json");
        size_t len = (size_t)archive_entry_size(e);
        char *text = itest_keep(malloc(len + 1));
        ck_assert(text);
        ck_assert_int_eq(archive_read_data(a, text, len), (la_ssize_t)len);
        archive_read_free(a);
        *ret_len = len;
        return text;
}

/* path: manifest, then entry (a file of data, or a link to target when
 * data is NULL), then flood files tree-ROOT/xN. */
static void hostile_archive(const char *path, const char *manifest, size_t len, const char *entry,
                            const char *data, const char *target, const char *tree, int flood)
{
        struct archive *a = archive_write_new();
        ck_assert_int_eq(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
        ck_assert_int_eq(archive_write_add_filter_zstd(a), ARCHIVE_OK);
        ck_assert_int_eq(archive_write_open_filename(a, path), ARCHIVE_OK);
        for (int i = -1; i <= flood; i++) {
                const char *name = i < 0 ? "manifest.json" : i == 0 ? entry : itest_strdupf("tree-%s/x%d", tree, i);
                const char *body = i < 0 ? manifest : i == 0 ? data : "x";
                size_t n = i < 0 ? len : body ? strlen(body) : 0;
                if (!name)
                        continue;
                struct archive_entry *e = archive_entry_new();
                ck_assert(e);
                archive_entry_set_pathname(e, name);
                archive_entry_set_perm(e, 0600);
                archive_entry_set_filetype(e, body ? AE_IFREG : AE_IFLNK);
                if (!body)
                        archive_entry_set_symlink(e, target);
                archive_entry_set_size(e, (la_int64_t)n);
                ck_assert_int_eq(archive_write_header(a, e), ARCHIVE_OK);
                if (n)
                        ck_assert_int_eq(archive_write_data(a, body, n), (la_ssize_t)n);
                archive_entry_free(e);
        }
        ck_assert_int_eq(archive_write_close(a), ARCHIVE_OK);
        archive_write_free(a);
}

/* Another user's archive, or one others may write: root would restore
 * what they put in it (the digests are theirs too).  Refused before a
 * byte is read; verify reads anyone's copy. */
static void assert_others_archive_refused(const char *const *env, const char *const *menv, const char *mark,
                                          const char *arch, const char *work, const pid_t *pids)
{
        const char *theirs = itest_strdupf("%s.theirs", arch);
        ck_assert_int_eq(system(itest_strdupf("cp '%s' '%s'", arch, theirs)), 0);
        ck_assert_int_eq(chown(theirs, 65534, 65534), 0);
        struct citest_run *res = cjob_ctl(env, "verify", "--archive", theirs, "--work-dir", work, NULL);
        assert_run(res->status == 0, res, "verify of another user's copy: %d", res->status);
        for (int k = 0; k < 2; k++) {
                res = cjob_ctl(menv, "restore", "--archive", theirs, "--work-dir", work, NULL);
                assert_run(res->status == 1 && strstr(res->out, "no one else may write") &&
                                   strstr(res->out, "nothing was restored"),
                           res, "restore of an archive %s: %d", k ? "others may write" : "of another user",
                           res->status);
                assert_nothing_restored(mark, pids, 3);
                ck_assert_int_eq(cjob_dir_entries(work), 0);
                ck_assert_int_eq(chown(theirs, 0, 0), 0);
                ck_assert_int_eq(chmod(theirs, 0666), 0);
        }
}

START_TEST(archive_file_damaged_and_hostile)
{
        struct citest_ctx x;
        pid_t pids[3];
        uint64_t start[3];
        const char *tree = start_job(&x, pids, start), *mark;
        const char *const *env = cjob_env(&x, NULL), *const *menv = marking_env(&x, &mark);
        const char *work = itest_strdupf("%s/work", x.d->dir), *arch = itest_strdupf("%s/out/job.tar.zst", x.d->dir);
        ck_assert_int_eq(mkdir(work, 0700), 0);
        ck_assert_int_eq(mkdir(itest_strdupf("%s/out", x.d->dir), 0700), 0);

        struct citest_run *res = cjob_ctl(env, "dump", "--tree", tree, "--archive", arch, "--work-dir", work, NULL);
        cjob_expect_ok(res, "dump --archive FILE");
        assert_run(strstr(res->out, "archive ") && strstr(res->out, "MB compressed"), res, "dump said something else");
        for (int i = 0; i < 3; i++)
                citest_await_gone(pids[i], AWAIT_MS);
        /* In place, alone (its temporary renamed), the private directory gone. */
        ck_assert_int_eq(cjob_dir_entries(itest_strdupf("%s/out", x.d->dir)), 1);
        ck_assert_int_eq(cjob_dir_entries(work), 0);
        res = cjob_ctl(env, "dump", "--tree", tree, "--archive", arch, NULL);
        assert_run(res->status == 1 && strstr(res->out, "already exists") && strstr(res->out, "nothing was suspended"),
                   res, "dump over an archive: %d", res->status);

        res = cjob_ctl(env, "verify", "--archive", arch, "--work-dir", work, NULL);
        assert_run(res->status == 0 && strstr(res->out, "as dumped"), res, "verify --archive: %d", res->status);
        res = cjob_ctl(menv, "restore", "--archive", arch, "--work-dir", work, "--archive-max-files", "2", NULL);
        assert_run(res->status == 1 && strstr(res->out, "--archive-max-files"), res, "restore past the limit: %d",
                   res->status);

        /* Damaged: a byte of the compressed stream. */
        const char *bad = itest_strdupf("%s/bad.tar.zst", x.d->dir);
        ck_assert_int_eq(system(itest_strdupf("cp '%s' '%s'", arch, bad)), 0);
        flip_byte(bad);
        res = cjob_ctl(menv, "verify", "--archive", bad, "--work-dir", work, NULL);
        assert_run(res->status == EXIT_IMAGES_DAMAGED, res, "verify of a damaged archive: %d", res->status);
        res = cjob_ctl(menv, "restore", "--archive", bad, "--work-dir", work, NULL);
        assert_run(res->status == EXIT_IMAGES_DAMAGED && strstr(res->out, "nothing was restored"), res,
                   "restore of a damaged archive: %d", res->status);
        assert_nothing_restored(mark, pids, 3);
        ck_assert_int_eq(cjob_dir_entries(work), 0);

        /* Hostile: "../" out of the private directory, a link to a root
         * file, a flood of entries the manifest does not name. */
        size_t len;
        const char *manifest = first_entry(arch, &len);
        const char *evil = itest_strdupf("%s/evil", x.d->dir);
        struct {
                const char *entry, *data, *target;
                int flood;
        } cases[] = {
                { "../evil", "evil", NULL, 0 },
                { itest_strdupf("tree-%s/../../evil", tree), "evil", NULL, 0 },
                { itest_strdupf("tree-%s/inventory.img", tree), NULL, "/etc/passwd", 0 },
                { NULL, NULL, NULL, 50000 },
        };
        for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
                hostile_archive(bad, manifest, len, cases[k].entry, cases[k].data, cases[k].target, tree,
                                cases[k].flood);
                res = cjob_ctl(menv, "restore", "--archive", bad, "--work-dir", work, NULL);
                assert_run(res->status == EXIT_IMAGES_DAMAGED && strstr(res->out, "nothing was restored"), res,
                           "restore of hostile archive %zu: %d", k, res->status);
                ck_assert_int_ne(access(evil, F_OK), 0);
                ck_assert_int_ne(access(itest_strdupf("%s/evil", work), F_OK), 0);
                ck_assert_int_eq(cjob_dir_entries(work), 0);
                assert_nothing_restored(mark, pids, 3);
        }

        assert_others_archive_refused(env, menv, mark, arch, work, pids);

        /* The good archive: the job back, its memory intact. */
        res = cjob_ctl(env, "restore", "--archive", arch, "--work-dir", work, NULL);
        cjob_expect_ok(res, "restore --archive FILE");
        cjob_check_job_restored(&x, pids, start, 3, 2);
        ck_assert_int_eq(cjob_dir_entries(work), 0);
        citest_kill_all(pids, 3);
}
END_TEST

int main(void)
{
        const TTest *tests[] = { images_changed_byte_refused, archive_through_a_pipe,
                archive_stream_kept_when_restore_fails, archive_file_damaged_and_hostile, NULL };

        /* Up to fourteen cudackptctl runs, each bounded by JOB_TIMEOUT_MS. */
        return citest_main("criu_images", 14.0 * JOB_TIMEOUT_MS / 1000, tests);
}
