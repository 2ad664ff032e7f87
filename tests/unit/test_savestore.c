/* Unit tests: the saves directory (savestore.h) on real directories under
 * /tmp, and the names a job or a save may have (savecall.h). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runner.h"

#include "saves/savecall.h"
#include "saves/savestore.h"

static char top[64];
static int dirfd_ = -1;

static void setup(void)
{
        char why[256];

        snprintf(top, sizeof(top), "/tmp/unit-saves-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(top));
        ck_assert_int_eq(savestore_open(top, &dirfd_, why, sizeof(why)), 0);
}

static void teardown(void)
{
        char cmd[128];

        close(dirfd_);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
        if (system(cmd) != 0)
                fprintf(stderr, "could not remove %s\n", top);
}

/* A save as a dump leaves it: a directory name in fd holding a manifest
 * naming the run job (a uid's) and a file of size bytes. */
static void make_dump(int fd, const char *name, const char *run, size_t size)
{
        char text[128];
        int d, f;

        ck_assert_int_eq(mkdirat(fd, name, 0700), 0);
        d = openat(fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(d, 0);
        snprintf(text, sizeof(text), "{\"run\": {\"name\": \"%s\"}}", run);
        f = openat(d, "manifest.json", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_ge(f, 0);
        ck_assert_int_eq(write(f, text, strlen(text)), (ssize_t)strlen(text));
        close(f);
        ck_assert_int_eq(mkdirat(d, "tree-1", 0700), 0);
        f = openat(d, "tree-1/pages.img", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_ge(f, 0);
        char *buf = calloc(1, size);
        ck_assert_int_eq(write(f, buf, size), (ssize_t)size);
        free(buf);
        close(f);
        close(d);
}

START_TEST(test_names)
{
        static const char *const good[] = { "a", "train-1", "A.b_c", "x-", "012345678901234567890123456789012345678901234567" };
        static const char *const bad[] = { "", ".", "..", ".x", "-x", "a/b", "../a", "a b", "a\n",
                                           "0123456789012345678901234567890123456789012345678", "é" };

        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
                ck_assert_msg(savecall_name_ok(good[i]), "\"%s\" refused", good[i]);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_msg(!savecall_name_ok(bad[i]), "\"%s\" accepted", bad[i]);
}
END_TEST

/* A uid's directory is made root's 0700; one that is not refused. */
START_TEST(test_uid_dir)
{
        struct stat st;
        int fd;

        ck_assert_int_eq(savestore_uid_dir(dirfd_, 4242, false, &fd), -ENOENT);
        ck_assert_int_eq(savestore_uid_dir(dirfd_, 4242, true, &fd), 0);
        ck_assert_int_eq(fstat(fd, &st), 0);
        ck_assert(st.st_uid == geteuid() && (st.st_mode & 07777) == 0700);
        close(fd);
        ck_assert_int_eq(mkdirat(dirfd_, "7", 0755), 0);
        ck_assert_int_eq(savestore_uid_dir(dirfd_, 7, true, &fd), -EPERM);
        ck_assert_int_eq(symlinkat("4242", dirfd_, "8"), 0);
        ck_assert_int_lt(savestore_uid_dir(dirfd_, 8, false, &fd), 0);
}
END_TEST

/* A dump installed under a new name, listed with its job and bytes; a
 * second one refused without replace and exchanged with replace (the old
 * one removed); the daemon's own names never listed; removal. */
START_TEST(test_install_list_remove)
{
        struct savestore_info *v = NULL, one;
        size_t n = 0, all = 0;
        char tmp[SAVESTORE_TMP_MAX];
        int fd;

        ck_assert_int_eq(savestore_uid_dir(dirfd_, 4242, true, &fd), 0);
        savestore_tmp_name("dump", tmp, sizeof(tmp));
        ck_assert(tmp[0] == '.');
        make_dump(fd, tmp, "u4242-train", 100000);
        ck_assert_int_eq(savestore_list(fd, 4242, &v, &n), 0);
        ck_assert_uint_eq(n, 0); /* a dump being written is no save */
        free(v);
        ck_assert_int_eq(savestore_install(fd, tmp, "s1", false), 0);
        ck_assert_int_eq(savestore_info(fd, 4242, "s1", &one), 0);
        ck_assert_str_eq(one.job, "train");
        ck_assert_uint_ge(one.bytes, 100000);
        /* Another uid's job in it is not named as this uid's. */
        ck_assert_int_eq(savestore_info(fd, 4243, "s1", &one), 0);
        ck_assert_str_eq(one.job, "");

        savestore_tmp_name("dump", tmp, sizeof(tmp));
        make_dump(fd, tmp, "u4242-other", 10);
        ck_assert_int_eq(savestore_install(fd, tmp, "s1", false), -EEXIST);
        ck_assert_int_eq(savestore_install(fd, tmp, "s1", true), 0);
        ck_assert_int_eq(faccessat(fd, tmp, F_OK, 0), -1); /* the old save is gone */
        ck_assert_int_eq(savestore_list(fd, 4242, &v, &n), 0);
        ck_assert_uint_eq(n, 1);
        ck_assert_str_eq(v[0].save, "s1");
        ck_assert_str_eq(v[0].job, "other");
        free(v);
        ck_assert_int_eq(savestore_count_all(dirfd_, &all), 0);
        ck_assert_uint_eq(all, 1);

        ck_assert_int_eq(savestore_remove(fd, "s1"), 0);
        ck_assert_int_eq(savestore_remove(fd, "s1"), -ENOENT);
        ck_assert_int_eq(savestore_info(fd, 4242, "s1", &one), -ENOENT);
        ck_assert_int_eq(savestore_count_all(dirfd_, &all), 0);
        ck_assert_uint_eq(all, 0);
        close(fd);
}
END_TEST

/* The sweep at start: the names of this node's earlier daemon (its host
 * name, another life) removed in every uid's directory; this daemon's own,
 * another node's (one whose name only starts like this one's too) and the
 * saves left. */
START_TEST(test_sweep)
{
        char mine[SAVESTORE_TMP_MAX], old[SAVESTORE_TMP_MAX], other[SAVESTORE_TMP_MAX + 8];
        char longer[SAVESTORE_TMP_MAX + 8], removing[SAVESTORE_TMP_MAX + 8];
        size_t n = 99, len;
        int fd, fd2;
        char *dash;

        ck_assert_int_eq(savestore_uid_dir(dirfd_, 4242, true, &fd), 0);
        ck_assert_int_eq(savestore_uid_dir(dirfd_, 4243, true, &fd2), 0);
        savestore_tmp_name("dump", mine, sizeof(mine));
        len = strlen(mine);
        ck_assert_uint_gt(len, 17);
        /* The same node, another life: the first hex digit of the 16 changed. */
        snprintf(old, sizeof(old), "%s", mine);
        old[len - 16] = old[len - 16] == '0' ? '1' : '0';
        dash = strrchr(mine, '-');
        ck_assert_ptr_nonnull(dash);
        snprintf(other, sizeof(other), ".dump-elsewhere-%s", old + len - 16);
        snprintf(longer, sizeof(longer), "%.*s.x-%s", (int)(dash - mine), mine, old + len - 16);
        snprintf(removing, sizeof(removing), ".remove-%s", old + strlen(".dump-"));
        make_dump(fd, mine, "u4242-a", 10);
        make_dump(fd, old, "u4242-b", 10);
        make_dump(fd, other, "u4242-c", 10);
        make_dump(fd, longer, "u4242-d", 10);
        make_dump(fd2, removing, "u4243-e", 10);
        make_dump(fd2, "s1", "u4243-f", 10);
        ck_assert_int_eq(savestore_sweep(dirfd_, &n), 0);
        ck_assert_uint_eq(n, 2);
        ck_assert_int_eq(faccessat(fd, old, F_OK, 0), -1);
        ck_assert_int_eq(faccessat(fd2, removing, F_OK, 0), -1);
        ck_assert_int_eq(faccessat(fd, mine, F_OK, 0), 0);
        ck_assert_int_eq(faccessat(fd, other, F_OK, 0), 0);
        ck_assert_int_eq(faccessat(fd, longer, F_OK, 0), 0);
        ck_assert_int_eq(faccessat(fd2, "s1", F_OK, 0), 0);
        close(fd);
        close(fd2);
}
END_TEST

/* A save's hold taken and let go by threads at once, each as a daemon
 * of its own (its own open file descriptions), each holder removing the
 * hold's file before it lets go as RemoveSave does: never two holders at
 * once.  (A lock taken on the file a holder had just removed held nothing
 * while the next holder made a new one.) */
struct hold_race {
        int fd;
        atomic_int holders, overlaps;
};

static void *hold_race_thread(void *arg)
{
        struct hold_race *r = arg;
        struct timespec now;
        double end;
        int h;

        clock_gettime(CLOCK_MONOTONIC, &now);
        end = (double)now.tv_sec + 1e-9 * (double)now.tv_nsec + 1.0;
        for (int i = 0; atomic_load(&r->overlaps) == 0; i++) {
                if (i % 256 == 0) { /* a second of it at most */
                        clock_gettime(CLOCK_MONOTONIC, &now);
                        if ((double)now.tv_sec + 1e-9 * (double)now.tv_nsec > end)
                                break;
                }
                if (savestore_hold(r->fd, "s1", &h) < 0)
                        continue;
                if (atomic_fetch_add(&r->holders, 1) != 0)
                        atomic_fetch_add(&r->overlaps, 1);
                sched_yield(); /* held a while: another holder would be seen */
                atomic_fetch_sub(&r->holders, 1);
                savestore_unhold(r->fd, "s1");
                close(h);
        }
        return NULL;
}

START_TEST(test_hold_race)
{
        struct hold_race r = { .fd = -1 };
        pthread_t th[8];
        int overlaps;

        ck_assert_int_eq(savestore_uid_dir(dirfd_, 4242, true, &r.fd), 0);
        for (size_t i = 0; i < 8; i++)
                ck_assert_int_eq(pthread_create(&th[i], NULL, hold_race_thread, &r), 0);
        for (size_t i = 0; i < 8; i++)
                pthread_join(th[i], NULL);
        overlaps = atomic_load(&r.overlaps);
        ck_assert_msg(overlaps == 0, "two holders at once");
        close(r.fd);
}
END_TEST

/* Two nodes whose host names differ only in a '-' and a '_' (Linux takes
 * both) are two nodes: the sweep of one
 * leaves the other's dump in flight alone.  Run in a UTS namespace of its
 * own, in a child, so that the host names and the node name stay its. */
static int sweep_of_node(const char *dumper, const char *sweeper, uid_t uid)
{
        char tmp[SAVESTORE_TMP_MAX], why[256];
        size_t n = 0;
        int fd, top_fd;

        if (unshare(CLONE_NEWUTS) < 0 || sethostname(dumper, strlen(dumper)) < 0 ||
            savestore_open(top, &top_fd, why, sizeof(why)) < 0 || savestore_uid_dir(top_fd, uid, true, &fd) < 0)
                return 2;
        savestore_tmp_name("dump", tmp, sizeof(tmp));
        if (mkdirat(fd, tmp, 0700) < 0 || sethostname(sweeper, strlen(sweeper)) < 0)
                return 3;
        close(top_fd);
        /* The other node's daemon starts: its node name, its life. */
        if (savestore_open(top, &top_fd, why, sizeof(why)) < 0 || savestore_sweep(top_fd, &n) < 0)
                return 4;
        return faccessat(fd, tmp, F_OK, 0) == 0 ? 0 : 1;
}

START_TEST(test_sweep_node_names)
{
        static const char *const pairs[][2] = { { "gpu-01", "gpu_01" }, { "gpu_01", "gpu-01" } };
        int st;

        for (size_t i = 0; i < 2; i++) {
                pid_t pid = fork();

                ck_assert_int_ge(pid, 0);
                if (pid == 0)
                        _exit(sweep_of_node(pairs[i][0], pairs[i][1], (uid_t)(4244 + i)));
                ck_assert_int_eq(waitpid(pid, &st, 0), pid);
                ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "node %s's dump, node %s's sweep: %d",
                              pairs[i][0], pairs[i][1], WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        }
}
END_TEST

/* A save's hold: a second holder (another open file description, as
 * another node's daemon would have) is refused until the first lets go;
 * the hold's file is the daemon's own, never a save. */
START_TEST(test_hold)
{
        struct savestore_info *v = NULL;
        size_t n = 9;
        int fd, h1 = -1, h2 = -1;

        ck_assert_int_eq(savestore_uid_dir(dirfd_, 4242, true, &fd), 0);
        make_dump(fd, "s1", "u4242-a", 10);
        ck_assert_int_eq(savestore_hold(fd, "s1", &h1), 0);
        ck_assert_int_eq(savestore_hold(fd, "s1", &h2), -EBUSY);
        ck_assert_int_eq(savestore_list(fd, 4242, &v, &n), 0);
        ck_assert_uint_eq(n, 1);
        free(v);
        close(h1);
        ck_assert_int_eq(savestore_hold(fd, "s1", &h2), 0);
        savestore_unhold(fd, "s1");
        ck_assert_int_eq(faccessat(fd, ".hold-s1", F_OK, 0), -1);
        close(h2);
        close(fd);
}
END_TEST

const char unit_suite_name[] = "savestore";

void unit_tests(TCase *tc)
{
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_names);
        tcase_add_test(tc, test_uid_dir);
        tcase_add_test(tc, test_install_list_remove);
        tcase_add_test(tc, test_sweep);
        tcase_add_test(tc, test_hold);
        tcase_add_test(tc, test_sweep_node_names);
        tcase_add_test(tc, test_hold_race);
}
