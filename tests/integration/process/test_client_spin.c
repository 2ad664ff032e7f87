/* test_client_spin.c: the client library's spin (cudackpt_client_set_spin(),
 * $CUDACKPT_SPIN_US) against the daemon: a spinning call gets the right
 * reply without ever sleeping, a call that does not spin sleeps, the
 * client's timeout still ends a spinning call, and bad values are refused
 * or ignored.
 *
 * "Sleeping" is a voluntary context switch of the calling thread
 * (getrusage(RUSAGE_THREAD).ru_nvcsw): a recv() or poll() that waits for
 * the reply makes one; a spin does not (its sched_yield() and preemption
 * by other work count as involuntary). */
#include "harness.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/resource.h>

/* Calls made per check: a client that does not spin sleeps in at least
 * one of them even when a reply is sometimes there before it waits. */
#define CALLS 20
/* 2048 MiB at 1024 MiB/s: a checkpoint of about 2 s. */
#define SLOW_TARGET "CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=2048", "CUDACKPT_SIM_CKPT_MIBPS=1024"

static long thread_nvcsw(void)
{
        struct rusage ru;
        ck_assert_int_eq(getrusage(RUSAGE_THREAD, &ru), 0);
        return ru.ru_nvcsw;
}

/* Makes CALLS calls on c, GetState of pid (asserted "running") and GetInfo
 * (asserted to list the interface) in turn; returns how many of them
 * slept. */
static int calls_that_slept(cudackpt_client *c, pid_t pid)
{
        int slept = 0;

        for (int i = 0; i < CALLS; i++) {
                cudackpt_reply r;
                cudackpt_reply_init(&r);
                long before = thread_nvcsw();
                int rc = i % 2 ? cudackpt_call(c, "org.varlink.service.GetInfo", NULL, &r)
                               : cudackpt_get_state(c, pid, &r);
                long after = thread_nvcsw();
                if (i % 2) {
                        itest_assert_reply_ok(rc, &r);
                        itest_assert_lists_interface(itest_reply_json(&r));
                } else {
                        itest_assert_reply_state(rc, &r, pid, "running");
                }
                cudackpt_reply_clear(&r);
                slept += after != before;
        }
        return slept;
}

/* A client connected with $CUDACKPT_SPIN_US set to value (NULL: unset). */
static cudackpt_client *client_with_env(struct itest_daemon *d, const char *value)
{
        if (value)
                ck_assert_int_eq(setenv(CUDACKPT_SPIN_ENV, value, 1), 0);
        else
                ck_assert_int_eq(unsetenv(CUDACKPT_SPIN_ENV), 0);
        return itest_client(d);
}

/* A spinning call never sleeps; without a spin, calls do (so the check
 * can fail). */
START_TEST(spin_never_sleeps)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_sim_target();
        cudackpt_client *c = client_with_env(d, NULL);

        ck_assert_int_gt(calls_that_slept(c, pid), 0);
        /* Two seconds asked, the one-second cap given: far more than a call takes. */
        ck_assert_int_eq(cudackpt_client_set_spin(c, 2000000), 0);
        ck_assert_int_eq(calls_that_slept(c, pid), 0);
        /* And not again: 0 is today's behaviour. */
        ck_assert_int_eq(cudackpt_client_set_spin(c, 0), 0);
        ck_assert_int_gt(calls_that_slept(c, pid), 0);
}
END_TEST

/* $CUDACKPT_SPIN_US is read at connect: a valid value spins, a value that
 * is not a number from 0 to the cap is ignored. */
START_TEST(spin_from_env)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_sim_target();

        ck_assert_int_eq(calls_that_slept(client_with_env(d, "1000000"), pid), 0);
        ck_assert_int_gt(calls_that_slept(client_with_env(d, "1000001"), pid), 0);
        ck_assert_int_gt(calls_that_slept(client_with_env(d, "lots"), pid), 0);
        ck_assert_int_gt(calls_that_slept(client_with_env(d, "-5"), pid), 0);
        ck_assert_int_gt(calls_that_slept(client_with_env(d, ""), pid), 0);
        /* Digits only, as the Python client reads it. */
        ck_assert_int_gt(calls_that_slept(client_with_env(d, " 1000000"), pid), 0);
        ck_assert_int_gt(calls_that_slept(client_with_env(d, "+1000000"), pid), 0);
        /* cudackpt_client_set_spin() overrides it. */
        cudackpt_client *c = client_with_env(d, "1000000");
        ck_assert_int_eq(cudackpt_client_set_spin(c, 0), 0);
        ck_assert_int_gt(calls_that_slept(c, pid), 0);
}
END_TEST

/* The client's timeout bounds a spinning call: the spin ends at its
 * deadline, and the call returns -ETIMEDOUT as one that sleeps would. */
START_TEST(spin_ends_at_timeout)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_target(SLOW_TARGET, NULL);
        cudackpt_client *c = client_with_env(d, NULL);

        ck_assert_int_eq(cudackpt_client_set_spin(c, CUDACKPT_CLIENT_SPIN_MAX_US), 0);
        /* A spin of its own second would take 1000 ms at least. */
        itest_assert_suspend_times_out(c, pid, 400, 560);
}
END_TEST

START_TEST(spin_bad_arguments)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_sim_target();
        cudackpt_client *c = client_with_env(d, NULL);

        ck_assert_int_eq(cudackpt_client_set_spin(c, -1), -EINVAL);
        ck_assert_int_eq(cudackpt_client_set_spin(NULL, 10), -EINVAL);
        /* The refused value changed nothing: still no spin. */
        ck_assert_int_gt(calls_that_slept(c, pid), 0);
}
END_TEST

int main(void)
{
        const TTest *tests[] = { spin_never_sleeps, spin_from_env, spin_ends_at_timeout, spin_bad_arguments,
                NULL };

        return itest_run("integration.client_spin", "client_spin", 30, tests);
}
