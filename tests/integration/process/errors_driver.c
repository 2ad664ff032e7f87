/* errors_driver.c: the errors of the driver itself, on the simulated one:
 * NotSupported (and the rollback it leaves), DriverError, DriverUnavailable
 * (no library, an old driver, a cuInit that fails); a part of
 * integration.errors (test_errors.c). */
#include "errors_driver.h"
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- NotSupported ---------------------------------------------------------- */

START_TEST(not_supported_suspend_rolls_back)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MANAGED=1", NULL);
        struct itest_conn *c = itest_connect(d);
        cJSON *j = itest_call_pid(c, CUDACKPT_METHOD_SUSPEND, pid);
        itest_assert_error(j, CUDACKPT_ERROR_NOT_SUPPORTED);
        itest_assert_int(j, "pid", pid);
        itest_assert_str(j, "method", "Suspend");
        itest_assert_str(j, "step", "checkpoint");
        itest_assert_bool(j, "rolled_back", true);
        itest_assert_str_opt(j, "state", "running");
        itest_assert_state_now(c, pid, "running");
}
END_TEST

START_TEST(not_supported_checkpoint_stays_locked)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MANAGED=1", NULL);
        struct itest_conn *c = itest_connect(d);
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_LOCK, pid), pid, "locked");
        cJSON *j = itest_call_pid(c, CUDACKPT_METHOD_CHECKPOINT, pid);
        itest_assert_error(j, CUDACKPT_ERROR_NOT_SUPPORTED);
        itest_assert_int(j, "pid", pid);
        itest_assert_str(j, "method", "Checkpoint");
        itest_assert_absent(j, "step");
        itest_assert_str_opt(j, "state", "locked");
        itest_assert_state_now(c, pid, "locked");
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_UNLOCK, pid), pid, "running");
}
END_TEST

/* ---- DriverError ----------------------------------------------------------- */

static void assert_driver_error(const cJSON *j, pid_t pid, const char *method)
{
        itest_assert_error(j, CUDACKPT_ERROR_DRIVER_ERROR);
        itest_assert_int(j, "pid", pid);
        itest_assert_str(j, "method", method);
        itest_assert_str(j, "cuda_error", "CUDA_ERROR_UNKNOWN");
        itest_assert_int(j, "cuda_error_code", 999);
}

START_TEST(driver_error_unlock)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_FAIL=unlock:CUDA_ERROR_UNKNOWN", NULL);
        struct itest_conn *c = itest_connect(d);
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_LOCK, pid), pid, "locked");
        cJSON *j = itest_call_pid(c, CUDACKPT_METHOD_UNLOCK, pid);
        assert_driver_error(j, pid, "Unlock");
        itest_assert_absent(j, "step");
        itest_assert_str_opt(j, "state", "locked");

        cudackpt_client *cl = itest_client(d);
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        itest_assert_reply_error(cudackpt_unlock(cl, pid, &r), &r, CUDACKPT_ERROR_DRIVER_ERROR);
        ck_assert_int_eq(r.pid, pid);
        assert_driver_error(itest_reply_json(&r), pid, "Unlock");
        cudackpt_reply_clear(&r);
}
END_TEST

START_TEST(driver_error_resume_unlock_step)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_FAIL=unlock:CUDA_ERROR_UNKNOWN", NULL);
        struct itest_conn *c = itest_connect(d);
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_SUSPEND, pid), pid, "checkpointed");
        cJSON *j = itest_call_pid(c, CUDACKPT_METHOD_RESUME, pid);
        assert_driver_error(j, pid, "Resume");
        itest_assert_str(j, "step", "unlock");
        itest_assert_str_opt(j, "state", "locked");
        itest_assert_state_now(c, pid, "locked");
}
END_TEST

START_TEST(driver_error_get_state_and_tid)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t a = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_FAIL=getstate:CUDA_ERROR_UNKNOWN", NULL);
        pid_t b = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_FAIL=tid:CUDA_ERROR_UNKNOWN", NULL);
        struct itest_conn *c = itest_connect(d);
        assert_driver_error(itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, a), a, "GetState");
        assert_driver_error(itest_call_pid(c, CUDACKPT_METHOD_GET_RESTORE_THREAD_ID, b), b, "GetRestoreThreadId");
        itest_assert_state_now(c, b, "running");
}
END_TEST

/* ---- DriverUnavailable ----------------------------------------------------- */

static void assert_unavailable_everywhere(struct itest_daemon *d, const char *mention1, const char *mention2)
{
        pid_t pid = itest_sim_target();
        struct itest_conn *c = itest_connect(d);
        for (size_t i = 0; itest_process_methods[i]; i++) {
                cJSON *j = itest_call_pid(c, itest_process_methods[i], pid);
                itest_assert_error(j, CUDACKPT_ERROR_DRIVER_UNAVAILABLE);
                const char *reason = itest_str(j, "reason");
                ck_assert_msg(reason && *reason, "no reason in %s", itest_dump(j));
                if (mention1)
                        ck_assert_msg(strstr(reason, mention1) || (mention2 && strstr(reason, mention2)),
                                      "reason does not mention %s: %s", mention1, itest_dump(j));
        }
        /* The daemon still serves what needs no driver. */
        cJSON *j = itest_call(c, "org.varlink.service.GetInfo", "{}");
        itest_assert_ok(j);

        cudackpt_client *cl = itest_client(d);
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        itest_assert_reply_error(cudackpt_get_state(cl, pid, &r), &r, CUDACKPT_ERROR_DRIVER_UNAVAILABLE);
        cudackpt_reply_clear(&r);
}

START_TEST(driver_unavailable_missing_library)
{
        struct itest_daemon_opts o = { .driver = "/nonexistent.so" };
        struct itest_daemon *d = itest_daemon_start(&o);
        assert_unavailable_everywhere(d, NULL, NULL);
}
END_TEST

START_TEST(driver_unavailable_old_driver)
{
        static const char *const env[] = { "CUDACKPT_SIM_DRIVER_VERSION=12000", NULL };
        struct itest_daemon_opts o = { .env = env };
        struct itest_daemon *d = itest_daemon_start(&o);
        assert_unavailable_everywhere(d, "12000", "12.0");
}
END_TEST

START_TEST(driver_unavailable_init_fails)
{
        /* 100: CUDA_ERROR_NO_DEVICE. */
        static const char *const env[] = { "CUDACKPT_SIM_INIT_ERROR=100", NULL };
        struct itest_daemon_opts o = { .env = env };
        struct itest_daemon *d = itest_daemon_start(&o);
        assert_unavailable_everywhere(d, NULL, NULL);
}
END_TEST

void errors_driver_add_tests(TCase *tc)
{
        tcase_add_test(tc, not_supported_suspend_rolls_back);
        tcase_add_test(tc, not_supported_checkpoint_stays_locked);
        tcase_add_test(tc, driver_error_unlock);
        tcase_add_test(tc, driver_error_resume_unlock_step);
        tcase_add_test(tc, driver_error_get_state_and_tid);
        tcase_add_test(tc, driver_unavailable_missing_library);
        tcase_add_test(tc, driver_unavailable_old_driver);
        tcase_add_test(tc, driver_unavailable_init_fails);
}
