/* Unit tests: client/ctl/job/manifest.c, the image directory's
 * manifest.json: what dump writes restore reads back the same, and
 * restore refuses a manifest whose trees and members do not agree, one of
 * too many trees, or one that is not a manifest, before running criu. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "runner.h"

#include "manifest.h"

static char dir[64];
static int dir_fd = -1;

static void setup(void)
{
        snprintf(dir, sizeof(dir), "/tmp/unit-manifest-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(dir));
        dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(dir_fd, 0);
}

static void teardown(void)
{
        char cmd[128];

        close(dir_fd);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        ck_assert_int_eq(system(cmd), 0);
}

/* DIR/manifest.json with text in it, as a user's file would be. */
static void put(const char *text)
{
        int fd = openat(dir_fd, CTL_MANIFEST_NAME, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t) strlen(text));
        close(fd);
}

static int read_back(ctl_manifest *m)
{
        char err[PATH_MAX + 512] = "";
        int r = ctl_manifest_read(dir_fd, dir, m, err, sizeof(err));

        ck_assert_msg(r == 0 || strstr(err, CTL_MANIFEST_NAME), "no sentence for %d: '%s'", r, err);
        return r;
}

/* A manifest of a job of text_trees (JSON) and text_members. */
static void put_job(const char *trees, const char *members)
{
        char text[4096];

        snprintf(text, sizeof(text),
                 "{\"format\":\"cudackpt-job\",\"version\":1,\"selector\":{\"tree\":10},\"criu_version\":\"4.2\","
                 "\"left_running\":false,\"trees\":%s,\"members\":%s}",
                 trees, members);
        put(text);
}

START_TEST(test_round_trip)
{
        int pids10[] = { 10, 11 }, pids20[] = { 20 };
        char *gpus[] = { (char *) "GPU-6987cd69-a0ec-5a42-c1ab-ecda53d34e96" };
        ctl_manifest_tree trees[] = { { 10, (char *) "tree-10", pids10, 2, NULL },
                                      { 20, (char *) "tree-20", pids20, 1, NULL } };
        ctl_manifest_member members[] = { { 11, 4526521, 10, gpus, 1 }, { 20, 99, 20, NULL, 0 } };
        ctl_manifest m = { .selector = cJSON_Parse("{\"pids\":[{\"pid\":11},{\"pid\":20}]}"),
                           .criu_version = (char *) "4.2", .left_running = true,
                           .trees = trees, .n_trees = 2, .members = members, .n_members = 2 };
        ctl_manifest got = { 0 };
        char part[64];
        struct stat st;
        int fd = ctl_manifest_create_part(dir_fd, part, sizeof(part));

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(strncmp(part, CTL_MANIFEST_NAME ".tmp-", strlen(CTL_MANIFEST_NAME ".tmp-")), 0);
        ck_assert_int_eq(ctl_manifest_write(&m, dir_fd, fd, part), 0);
        cJSON_Delete(m.selector);
        /* Renamed into place: no temporary file is left. */
        ck_assert_int_eq(fstatat(dir_fd, part, &st, AT_SYMLINK_NOFOLLOW), -1);
        ck_assert_int_eq(read_back(&got), 0);
        ck_assert(got.left_running);
        ck_assert_str_eq(got.criu_version, "4.2");
        ck_assert_uint_eq(got.n_trees, 2);
        ck_assert_int_eq(got.trees[1].root, 20);
        ck_assert_str_eq(got.trees[0].images, "tree-10");
        ck_assert_uint_eq(got.trees[0].n_pids, 2);
        ck_assert_int_eq(got.trees[0].pids[1], 11);
        ck_assert_uint_eq(got.n_members, 2);
        ck_assert_int_eq(got.members[0].pid, 11);
        ck_assert_uint_eq(got.members[0].start_time, 4526521);
        ck_assert_int_eq(got.members[0].tree, 10);
        ck_assert_uint_eq(got.members[0].n_gpus, 1);
        ck_assert_str_eq(got.members[0].gpus[0], gpus[0]);
        ck_assert_ptr_nonnull(cJSON_GetObjectItemCaseSensitive(got.selector, "pids"));
        ctl_manifest_free(&got);
}
END_TEST

START_TEST(test_agree)
{
        ctl_manifest m = { 0 };

        put_job("[{\"root\":10,\"images\":\"tree-10\",\"pids\":[10,11]}]",
                "[{\"pid\":11,\"start_time\":5,\"tree\":10,\"gpus\":[]}]");
        ck_assert_int_eq(read_back(&m), 0);
        ctl_manifest_free(&m);
        /* A tree without its root among its pids. */
        put_job("[{\"root\":10,\"images\":\"tree-10\",\"pids\":[11]}]", "[]");
        ck_assert_int_eq(read_back(&m), -EBADMSG);
        /* A pid in two trees. */
        put_job("[{\"root\":10,\"images\":\"tree-10\",\"pids\":[10,11]},"
                "{\"root\":11,\"images\":\"tree-11\",\"pids\":[11]}]", "[]");
        ck_assert_int_eq(read_back(&m), -EBADMSG);
        /* A member outside its tree, and a member twice. */
        put_job("[{\"root\":10,\"images\":\"tree-10\",\"pids\":[10]}]",
                "[{\"pid\":11,\"start_time\":5,\"tree\":10,\"gpus\":[]}]");
        ck_assert_int_eq(read_back(&m), -EBADMSG);
        put_job("[{\"root\":10,\"images\":\"tree-10\",\"pids\":[10]}]",
                "[{\"pid\":10,\"start_time\":5,\"tree\":10},{\"pid\":10,\"start_time\":5,\"tree\":10}]");
        ck_assert_int_eq(read_back(&m), -EBADMSG);
}
END_TEST

START_TEST(test_not_a_manifest)
{
        ctl_manifest m = { 0 };

        put("not JSON");
        ck_assert_int_eq(read_back(&m), -EINVAL);
        put("{\"format\":\"cudackpt-job\",\"version\":2,\"trees\":[],\"members\":[]}");
        ck_assert_int_eq(read_back(&m), -EINVAL);
        put_job("[{\"root\":0,\"images\":\"tree-0\",\"pids\":[0]}]", "[]");
        ck_assert_int_lt(read_back(&m), 0);
        put_job("[{\"root\":10,\"images\":7,\"pids\":[10]}]", "[]");
        ck_assert_int_lt(read_back(&m), 0);
        ck_assert_int_eq(unlinkat(dir_fd, CTL_MANIFEST_NAME, 0), 0);
        ck_assert_int_eq(read_back(&m), -ENOENT);
}
END_TEST

/* One criu of each tree runs at once: more trees than that are refused. */
START_TEST(test_too_many_trees)
{
        size_t size = 64 * (CTL_JOB_MAX_TREES + 2);
        char *trees = malloc(size), *p = trees;
        ctl_manifest m = { 0 };

        ck_assert_ptr_nonnull(trees);
        p += sprintf(p, "[");
        for (int i = 1; i <= CTL_JOB_MAX_TREES + 1; i++)
                p += sprintf(p, "%s{\"root\":%d,\"images\":\"tree-%d\",\"pids\":[%d]}", i > 1 ? "," : "", i, i, i);
        sprintf(p, "]");
        {
                char *text = malloc(size + 256);

                ck_assert_ptr_nonnull(text);
                sprintf(text, "{\"format\":\"cudackpt-job\",\"version\":1,\"selector\":{\"tree\":1},"
                              "\"criu_version\":\"4.2\",\"left_running\":false,\"trees\":%s,\"members\":[]}", trees);
                put(text);
                free(text);
        }
        free(trees);
        ck_assert_int_eq(read_back(&m), -E2BIG);
}
END_TEST

const char unit_suite_name[] = "manifest";

void unit_tests(TCase *tc)
{
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_round_trip);
        tcase_add_test(tc, test_agree);
        tcase_add_test(tc, test_not_a_manifest);
        tcase_add_test(tc, test_too_many_trees);
}
