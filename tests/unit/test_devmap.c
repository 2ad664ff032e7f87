/* Unit tests: client/ctl/args.c, the GPU maps of restore and resume
 * (--map, --device-map OLD=NEW[,OLD=NEW...]) collected in the form
 * cudackpt_restore() takes, and the strict numbers of every command line. */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <string.h>

#include "runner.h"

#include "args.h"

#define A "GPU-00000000-0000-0000-0000-00000000000a"
#define B "GPU-00000000-0000-0000-0000-00000000000b"
#define C "GPU-00000000-0000-0000-0000-00000000000c"

START_TEST(test_pairs)
{
        ctl_map m = { 0 };

        ck_assert_int_eq(ctl_map_add(&m, A "=" B), 0);
        ck_assert_int_eq(ctl_map_add(&m, B "=" A "," C "=" C), 0);
        ck_assert_uint_eq(m.n_items, 6);
        ck_assert_str_eq(m.items[0], A);
        ck_assert_str_eq(m.items[1], B);
        ck_assert_str_eq(m.items[2], B);
        ck_assert_str_eq(m.items[3], A);
        ck_assert_str_eq(m.items[4], C);
        ck_assert_str_eq(m.items[5], C);
        ck_assert_ptr_null(m.items[6]);
        ctl_map_free(&m);
        ck_assert_ptr_null(m.items);
        ck_assert_uint_eq(m.n_items, 0);
}
END_TEST

/* Each malformed argument is refused, and the map keeps what it held. */
START_TEST(test_refused)
{
        static const char *const bad[] = { "", "=", A, A "=", "=" B, A "=" B "=" C, A "=" B ",", "," A "=" B,
                                           A "=" B ",," C "=" A };
        ctl_map m = { 0 };

        ck_assert_int_eq(ctl_map_add(&m, C "=" B), 0);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                ck_assert_msg(ctl_map_add(&m, bad[i]) == -EINVAL, "'%s' not refused", bad[i]);
                ck_assert_uint_eq(m.n_items, 2);
        }
        ck_assert_int_eq(ctl_map_add(&m, NULL), -EINVAL);
        /* An old GPU named twice, in one argument or across two. */
        ck_assert_int_eq(ctl_map_add(&m, C "=" A), -EEXIST);
        ck_assert_int_eq(ctl_map_add(&m, A "=" B "," A "=" C), -EEXIST);
        ck_assert_uint_eq(m.n_items, 2);
        ck_assert_str_eq(m.items[1], B);
        ctl_map_free(&m);
}
END_TEST

START_TEST(test_numbers)
{
        unsigned long long v;
        int pid;

        ck_assert_int_eq(ctl_parse_pid("1", &pid), 0);
        ck_assert_int_eq(pid, 1);
        ck_assert_int_eq(ctl_parse_pid("2147483647", &pid), 0);
        ck_assert_int_eq(pid, INT_MAX);
        ck_assert_int_lt(ctl_parse_pid("0", &pid), 0);
        ck_assert_int_lt(ctl_parse_pid("2147483648", &pid), 0);
        ck_assert_int_lt(ctl_parse_pid("-1", &pid), 0);
        ck_assert_int_lt(ctl_parse_pid("1 ", &pid), 0);
        ck_assert_int_lt(ctl_parse_pid("", &pid), 0);
        ck_assert_int_eq(ctl_parse_uint("0", 5, &v), 0);
        ck_assert_uint_eq(v, 0);
        ck_assert_int_eq(ctl_parse_uint("5", 5, &v), 0);
        ck_assert_int_eq(ctl_parse_uint("6", 5, &v), -ERANGE);
        ck_assert_int_eq(ctl_parse_uint("99999999999999999999999", ULLONG_MAX, &v), -ERANGE);
        ck_assert_int_eq(ctl_parse_uint("0x5", 5, &v), -EINVAL);
        ck_assert_int_eq(ctl_parse_uint("+5", 5, &v), -EINVAL);
}
END_TEST

const char unit_suite_name[] = "devmap";

void unit_tests(TCase *tc)
{
        tcase_add_test(tc, test_pairs);
        tcase_add_test(tc, test_refused);
        tcase_add_test(tc, test_numbers);
}
