/* Unit tests: CRIU's lock rules read from a dump's logs (savelockrules.h),
 * on real files under /tmp: what a pair of lines of CRIU 4.2 says is taken,
 * and nothing else (a command that failed, a line between, a child's line,
 * words or addresses not CRIU's, a line too long, a rule unlocked again). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runner.h"

#include "saves/savelockrules.h"

#define BODY(cmd, w, op, chain, s, sp, d, dp)                                                                 \
        "\tRunning iptables [" cmd " " w " -t filter " op " " chain " --protocol tcp -m mark ! --mark 0xC114 "   \
        "--source " s " --sport " sp " --destination " d " --dport " dp " -j DROP]\n"
#define RULE(...) "(00.100000) " BODY(__VA_ARGS__)

static char top[64];
static int fd_ = -1;

static void setup(void)
{
        snprintf(top, sizeof(top), "/tmp/unit-locks-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(top));
        fd_ = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(fd_, 0);
        ck_assert_int_eq(mkdirat(fd_, "img", 0700), 0);
}

static void teardown(void)
{
        char cmd[128];

        close(fd_);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
        if (system(cmd) != 0)
                fprintf(stderr, "could not remove %s\n", top);
}

/* img/TREE/dump.log holding text. */
static void write_log(const char *tree, const char *text)
{
        char path[64];
        int f;

        snprintf(path, sizeof(path), "img/%s", tree);
        ck_assert_int_eq(mkdirat(fd_, path, 0700), 0);
        snprintf(path, sizeof(path), "img/%s/dump.log", tree);
        f = openat(fd_, path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_ge(f, 0);
        ck_assert_int_eq(write(f, text, strlen(text)), (ssize_t)strlen(text));
        close(f);
}

/* One connection of 10.0.0.1:5000 (ours) to 10.0.0.2:80, locked. */
#define PAIR4                                                                                                  \
        RULE("iptables", "-w", "-I", "INPUT", "10.0.0.2", "80", "10.0.0.1", "5000")                         \
        "(00.100001) Locked 10.0.0.1:5000 - 10.0.0.2:80 connection\n"                                          \
        RULE("iptables", "-w", "-I", "OUTPUT", "10.0.0.1", "5000", "10.0.0.2", "80")                        \
        "(00.100002) Locked 10.0.0.2:80 - 10.0.0.1:5000 connection\n"

START_TEST(test_pairs)
{
        struct savelockrules s;

        write_log("tree-1", "(00.000001) Version: 4.2\n" PAIR4 "(00.2) Dumping finished successfully\n");
        /* ip6tables, CRIU without xtables' lock (no -w: two spaces). */
        write_log("tree-2", RULE("ip6tables", "", "-I", "INPUT", "fd00::2", "443", "fd00:0::1", "6000")
                  "(00.3) Locked fd00::1:6000 - fd00::2:443 connection\n");
        ck_assert_int_eq(savelockrules_read(fd_, "img", 100, &s), 0);
        ck_assert_uint_eq(s.n, 3);
        ck_assert_uint_eq(savelockrules_connections(&s), 2);
        for (size_t i = 0; i < s.n; i++) {
                ck_assert(savelockrules_valid(&s.v[i]));
                ck_assert_str_eq(s.v[i].mark, "0xC114");
                if (s.v[i].v6) {
                        ck_assert(!s.v[i].output);
                        ck_assert_str_eq(s.v[i].dst, "fd00::1"); /* inet_ntop's form */
                        ck_assert_uint_eq(s.v[i].sport, 443);
                } else if (s.v[i].output) {
                        ck_assert_str_eq(s.v[i].src, "10.0.0.1");
                        ck_assert_uint_eq(s.v[i].sport, 5000);
                        ck_assert_str_eq(s.v[i].dst, "10.0.0.2");
                        ck_assert_uint_eq(s.v[i].dport, 80);
                } else {
                        ck_assert_str_eq(s.v[i].src, "10.0.0.2");
                        ck_assert_uint_eq(s.v[i].dport, 5000);
                }
        }
        savelockrules_free(&s);
        ck_assert_int_eq(savelockrules_read(fd_, "img", 2, &s), -E2BIG);
        ck_assert_uint_eq(s.n, 2);
        savelockrules_free(&s);
}
END_TEST

START_TEST(test_not_taken)
{
        char *log = NULL, long_line[SAVELOCKRULES_LINE_MAX + 200];
        struct savelockrules s;

        memset(long_line, 'x', sizeof(long_line));
        memcpy(long_line, "(00.1) ", 7);
        long_line[sizeof(long_line) - 1] = '\0';
        ck_assert_int_ge(asprintf(&log, "%s%s%s%s%s%s%s%s%s%s%s%s%s%s",
                 /* failed: no Locked line after it */
                 RULE("iptables", "-w", "-I", "INPUT", "10.0.0.3", "80", "10.0.0.1", "5001"),
                 "(00.2) Iptables configuration failed\n",
                 /* a line between */
                 RULE("iptables", "-w", "-I", "INPUT", "10.0.0.3", "80", "10.0.0.1", "5002"),
                 "(00.2) something\n(00.2) Locked 10.0.0.1:5002 - 10.0.0.3:80 connection\n",
                 /* a child's lines (its pid after the time) */
                 "(00.3)     42: " BODY("iptables", "-w", "-I", "INPUT", "10.0.0.3", "80", "10.0.0.1", "5003"),
                 "(00.3)    42: Locked 10.0.0.1:5003 - 10.0.0.3:80 connection\n",
                 /* another connection's Locked line */
                 RULE("iptables", "-w", "-I", "INPUT", "10.0.0.3", "80", "10.0.0.1", "5004"),
                 "(00.4) Locked 10.0.0.1:5005 - 10.0.0.3:80 connection\n",
                 /* words, chains, addresses and ports that are not CRIU's */
                 RULE("iptables", "-w", "-I", "INPUT", "10.0.0.3", "80", "10.0.0.1", "5006 -j ACCEPT"),
                 RULE("iptables", "-w", "-I", "FORWARD", "10.0.0.3", "80", "10.0.0.1", "5007"),
                 RULE("iptables", "-w", "-I", "INPUT", "10.0.0.999", "80", "10.0.0.1", "5008")
                 RULE("iptables", "-w", "-I", "INPUT", "fd00::1", "80", "10.0.0.1", "5009")
                 RULE("iptables", "-w", "-I", "INPUT", "10.0.0.3", "080", "10.0.0.1", "5010")
                 RULE("iptables", "-w", "-I", "INPUT", "10.0.0.3", "80", "10.0.0.1", "70000"),
                 /* a line too long, and a rule locked, then unlocked */
                 long_line, "\n" PAIR4,
                 RULE("iptables", "-w", "-D", "OUTPUT", "10.0.0.1", "5000", "10.0.0.2", "80")
                 "(00.5) Unlocked 10.0.0.2:80 - 10.0.0.1:5000 connection\n"), 0);
        write_log("tree-1", log);
        free(log);
        ck_assert_int_eq(savelockrules_read(fd_, "img", 100, &s), 0);
        ck_assert_uint_eq(s.n, 1); /* PAIR4's INPUT rule, its OUTPUT one unlocked */
        ck_assert(!s.v[0].output);
        ck_assert_uint_eq(s.v[0].dport, 5000);
        savelockrules_free(&s);
}
END_TEST

START_TEST(test_refused_files)
{
        struct savelockrules s;

        ck_assert_int_eq(savelockrules_read(fd_, "none", 100, &s), -ENOENT);
        ck_assert_int_eq(symlinkat("/etc", fd_, "link"), 0);
        ck_assert_int_eq(savelockrules_read(fd_, "link", 100, &s), -ENOTDIR);
        /* A dump.log that is no file, or a link: not read. */
        ck_assert_int_eq(mkdirat(fd_, "img/tree-1", 0700), 0);
        ck_assert_int_eq(mkfifoat(fd_, "img/tree-1/dump.log", 0600), 0);
        ck_assert_int_eq(savelockrules_read(fd_, "img", 100, &s), -EPERM);
        ck_assert_int_eq(mkdirat(fd_, "img2", 0700), 0);
        ck_assert_int_eq(mkdirat(fd_, "img2/tree-1", 0700), 0);
        ck_assert_int_eq(symlinkat("/etc/passwd", fd_, "img2/tree-1/dump.log"), 0);
        ck_assert_int_eq(savelockrules_read(fd_, "img2", 100, &s), 0);
        ck_assert_uint_eq(s.n, 0);
}
END_TEST

START_TEST(test_valid)
{
        struct savelockrule r = { .mark = "0xC114", .src = "10.0.0.1", .dst = "10.0.0.2", .sport = 1, .dport = 2 };

        ck_assert(savelockrules_valid(&r));
        r.v6 = true;
        ck_assert(!savelockrules_valid(&r));
        snprintf(r.src, sizeof(r.src), "fd00::1");
        snprintf(r.dst, sizeof(r.dst), "fd00:0::2"); /* not inet_ntop's form */
        ck_assert(!savelockrules_valid(&r));
        snprintf(r.dst, sizeof(r.dst), "fd00::2");
        ck_assert(savelockrules_valid(&r));
        snprintf(r.mark, sizeof(r.mark), "0xC114;");
        ck_assert(!savelockrules_valid(&r));
        snprintf(r.mark, sizeof(r.mark), "49428");
        r.sport = 0;
        ck_assert(!savelockrules_valid(&r));
}
END_TEST

const char unit_suite_name[] = "savelockrules";

void unit_tests(TCase *tc)
{
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_pairs);
        tcase_add_test(tc, test_not_taken);
        tcase_add_test(tc, test_refused_files);
        tcase_add_test(tc, test_valid);
}
