/* Unit tests: client/ctl/job/digest.c, the digests of a dump's image
 * files: what dump computes is XXH3-128 of each file (checked against
 * libxxhash called here directly), verify finds a changed byte, a
 * truncated, missing, extra or linked file and names it, accepts criu's
 * logs beside the images, and the manifest's "files" lists are read back
 * the same and refused when malformed. */
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
#include <xxhash.h>

#include "runner.h"

#include "digest.h"
#include "manifest.h"

static char dir[64];
static int dir_fd = -1, tree_fd = -1;
static ctl_digest_set set;
static ctl_digest_tree tree;

#define BIG_SIZE (3 * 1024 * 1024 + 17)

static void put(int fd, const char *name, const void *data, size_t len)
{
        int f = openat(fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

        ck_assert_int_ge(f, 0);
        ck_assert_int_eq(write(f, data, len), (ssize_t) len);
        close(f);
}

static void setup(void)
{
        unsigned char *big = malloc(BIG_SIZE);

        snprintf(dir, sizeof(dir), "/tmp/unit-digest-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(dir));
        dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_eq(mkdirat(dir_fd, "tree-7", 0700), 0);
        tree_fd = openat(dir_fd, "tree-7", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(tree_fd, 0);
        ck_assert_ptr_nonnull(big);
        for (size_t i = 0; i < BIG_SIZE; i++)
                big[i] = (unsigned char) (i * 2654435761u >> 13);
        put(tree_fd, "pages-1.img", big, BIG_SIZE);
        put(tree_fd, "inventory.img", "hello", 5);
        put(tree_fd, "empty.img", "", 0);
        put(tree_fd, "dump.log", "criu's log\n", 11);
        free(big);
        set = (ctl_digest_set) { 0 };
        tree = (ctl_digest_tree) { .dir_fd = tree_fd, .name = "tree-7", .set = &set };
}

static void teardown(void)
{
        char cmd[128];

        ctl_digest_set_free(&set);
        close(tree_fd);
        close(dir_fd);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        ck_assert_int_eq(system(cmd), 0);
}

static void compute(void)
{
        char err[512] = "";
        uint64_t bytes = 0;

        ck_assert_msg(ctl_digest_compute(&tree, 1, &bytes, err, sizeof(err)) == 0, "compute: %s", err);
        ck_assert_uint_eq(bytes, BIG_SIZE + 5);
}

/* verify's result; its sentence in err. */
static int verify(char *err, size_t size)
{
        err[0] = '\0';
        return ctl_digest_verify(&tree, 1, NULL, err, size);
}

static void expect_refused(const char *what)
{
        char err[512];

        ck_assert_int_eq(verify(err, sizeof(err)), -EBADMSG);
        ck_assert_msg(strstr(err, what), "verify said '%s', not '%s'", err, what);
}

START_TEST(test_compute_is_xxh3_128)
{
        XXH128_canonical_t c;
        char want[CTL_DIGEST_HEX_SIZE];

        compute();
        ck_assert_uint_eq(set.n, 3); /* dump.log is not an image */
        ck_assert_str_eq(set.files[0].name, "empty.img");
        ck_assert_str_eq(set.files[1].name, "inventory.img");
        ck_assert_str_eq(set.files[2].name, "pages-1.img");
        ck_assert_uint_eq(set.files[2].size, BIG_SIZE);
        XXH128_canonicalFromHash(&c, XXH3_128bits("hello", 5));
        for (int i = 0; i < 16; i++)
                snprintf(want + 2 * i, 3, "%02x", c.digest[i]);
        ck_assert_str_eq(set.files[1].hex, want);
        XXH128_canonicalFromHash(&c, XXH3_128bits("", 0));
        for (int i = 0; i < 16; i++)
                snprintf(want + 2 * i, 3, "%02x", c.digest[i]);
        ck_assert_str_eq(set.files[0].hex, want);
}
END_TEST

START_TEST(test_verify_good_and_logs)
{
        char err[512];

        compute();
        ck_assert_int_eq(verify(err, sizeof(err)), 0);
        /* What a restore writes beside the images is no extra file. */
        put(tree_fd, "restore.log", "x", 1);
        put(tree_fd, "stats-restore", "x", 1);
        unlinkat(tree_fd, "dump.log", 0);
        ck_assert_msg(verify(err, sizeof(err)) == 0, "%s", err);
}
END_TEST

START_TEST(test_verify_changed_byte)
{
        int fd;

        compute();
        fd = openat(tree_fd, "pages-1.img", O_WRONLY | O_CLOEXEC);
        ck_assert_int_eq(pwrite(fd, "\x5a", 1, BIG_SIZE / 2), 1);
        close(fd);
        expect_refused("tree-7/pages-1.img was changed");
}
END_TEST

START_TEST(test_verify_truncated_missing_extra)
{
        int fd;

        compute();
        switch (_i) {
        case 0:
                fd = openat(tree_fd, "pages-1.img", O_WRONLY | O_CLOEXEC);
                ck_assert_int_eq(ftruncate(fd, 4096), 0);
                close(fd);
                expect_refused("tree-7/pages-1.img is truncated: 4096 bytes");
                break;
        case 1:
                ck_assert_int_eq(unlinkat(tree_fd, "inventory.img", 0), 0);
                expect_refused("tree-7/inventory.img is missing");
                break;
        case 2:
                put(tree_fd, "pages-2.img", "more", 4);
                expect_refused("tree-7/pages-2.img is not in the manifest");
                break;
        case 3:
                ck_assert_int_eq(unlinkat(tree_fd, "inventory.img", 0), 0);
                ck_assert_int_eq(symlinkat("empty.img", tree_fd, "inventory.img"), 0);
                expect_refused("tree-7/inventory.img is not a regular file");
                break;
        case 4:
                ck_assert_int_eq(mkdirat(tree_fd, "sub", 0700), 0);
                expect_refused("tree-7/sub is not a regular file");
                break;
        case 5:
                ck_assert_int_eq(symlinkat("/etc/passwd", tree_fd, "restore.log"), 0);
                expect_refused("tree-7/restore.log is not a regular file");
                break;
        default:
                put(tree_fd, "empty.img", "x", 1);
                expect_refused("tree-7/empty.img is longer than it was dumped");
        }
}
END_TEST

START_TEST(test_json_round_trip)
{
        ctl_digest_set back = { 0 };
        cJSON *j;

        compute();
        j = ctl_digest_to_json(&set);
        ck_assert_ptr_nonnull(j);
        ck_assert_int_eq(ctl_digest_from_json(j, &back), 0);
        ck_assert_uint_eq(back.n, set.n);
        for (size_t i = 0; i < set.n; i++) {
                ck_assert_str_eq(back.files[i].name, set.files[i].name);
                ck_assert_str_eq(back.files[i].hex, set.files[i].hex);
                ck_assert_uint_eq(back.files[i].size, set.files[i].size);
        }
        ck_assert_ptr_nonnull(ctl_digest_find(&back, "pages-1.img"));
        ck_assert_ptr_null(ctl_digest_find(&back, "pages-9.img"));
        ctl_digest_set_free(&back);
        cJSON_Delete(j);
}
END_TEST

static const char *const bad_lists[] = {
        "{}",
        "[{\"name\":\"a\",\"size\":1}]",
        "[{\"name\":\"a\",\"size\":1,\"xxh3_128\":\"0123456789ABCDEF0123456789abcdef\"}]",
        "[{\"name\":\"a\",\"size\":1,\"xxh3_128\":\"0123456789abcdef\"}]",
        "[{\"name\":\"../a\",\"size\":1,\"xxh3_128\":\"0123456789abcdef0123456789abcdef\"}]",
        "[{\"name\":\"a/b\",\"size\":1,\"xxh3_128\":\"0123456789abcdef0123456789abcdef\"}]",
        "[{\"name\":\"..\",\"size\":1,\"xxh3_128\":\"0123456789abcdef0123456789abcdef\"}]",
        "[{\"name\":\"dump.log\",\"size\":1,\"xxh3_128\":\"0123456789abcdef0123456789abcdef\"}]",
        "[{\"name\":\"a\",\"size\":-1,\"xxh3_128\":\"0123456789abcdef0123456789abcdef\"}]",
        "[{\"name\":\"a\",\"size\":1.5,\"xxh3_128\":\"0123456789abcdef0123456789abcdef\"}]",
        "[{\"name\":\"b\",\"size\":1,\"xxh3_128\":\"0123456789abcdef0123456789abcdef\"},"
        "{\"name\":\"a\",\"size\":1,\"xxh3_128\":\"0123456789abcdef0123456789abcdef\"}]",
        "[{\"name\":\"a\",\"size\":1,\"xxh3_128\":\"0123456789abcdef0123456789abcdef\"},"
        "{\"name\":\"a\",\"size\":1,\"xxh3_128\":\"0123456789abcdef0123456789abcdef\"}]",
};

START_TEST(test_json_malformed)
{
        ctl_digest_set back;
        cJSON *j = cJSON_Parse(bad_lists[_i]);

        ck_assert_ptr_nonnull(j);
        ck_assert_msg(ctl_digest_from_json(j, &back) == -EINVAL, "accepted %s", bad_lists[_i]);
        ctl_digest_set_free(&back);
        cJSON_Delete(j);
}
END_TEST

START_TEST(test_names)
{
        ck_assert(ctl_digest_name_ok("pages-1.img"));
        ck_assert(!ctl_digest_name_ok(""));
        ck_assert(!ctl_digest_name_ok("."));
        ck_assert(!ctl_digest_name_ok(".."));
        ck_assert(!ctl_digest_name_ok("a/b"));
        ck_assert(!ctl_digest_name_ok("a b"));
        ck_assert(!ctl_digest_name_ok("a\nb"));
        ck_assert(!ctl_digest_name_ok("\xc3\xa9"));
        ck_assert(ctl_digest_skipped_name("dump.log"));
        ck_assert(!ctl_digest_skipped_name("inventory.img"));
}
END_TEST

/* A manifest with digests reads back with them; one with digests for
 * some trees only is refused; one without any (older) reads without. */
START_TEST(test_manifest_files)
{
        int pids[2] = { 7, 8 };
        ctl_manifest_tree trees[2] = { { .root = 7, .images = "tree-7", .pids = pids, .n_pids = 1, .files = &set },
                                       { .root = 8, .images = "tree-8", .pids = pids + 1, .n_pids = 1 } };
        ctl_manifest m = { .criu_version = "4.2", .trees = trees, .n_trees = 1 }, back = { 0 };
        char part[128], err[512];
        int fd;

        compute();
        m.selector = cJSON_Parse("{\"tree\":7}");
        fd = ctl_manifest_create_part(dir_fd, part, sizeof(part));
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ctl_manifest_write(&m, dir_fd, fd, part), 0);
        close(fd);
        ck_assert_msg(ctl_manifest_read(dir_fd, dir, &back, err, sizeof(err)) == 0, "%s", err);
        ck_assert(ctl_manifest_has_digests(&back));
        ck_assert_uint_eq(back.trees[0].files->n, 3);
        ck_assert_str_eq(back.trees[0].files->files[2].hex, set.files[2].hex);
        ctl_manifest_free(&back);

        m.n_trees = 2;
        fd = ctl_manifest_create_part(dir_fd, part, sizeof(part));
        ck_assert_int_eq(ctl_manifest_write(&m, dir_fd, fd, part), 0);
        close(fd);
        ck_assert_int_eq(ctl_manifest_read(dir_fd, dir, &back, err, sizeof(err)), -EINVAL);
        ctl_manifest_free(&back);

        trees[0].files = NULL;
        fd = ctl_manifest_create_part(dir_fd, part, sizeof(part));
        ck_assert_int_eq(ctl_manifest_write(&m, dir_fd, fd, part), 0);
        close(fd);
        ck_assert_msg(ctl_manifest_read(dir_fd, dir, &back, err, sizeof(err)) == 0, "%s", err);
        ck_assert(!ctl_manifest_has_digests(&back));
        ctl_manifest_free(&back);
        cJSON_Delete(m.selector);
}
END_TEST

const char unit_suite_name[] = "digest";

void unit_tests(TCase *tc)
{
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_compute_is_xxh3_128);
        tcase_add_test(tc, test_verify_good_and_logs);
        tcase_add_test(tc, test_verify_changed_byte);
        tcase_add_loop_test(tc, test_verify_truncated_missing_extra, 0, 7);
        tcase_add_test(tc, test_json_round_trip);
        tcase_add_loop_test(tc, test_json_malformed, 0, (int) (sizeof(bad_lists) / sizeof(bad_lists[0])));
        tcase_add_test(tc, test_names);
        tcase_add_test(tc, test_manifest_files);
}
