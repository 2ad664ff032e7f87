/* Unit tests: the selection engine (select.h), on a loop of its own and
 * this process's /proc. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "runner.h"
#include "host/pidns.h"
#include "jobs/select.h"

/* Selector sel of a caller in cgroup ours is want in the daemon's paths. */
static void assert_in_ours(const char *ours, const char *sel, const char *want)
{
        char *p;

        ck_assert_int_eq(select_cgroup_in_ours(ours, sel, &p), 0);
        ck_assert_str_eq(p, want);
        free(p);
}

/* A caller's cgroup selector in the daemon's paths. */
START_TEST(test_cgroup_in_ours)
{
        assert_in_ours("", "/a/b", "/a/b");
        assert_in_ours("", "/", "/");
        /* A container's root is its "/". */
        assert_in_ours("/box", "/", "/box");
        assert_in_ours("/box", "/job", "/box/job");
}
END_TEST

static const char *error_name(const cJSON *msg)
{
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(msg, "error");

        return cJSON_IsString(e) ? e->valuestring : "";
}

/* What the failures of the selection itself answer. */
START_TEST(test_error_replies)
{
        struct select_job j = { .method = PROTO_LOCK_GROUP, .error = -E2BIG };
        const char *result, *detail;
        cJSON *msg = select_error_reply(&j, 100, &result, &detail);

        ck_assert_str_eq(error_name(msg), "io.cudackpt.Process.GroupTooLarge");
        ck_assert_str_eq(result, "GroupTooLarge");
        ck_assert_ptr_null(detail);
        cJSON_Delete(msg);
        j.error = -EREMOTE;
        msg = select_error_reply(&j, 100, &result, &detail);
        ck_assert_str_eq(error_name(msg), "io.cudackpt.Process.PermissionDenied");
        ck_assert_str_eq(result, "PermissionDenied");
        ck_assert_str_eq(detail, "cgroup namespace unknown");
        cJSON_Delete(msg);
        /* Others the client cannot be told: its connection is closed. */
        j.error = -ENOMEM;
        ck_assert_ptr_null(select_error_reply(&j, 100, &result, &detail));
}
END_TEST

static void done_cb(struct select_job *j)
{
        *(bool *)j->loop->data = true;
}

/* Runs one selection of pids to its end. */
static void run(struct select_job *j, struct proto_group_request *req, const struct config *cfg,
                struct select_source *src, struct policy_caller *caller, uv_loop_t *loop)
{
        bool done = false;

        loop->data = &done;
        *j = (struct select_job){ .loop = loop, .cfg = cfg, .source = src, .caller = caller, .req = req,
                                  .method = PROTO_LOCK_GROUP, .purpose = SELECT_TO_ACT, .done_cb = done_cb };
        select_start(j);
        while (!done)
                uv_run(loop, UV_RUN_ONCE);
}

/* Named pids: one with no process fails (NoSuchProcess), the daemon
 * itself is refused, each as the single call judges it; the result is
 * sorted by pid and a pid named twice is one member. */
START_TEST(test_pids)
{
        struct config cfg;
        struct select_source src = { 0 };
        struct policy_caller caller = { .uid = 0, .pid = getpid(), .pidfd = -1 };
        struct proto_pid_ref pids[] = { { .pid = getpid() }, { .pid = 0x3ffffff0 }, { .pid = getpid() } };
        struct proto_group_request req = { .kind = PROTO_SELECT_PIDS, .pids = pids, .n_pids = 3 };
        struct select_job j;
        uv_loop_t loop;

        config_init(&cfg);
        caller.pidns = PIDNS_SAME;
        ck_assert_int_eq(uv_loop_init(&loop), 0);
        run(&j, &req, &cfg, &src, &caller, &loop);
        ck_assert_int_eq(j.error, 0);
        ck_assert_uint_eq(j.n_cand, 3);
        ck_assert_uint_eq(j.n, 3); /* failed members are never merged */
        ck_assert_int_eq(j.m[2].pid, 0x3ffffff0); /* no process has it */
        ck_assert(j.m[2].failed);
        ck_assert_int_eq(j.m[2].err.error, OPS_NO_SUCH_PROCESS);
        ck_assert_int_eq(j.m[2].err_method, PROTO_LOCK);
        for (size_t i = 0; i < 2; i++) {
                ck_assert_int_eq(j.m[i].pid, getpid());
                ck_assert(j.m[i].failed);
                ck_assert_int_eq(j.m[i].err.error, OPS_PERMISSION_DENIED);
                ck_assert_int_ge(j.m[i].pidfd, 0);
        }
        select_job_clear(&j);
        ck_assert_ptr_null(j.m);
        uv_loop_close(&loop);
        config_free(&cfg);
}
END_TEST

const char unit_suite_name[] = "select";

void unit_tests(TCase *tc)
{
        tcase_add_test(tc, test_cgroup_in_ours);
        tcase_add_test(tc, test_error_replies);
        tcase_add_test(tc, test_pids);
}
