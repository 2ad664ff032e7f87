/* Unit tests: common/, what the daemon and the client both rely on: the
 * cgroup path rule and the strict JSON member readers. */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cgroup-path.h"
#include "json.h"
#include "runner.h"

START_TEST(test_cgroup_accepted)
{
        static const struct {
                const char *path;
                size_t len;
        } ok[] = {
                { "/", 1 },
                { "//", 1 },
                { "/kubepods/pod42", 15 },
                { "/kubepods/pod42/", 15 },
                { "/a.b/..c/...", 12 },
        };
        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
                size_t len = 0;

                ck_assert_msg(cgroup_path_check(ok[i].path, &len) == 0, "refused %s", ok[i].path);
                ck_assert_uint_eq(len, ok[i].len);
                ck_assert_int_eq(cgroup_path_check(ok[i].path, NULL), 0);
        }
}
END_TEST

START_TEST(test_cgroup_refused)
{
        static const char *bad[] = { "", "kubepods", "/a//b", "/./a", "/a/.", "/a/../b", "/..", "/a/..//" };
        char *long_path = malloc(4097);

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_msg(cgroup_path_check(bad[i], NULL) == -EINVAL, "accepted %s", bad[i]);
        ck_assert_ptr_nonnull(long_path);
        memset(long_path, 'a', 4096);
        long_path[0] = '/';
        long_path[4096] = '\0';
        ck_assert_int_eq(cgroup_path_check(long_path, NULL), -EINVAL);
        long_path[4095] = '\0';
        ck_assert_int_eq(cgroup_path_check(long_path, NULL), 0);
        free(long_path);
}
END_TEST

START_TEST(test_json_integers)
{
        cJSON *o = cJSON_Parse("{\"pid\":42,\"half\":3.5,\"huge\":1e300,\"neg\":-1,\"text\":\"7\","
                               "\"max\":9007199254740992}");
        long long v = 7;

        ck_assert_ptr_nonnull(o);
        ck_assert(json_get_integer(o, "pid", 0, INT_MAX, &v) && v == 42);
        v = 7;
        ck_assert(!json_get_integer(o, "half", 0, INT_MAX, &v) && v == 7);
        ck_assert(!json_get_integer(o, "huge", 0, JSON_MAX_EXACT, &v) && v == 7);
        ck_assert(!json_get_integer(o, "neg", 0, INT_MAX, &v) && v == 7);
        ck_assert(json_get_integer(o, "neg", -JSON_MAX_EXACT, JSON_MAX_EXACT, &v) && v == -1);
        ck_assert(!json_get_integer(o, "text", 0, INT_MAX, &v));
        ck_assert(!json_get_integer(o, "absent", 0, INT_MAX, &v));
        ck_assert(json_get_integer(o, "max", 0, JSON_MAX_EXACT, &v) && v == 9007199254740992LL);
        ck_assert(json_is_integer(cJSON_GetObjectItemCaseSensitive(o, "pid"), 42, 42));
        ck_assert(!json_is_integer(cJSON_GetObjectItemCaseSensitive(o, "pid"), 43, 50));
        ck_assert(!json_is_integer(NULL, 0, 1));
        cJSON_Delete(o);
}
END_TEST

START_TEST(test_json_other_kinds)
{
        cJSON *o = cJSON_Parse("{\"s\":\"running\",\"n\":1.5,\"b\":false,\"null\":null}");
        double d = 0;
        bool b = true;

        ck_assert_ptr_nonnull(o);
        ck_assert_str_eq(json_get_string(o, "s"), "running");
        ck_assert_ptr_null(json_get_string(o, "n"));
        ck_assert_ptr_null(json_get_string(o, "null"));
        ck_assert_ptr_null(json_get_string(NULL, "s"));
        ck_assert(json_get_number(o, "n", &d) && d == 1.5);
        ck_assert(!json_get_number(o, "s", &d));
        ck_assert(json_get_bool(o, "b", &b) && !b);
        ck_assert(!json_get_bool(o, "null", &b));
        cJSON_Delete(o);
}
END_TEST

const char unit_suite_name[] = "common";

void unit_tests(TCase *tc)
{
        tcase_add_test(tc, test_cgroup_accepted);
        tcase_add_test(tc, test_cgroup_refused);
        tcase_add_test(tc, test_json_integers);
        tcase_add_test(tc, test_json_other_kinds);
}
