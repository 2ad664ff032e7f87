/* Unit tests: client/ctl/job/restoreaccess.c, what restore --owner checks a
 * restored job holds, on live processes of another uid (/bin/sleep): one
 * holding only what its user may open passes; one holding a file root
 * opened for it (as criu does, reopening a swapped path), or working in a
 * directory below one its user may not search, is refused with the path
 * said; uid 0 is checked without its capabilities; criu's log, which the
 * restored tasks hold until criu lets them go, is not counted.  And
 * client/ctl/job/dumpghost.c, what dump --owner refuses: a deleted file
 * held in a directory anyone but root could replace (one in a directory
 * of the owner's or another user's, or one others may write to, a sticky
 * one where the entry is not root's), not one whose way is root's (a
 * sticky directory's too).  Needs root (the processes change uid); left out otherwise. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runner.h"

#include "dumpghost.h"
#include "restoreaccess.h"

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

static void make_file(const char *rel, uid_t uid, mode_t mode)
{
        int fd = open(at(rel), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, "data\n", 5), 5);
        ck_assert_int_eq(fchown(fd, uid, uid), 0);
        ck_assert_int_eq(fchmod(fd, mode), 0);
        close(fd);
}

static void setup(void)
{
        snprintf(base, sizeof(base), "/tmp/unit-restoreaccess.XXXXXX");
        ck_assert(mkdtemp(base));
        ck_assert_int_eq(chmod(base, 0755), 0);
}

static void teardown(void)
{
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
        ck_assert_int_eq(system(cmd), 0);
}

/* Whether pid's state is S (sleep's only one once it runs). */
static bool asleep(pid_t pid)
{
        char path[64], buf[512], *p;
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "re");
        size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
        if (f)
                fclose(f);
        buf[n] = '\0';
        p = strrchr(buf, ')');
        return p && p[1] == ' ' && p[2] == 'S';
}

/* /bin/sleep as uid, in dir (or "/"), its fds 0-2 /dev/null and fd 3 the
 * file rel opened by root with flags (rel NULL: none); its pin, once it
 * runs sleep. */
static ctl_pin start(uid_t uid, const char *dir, const char *rel, int flags)
{
        int p[2];
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid_t c = fork();
        ck_assert_int_ge(c, 0);
        if (c == 0) {
                int null = open("/dev/null", O_RDWR);
                for (int fd = 0; fd < 3; fd++)
                        dup2(null, fd);
                dup2(p[1], 9);
                syscall(SYS_close_range, 3, 8, 0);
                syscall(SYS_close_range, 10, ~0u, 0);
                if ((rel && open(at(rel), flags) != 3) || chdir(dir ? dir : "/") < 0 || setgroups(0, NULL) < 0 ||
                    setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0)
                        _exit(1);
                fcntl(9, F_SETFD, FD_CLOEXEC);
                execl("/bin/sleep", "sleep", "100", (char *)NULL);
                _exit(1);
        }
        close(p[1]);
        char ch;
        /* EOF once sleep runs (the pipe is close-on-exec there). */
        ck_assert_int_eq(read(p[0], &ch, 1), 0);
        close(p[0]);
        /* Asleep: its loader done, nothing of it changes any more (criu
         * holds the processes so when they are checked). */
        for (int i = 0; i < 5000 && !asleep(c); i++)
                poll(NULL, 0, 1);
        ck_assert(asleep(c));
        ctl_pin pin = { .pid = c, .pidfd = (int)syscall(SYS_pidfd_open, c, 0) };
        ck_assert_int_ge(pin.pidfd, 0);
        int st;
        ck_assert_int_eq(waitpid(c, &st, WNOHANG), 0);
        return pin;
}

static void stop(ctl_pin *pin)
{
        kill(pin->pid, SIGKILL);
        waitpid(pin->pid, NULL, 0);
        close(pin->pidfd);
}

/* The check of pin as uid: its result, what it refused in refused. */
static int check(ctl_pin *pin, uid_t uid, const ctl_criu_run *runs, size_t n, char *refused, size_t size)
{
        ctl_pins pins = { .v = pin, .n = 1 };
        refused[0] = '\0';
        return ctl_restore_access_check(&pins, 0, uid, runs, n, "unit: ", refused, size);
}

static void expect(uid_t uid, const char *dir, const char *rel, int flags, uid_t as, int r, const char *words)
{
        char refused[PATH_MAX + 256];
        ctl_pin pin = start(uid, dir, rel, flags);
        int got = check(&pin, as, NULL, 0, refused, sizeof(refused));
        stop(&pin);
        ck_assert_msg(got == r, "%s as uid %u: %d (%s), not %d", rel ? rel : dir, (unsigned)as, got, refused, r);
        ck_assert_msg(!words || strstr(refused, words), "\"%s\" does not say \"%s\"", refused, words);
}

START_TEST(test_owner_rights)
{
        if (geteuid() != 0)
                return; /* another uid's processes need root */
        make_file("mine", OTHER_UID, 0600);
        make_file("roots", 0, 0600);
        ck_assert_int_eq(mkdir(at("closed"), 0700), 0);
        ck_assert_int_eq(mkdir(at("closed/inner"), 0755), 0);
        ck_assert_int_eq(chmod(at("closed/inner"), 0755), 0);
        make_file("closed/open", 0, 0644);

        expect(OTHER_UID, NULL, NULL, 0, OTHER_UID, 0, NULL);
        expect(OTHER_UID, NULL, "mine", O_RDWR, OTHER_UID, 0, NULL);
        /* Root's file, root's directory's: as criu would open them. */
        expect(OTHER_UID, NULL, "roots", O_RDONLY, OTHER_UID, -EACCES, "roots (descriptor 3)");
        expect(OTHER_UID, NULL, "closed/open", O_RDONLY, OTHER_UID, -EACCES, "closed/open (descriptor 3)");
        expect(OTHER_UID, at("closed/inner"), NULL, 0, OTHER_UID, -EACCES, "(its working directory)");
        /* uid 0 without its capabilities: another uid's 0600 file, for writing. */
        expect(0, NULL, "mine", O_WRONLY, 0, -EACCES, "may not write");
        expect(0, NULL, "roots", O_RDWR, 0, 0, NULL);
}
END_TEST

START_TEST(test_criu_log)
{
        if (geteuid() != 0)
                return;
        make_file("restore.log", 0, 0600);
        char refused[PATH_MAX + 256];
        ctl_pin pin = start(OTHER_UID, NULL, "restore.log", O_WRONLY | O_APPEND);
        int dir = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(dir, 0);
        ctl_criu_run run = { .dir_fd = dir, .log_name = "restore.log" };
        ck_assert_int_eq(check(&pin, OTHER_UID, NULL, 0, refused, sizeof(refused)), -EACCES);
        ck_assert_msg(check(&pin, OTHER_UID, &run, 1, refused, sizeof(refused)) == 0, "%s", refused);
        stop(&pin);
        close(dir);
}
END_TEST

/* A process of OTHER_UID holding DIR/f (made, opened, removed): what
 * dump --owner=OTHER_UID says of it; r the result wanted. */
static void expect_ghost(const char *dir, int r)
{
        char err[PATH_MAX + 512] = "", rel[64];
        snprintf(rel, sizeof(rel), "%s/f", dir);
        make_file(rel, OTHER_UID, 0600);
        ctl_pin pin = start(OTHER_UID, NULL, rel, O_RDONLY);
        ck_assert_int_eq(unlink(at(rel)), 0);
        ctl_pins pins = { .v = &pin, .n = 1 };
        int got = ctl_dump_ghost_check(&pins, OTHER_UID, err, sizeof(err));
        int as_root = ctl_dump_ghost_check(&pins, 0, err, sizeof(err));
        stop(&pin);
        ck_assert_msg(got == r, "a deleted file in %s: %d (%s), not %d", dir, got, err, r);
        ck_assert_msg(r == 0 || strstr(err, at(dir)), "\"%s\" does not name %s", err, at(dir));
        ck_assert_int_eq(as_root, 0);
}

static void make_dir(const char *rel, uid_t uid, gid_t gid, mode_t mode)
{
        ck_assert_int_eq(mkdir(at(rel), 0700), 0);
        ck_assert_int_eq(chown(at(rel), uid, gid), 0);
        ck_assert_int_eq(chmod(at(rel), mode), 0);
}

START_TEST(test_ghosts)
{
        if (geteuid() != 0)
                return;
        make_dir("root", 0, 0, 0755);
        make_dir("sticky", 0, 0, 01777);
        make_dir("own", OTHER_UID, OTHER_UID, 0755);
        make_dir("own/sub", 0, 0, 0755);
        make_dir("sticky/theirs", OTHER_UID, OTHER_UID, 0755);
        make_dir("groupw", 0, OTHER_UID, 0775);
        make_dir("groupw/sub", 0, 0, 0755);
        make_dir("another", 4242, 4242, 0755);
        make_dir("another/sub", 0, 0, 0755);
        /* The directory itself stays where it is (what is in it is made
         * by criu with O_EXCL, linked without following). */
        expect_ghost("root", 0);
        expect_ghost("sticky", 0);
        expect_ghost("own", 0);
        expect_ghost("groupw", 0);
        /* One on the way the owner may rename, or put a link in place of. */
        expect_ghost("own/sub", -EACCES);
        expect_ghost("sticky/theirs", -EACCES);
        expect_ghost("groupw/sub", -EACCES);
        /* One another user could replace, against the owner. */
        expect_ghost("another/sub", -EACCES);
}
END_TEST

const char unit_suite_name[] = "restoreaccess";

void unit_tests(TCase *tc)
{
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_owner_rights);
        tcase_add_test(tc, test_criu_log);
        tcase_add_test(tc, test_ghosts);
}
