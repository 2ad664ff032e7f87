/* Unit tests: client/ctl/job/safedir.c, the checked walk that opens the image
 * directory of dump and restore --images (what root checks is what it
 * uses): directories others may write or own on the way are refused, a
 * sticky one is crossed, links are followed only where no one else could
 * have put them, the last component is never a link; a trusted file
 * (restore --archive FILE) is its user's, written by no one else.  The cases with
 * another user's files need root (chown); they are left out otherwise. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runner.h"

#include "safedir.h"

#define OTHER_UID 65534

static char base[64];

static const char *at(const char *rel)
{
        static char bufs[8][PATH_MAX];
        static int k;
        char *b = bufs[k++ % 8];
        snprintf(b, PATH_MAX, "%s/%s", base, rel);
        return b;
}

static void make_dir(const char *rel, mode_t mode)
{
        ck_assert_msg(mkdir(at(rel), 0700) == 0, "mkdir %s: %s", rel, strerror(errno));
        ck_assert_int_eq(chmod(at(rel), mode), 0);
}

static void setup(void)
{
        snprintf(base, sizeof(base), "/tmp/unit-safedir.XXXXXX");
        ck_assert(mkdtemp(base));
        make_dir("a", 0755);
        make_dir("a/img", 0700);
}

static void teardown(void)
{
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
        ck_assert_int_eq(system(cmd), 0);
}

/* Opens path; r the result wanted, and on success the directory must be
 * want (or path itself when want is NULL). */
static void expect(const char *path, bool create, int r, const char *want)
{
        char err[PATH_MAX + 512] = "";
        int fd = -1;
        int got = ctl_safedir_open(path, create, &fd, err, sizeof(err));
        ck_assert_msg(got == r, "%s: %d (%s), wanted %d", path, got, err, r);
        if (r < 0) {
                ck_assert_msg(*err, "%s: refused without a sentence", path);
                return;
        }
        struct stat a, b;
        ck_assert_int_eq(fstat(fd, &a), 0);
        ck_assert_int_eq(stat(want ? want : path, &b), 0);
        ck_assert_msg(a.st_ino == b.st_ino && a.st_dev == b.st_dev, "%s: opened another directory", path);
        close(fd);
}

START_TEST(test_plain)
{
        expect(at("a/img"), false, 0, NULL);
        expect(at("a//img/"), false, 0, at("a/img"));
        expect(at("a/./img"), false, 0, at("a/img"));
        /* Missing: made with create only, 0700. */
        expect(at("a/new"), false, -ENOENT, NULL);
        expect(at("a/new"), true, 0, NULL);
        struct stat st;
        ck_assert_int_eq(stat(at("a/new"), &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0700);
        /* Relative to the working directory. */
        char cwd[PATH_MAX];
        ck_assert(getcwd(cwd, sizeof(cwd)));
        ck_assert_int_eq(chdir(at("a")), 0);
        expect("img", false, 0, at("a/img"));
        ck_assert_int_eq(chdir(cwd), 0);
        /* ".." is not walked. */
        expect(at("a/../a/img"), false, -EINVAL, NULL);
}
END_TEST

START_TEST(test_modes)
{
        /* The directory itself: writable by its group, or a link. */
        ck_assert_int_eq(chmod(at("a/img"), 0770), 0);
        expect(at("a/img"), false, -EPERM, NULL);
        ck_assert_int_eq(chmod(at("a/img"), 0700), 0);
        ck_assert_int_eq(symlink(at("a/img"), at("a/link")), 0);
        expect(at("a/link"), false, -ELOOP, NULL);
        /* A directory on the way that anyone may write, not sticky. */
        make_dir("w", 0777);
        make_dir("w/img", 0700);
        expect(at("w/img"), false, -EPERM, NULL);
        /* ... sticky: crossed. */
        ck_assert_int_eq(chmod(at("w"), 01777), 0);
        expect(at("w/img"), false, 0, NULL);
        /* A link on the way, in a directory no one else may write: followed. */
        ck_assert_int_eq(symlink("a", at("rel")), 0);
        ck_assert_int_eq(symlink(at("a"), at("abs")), 0);
        expect(at("rel/img"), false, 0, at("a/img"));
        expect(at("abs/img"), false, 0, at("a/img"));
}
END_TEST

START_TEST(test_other_user)
{
        if (geteuid() != 0)
                return; /* chown needs root */
        /* Another user's directory on the way, or as the directory. */
        make_dir("u", 0755);
        make_dir("u/img", 0700);
        ck_assert_int_eq(chown(at("u"), OTHER_UID, OTHER_UID), 0);
        expect(at("u/img"), false, -EPERM, NULL);
        ck_assert_int_eq(chown(at("a/img"), OTHER_UID, OTHER_UID), 0);
        expect(at("a/img"), false, -EPERM, NULL);
        ck_assert_int_eq(chown(at("a/img"), 0, 0), 0);
        /* In a sticky directory: what another user put there is not
         * crossed, a link of theirs not followed; root's are. */
        make_dir("s", 01777);
        make_dir("s/theirs", 0755);
        make_dir("s/theirs/img", 0700);
        ck_assert_int_eq(chown(at("s/theirs"), OTHER_UID, OTHER_UID), 0);
        expect(at("s/theirs/img"), false, -EPERM, NULL);
        ck_assert_int_eq(symlink(at("a"), at("s/evil")), 0);
        ck_assert_int_eq(lchown(at("s/evil"), OTHER_UID, OTHER_UID), 0);
        expect(at("s/evil/img"), false, -EPERM, NULL);
        ck_assert_int_eq(symlink(at("a"), at("s/good")), 0);
        expect(at("s/good/img"), false, 0, at("a/img"));
}
END_TEST

START_TEST(test_sub)
{
        char err[PATH_MAX + 512];
        int dfd = -1, fd = -1;
        ck_assert_int_eq(ctl_safedir_open(at("a/img"), false, &dfd, err, sizeof(err)), 0);
        ck_assert_int_eq(ctl_safedir_sub(dfd, "tree-1", false, &fd), -ENOENT);
        ck_assert_int_eq(ctl_safedir_sub(dfd, "tree-1", true, &fd), 0);
        close(fd);
        ck_assert_int_eq(symlink(at("a"), at("a/img/tree-2")), 0);
        ck_assert_int_eq(ctl_safedir_sub(dfd, "tree-2", true, &fd), -EEXIST);
        make_dir("a/img/tree-3", 0770);
        ck_assert_int_eq(ctl_safedir_sub(dfd, "tree-3", false, &fd), -EEXIST);
        close(dfd);
}
END_TEST

/* Makes rel, a file of mode; opened as a trusted file: r wanted. */
static void expect_file(const char *rel, mode_t mode, int r)
{
        char err[PATH_MAX + 512] = "";
        int fd = open(at(rel), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

        if (fd >= 0) {
                ck_assert_int_eq(fchmod(fd, mode), 0);
                close(fd);
        }
        fd = -1;
        int got = ctl_safedir_open_file(at(rel), &fd, err, sizeof(err));
        ck_assert_msg(got == r, "%s: %d (%s), wanted %d", rel, got, err, r);
        ck_assert_msg(r == 0 ? fd >= 0 && (fcntl(fd, F_GETFL) & (O_ACCMODE | O_NONBLOCK)) == O_RDONLY : *err != '\0', "%s",
                      rel);
        if (fd >= 0)
                close(fd);
}

/* restore --archive's FILE: its directory walked as on the way (a sticky
 * one crossed), the file itself this user's, written by no one else, not
 * a link; another user's, even in a directory of ours, refused. */
START_TEST(test_file)
{
        expect_file("a/x.zst", 0644, 0);
        expect_file("a/y.zst", 0666, -EPERM);
        make_dir("a/sub", 0700);
        ck_assert_int_eq(mkdir(at("a/sub/d"), 0700), 0);
        expect_file("a/sub/d", 0700, -EPERM); /* a directory */
        ck_assert_int_eq(symlink(at("a/x.zst"), at("a/link.zst")), 0);
        expect_file("a/link.zst", 0600, -ELOOP);
        make_dir("w", 0777);
        expect_file("w/x.zst", 0600, -EPERM);
        ck_assert_int_eq(chmod(at("w"), 01777), 0);
        expect_file("w/x.zst", 0600, 0);
        char cwd[PATH_MAX];
        ck_assert(getcwd(cwd, sizeof(cwd)));
        char err[PATH_MAX + 512];
        int fd = -1;
        ck_assert_int_eq(chdir(at("a")), 0);
        ck_assert_msg(ctl_safedir_open_file("x.zst", &fd, err, sizeof(err)) == 0, "%s", err);
        close(fd);
        ck_assert_int_eq(ctl_safedir_open_file(".", &fd, err, sizeof(err)), -EINVAL);
        ck_assert_int_eq(chdir(cwd), 0);
        if (geteuid() != 0)
                return; /* chown needs root */
        ck_assert_int_eq(chown(at("a/x.zst"), OTHER_UID, OTHER_UID), 0);
        expect_file("a/x.zst", 0600, -EPERM);
}
END_TEST

const char unit_suite_name[] = "safedir";

void unit_tests(TCase *tc)
{
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_plain);
        tcase_add_test(tc, test_modes);
        tcase_add_test(tc, test_other_user);
        tcase_add_test(tc, test_sub);
        tcase_add_test(tc, test_file);
}
