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

/* ---- NotSupported, DriverError --------------------------------------------- */

#define MANAGED "CUDACKPT_SIM_MANAGED=1"
#define FAIL_UNLOCK "CUDACKPT_SIM_FAIL=unlock:CUDA_ERROR_UNKNOWN"

/* A call the driver fails: method on a target of env (first brought to
 * before_state by the method before, where given), answered error with
 * its method's name and step (NULL: none), leaving the process in state,
 * in the reply and now.  DriverError names the CUDA error too. */
struct driver_failure {
        const char *env, *before, *before_state;
        const char *method, *error, *name, *step, *state;
};

static void assert_driver_error(const cJSON *j, pid_t pid, const char *method)
{
        itest_assert_error(j, CUDACKPT_ERROR_DRIVER_ERROR);
        itest_assert_int(j, "pid", pid);
        itest_assert_str(j, "method", method);
        itest_assert_str(j, "cuda_error", "CUDA_ERROR_UNKNOWN");
        itest_assert_int(j, "cuda_error_code", 999);
}

/* Runs f on a new target (*ret_pid) through c; returns the reply. */
static cJSON *fail_call(struct itest_conn *c, const struct driver_failure *f, pid_t *ret_pid)
{
        pid_t pid = itest_target("CUDACKPT_SIM=1", f->env, NULL);
        cJSON *j;

        if (f->before)
                itest_assert_state(itest_call_pid(c, f->before, pid), pid, f->before_state);
        j = itest_call_pid(c, f->method, pid);
        if (strcmp(f->error, CUDACKPT_ERROR_DRIVER_ERROR) == 0)
                assert_driver_error(j, pid, f->name);
        itest_assert_error(j, f->error);
        itest_assert_int(j, "pid", pid);
        itest_assert_str(j, "method", f->name);
        if (f->step)
                itest_assert_str(j, "step", f->step);
        else
                itest_assert_absent(j, "step");
        itest_assert_str_opt(j, "state", f->state);
        itest_assert_state_now(c, pid, f->state);
        *ret_pid = pid;
        return j;
}

START_TEST(not_supported_suspend_rolls_back)
{
        static const struct driver_failure f = { MANAGED, NULL, NULL, CUDACKPT_METHOD_SUSPEND,
                                                 CUDACKPT_ERROR_NOT_SUPPORTED, "Suspend", "checkpoint", "running" };
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid;

        itest_assert_bool(fail_call(itest_connect(d), &f, &pid), "rolled_back", true);
}
END_TEST

START_TEST(not_supported_checkpoint_stays_locked)
{
        static const struct driver_failure f = { MANAGED, CUDACKPT_METHOD_LOCK, "locked", CUDACKPT_METHOD_CHECKPOINT,
                                                 CUDACKPT_ERROR_NOT_SUPPORTED, "Checkpoint", NULL, "locked" };
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t pid;

        fail_call(c, &f, &pid);
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_UNLOCK, pid), pid, "running");
}
END_TEST

START_TEST(driver_error_unlock)
{
        static const struct driver_failure f = { FAIL_UNLOCK, CUDACKPT_METHOD_LOCK, "locked", CUDACKPT_METHOD_UNLOCK,
                                                 CUDACKPT_ERROR_DRIVER_ERROR, "Unlock", NULL, "locked" };
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid;

        fail_call(itest_connect(d), &f, &pid);

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
        static const struct driver_failure f = { FAIL_UNLOCK, CUDACKPT_METHOD_SUSPEND, "checkpointed",
                                                 CUDACKPT_METHOD_RESUME, CUDACKPT_ERROR_DRIVER_ERROR, "Resume",
                                                 "unlock", "locked" };
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid;

        fail_call(itest_connect(d), &f, &pid);
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
