/* Unit tests: client/ctl/selector.c, the selector options of cudackptctl
 * (--pids, --cgroup, --tree) parsed into the protocol's Selector object,
 * and what each refuses before anything is asked of the daemon. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "runner.h"

#include "selector.h"

/* sel's JSON, unformatted; the caller frees it. */
static char *json_of(const ctl_selector *sel)
{
        ck_assert_ptr_nonnull(sel->json);
        return cJSON_PrintUnformatted(sel->json);
}

static void expect(ctl_selector_kind kind, const char *arg, const char *want)
{
        ctl_selector sel = { .kind = CTL_SELECT_NONE };
        char *text;

        ck_assert_msg(ctl_selector_parse(&sel, kind, arg) == 0, "%s '%s' refused", ctl_selector_option(kind), arg);
        ck_assert_int_eq(sel.kind, kind);
        ck_assert_str_eq(sel.arg, arg);
        text = json_of(&sel);
        ck_assert_str_eq(text, want);
        free(text);
        ctl_selector_free(&sel);
}

static void refuse(ctl_selector_kind kind, const char *arg, int err)
{
        ctl_selector sel = { .kind = CTL_SELECT_NONE };

        ck_assert_msg(ctl_selector_parse(&sel, kind, arg) == err, "%s '%s' not refused with %d",
                      ctl_selector_option(kind), arg, err);
        ck_assert_int_eq(sel.kind, CTL_SELECT_NONE);
        ck_assert_ptr_null(sel.json);
}

/* What each selector option accepts, and the Selector it makes. */
static const struct {
        ctl_selector_kind kind;
        const char *arg;
        const char *want;
} accepted[] = {
        { CTL_SELECT_PIDS, "42", "{\"pids\":[{\"pid\":42}]}" },
        { CTL_SELECT_PIDS, "1,2147483647", "{\"pids\":[{\"pid\":1},{\"pid\":2147483647}]}" },
        { CTL_SELECT_PIDS, "42:123456", "{\"pids\":[{\"pid\":42,\"start_time\":123456}]}" },
        { CTL_SELECT_CGROUP, "/", "{\"cgroup\":\"/\"}" },
        { CTL_SELECT_CGROUP, "/kubepods/pod42", "{\"cgroup\":\"/kubepods/pod42\"}" },
        { CTL_SELECT_TREE, "4242", "{\"tree\":4242}" },
};

/* What each refuses, and with what. */
static const struct {
        ctl_selector_kind kind;
        const char *arg;
        int err;
} refused[] = {
        { CTL_SELECT_PIDS, "", -EINVAL },
        { CTL_SELECT_PIDS, "1,,2", -EINVAL },
        { CTL_SELECT_PIDS, "1,", -EINVAL },
        { CTL_SELECT_PIDS, "0", -EINVAL },
        { CTL_SELECT_PIDS, "-1", -EINVAL },
        { CTL_SELECT_PIDS, "+1", -EINVAL },
        { CTL_SELECT_PIDS, " 1", -EINVAL },
        { CTL_SELECT_PIDS, "0x10", -EINVAL },
        { CTL_SELECT_PIDS, "2147483648", -EINVAL },
        { CTL_SELECT_PIDS, "42:", -EINVAL },
        { CTL_SELECT_PIDS, "42:x", -EINVAL },
        { CTL_SELECT_PIDS, "1,2,1", -EEXIST },
        { CTL_SELECT_PIDS, "7:1,7:2", -EEXIST },
        { CTL_SELECT_CGROUP, "", -EINVAL },
        { CTL_SELECT_CGROUP, "kubepods", -EINVAL },
        { CTL_SELECT_CGROUP, "/a//b", -EINVAL },
        { CTL_SELECT_CGROUP, "/a/./b", -EINVAL },
        { CTL_SELECT_CGROUP, "/a/../b", -EINVAL },
        { CTL_SELECT_TREE, "", -EINVAL },
        { CTL_SELECT_TREE, "0", -EINVAL },
        { CTL_SELECT_TREE, "1,2", -EINVAL },
        { CTL_SELECT_TREE, "42:1", -EINVAL },
};

START_TEST(test_accepted)
{
        expect(accepted[_i].kind, accepted[_i].arg, accepted[_i].want);
}
END_TEST

START_TEST(test_refused)
{
        refuse(refused[_i].kind, refused[_i].arg, refused[_i].err);
}
END_TEST

/* A second selector replaces the first; a refused one leaves it as it was. */
START_TEST(test_replace)
{
        ctl_selector sel = { .kind = CTL_SELECT_NONE };
        char *text;

        ck_assert_int_eq(ctl_selector_parse(&sel, CTL_SELECT_TREE, "7"), 0);
        ck_assert_int_eq(ctl_selector_parse(&sel, CTL_SELECT_PIDS, "1,1"), -EEXIST);
        ck_assert_int_eq(sel.kind, CTL_SELECT_TREE);
        text = json_of(&sel);
        ck_assert_str_eq(text, "{\"tree\":7}");
        free(text);
        ck_assert_int_eq(ctl_selector_parse(&sel, CTL_SELECT_CGROUP, "/x"), 0);
        ck_assert_int_eq(sel.kind, CTL_SELECT_CGROUP);
        text = json_of(&sel);
        ck_assert_str_eq(text, "{\"cgroup\":\"/x\"}");
        free(text);
        ctl_selector_free(&sel);
        ck_assert_ptr_null(sel.json);
        ck_assert_str_eq(ctl_selector_option(CTL_SELECT_PIDS), "--pids");
        ck_assert_str_eq(ctl_selector_option(CTL_SELECT_NONE), "");
}
END_TEST

const char unit_suite_name[] = "selector";

void unit_tests(TCase *tc)
{
        tcase_add_loop_test(tc, test_accepted, 0, sizeof(accepted) / sizeof(accepted[0]));
        tcase_add_loop_test(tc, test_refused, 0, sizeof(refused) / sizeof(refused[0]));
        tcase_add_test(tc, test_replace);
}
