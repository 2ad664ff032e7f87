/* Unit tests: a directory only the daemon's user may change (privdir.h),
 * on real directories under /tmp (itself sticky and root's). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runner.h"

#include "base/privdir.h"

#define OTHER_UID 4242

static char top[64];

static void setup(void)
{
        snprintf(top, sizeof(top), "/tmp/unit-privdir-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(top));
}

static void teardown(void)
{
        char cmd[128];

        snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
        if (system(cmd) != 0)
                fprintf(stderr, "could not remove %s\n", top);
}

static const char *path_of(const char *name)
{
        static char buf[4][256];
        static int k;

        k = (k + 1) % 4;
        snprintf(buf[k], sizeof(buf[k]), "%s/%s", top, name);
        return buf[k];
}

/* privdir_open(path): its result, why in why. */
static int try_open(const char *path, char *why, size_t n)
{
        int fd = -1, r = privdir_open(path, &fd, why, n);

        if (r == 0) {
                ck_assert_int_ge(fd, 0);
                close(fd);
        } else {
                ck_assert_int_eq(fd, -1);
        }
        return r;
}

START_TEST(test_root_only_dir)
{
        char why[256] = "";
        struct stat a, b;
        int fd = -1;

        ck_assert_int_eq(mkdir(path_of("d"), 0755), 0);
        ck_assert_msg(privdir_open(path_of("d"), &fd, why, sizeof(why)) == 0, "%s", why);
        /* The descriptor is of that very directory. */
        ck_assert_int_eq(fstat(fd, &a), 0);
        ck_assert_int_eq(stat(path_of("d"), &b), 0);
        ck_assert(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
        close(fd);
        /* Relative to the working directory, "." and repeated slashes. */
        ck_assert_int_eq(chdir(top), 0);
        ck_assert_msg(try_open("d", why, sizeof(why)) == 0, "%s", why);
        ck_assert_msg(try_open(".//d/./", why, sizeof(why)) == 0, "%s", why);
}
END_TEST

START_TEST(test_open_to_others)
{
        char why[256] = "";

        ck_assert_int_eq(mkdir(path_of("d"), 0755), 0);
        ck_assert_int_eq(chmod(path_of("d"), 0777), 0);
        ck_assert_int_eq(try_open(path_of("d"), why, sizeof(why)), -EPERM);
        ck_assert_msg(strstr(why, "may be written by others than its owner (mode 0777)"), "%s", why);
        /* Sticky is no excuse for the directory itself (/tmp as the store). */
        ck_assert_int_eq(chmod(path_of("d"), 01777), 0);
        ck_assert_int_eq(try_open(path_of("d"), why, sizeof(why)), -EPERM);
        ck_assert_int_eq(chmod(path_of("d"), 0775), 0);
        ck_assert_int_eq(try_open(path_of("d"), why, sizeof(why)), -EPERM);
        ck_assert_int_eq(try_open("/tmp", why, sizeof(why)), -EPERM);
}
END_TEST

START_TEST(test_ancestors)
{
        char why[256] = "";

        ck_assert_int_eq(mkdir(path_of("d"), 0755), 0);
        ck_assert_int_eq(mkdir(path_of("d/s"), 0755), 0);
        /* Above it, open to others and not sticky: they could swap it. */
        ck_assert_int_eq(chmod(path_of("d"), 0777), 0);
        ck_assert_int_eq(try_open(path_of("d/s"), why, sizeof(why)), -EPERM);
        ck_assert_msg(strstr(why, path_of("d")) && strstr(why, "may be written by others"), "%s", why);
        /* Sticky above it is safe. */
        ck_assert_int_eq(chmod(path_of("d"), 01777), 0);
        ck_assert_msg(try_open(path_of("d/s"), why, sizeof(why)) == 0, "%s", why);
}
END_TEST

START_TEST(test_owners)
{
        char why[256] = "";

        if (geteuid() != 0)
                return; /* chown needs root */
        ck_assert_int_eq(mkdir(path_of("d"), 0755), 0);
        ck_assert_int_eq(mkdir(path_of("d/s"), 0755), 0);
        ck_assert_int_eq(chown(path_of("d/s"), OTHER_UID, OTHER_UID), 0);
        ck_assert_int_eq(try_open(path_of("d/s"), why, sizeof(why)), -EPERM);
        ck_assert_msg(strstr(why, "is owned by uid 4242"), "%s", why);
        /* Another's directory above it: it could rename what is inside. */
        ck_assert_int_eq(mkdir(path_of("d/s/t"), 0755), 0);
        ck_assert_int_eq(try_open(path_of("d/s/t"), why, sizeof(why)), -EPERM);
        /* In a sticky directory, a link of another user is not followed. */
        ck_assert_int_eq(chmod(path_of("d"), 01777), 0);
        ck_assert_int_eq(mkdir(path_of("real"), 0755), 0);
        ck_assert_int_eq(symlink(path_of("real"), path_of("d/link")), 0);
        ck_assert_msg(try_open(path_of("d/link"), why, sizeof(why)) == 0, "%s", why);
        ck_assert_int_eq(lchown(path_of("d/link"), OTHER_UID, OTHER_UID), 0);
        ck_assert_int_eq(try_open(path_of("d/link"), why, sizeof(why)), -EPERM);
        ck_assert_msg(strstr(why, "a symbolic link owned by another user"), "%s", why);
}
END_TEST

START_TEST(test_links_and_names)
{
        char why[256] = "";

        ck_assert_int_eq(mkdir(path_of("d"), 0755), 0);
        ck_assert_int_eq(mkdir(path_of("d/s"), 0755), 0);
        /* Links of root or the daemon's user are followed, relative ones too. */
        ck_assert_int_eq(symlink("d/s", path_of("rel")), 0);
        ck_assert_msg(try_open(path_of("rel"), why, sizeof(why)) == 0, "%s", why);
        ck_assert_int_eq(symlink(path_of("d"), path_of("abs")), 0);
        ck_assert_msg(try_open(path_of("abs/s"), why, sizeof(why)) == 0, "%s", why);
        /* A loop ends. */
        ck_assert_int_eq(symlink("loop", path_of("loop")), 0);
        ck_assert_int_eq(try_open(path_of("loop"), why, sizeof(why)), -ELOOP);
        ck_assert_int_eq(try_open(path_of("d/../d"), why, sizeof(why)), -EPERM);
        ck_assert_int_eq(try_open(path_of("none"), why, sizeof(why)), -ENOENT);
        ck_assert_int_eq(try_open("", why, sizeof(why)), -EINVAL);
        ck_assert_int_eq(close(creat(path_of("file"), 0600)), 0);
        ck_assert_int_eq(try_open(path_of("file"), why, sizeof(why)), -ENOTDIR);
}
END_TEST

const char unit_suite_name[] = "privdir";

void unit_tests(TCase *tc)
{
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_root_only_dir);
        tcase_add_test(tc, test_open_to_others);
        tcase_add_test(tc, test_ancestors);
        tcase_add_test(tc, test_owners);
        tcase_add_test(tc, test_links_and_names);
}
