/* Unit tests: the record of the saves' lock rules (savelocks.h) read back
 * at start, strictly, from a runtime directory under /tmp, seen through
 * the bounds it counts (savelocks_hold() of a dump with no rule): a record
 * of this boot counts, one of another boot does not, a record that is not
 * one is ignored, a file not the daemon's own is refused; a save made
 * again (savelocks_keep()) drops the record of the name. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runner.h"

#include "base/storefile.h"
#include "saves/savelocks.h"

static char top[64];
static int fd_ = -1;
static struct config cfg;
static struct life life;

static void setup(void)
{
        snprintf(top, sizeof(top), "/tmp/unit-savelocks-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(top));
        fd_ = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(fd_, 0);
        ck_assert_int_eq(mkdirat(fd_, "img", 0700), 0); /* a dump of no process tree: no rule */
        config_init(&cfg);
        cfg.max_locked_connections_per_uid = 2;
        cfg.max_locked_connections = 3;
        life_init(&life, NULL);
}

static void teardown(void)
{
        char cmd[128];

        close(fd_);
        config_free(&cfg);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
        if (system(cmd) != 0)
                fprintf(stderr, "could not remove %s\n", top);
}

/* Two rules (one connection) of CRIU's, as the file keeps them. */
#define CONN(port)                                                                                             \
        "[\"iptables\",\"INPUT\",\"0xC114\",\"192.0.2.2\",80,\"192.0.2.1\"," #port "],"                       \
        "[\"iptables\",\"OUTPUT\",\"0xC114\",\"192.0.2.1\"," #port ",\"192.0.2.2\",80]"

/* SAVELOCKS_FILE of boot (NULL: this one's) holding records. */
static void write_store(const char *boot, const char *records)
{
        char id[40], *text = NULL, why[256];

        storefile_boot_id(id);
        ck_assert_int_ge(asprintf(&text, "{\"boot_id\":\"%s\",\"records\":[%s]}", boot ? boot : id, records), 0);
        ck_assert_int_eq(storefile_write(fd_, SAVELOCKS_FILE, text, strlen(text), why, sizeof(why)), 0);
        free(text);
}

/* savelocks_hold() of uid's dump of no rule: 0, or the bound passed. */
static uint64_t hold(struct savelocks *t, uid_t uid)
{
        struct savelocks_part *p = NULL;
        uint64_t limit = 0;
        int r = savelocks_hold(t, uid, fd_, "img", &p, &limit);

        ck_assert(r == 0 || r == -EDQUOT);
        savelocks_let_go(t, p);
        return r == 0 ? 0 : limit;
}

START_TEST(test_read_back)
{
        struct savelocks t;

        /* uid 5: 2 connections; uid 6: 1; and records whose
         * address, port, chain or save is not one (ignored). */
        write_store(NULL, "{\"uid\":5,\"save\":\"s\",\"rules\":[" CONN(5000) "," CONN(5001) "]},"
                          "{\"uid\":6,\"save\":\"s\",\"rules\":[" CONN(6000) "]},"
                          "{\"uid\":7,\"save\":\"s\",\"rules\":[[\"iptables\",\"INPUT\",\"0xC114\",\"192.0.2.999\",80,"
                          "\"192.0.2.1\",1]]},"
                          "{\"uid\":7,\"save\":\"t\",\"rules\":[[\"iptables\",\"INPUT\",\"0xC114\",\"192.0.2.2\",0,"
                          "\"192.0.2.1\",1]]},"
                          "{\"uid\":7,\"save\":\"u\",\"rules\":[[\"iptables\",\"FORWARD\",\"0xC114\",\"192.0.2.2\",1,"
                          "\"192.0.2.1\",1]]},"
                          "{\"uid\":7,\"save\":\"../v\",\"rules\":[" CONN(7000) "]}");
        cfg.max_locked_connections_per_uid = 1;
        savelocks_init(&t, uv_default_loop(), &cfg, &life, top);
        ck_assert_uint_eq(hold(&t, 5), 1); /* 2 of its own, past its bound of 1 */
        ck_assert_uint_eq(hold(&t, 6), 0); /* 1 of its own, 3 in all */
        cfg.max_locked_connections = 2;
        ck_assert_uint_eq(hold(&t, 6), 2);
        ck_assert_uint_eq(hold(&t, 7), 2);
        cfg.max_locked_connections = 3;
        ck_assert_uint_eq(hold(&t, 7), 0); /* uid 7's records were none */
        if (geteuid() == 0 && access("/usr/sbin/iptables", X_OK) == 0) {
                /* A save of the name made again: its record's rules
                 * (192.0.2.x, none there) deleted, the record dropped, the
                 * file written. */
                savelocks_keep(&t, 6, NULL, "s");
                cfg.max_locked_connections = 2;
                ck_assert_uint_eq(hold(&t, 7), 0);
        }
        savelocks_free(&t);
        savelocks_init(&t, uv_default_loop(), &cfg, &life, top);
        ck_assert_uint_eq(hold(&t, 5), 1);
        ck_assert_uint_eq(hold(&t, 7), geteuid() == 0 && access("/usr/sbin/iptables", X_OK) == 0 ? 0 : 2);
        savelocks_free(&t);
}
END_TEST

START_TEST(test_refused)
{
        struct savelocks t;
        int f;

        write_store("00000000-0000-0000-0000-000000000000", "{\"uid\":5,\"save\":\"s\",\"rules\":[" CONN(5000) "]}");
        cfg.max_locked_connections_per_uid = 1;
        savelocks_init(&t, uv_default_loop(), &cfg, &life, top);
        ck_assert_uint_eq(hold(&t, 5), 0); /* another boot's: gone with it */
        savelocks_free(&t);
        write_store(NULL, "{\"uid\":5,\"save\":\"s\",\"rules\":[" CONN(5000) "," CONN(5001) "]}");
        ck_assert_int_eq(fchmodat(fd_, SAVELOCKS_FILE, 0644, 0), 0); /* not the daemon's own */
        savelocks_init(&t, uv_default_loop(), &cfg, &life, top);
        ck_assert_uint_eq(hold(&t, 5), 0);
        savelocks_free(&t);
        ck_assert_int_eq(unlinkat(fd_, SAVELOCKS_FILE, 0), 0);
        f = openat(fd_, SAVELOCKS_FILE, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_eq(write(f, "{\"records\": [", 13), 13); /* cut short */
        close(f);
        savelocks_init(&t, uv_default_loop(), &cfg, &life, top);
        ck_assert_uint_eq(hold(&t, 5), 0);
        savelocks_free(&t);
}
END_TEST

const char unit_suite_name[] = "savelocks";

void unit_tests(TCase *tc)
{
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_read_back);
        tcase_add_test(tc, test_refused);
}
