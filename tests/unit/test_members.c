/* Unit tests: a group's members and their part of its replies
 * (members.h). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"
#include "cudackpt/protocol.h"
#include "jobs/members.h"

static const struct driver drv;
static const struct policy_caller caller = { .uid = 1000, .pid = 1, .pidfd = -1 };

static struct group_member member(pid_t pid, int state)
{
        return (struct group_member){ .s = { .pid = pid, .vpid = pid, .start_time = 7, .pidfd = -1 },
                                      .state = state };
}

static const cJSON *get(const cJSON *o, const char *key)
{
        return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* Members in a state the method does not converge from fail with
 * InvalidState of the single method's first step; skipped ones are not
 * judged. */
START_TEST(test_check_states)
{
        struct group_member m[] = { member(10, CU_PROCESS_STATE_RUNNING), member(11, CU_PROCESS_STATE_CHECKPOINTED),
                                    member(12, CU_PROCESS_STATE_CHECKPOINTED) };
        struct members ms = { .m = m, .n = 3, .drv = &drv, .caller = &caller };
        size_t first;

        m[2].s.skipped = true;
        ck_assert(!members_first_failed(&ms, &first));
        members_check_states(&ms, PROTO_LOCK_GROUP);
        ck_assert(members_first_failed(&ms, &first));
        ck_assert_uint_eq(first, 1);
        ck_assert_int_eq(m[1].s.err.error, OPS_INVALID_STATE);
        ck_assert_int_eq(m[1].s.err_method, PROTO_LOCK);
        ck_assert_int_eq(m[1].s.err.step, OPS_STEP_LOCK);
        ck_assert(!m[0].s.failed && !m[2].s.failed);
        ck_assert(!members_all_running(&ms));
        m[1].gone = true; /* an exited member does not count */
        ck_assert(members_all_running(&ms));
}
END_TEST

/* GroupFailed names the first failure the caller may know of, and counts
 * the hidden members without naming them. */
START_TEST(test_failure_reply)
{
        struct ops_result denied = { .error = OPS_PERMISSION_DENIED, .state = -1, .restore_tid = -1,
                                     .rolled_back = -1, .in_flight = -1 };
        struct group_member m[] = { member(20, CU_PROCESS_STATE_LOCKED), member(21, -1), member(22, -1) };
        struct members ms = { .m = m, .n = 3, .drv = &drv, .caller = &caller };
        cJSON *msg, *p, *arr;

        m[1].s.hidden = true;
        members_fail(&m[1], PROTO_LOCK, &denied);
        m[2].s.skipped = true;
        msg = members_failure_reply(&ms, PROTO_LOCK_GROUP, PLAN_SELECT, false, cJSON_CreateObject());
        ck_assert_str_eq(get(msg, "error")->valuestring, CUDACKPT_ERROR_GROUP_FAILED);
        p = cJSON_GetObjectItemCaseSensitive(msg, "parameters");
        ck_assert_str_eq(get(p, "phase")->valuestring, "select");
        ck_assert_str_eq(get(p, "method")->valuestring, "LockGroup");
        ck_assert_str_eq(get(p, "error")->valuestring, CUDACKPT_ERROR_PERMISSION_DENIED);
        ck_assert_int_eq(get(p, "refused")->valueint, 1);
        ck_assert_ptr_null(get(p, "pid")); /* none the caller may know of */
        ck_assert_int_eq(get(get(p, "error_parameters"), "caller_uid")->valueint, 1000);
        arr = cJSON_GetObjectItemCaseSensitive(p, "members");
        ck_assert_int_eq(cJSON_GetArraySize(arr), 1);
        ck_assert_int_eq(get(cJSON_GetArrayItem(arr, 0), "pid")->valueint, 20);
        ck_assert_str_eq(get(cJSON_GetArrayItem(arr, 0), "state")->valuestring, "locked");
        arr = cJSON_GetObjectItemCaseSensitive(p, "skipped");
        ck_assert_int_eq(cJSON_GetArraySize(arr), 1);
        ck_assert_str_eq(get(cJSON_GetArrayItem(arr, 0), "reason")->valuestring, CUDACKPT_SKIP_NOT_CUDA);
        cJSON_Delete(msg);
        /* A visible failure is named, with its pid. */
        members_fail(&m[0], PROTO_LOCK, &denied);
        msg = members_failure_reply(&ms, PROTO_LOCK_GROUP, PLAN_LOCK, true, cJSON_CreateObject());
        p = cJSON_GetObjectItemCaseSensitive(msg, "parameters");
        ck_assert_int_eq(get(p, "pid")->valueint, 20);
        ck_assert_str_eq(get(p, "error")->valuestring, CUDACKPT_ERROR_PERMISSION_DENIED);
        ck_assert(cJSON_IsTrue(get(p, "rolled_back")));
        cJSON_Delete(msg);
}
END_TEST

/* Two groups wait for one another when they share an active member. */
START_TEST(test_overlap)
{
        struct group_member a[] = { member(30, 0), member(31, 0) }, b[] = { member(31, 0) };
        struct members ma = { .m = a, .n = 2 }, mb = { .m = b, .n = 1 };

        ck_assert(members_overlap(&ma, &mb));
        b[0].gone = true;
        ck_assert(!members_overlap(&ma, &mb));
        ck_assert(members_ms(1234567) == 1.235);
}
END_TEST

const char unit_suite_name[] = "members";

void unit_tests(TCase *tc)
{
        tcase_add_test(tc, test_check_states);
        tcase_add_test(tc, test_failure_reply);
        tcase_add_test(tc, test_overlap);
}
