/* Unit tests: fair shares (share.h) and the access rule's lease part
 * (access.h). */
#include <check.h>
#include <errno.h>
#include <stdlib.h>

#include "runner.h"

#include "auth/access.h"
#include "base/share.h"

static const char *const keys[] = { "max_x", "max_x_per_uid", "max_x_reserved" };

/* Ten in all, three per uid, four kept for the privileged. */
START_TEST(test_bounds)
{
        struct share s;
        struct share_refusal why;

        share_init(&s, keys, 10, 3, 4);
        for (int i = 0; i < 3; i++)
                ck_assert_int_eq(share_take(&s, 1000, false, &why), 0);
        ck_assert_int_eq(share_take(&s, 1000, false, &why), -EAGAIN);
        ck_assert_int_eq(why.verdict, SHARE_UID_FULL);
        ck_assert_str_eq(why.key, "max_x_per_uid");
        ck_assert_uint_eq(why.limit, 3);
        for (int i = 0; i < 3; i++)
                ck_assert_int_eq(share_take(&s, 1001, false, &why), 0);
        /* Six of the unprivileged six taken: a third uid meets the reserve. */
        ck_assert_int_eq(share_take(&s, 1002, false, &why), -EAGAIN);
        ck_assert_int_eq(why.verdict, SHARE_UNPRIVILEGED_FULL);
        ck_assert_str_eq(why.key, "max_x_reserved");
        ck_assert_uint_eq(why.limit, 6);
        /* The privileged have the reserve, and no per-uid bound. */
        for (int i = 0; i < 4; i++)
                ck_assert_int_eq(share_take(&s, 0, true, &why), 0);
        ck_assert_int_eq(share_take(&s, 0, true, &why), -EAGAIN);
        ck_assert_int_eq(why.verdict, SHARE_FULL);
        ck_assert_str_eq(why.key, "max_x");
        ck_assert_uint_eq(share_held(&s, 1000), 3);
        /* Given back, taken again by whoever is within its share. */
        share_give(&s, 1000, false);
        ck_assert_uint_eq(share_held(&s, 1000), 2);
        ck_assert_int_eq(share_take(&s, 1001, false, &why), -EAGAIN);
        ck_assert_int_eq(why.verdict, SHARE_UID_FULL);
        ck_assert_int_eq(share_take(&s, 1002, false, &why), 0);
        share_give(&s, 0, true);
        ck_assert_int_eq(share_take(&s, 0, true, NULL), 0);
        share_free(&s);
}
END_TEST

/* A reserve over half its limit is cut to half. */
START_TEST(test_clamped)
{
        struct share s;

        share_init(&s, keys, 2, 8, 5);
        ck_assert_uint_eq(s.reserved, 1);
        ck_assert_int_eq(share_take(&s, 7, false, NULL), 0);
        ck_assert_int_eq(share_take(&s, 7, false, NULL), -EAGAIN);
        ck_assert_int_eq(share_take(&s, 8, false, NULL), -EAGAIN);
        ck_assert_int_eq(share_take(&s, 0, true, NULL), 0);
        share_free(&s);
}
END_TEST

/* Connections: the per-uid bound holds root too, the reserve is root's. */
START_TEST(test_per_uid_everyone)
{
        struct share s;
        struct share_refusal why;

        share_init(&s, keys, 10, 2, 5);
        s.per_uid_everyone = true;
        ck_assert_int_eq(share_take(&s, 0, true, NULL), 0);
        ck_assert_int_eq(share_take(&s, 0, true, NULL), 0);
        ck_assert_int_eq(share_take(&s, 0, true, &why), -EAGAIN);
        ck_assert_int_eq(why.verdict, SHARE_UID_FULL);
        /* A container's root (uid 0, unprivileged) counts apart. */
        ck_assert_int_eq(share_take(&s, 0, false, NULL), 0);
        ck_assert_uint_eq(share_held(&s, 0), 1);
        share_give(&s, 0, true);
        ck_assert_int_eq(share_take(&s, 0, true, NULL), 0);
        ck_assert_int_eq(share_take(&s, 0, true, NULL), -EAGAIN);
        share_free(&s);
}
END_TEST

/* ReleaseLease and RenewLease: the taker, or one who acts on every member;
 * the daemon's own namespace sees every pid. */
START_TEST(test_manage_lease)
{
        struct config c;
        struct policy_caller taker = { .uid = 1000, .pidns = PIDNS_SAME };
        struct policy_caller root = { .uid = 0, .pidns = PIDNS_SAME };
        struct policy_caller other = { .uid = 1001, .pidns = PIDNS_SAME };
        struct policy_caller setuid_real = { .uid = 1002, .pidns = PIDNS_SAME };
        /* A caller of another pid namespace that cannot translate sees nothing. */
        struct policy_caller boxed_root = { .uid = 0, .pidns = { .other = true, .unsupported = true, .fd = -1 } };
        const struct access_proc own[] = { { 1, { 1000, 1000, 1000 } } };
        const struct access_proc suid[] = { { 1, { 1002, 0, 0 } } };

        config_init(&c);
        ck_assert(access_may_manage_lease(&c, &taker, 1000, own, 1));
        ck_assert(access_may_manage_lease(&c, &root, 1000, own, 1));
        ck_assert(!access_may_manage_lease(&c, &other, 1000, own, 1));
        ck_assert(!access_may_manage_lease(&c, &boxed_root, 1000, own, 1));
        /* root's lease on a setuid process: its real uid may not manage it. */
        ck_assert(!access_may_manage_lease(&c, &setuid_real, 0, suid, 1));
        ck_assert(access_may_manage_lease(&c, &root, 0, suid, 1));
        ck_assert(!access_may_manage_lease(&c, &taker, 1000, own, 0));
        /* Root of a container has no claim on the reserves. */
        ck_assert(access_privileged(&c, &root));
        ck_assert(!access_privileged(&c, &boxed_root));
        config_free(&c);
}
END_TEST

const char unit_suite_name[] = "share";

void unit_tests(TCase *tc)
{
        tcase_add_test(tc, test_bounds);
        tcase_add_test(tc, test_clamped);
        tcase_add_test(tc, test_per_uid_everyone);
        tcase_add_test(tc, test_manage_lease);
}
