/* Unit tests: client/ctl/job/runlimits.c's reading of /proc/PID/limits:
 * this process's own table read whole and equal to getrlimit()'s values;
 * a table that is not the kernel's (a value that is no number, a soft
 * limit above its hard one, a line too long, an unknown line, none at
 * all) refused. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "runner.h"

#include "runlimits.h"

START_TEST(own_table)
{
        char text[4096];
        FILE *f = fopen("/proc/self/limits", "r");
        size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
        ctl_run_limits l;
        struct rlimit rl;

        if (f)
                fclose(f);
        text[n] = '\0';
        ck_assert_int_eq(ctl_run_limits_parse(text, &l), 0);
        ck_assert_uint_eq(l.n, 16);
        for (size_t i = 0; i < l.n; i++) {
                ck_assert_int_eq(getrlimit(l.resource[i], &rl), 0);
                ck_assert_msg(rl.rlim_cur == l.lim[i].rlim_cur && rl.rlim_max == l.lim[i].rlim_max,
                              "limit %d read as the kernel has it", l.resource[i]);
        }
}
END_TEST

START_TEST(not_the_kernels)
{
        static const char head[] = "Limit                     Soft Limit           Hard Limit           Units     \n";
        char text[1024], longline[600];
        ctl_run_limits l;

        snprintf(text, sizeof(text), "%sMax open files            1024                 4096                 files\n",
                 head);
        ck_assert_int_eq(ctl_run_limits_parse(text, &l), 0);
        ck_assert_int_eq(l.resource[0], RLIMIT_NOFILE);
        ck_assert_uint_eq(l.lim[0].rlim_cur, 1024);
        snprintf(text, sizeof(text), "%sMax open files            lots                 4096                 files\n",
                 head);
        ck_assert_int_eq(ctl_run_limits_parse(text, &l), -EBADMSG);
        snprintf(text, sizeof(text), "%sMax open files            8192                 4096                 files\n",
                 head);
        ck_assert_int_eq(ctl_run_limits_parse(text, &l), -EBADMSG);
        snprintf(text, sizeof(text), "%sMax things                1                    2                    x\n", head);
        ck_assert_int_eq(ctl_run_limits_parse(text, &l), -EBADMSG);
        snprintf(text, sizeof(text), "%sMax open files            99999999999999999999999 unlimited         files\n",
                 head);
        ck_assert_int_eq(ctl_run_limits_parse(text, &l), -EBADMSG);
        ck_assert_int_eq(ctl_run_limits_parse(head, &l), -EBADMSG);
        ck_assert_int_eq(ctl_run_limits_parse("", &l), -EBADMSG);
        memset(longline, 'x', sizeof(longline) - 1);
        longline[sizeof(longline) - 1] = '\0';
        ck_assert_int_eq(ctl_run_limits_parse(longline, &l), -EBADMSG);
}
END_TEST

const char unit_suite_name[] = "runlimits";

void unit_tests(TCase *tc) {
        tcase_add_test(tc, own_table);
        tcase_add_test(tc, not_the_kernels);
}
