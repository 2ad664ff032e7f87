/* Unit tests: client/ctl/addrgroup.c, which clients of metrics --listen
 * count together for --max-per-address: loopback as one (127.0.0.0/8,
 * ::1 and their IPv4-mapped forms), a mapped address as its IPv4 address,
 * others by their first --ipv4-prefix or --ipv6-prefix bits. */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <string.h>

#include "runner.h"

#include "addrgroup.h"

/* The group of text, an IPv4 or IPv6 address, under prefixes v4 and v6. */
static ctl_addrgroup group_of(const char *text, unsigned v4, unsigned v6)
{
        struct sockaddr_storage ss = { 0 };
        ctl_addrgroup g;

        if (strchr(text, ':')) {
                struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
                in6->sin6_family = AF_INET6;
                ck_assert_int_eq(inet_pton(AF_INET6, text, &in6->sin6_addr), 1);
        } else {
                struct sockaddr_in *in = (struct sockaddr_in *)&ss;
                in->sin_family = AF_INET;
                ck_assert_int_eq(inet_pton(AF_INET, text, &in->sin_addr), 1);
        }
        ctl_addrgroup_of((struct sockaddr *)&ss, v4, v6, &g);
        return g;
}

static bool same(const char *a, const char *b, unsigned v4, unsigned v6)
{
        ctl_addrgroup ga = group_of(a, v4, v6), gb = group_of(b, v4, v6);

        return ctl_addrgroup_equal(&ga, &gb);
}

#define DEF4 CTL_ADDRGROUP_IPV4_PREFIX
#define DEF6 CTL_ADDRGROUP_IPV6_PREFIX

START_TEST(test_loopback_is_one)
{
        ck_assert(same("127.0.0.1", "127.0.0.16", DEF4, DEF6));
        ck_assert(same("127.0.0.1", "127.255.3.9", 32, 128));
        ck_assert(same("127.0.0.1", "::1", DEF4, DEF6));
        ck_assert(same("::ffff:127.0.0.2", "127.0.0.1", DEF4, DEF6));
        ck_assert_int_eq(group_of("127.1.2.3", DEF4, DEF6).kind, CTL_ADDRGROUP_LOOPBACK);
        ck_assert(!same("127.0.0.1", "128.0.0.1", DEF4, DEF6));
        ck_assert(!same("::1", "::2", DEF4, DEF6));
}
END_TEST

START_TEST(test_mapped_is_ipv4)
{
        ck_assert(same("::ffff:10.1.2.3", "10.1.2.3", DEF4, DEF6));
        ck_assert(!same("::ffff:10.1.2.3", "10.1.2.4", DEF4, DEF6));
        ck_assert(same("::ffff:10.1.2.3", "10.1.2.4", 24, DEF6));
        ck_assert_int_eq(group_of("::ffff:10.1.2.3", DEF4, DEF6).kind, CTL_ADDRGROUP_IPV4);
}
END_TEST

START_TEST(test_prefixes)
{
        /* IPv4: the address alone by default. */
        ck_assert(!same("10.0.0.1", "10.0.0.2", DEF4, DEF6));
        ck_assert(same("10.0.0.1", "10.0.0.1", DEF4, DEF6));
        ck_assert(same("10.0.0.1", "10.0.0.254", 24, DEF6));
        ck_assert(!same("10.0.0.1", "10.0.1.1", 24, DEF6));
        ck_assert(same("10.0.0.1", "10.0.1.1", 23, DEF6));
        ck_assert(same("10.0.0.1", "10.0.0.0", 31, DEF6));
        ck_assert(!same("10.0.0.1", "10.0.0.2", 31, DEF6));
        ck_assert(same("1.2.3.4", "200.9.9.9", 0, DEF6));
        ck_assert(!same("10.0.0.1", "10.0.0.2", 99, DEF6)); /* past 32: 32 */
        /* IPv6: a /64 by default. */
        ck_assert(same("2001:db8:1:2::1", "2001:db8:1:2:ffff::9", DEF4, DEF6));
        ck_assert(!same("2001:db8:1:2::1", "2001:db8:1:3::1", DEF4, DEF6));
        ck_assert(!same("2001:db8:1:2::1", "2001:db8:1:2::2", DEF4, 128));
        ck_assert(same("2001:db8:1:2::1", "2001:db8:1:3::1", DEF4, 48));
        ck_assert(same("2001:db8:1:2::1", "2001:db8:1:2::1", DEF4, 128));
        /* An IPv4 and an IPv6 group never meet, whatever the prefixes. */
        ck_assert(!same("0.0.0.0", "::", 0, 0));
}
END_TEST

START_TEST(test_not_ip)
{
        ctl_addrgroup a, b;
        struct sockaddr un = { .sa_family = AF_UNIX };

        ctl_addrgroup_of(NULL, DEF4, DEF6, &a);
        ctl_addrgroup_of(&un, DEF4, DEF6, &b);
        ck_assert_int_eq(a.kind, CTL_ADDRGROUP_OTHER);
        ck_assert(ctl_addrgroup_equal(&a, &b));
}
END_TEST

const char unit_suite_name[] = "addrgroup";

void unit_tests(TCase *tc)
{
        tcase_add_test(tc, test_loopback_is_one);
        tcase_add_test(tc, test_mapped_is_ipv4);
        tcase_add_test(tc, test_prefixes);
        tcase_add_test(tc, test_not_ip);
}
