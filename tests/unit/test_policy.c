/* Unit tests: the authorisation rule as a table. */
#include <check.h>
#include <stdlib.h>

#include "runner.h"

#include "auth/policy.h"

#define U 1000 /* the caller */
#define O 2000 /* another user */
#define GOP 50 /* an operator group */

struct row {
        const char *what;
        uid_t caller;
        gid_t group;       /* the caller's supplementary group, 0 for none */
        uid_t r, e, s;     /* the target's ids */
        bool read_only;
        bool operators;    /* GOP configured as operator group */
        bool op_root;      /* operators_may_act_on_root */
        bool ro_open;      /* read_only_unrestricted */
        enum policy_verdict want;
};

static const struct row rows[] = {
        { "root acts on anyone", 0, 0, O, O, O, false, false, false, false, POLICY_ALLOW_ROOT },
        { "root acts on root", 0, 0, 0, 0, 0, false, false, false, false, POLICY_ALLOW_ROOT },
        { "owner", U, 0, U, U, U, false, false, false, false, POLICY_ALLOW_OWNER },
        { "owner reads", U, 0, U, U, U, true, false, false, false, POLICY_ALLOW_OWNER },
        { "other user", U, 0, O, O, O, false, false, false, false, POLICY_DENY },
        { "other user, read", U, 0, O, O, O, true, false, false, false, POLICY_DENY },
        { "setuid target: euid differs", U, 0, U, O, U, false, false, false, false, POLICY_DENY },
        { "saved uid differs", U, 0, U, U, 0, false, false, false, false, POLICY_DENY },
        { "real uid differs", U, 0, O, U, U, false, false, false, false, POLICY_DENY },
        { "root's process", U, 0, 0, 0, 0, false, false, false, false, POLICY_DENY },
        { "operator on other user", U, GOP, O, O, O, false, true, false, false, POLICY_ALLOW_OPERATOR },
        { "operator group configured, caller not in it", U, 0, O, O, O, false, true, false, false, POLICY_DENY },
        { "operator on root", U, GOP, 0, 0, 0, false, true, false, false, POLICY_DENY },
        { "operator on half-root", U, GOP, O, 0, O, false, true, false, false, POLICY_DENY },
        { "operator on root, allowed", U, GOP, 0, 0, 0, false, true, true, false, POLICY_ALLOW_OPERATOR },
        { "read-only open", U, 0, O, O, O, true, false, false, true, POLICY_ALLOW_READ },
        { "read-only open, root target", U, 0, 0, 0, 0, true, false, false, true, POLICY_ALLOW_READ },
        { "read-only open does not open writes", U, 0, O, O, O, false, false, false, true, POLICY_DENY },
        { "no credentials", (uid_t)-1, 0, O, O, O, true, false, false, false, POLICY_DENY },
};

START_TEST(test_table)
{
        const struct row *w = &rows[_i];
        struct config c;
        struct policy_caller caller = { .uid = w->caller, .gid = 100, .pid = 1 };
        struct policy_target t = { w->r, w->e, w->s };

        config_init(&c);
        if (w->group) {
                caller.groups[0] = w->group;
                caller.n_groups = 1;
        }
        if (w->operators) {
                c.operator_gids[0] = GOP;
                c.n_operator_gids = 1;
        }
        c.operators_may_act_on_root = w->op_root;
        c.read_only_unrestricted = w->ro_open;
        ck_assert_msg(policy_decide(&c, &caller, &t, w->read_only) == w->want, "%s", w->what);
        config_free(&c);
}
END_TEST

START_TEST(test_primary_group_counts)
{
        struct config c;
        struct policy_caller caller = { .uid = U, .gid = GOP };
        struct policy_target t = { O, O, O };

        config_init(&c);
        c.operator_gids[0] = GOP;
        c.n_operator_gids = 1;
        ck_assert_int_eq(policy_decide(&c, &caller, &t, false), POLICY_ALLOW_OPERATOR);
        config_free(&c);
}
END_TEST

const char unit_suite_name[] = "policy";

void unit_tests(TCase *tc)
{
        tcase_add_loop_test(tc, test_table, 0, (int)(sizeof(rows) / sizeof(rows[0])));
        tcase_add_test(tc, test_primary_group_counts);
}
