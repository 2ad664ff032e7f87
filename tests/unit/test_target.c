/* Unit tests: /proc parsing and pidfd pinning of real processes. */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "target.h"

START_TEST(test_parse_stat)
{
        uint64_t st = 0;
        char state = 0;
        const char *line =
                "1234 (we ird) (name)) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10\n";

        ck_assert_int_eq(target_parse_start_time(line, &st, &state), 0);
        ck_assert_uint_eq(st, 987654);
        ck_assert_int_eq(state, 'S');
        ck_assert_int_lt(target_parse_start_time("1234 (x) S 1 2 3", &st, &state), 0);
        ck_assert_int_lt(target_parse_start_time("garbage", &st, &state), 0);
        ck_assert_int_lt(target_parse_start_time(
                                 "1 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 12x 1 1", &st, &state),
                         0);
}
END_TEST

START_TEST(test_parse_uids)
{
        uid_t r, e, s;

        ck_assert_int_eq(target_parse_uids("Name:\tx\nUid:\t1000\t0\t1001\t1000\nGid:\t1\t1\t1\t1\n", &r,
                                           &e, &s),
                         0);
        ck_assert_uint_eq(r, 1000);
        ck_assert_uint_eq(e, 0);
        ck_assert_uint_eq(s, 1001);
        ck_assert_int_lt(target_parse_uids("Name:\tx\nGid:\t1\n", &r, &e, &s), 0);
}
END_TEST

START_TEST(test_pin_and_exit)
{
        struct target_identity id;
        pid_t child = fork();

        ck_assert_int_ge(child, 0);
        if (child == 0) {
                pause();
                _exit(0);
        }
        ck_assert_int_eq(target_open(child, &id), 0);
        ck_assert_int_eq(id.pid, child);
        ck_assert_uint_eq(id.ruid, getuid());
        ck_assert_int_eq(target_alive(&id), 1);
        kill(child, SIGKILL);
        /* Gone as soon as it is a zombie, before it is reaped. */
        siginfo_t si;
        ck_assert_int_eq(waitid(P_PID, (id_t)child, &si, WEXITED | WNOWAIT), 0);
        ck_assert_int_eq(target_alive(&id), 0);
        ck_assert_int_eq(target_open(child, &(struct target_identity){ 0 }), -ESRCH);
        waitpid(child, NULL, 0);
        ck_assert_int_eq(target_alive(&id), 0);
        target_close(&id);
        ck_assert_int_eq(target_open(child, &id), -ESRCH);
        ck_assert_int_eq(target_open(0, &id), -ESRCH);
        ck_assert_int_eq(target_open(-5, &id), -ESRCH);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("target");
        TCase *tc = tcase_create("core");
        SRunner *sr;
        int failed;

        tcase_add_test(tc, test_parse_stat);
        tcase_add_test(tc, test_parse_uids);
        tcase_add_test(tc, test_pin_and_exit);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
