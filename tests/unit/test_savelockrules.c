/* Unit tests: CRIU's lock rules read from a dump's logs (savelockrules.h)
 * and checked against the connections of its images (saveinetsk.h), on
 * real files under /tmp: what a pair of lines of CRIU 4.2 says of a
 * connection of the images is taken, and nothing else (a command that
 * failed, a line between, a child's line, words or addresses not CRIU's, a
 * line too long, a rule of no connection, or a second one of a
 * connection's chain; nor does a rule a job's lines shape take CRIU's
 * place, nor one "unlocked", nor one of a tree with a net namespace of its
 * own); and a delete whose iptables hangs is bounded. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <arpa/inet.h>
#include <stdint.h>
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

static size_t put_varint(uint8_t *p, uint64_t v)
{
        size_t n = 0;

        do {
                p[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
                v >>= 7;
        } while (v);
        return n;
}

static size_t put_field(uint8_t *p, unsigned num, uint64_t v)
{
        size_t n = put_varint(p, (uint64_t)num << 3);

        return n + put_varint(p + n, v);
}

/* The net namespace file_entry() gives a socket (its ns_id): 0, none. */
static unsigned entry_ns_id;

/* A file_entry of a TCP socket local:lport to remote:rport (family af),
 * as CRIU writes it, into p: its length. */
static size_t file_entry(uint8_t *p, int af, const char *local, unsigned lport, const char *remote, unsigned rport)
{
        uint8_t isk[256], a[16];
        size_t n = 0, words = af == AF_INET6 ? 4 : 1;
        const unsigned num[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
        const uint64_t val[] = { 7, 42, (uint64_t)af, 1, IPPROTO_TCP, 1, lport, rport, 0, 0 };

        for (size_t i = 0; i < 10; i++)
                n += put_field(isk + n, num[i], val[i]);
        for (int end = 0; end < 2; end++) {
                ck_assert_int_eq(inet_pton(af, end ? remote : local, a), 1);
                for (size_t w = 0; w < words; w++) {
                        uint32_t word;

                        memcpy(&word, a + 4 * w, 4);
                        n += put_field(isk + n, end ? 12 : 11, word);
                }
        }
        if (entry_ns_id)
                n += put_field(isk + n, 18, entry_ns_id);
        size_t m = put_field(p, 1, 2) + put_field(p + 2, 2, 7);

        m += put_varint(p + m, 4 << 3 | 2);
        m += put_varint(p + m, n);
        memcpy(p + m, isk, n);
        return m + n;
}

/* img/TREE/files.img holding count entries, one after the other in entries, each lens[i] bytes long. */
static void write_files(const char *tree, const uint8_t *entries, const size_t *lens, size_t count)
{
        char path[64];
        uint32_t head[2] = { 0x54564319u, 0x56303138u };
        int f;

        snprintf(path, sizeof(path), "img/%s/files.img", tree);
        f = openat(fd_, path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_ge(f, 0);
        ck_assert_int_eq(write(f, head, sizeof(head)), (ssize_t)sizeof(head));
        for (size_t i = 0; i < count; i++) {
                uint32_t len = (uint32_t)lens[i];

                ck_assert_int_eq(write(f, &len, 4), 4);
                ck_assert_int_eq(write(f, entries, len), (ssize_t)len);
                entries += len;
        }
        close(f);
}

/* img/TREE/files.img with the connections 10.0.0.1:PORT - 10.0.0.3:80 for
 * PORT from 5001 to 5010, and 10.0.0.1:5000 - 10.0.0.2:80 (PAIR4's). */
static void write_conns(const char *tree)
{
        uint8_t buf[11 * 256], *p = buf;
        size_t lens[11];

        for (unsigned i = 0; i < 10; i++) {
                lens[i] = file_entry(p, AF_INET, "10.0.0.1", 5001 + i, "10.0.0.3", 80);
                p += lens[i];
        }
        lens[10] = file_entry(p, AF_INET, "10.0.0.1", 5000, "10.0.0.2", 80);
        write_files(tree, buf, lens, 11);
}

/* img/TREE/dump.log holding text. */
static void write_log(const char *tree, const char *text)
{
        char path[64];
        int f;

        snprintf(path, sizeof(path), "img/%s", tree);
        (void)mkdirat(fd_, path, 0700);
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
        uint8_t buf[512];
        size_t lens[2], unmatched = 0;
        struct savelockrules s;

        /* PAIR4 twice (a second rule of a connection's chain is none of
         * CRIU's), and a pair of no connection of the images. */
        write_log("tree-1", "(00.000001) Version: 4.2\n" PAIR4 PAIR4
                  RULE("iptables", "-w", "-I", "INPUT", "10.0.0.9", "80", "10.0.0.1", "5000")
                  "(00.1) Locked 10.0.0.1:5000 - 10.0.0.9:80 connection\n"
                  "(00.2) Dumping finished successfully\n");
        write_conns("tree-1");
        /* ip6tables, CRIU without xtables' lock (no -w: two spaces), the
         * command's output between; an IPv4-mapped peer, locked as IPv4. */
        write_log("tree-2", RULE("ip6tables", "", "-I", "INPUT", "fd00::2", "443", "fd00:0::1", "6000")
                  "Another app is currently holding the xtables lock. Waiting (1s) for it to exit...\n"
                  "(00.3) Locked fd00::1:6000 - fd00::2:443 connection\n"
                  RULE("iptables", "-w", "-I", "OUTPUT", "10.0.0.7", "7000", "10.0.0.8", "22")
                  "(00.3) Locked 10.0.0.8:22 - 10.0.0.7:7000 connection\n");
        lens[0] = file_entry(buf, AF_INET6, "fd00::1", 6000, "fd00::2", 443);
        lens[1] = file_entry(buf + lens[0], AF_INET6, "::ffff:10.0.0.7", 7000, "::ffff:10.0.0.8", 22);
        write_files("tree-2", buf, lens, 2);
        ck_assert_int_eq(savelockrules_read(fd_, "img", 100, &unmatched, &s), 0);
        ck_assert_uint_eq(unmatched, 3);
        ck_assert_uint_eq(s.n, 4);
        ck_assert_uint_eq(savelockrules_connections(&s), 2);
        for (size_t i = 0; i < s.n; i++) {
                ck_assert(savelockrules_valid(&s.v[i]));
                ck_assert_str_eq(s.v[i].mark, "0xC114");
                if (s.v[i].v6) {
                        ck_assert(!s.v[i].output);
                        ck_assert_str_eq(s.v[i].dst, "fd00::1"); /* inet_ntop's form */
                        ck_assert_uint_eq(s.v[i].sport, 443);
                } else if (s.v[i].sport == 7000) {
                        ck_assert(s.v[i].output);
                        ck_assert_str_eq(s.v[i].src, "10.0.0.7");
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
        ck_assert_int_eq(savelockrules_read(fd_, "img", 2, &unmatched, &s), -E2BIG);
        ck_assert_uint_eq(s.n, 2);
        savelockrules_free(&s);
}
END_TEST

START_TEST(test_not_taken)
{
        char *log = NULL, long_line[SAVELOCKRULES_LINE_MAX + 200];
        size_t unmatched = 9;
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
                 /* a line too long, and a rule locked, then "unlocked" (not taken) */
                 long_line, "\n" PAIR4,
                 RULE("iptables", "-w", "-D", "OUTPUT", "10.0.0.1", "5000", "10.0.0.2", "80")
                 "(00.5) Unlocked 10.0.0.2:80 - 10.0.0.1:5000 connection\n"), 0);
        write_log("tree-1", log);
        free(log);
        write_conns("tree-1");
        ck_assert_int_eq(savelockrules_read(fd_, "img", 100, &unmatched, &s), 0);
        ck_assert_uint_eq(unmatched, 0);
        ck_assert_uint_eq(s.n, 2); /* PAIR4's rules: an "Unlocked" line takes none back */
        for (size_t i = 0; i < s.n; i++)
                ck_assert_uint_eq(s.v[i].output ? s.v[i].sport : s.v[i].dport, 5000);
        savelockrules_free(&s);
}
END_TEST

/* Lines a job shapes in the log (a file name with newlines, logged by
 * criu before or after its sockets) take no rule's place: a pair with
 * another mark before CRIU's own, and CRIU's "Unlocked" lines for rules
 * that stay, leave CRIU's rules taken. */
START_TEST(test_forged)
{
        size_t unmatched = 9;
        struct savelockrules s;

        write_log("tree-1", "(00.1) \tRunning iptables [iptables -w -t filter -I INPUT --protocol tcp -m mark ! "
                  "--mark 0x1 --source 10.0.0.2 --sport 80 --destination 10.0.0.1 --dport 5000 -j DROP]\n"
                  "(00.1) Locked 10.0.0.1:5000 - 10.0.0.2:80 connection\n"
                  "(00.1) \tRunning iptables [iptables -w -t filter -I OUTPUT --protocol tcp -m mark ! "
                  "--mark 1 --source 10.0.0.1 --sport 5000 --destination 10.0.0.2 --dport 80 -j DROP]\n"
                  "(00.1) Locked 10.0.0.2:80 - 10.0.0.1:5000 connection\n"
                  PAIR4
                  "(00.2) \tRunning iptables [iptables -w -t filter -D INPUT --protocol tcp -m mark ! --mark "
                  "0xC114 --source 10.0.0.2 --sport 80 --destination 10.0.0.1 --dport 5000 -j DROP]\n"
                  "(00.2) Unlocked 10.0.0.1:5000 - 10.0.0.2:80 connection\n"
                  "(00.2) \tRunning iptables [iptables -w -t filter -D OUTPUT --protocol tcp -m mark ! --mark "
                  "0xC114 --source 10.0.0.1 --sport 5000 --destination 10.0.0.2 --dport 80 -j DROP]\n"
                  "(00.2) Unlocked 10.0.0.2:80 - 10.0.0.1:5000 connection\n");
        write_conns("tree-1");
        ck_assert_int_eq(savelockrules_read(fd_, "img", 100, &unmatched, &s), 0);
        ck_assert_uint_eq(s.n, 2);
        for (size_t i = 0; i < s.n; i++) {
                ck_assert_str_eq(s.v[i].mark, "0xC114");
                ck_assert_uint_eq(s.v[i].output ? s.v[i].sport : s.v[i].dport, 5000);
        }
        savelockrules_free(&s);
}
END_TEST

/* img/TREE/netns-ID.img: CRIU dumped that net namespace. */
static void write_netns(const char *tree, unsigned id)
{
        char path[64];
        int f;

        snprintf(path, sizeof(path), "img/%s/netns-%u.img", tree, id);
        f = openat(fd_, path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_ge(f, 0);
        close(f);
}

/* A connection of a net namespace CRIU dumped (netns-ID.img, ID its
 * socket's ns_id; one without ns_id once one was dumped): CRIU locked it
 * inside that namespace, so its log's rules (the job's lines, naming
 * addresses it chose there) are none of this node's.  Those of a
 * namespace not dumped (the node's, in a dump of a nested one) are. */
START_TEST(test_own_netns)
{
        size_t unmatched = 9;
        struct savelockrules s;

        entry_ns_id = 2;
        write_log("tree-1", PAIR4);
        write_conns("tree-1");
        entry_ns_id = 11;
        write_log("tree-2", PAIR4 RULE("iptables", "-w", "-I", "INPUT", "10.0.0.3", "80", "10.0.0.1", "5001")
                  "(00.2) Locked 10.0.0.1:5001 - 10.0.0.3:80 connection\n");
        write_conns("tree-2");
        write_netns("tree-2", 11);
        entry_ns_id = 0;
        write_log("tree-3", PAIR4);
        write_conns("tree-3");
        write_netns("tree-3", 11);
        entry_ns_id = 2;
        write_log("tree-4", PAIR4);
        write_conns("tree-4");
        write_netns("tree-4", 11);
        entry_ns_id = 0;
        ck_assert_int_eq(savelockrules_read(fd_, "img", 100, &unmatched, &s), 0);
        ck_assert_uint_eq(s.n, 4); /* tree-1's and tree-4's */
        for (size_t i = 0; i < s.n; i++)
                ck_assert_uint_eq(s.v[i].output ? s.v[i].sport : s.v[i].dport, 5000);
        savelockrules_free(&s);
}
END_TEST

START_TEST(test_refused_files)
{
        static const char *const bad[] = { "", "\x19\x43\x56\x54\x38\x31\x30\x57", /* another magic */
                                           "\x19\x43\x56\x54\x38\x31\x30\x56\x09\x00\x00\x00\x08",
                                           "\x19\x43\x56\x54\x38\x31\x30\x56\x02\x00\x00\x00\x0b\x01" };
        struct savelockrules s;
        size_t unmatched;

        ck_assert_int_eq(savelockrules_read(fd_, "none", 100, &unmatched, &s), -ENOENT);
        ck_assert_int_eq(symlinkat("/etc", fd_, "link"), 0);
        ck_assert_int_eq(savelockrules_read(fd_, "link", 100, &unmatched, &s), -ENOTDIR);
        /* A tree without its images, or with images cut short or not CRIU's. */
        write_log("tree-1", PAIR4);
        ck_assert_int_eq(savelockrules_read(fd_, "img", 100, &unmatched, &s), -ENOENT);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                int f = openat(fd_, "img/tree-1/files.img", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                size_t len = i < 2 ? (i ? 8 : 0) : i == 2 ? 13 : 14;

                ck_assert_int_eq(write(f, bad[i], len), (ssize_t)len);
                close(f);
                ck_assert_int_eq(savelockrules_read(fd_, "img", 100, &unmatched, &s), -EBADMSG);
        }
        /* A dump.log that is no file, or a link: refused. */
        write_conns("tree-1");
        ck_assert_int_eq(unlinkat(fd_, "img/tree-1/dump.log", 0), 0);
        ck_assert_int_eq(mkfifoat(fd_, "img/tree-1/dump.log", 0600), 0);
        ck_assert_int_eq(savelockrules_read(fd_, "img", 100, &unmatched, &s), -EPERM);
        ck_assert_int_eq(unlinkat(fd_, "img/tree-1/dump.log", 0), 0);
        ck_assert_int_eq(symlinkat("/etc/passwd", fd_, "img/tree-1/dump.log"), 0);
        ck_assert_int_eq(savelockrules_read(fd_, "img", 100, &unmatched, &s), -ELOOP);
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

/* In a mount namespace of its own, with /usr/sbin/iptables a script that
 * writes its words to ARGS and hangs: the delete returns -ETIMEDOUT after
 * SAVELOCKRULES_TIMEOUT_MS, not much later, having asked iptables to wait
 * for xtables' lock a bounded time.  The child's exit status: 0 passed,
 * else the step that failed. */
static int hung_child(void)
{
        struct savelockrule r = { .mark = "0xC114", .src = "10.0.0.2", .dst = "10.0.0.1", .sport = 80, .dport = 5000 };
        char fake[128], args_path[128], script[512], args[512] = "";
        struct timespec t0, t1;
        long ms;
        FILE *f;
        int e;

        snprintf(fake, sizeof(fake), "%s/fake-iptables", top);
        snprintf(args_path, sizeof(args_path), "%s/args", top);
        snprintf(script, sizeof(script), "#!/bin/sh\necho \"$@\" > %s\nexec sleep 600\n", args_path);
        f = fopen(fake, "w");
        if (!f || fputs(script, f) < 0 || fclose(f) != 0 || chmod(fake, 0755) < 0)
                return 1;
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount(fake, "/usr/sbin/iptables", NULL, MS_BIND, NULL) < 0)
                return 2;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        e = savelockrules_delete(&r);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
        if (e != -ETIMEDOUT || ms < SAVELOCKRULES_TIMEOUT_MS || ms > SAVELOCKRULES_TIMEOUT_MS + 5000)
                return 3;
        f = fopen(args_path, "r");
        if (!f || !fgets(args, sizeof(args), f))
                return 4;
        fclose(f);
        return strncmp(args, "-w " SAVELOCKRULES_LOCK_WAIT_S " -t filter -D INPUT ", 23) == 0 ? 0 : 5;
}

START_TEST(test_delete_hung)
{
        pid_t pid;
        int st = 0;

        if (geteuid() != 0 || access("/usr/sbin/iptables", X_OK) != 0) {
                fprintf(stderr, "test_delete_hung skipped: needs root and /usr/sbin/iptables\n");
                return;
        }
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0)
                _exit(hung_child());
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "failed at step %d", WEXITSTATUS(st));
}
END_TEST

const char unit_suite_name[] = "savelockrules";

void unit_tests(TCase *tc)
{
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_pairs);
        tcase_add_test(tc, test_not_taken);
        tcase_add_test(tc, test_forged);
        tcase_add_test(tc, test_own_netns);
        tcase_add_test(tc, test_refused_files);
        tcase_add_test(tc, test_valid);
        tcase_add_test(tc, test_delete_hung);
        tcase_set_timeout(tc, 60);
}
