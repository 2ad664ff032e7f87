/* Unit tests: driver results mapped to protocol errors, and replies. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"

#include "cudackpt/protocol.h"
#include "run/ops.h"

struct row {
        enum ops_step step;
        CUresult r;
        bool alive, mapping;
        enum ops_error want;
};

/* driver-behaviour.md: the results the real driver gives, and what they mean. */
static const struct row rows[] = {
        { OPS_STEP_LOCK, CUDA_SUCCESS, true, false, OPS_OK },
        { OPS_STEP_LOCK, CUDA_SUCCESS, false, false, OPS_PROCESS_GONE },
        { OPS_STEP_GET_STATE, CUDA_ERROR_OPERATING_SYSTEM, false, false, OPS_PROCESS_GONE },
        { OPS_STEP_GET_STATE, CUDA_ERROR_OPERATING_SYSTEM, true, false, OPS_DRIVER_ERROR },
        { OPS_STEP_GET_STATE, CUDA_ERROR_NOT_INITIALIZED, true, false, OPS_NOT_CUDA_PROCESS },
        { OPS_STEP_LOCK, CUDA_ERROR_NOT_INITIALIZED, true, false, OPS_NOT_CUDA_PROCESS },
        { OPS_STEP_LOCK, CUDA_ERROR_ILLEGAL_STATE, true, false, OPS_INVALID_STATE },
        { OPS_STEP_UNLOCK, CUDA_ERROR_ILLEGAL_STATE, true, false, OPS_INVALID_STATE },
        { OPS_STEP_LOCK, CUDA_ERROR_NOT_READY, true, false, OPS_TIMEOUT },
        { OPS_STEP_CHECKPOINT, CUDA_ERROR_NOT_READY, true, false, OPS_DRIVER_ERROR },
        { OPS_STEP_CHECKPOINT, CUDA_ERROR_NOT_SUPPORTED, true, false, OPS_NOT_SUPPORTED },
        { OPS_STEP_CHECKPOINT, CUDA_ERROR_UNKNOWN, true, false, OPS_DRIVER_ERROR },
        { OPS_STEP_RESTORE, CUDA_ERROR_INVALID_VALUE, true, true, OPS_INVALID_GPU_MAPPING },
        { OPS_STEP_RESTORE, CUDA_ERROR_INVALID_VALUE, true, false, OPS_DRIVER_ERROR },
        { OPS_STEP_CHECKPOINT, CUDA_ERROR_INVALID_VALUE, true, true, OPS_DRIVER_ERROR },
        { OPS_STEP_RESTORE, CUDA_ERROR_OUT_OF_MEMORY, true, true, OPS_DRIVER_ERROR },
};

START_TEST(test_classify)
{
        const struct row *w = &rows[_i];
        ck_assert_int_eq(ops_classify(w->step, w->r, w->alive, w->mapping), w->want);
}
END_TEST

static CUresult fake_error_name(CUresult r, const char **s)
{
        *s = r == CUDA_ERROR_UNKNOWN ? "CUDA_ERROR_UNKNOWN" : NULL;
        return *s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static cJSON *params(cJSON *m)
{
        return cJSON_GetObjectItemCaseSensitive(m, "parameters");
}

START_TEST(test_replies)
{
        struct driver d = { .cu_get_error_name = fake_error_name };
        struct ops_result r = { .error = OPS_OK, .state = 2, .duration_ns = 1234567, .rolled_back = -1 };
        cJSON *m, *p;

        m = ops_reply(&d, PROTO_SUSPEND, 42, 1000, &r);
        p = params(m);
        ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(m, "error"));
        ck_assert_int_eq(cJSON_GetObjectItemCaseSensitive(p, "pid")->valueint, 42);
        ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "state")), "checkpointed");
        ck_assert_double_eq_tol(cJSON_GetObjectItemCaseSensitive(p, "duration_ms")->valuedouble, 1.235, 1e-9);
        cJSON_Delete(m);

        /* GetState carries no duration. */
        r.state = 9;
        m = ops_reply(&d, PROTO_GET_STATE, 42, 1000, &r);
        p = params(m);
        ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "state")), "unknown-9");
        ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(p, "duration_ms"));
        cJSON_Delete(m);

        /* A failed Suspend names its step and the rollback. */
        r = (struct ops_result){ .error = OPS_DRIVER_ERROR, .step = OPS_STEP_CHECKPOINT,
                                 .cu = CUDA_ERROR_UNKNOWN, .state = 0, .rolled_back = 1 };
        m = ops_reply(&d, PROTO_SUSPEND, 42, 1000, &r);
        p = params(m);
        ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "error")),
                         CUDACKPT_ERROR_DRIVER_ERROR);
        ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "cuda_error")),
                         "CUDA_ERROR_UNKNOWN");
        ck_assert_int_eq(cJSON_GetObjectItemCaseSensitive(p, "cuda_error_code")->valueint, 999);
        ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "step")), "checkpoint");
        ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "rolled_back")));
        ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "method")), "Suspend");
        ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "state")), "running");
        cJSON_Delete(m);

        /* An error number the driver cannot name is still reported. */
        r.cu = (CUresult)12345;
        m = ops_reply(&d, PROTO_CHECKPOINT, 42, 1000, &r);
        p = params(m);
        ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "cuda_error")),
                         "CUDA_ERROR_12345");
        ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(p, "step"));
        cJSON_Delete(m);

        r = (struct ops_result){ .error = OPS_TIMEOUT, .step = OPS_STEP_LOCK, .state = 0,
                                 .timeout_ms = 100, .rolled_back = -1 };
        m = ops_reply(&d, PROTO_LOCK, 42, 1000, &r);
        p = params(m);
        ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "error")),
                         CUDACKPT_ERROR_TIMEOUT);
        ck_assert_int_eq(cJSON_GetObjectItemCaseSensitive(p, "timeout_ms")->valueint, 100);
        cJSON_Delete(m);

        r = (struct ops_result){ .error = OPS_PERMISSION_DENIED, .state = -1 };
        m = ops_reply(&d, PROTO_LOCK, 42, 1000, &r);
        p = params(m);
        ck_assert_int_eq(cJSON_GetObjectItemCaseSensitive(p, "caller_uid")->valueint, 1000);
        ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(p, "state"));
        cJSON_Delete(m);
}
END_TEST

const char unit_suite_name[] = "ops";

void unit_tests(TCase *tc)
{
        tcase_add_loop_test(tc, test_classify, 0, (int)(sizeof(rows) / sizeof(rows[0])));
        tcase_add_test(tc, test_replies);
}
