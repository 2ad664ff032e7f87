/* Unit tests: client/ctl/job/manifestns.c, manifest.json's keys for a tree
 * that is a pid namespace of its own (cudackptctl run's jobs): written and
 * read back the same; a manifest without them is read as before (plain
 * trees); ns_pids that do not fit their tree, and members whose ns_pid is
 * not their tree's, are refused before anything is restored.  A tree's
 * mount namespace (mount_namespace) likewise, and criu's words for it
 * (criumntns.c). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "runner.h"

#include "criumntns.h"
#include "manifest.h"

static char dir[64];
static int dir_fd = -1;

static void setup(void)
{
        snprintf(dir, sizeof(dir), "/tmp/unit-manifestns-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(dir));
        dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(dir_fd, 0);
}

static void teardown(void)
{
        unlinkat(dir_fd, CTL_MANIFEST_NAME, 0);
        close(dir_fd);
        rmdir(dir);
}

/* DIR/manifest.json of one tree (its JSON) and members, read back: the result. */
static int read_job(const char *tree, const char *members, ctl_manifest *m)
{
        char text[2048], err[PATH_MAX + 512];
        int n = snprintf(text, sizeof(text),
                         "{\"format\":\"cudackpt-job\",\"version\":1,\"selector\":{\"tree\":10},"
                         "\"criu_version\":\"4.2\",\"left_running\":false,\"trees\":[%s],\"members\":%s}",
                         tree, members);
        int fd = openat(dir_fd, CTL_MANIFEST_NAME, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, text, (size_t) n), n);
        close(fd);
        *m = (ctl_manifest) { 0 };
        return ctl_manifest_read(dir_fd, dir, m, err, sizeof(err));
}

START_TEST(test_ns_round_trip)
{
        int pids[] = { 10, 11, 12 }, ns[] = { 1, 2, 3 };
        ctl_manifest_tree tree = { .root = 10, .images = (char *) "tree-10", .pids = pids, .n_pids = 3,
                                   .pid_ns = true, .ns_pids = ns, .mnt_ns = true };
        ctl_manifest_member member = { .pid = 12, .start_time = 7, .tree = 10, .ns_pid = 3 };
        ctl_manifest m = { .selector = cJSON_Parse("{\"tree\":10}"), .criu_version = (char *) "4.2",
                           .trees = &tree, .n_trees = 1, .members = &member, .n_members = 1 };
        ctl_manifest got = { 0 };
        char part[64], err[PATH_MAX + 512];
        int fd = ctl_manifest_create_part(dir_fd, part, sizeof(part));

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ctl_manifest_write(&m, dir_fd, fd, part), 0);
        close(fd);
        cJSON_Delete(m.selector);
        ck_assert_int_eq(ctl_manifest_read(dir_fd, dir, &got, err, sizeof(err)), 0);
        ck_assert(got.trees[0].pid_ns);
        ck_assert(got.trees[0].mnt_ns);
        ck_assert_int_eq(got.trees[0].ns_pids[0], 1);
        ck_assert_int_eq(got.trees[0].ns_pids[2], 3);
        ck_assert_int_eq(got.members[0].ns_pid, 3);
        ctl_manifest_free(&got);
}
END_TEST

START_TEST(test_ns_old_manifest)
{
        ctl_manifest m;

        /* Without the keys: a plain tree, as before. */
        ck_assert_int_eq(read_job("{\"root\":10,\"images\":\"tree-10\",\"pids\":[10,11]}",
                                  "[{\"pid\":11,\"start_time\":5,\"tree\":10}]", &m), 0);
        ck_assert(!m.trees[0].pid_ns);
        ck_assert(!m.trees[0].mnt_ns);
        ck_assert_ptr_null(m.trees[0].ns_pids);
        ck_assert_int_eq(m.members[0].ns_pid, 0);
        ctl_manifest_free(&m);
}
END_TEST

START_TEST(test_ns_refused)
{
        static const char *const bad[][2] = {
                /* ns_pids without the flag, the flag not true, not a list */
                { "\"ns_pids\":[1,2]", "[]" },
                { "\"pid_namespace\":1,\"ns_pids\":[1,2]", "[]" },
                { "\"pid_namespace\":true,\"ns_pids\":2", "[]" },
                /* not one per pid, the root not 1, another one 1, one twice, not a pid */
                { "\"pid_namespace\":true,\"ns_pids\":[1]", "[]" },
                { "\"pid_namespace\":true,\"ns_pids\":[2,1]", "[]" },
                { "\"pid_namespace\":true,\"ns_pids\":[1,1]", "[]" },
                { "\"pid_namespace\":true,\"ns_pids\":[1,0]", "[]" },
                /* a member's ns_pid not its tree's, a member without one, one in a plain tree */
                { "\"pid_namespace\":true,\"ns_pids\":[1,2]", "[{\"pid\":11,\"tree\":10,\"ns_pid\":3}]" },
                { "\"pid_namespace\":true,\"ns_pids\":[1,2]", "[{\"pid\":11,\"tree\":10}]" },
                { NULL, "[{\"pid\":11,\"tree\":10,\"ns_pid\":2}]" },
                /* a mount namespace on a plain tree, or not a boolean */
                { "\"mount_namespace\":true", "[]" },
                { "\"pid_namespace\":true,\"ns_pids\":[1,2],\"mount_namespace\":1", "[]" },
        };
        ctl_manifest m;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char tree[256];
                int r;

                snprintf(tree, sizeof(tree), "{\"root\":10,\"images\":\"tree-10\",\"pids\":[10,11]%s%s}",
                         bad[i][0] ? "," : "", bad[i][0] ? bad[i][0] : "");
                r = read_job(tree, bad[i][1], &m);
                ck_assert_msg(r == -EINVAL || r == -EBADMSG, "case %zu (%s %s) read: %d", i, tree, bad[i][1], r);
        }
        ck_assert_int_eq(read_job("{\"root\":10,\"images\":\"tree-10\",\"pids\":[10,11],\"pid_namespace\":true,"
                                  "\"ns_pids\":[1,2]}", "[{\"pid\":11,\"tree\":10,\"ns_pid\":2}]", &m), 0);
        ctl_manifest_free(&m);
}
END_TEST

/* criu's words: none for a tree without a mount namespace of its own (an
 * older dump restores as before); the external mounts for dump, and the
 * node's / as its root too for restore. */
START_TEST(test_ns_criu_words)
{
        const char *w[2 + CTL_CRIU_MNTNS_MAX_WORDS + 1] = { "restore", "-d" };

        ck_assert_uint_eq(ctl_criu_mntns_words(w, 2, false, true), 2);
        ck_assert_ptr_null(w[2]);
        ck_assert_uint_eq(ctl_criu_mntns_words(w, 2, false, false), 2);
        ck_assert_uint_eq(ctl_criu_mntns_words(w, 2, true, false), 4);
        ck_assert_str_eq(w[2], "--external");
        ck_assert_str_eq(w[3], "mnt[]");
        ck_assert_ptr_null(w[4]);
        ck_assert_uint_eq(ctl_criu_mntns_words(w, 2, true, true), 6);
        ck_assert_str_eq(w[4], "--root");
        ck_assert_str_eq(w[5], "/");
        ck_assert_ptr_null(w[6]);
}
END_TEST

const char unit_suite_name[] = "manifestns";

void unit_tests(TCase *tc)
{
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_ns_round_trip);
        tcase_add_test(tc, test_ns_old_manifest);
        tcase_add_test(tc, test_ns_refused);
        tcase_add_test(tc, test_ns_criu_words);
}
