/* test_errors.c: every error of io.cudackpt.Process that the simulated
 * driver (or the daemon's own checks) can produce, with the parameters the
 * IDL gives it, and the state the process is left in afterwards; those of
 * processes that exit, stop or are traced during an operation
 * (ProcessGone, ProcessStopped) are test_lifecycle.c's.  The driver's own
 * errors (NotSupported, DriverError, DriverUnavailable) are in
 * errors_driver.c. */
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

static cJSON *suspend(struct itest_conn *c, pid_t pid)
{
        cJSON *j = itest_call_pid(c, CUDACKPT_METHOD_SUSPEND, pid);
        itest_assert_state(j, pid, "checkpointed");
        return j;
}

/* ---- NoSuchProcess / NotCudaProcess ---------------------------------------- */

/* Every method of io.cudackpt.Process on pid fails with error, naming pid. */
static void assert_every_method_fails(struct itest_conn *c, pid_t pid, const char *error)
{
        for (size_t i = 0; itest_process_methods[i]; i++) {
                cJSON *j = itest_call_pid(c, itest_process_methods[i], pid);
                itest_assert_error(j, error);
                itest_assert_int(j, "pid", pid);
        }
}

START_TEST(no_such_process)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t dead = itest_dead_pid();
        struct itest_conn *c = itest_connect(d);
        assert_every_method_fails(c, dead, CUDACKPT_ERROR_NO_SUCH_PROCESS);
        cudackpt_client *cl = itest_client(d);
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        itest_assert_reply_error(cudackpt_get_state(cl, dead, &r), &r, CUDACKPT_ERROR_NO_SUCH_PROCESS);
        ck_assert_int_eq(r.pid, dead);
        cudackpt_reply_clear(&r);
        itest_assert_reply_error(cudackpt_suspend(cl, dead, -1, &r), &r, CUDACKPT_ERROR_NO_SUCH_PROCESS);
        cudackpt_reply_clear(&r);
}
END_TEST

/* The daemon never acts on itself, whether named by its pid or by the id of
 * one of its threads (which means the same process). */
START_TEST(daemon_itself_refused)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        char path[64];
        struct dirent *e;
        int threads = 0;

        snprintf(path, sizeof(path), "/proc/%d/task", (int)d->pid);
        DIR *dir = opendir(path);
        ck_assert_ptr_nonnull(dir);
        while ((e = readdir(dir))) {
                int tid = atoi(e->d_name);
                if (tid <= 0)
                        continue;
                threads += tid != d->pid;
                assert_every_method_fails(c, tid, CUDACKPT_ERROR_PERMISSION_DENIED);
        }
        closedir(dir);
        /* The worker threads of libuv's pool exist from the first operation. */
        ck_assert_int_gt(threads, 0);
}
END_TEST

START_TEST(not_cuda_process)
{
        struct itest_daemon *d = itest_daemon_start_default();
        /* No CUDACKPT_SIM: a process that never initialised CUDA. */
        pid_t pid = itest_target("CUDACKPT_SIM_MEM_MIB=64", NULL);
        struct itest_conn *c = itest_connect(d);
        assert_every_method_fails(c, pid, CUDACKPT_ERROR_NOT_CUDA_PROCESS);
        cudackpt_client *cl = itest_client(d);
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        itest_assert_reply_error(cudackpt_lock(cl, pid, -1, &r), &r, CUDACKPT_ERROR_NOT_CUDA_PROCESS);
        ck_assert_int_eq(r.pid, pid);
        cudackpt_reply_clear(&r);
}
END_TEST

/* ---- InvalidState ---------------------------------------------------------- */

/* InvalidState names the state the call needed.  It carries the process's
 * state only when the daemon knows it without asking the driver again (the
 * step before in the same Suspend or Resume): never a wrong one. */
static void assert_invalid_state(const cJSON *j, pid_t pid, const char *method, const char *required)
{
        itest_assert_error(j, CUDACKPT_ERROR_INVALID_STATE);
        itest_assert_int(j, "pid", pid);
        itest_assert_str(j, "method", method);
        itest_assert_str(j, "required_state", required);
        ck_assert_msg(!itest_has(j, "state") || strcmp(itest_str(j, "state"), required) != 0,
                      "InvalidState says the process is in the state it needs: %s", itest_dump(j));
}

START_TEST(invalid_state_on_running)
{
        struct itest_daemon *d;
        struct itest_conn *c;
        pid_t pid = itest_sim_conn(&d, &c);

        cJSON *j = itest_call(c, CUDACKPT_METHOD_UNLOCK,
                              itest_strdupf("{\"pid\":%d,\"start_time\":%llu}", (int)pid,
                                            (unsigned long long)itest_start_time(pid)));
        assert_invalid_state(j, pid, "Unlock", "locked");
        itest_assert_absent(j, "state");
        itest_assert_absent(j, "step");
        itest_assert_state_now(c, pid, "running");

        assert_invalid_state(itest_call_pid(c, CUDACKPT_METHOD_CHECKPOINT, pid), pid, "Checkpoint", "locked");
        itest_assert_state_now(c, pid, "running");
        assert_invalid_state(itest_call_pid(c, CUDACKPT_METHOD_RESTORE, pid), pid, "Restore", "checkpointed");
        itest_assert_state_now(c, pid, "running");

        /* Resume fails in its restore step and says so. */
        j = itest_call_pid(c, CUDACKPT_METHOD_RESUME, pid);
        assert_invalid_state(j, pid, "Resume", "checkpointed");
        itest_assert_str(j, "step", "restore");
        itest_assert_state_now(c, pid, "running");

        cudackpt_client *cl = itest_client(d);
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        itest_assert_reply_error(cudackpt_unlock(cl, pid, &r), &r, CUDACKPT_ERROR_INVALID_STATE);
        ck_assert_int_eq(r.pid, pid);
        ck_assert_ptr_null(r.state);
        cudackpt_reply_clear(&r);
}
END_TEST

START_TEST(invalid_state_on_locked)
{
        struct itest_conn *c;
        pid_t pid = itest_sim_conn(NULL, &c);
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_LOCK, pid), pid, "locked");
        assert_invalid_state(itest_call_pid(c, CUDACKPT_METHOD_RESTORE, pid), pid, "Restore", "checkpointed");
        itest_assert_state_now(c, pid, "locked");
        assert_invalid_state(itest_call_pid(c, CUDACKPT_METHOD_LOCK, pid), pid, "Lock", "running");
        itest_assert_state_now(c, pid, "locked");
        cJSON *j = itest_call_pid(c, CUDACKPT_METHOD_RESUME, pid);
        assert_invalid_state(j, pid, "Resume", "checkpointed");
        itest_assert_str(j, "step", "restore");
        itest_assert_state_now(c, pid, "locked");
        /* The process is unharmed: the cycle goes on. */
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_CHECKPOINT, pid), pid, "checkpointed");
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_RESTORE, pid), pid, "locked");
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_UNLOCK, pid), pid, "running");
}
END_TEST

START_TEST(invalid_state_on_checkpointed)
{
        struct itest_conn *c;
        pid_t pid = itest_sim_conn(NULL, &c);
        suspend(c, pid);
        assert_invalid_state(itest_call_pid(c, CUDACKPT_METHOD_UNLOCK, pid), pid, "Unlock", "locked");
        assert_invalid_state(itest_call_pid(c, CUDACKPT_METHOD_CHECKPOINT, pid), pid, "Checkpoint", "locked");
        itest_assert_state_now(c, pid, "checkpointed");
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_RESUME, pid), pid, "running");
}
END_TEST

/* ---- Timeout --------------------------------------------------------------- */

/* A lock's timeout_ms here, and how long after it the reply may come: the
 * call's pinning, its reply and a loaded machine's scheduling, but not a
 * second timeout_ms (the kernel in flight lasts ten times as long). */
#define LOCK_TIMEOUT_MS 400
#define LOCK_TIMEOUT_SLACK_MS 200
#define BUSY_PAST_TIMEOUT "CUDACKPT_SIM_BUSY_MS=4000"

/* Asserts that a call with timeout_ms LOCK_TIMEOUT_MS, sent at t0, gave up
 * at its timeout: not before, and not long after. */
static void assert_gave_up_in_time(const char *what, double t0)
{
        double took = itest_now_ms() - t0;
        printf("%s with timeout_ms %d answered after %.0f ms\n", what, LOCK_TIMEOUT_MS, took);
        ck_assert_msg(took >= LOCK_TIMEOUT_MS && took < LOCK_TIMEOUT_MS + LOCK_TIMEOUT_SLACK_MS,
                      "%s with timeout_ms %d answered after %.0f ms", what, LOCK_TIMEOUT_MS, took);
}

/* method (named name) with timeout_ms LOCK_TIMEOUT_MS, sent raw, on a
 * target busy past it: Timeout with its parameters, in time, and the
 * target left running. */
static void assert_times_out(struct itest_daemon *d, const char *method, const char *name)
{
        pid_t pid = itest_target("CUDACKPT_SIM=1", BUSY_PAST_TIMEOUT, NULL);
        struct itest_conn *c = itest_connect(d);
        double t0 = itest_now_ms();
        cJSON *j = itest_call(c, method,
                              itest_strdupf("{\"pid\":%d,\"timeout_ms\":%d}", (int)pid, LOCK_TIMEOUT_MS));
        assert_gave_up_in_time(name, t0);
        itest_assert_error(j, CUDACKPT_ERROR_TIMEOUT);
        itest_assert_int(j, "pid", pid);
        itest_assert_str(j, "method", name);
        itest_assert_int(j, "timeout_ms", LOCK_TIMEOUT_MS);
        itest_assert_str(j, "state", "running");
        itest_assert_state_now(c, pid, "running");
}

START_TEST(lock_timeout)
{
        struct itest_daemon *d = itest_daemon_start_default();
        assert_times_out(d, CUDACKPT_METHOD_LOCK, "Lock");

        cudackpt_client *cl = itest_client(d);
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        pid_t pid2 = itest_target("CUDACKPT_SIM=1", BUSY_PAST_TIMEOUT, NULL);
        double t0 = itest_now_ms();
        int rc = cudackpt_lock(cl, pid2, LOCK_TIMEOUT_MS, &r);
        assert_gave_up_in_time("cudackpt_lock()", t0);
        itest_assert_reply_error(rc, &r, CUDACKPT_ERROR_TIMEOUT);
        ck_assert_int_eq(r.pid, pid2);
        ck_assert_str_eq(r.state, "running");
        cudackpt_reply_clear(&r);
}
END_TEST

START_TEST(suspend_timeout)
{
        struct itest_daemon *d = itest_daemon_start_default();
        assert_times_out(d, CUDACKPT_METHOD_SUSPEND, "Suspend");
}
END_TEST

/* Without a limit, Lock waits for the kernel in flight. */
START_TEST(lock_waits_for_kernel)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_BUSY_MS=500", NULL);
        struct itest_conn *c = itest_connect(d);
        cJSON *j = itest_call(c, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"timeout_ms\":0}", (int)pid));
        itest_assert_state(j, pid, "locked");
        const cJSON *dur = cJSON_GetObjectItemCaseSensitive(itest_params(j), "duration_ms");
        ck_assert_msg(cJSON_IsNumber(dur) && dur->valuedouble >= 400, "Lock behind a 500 ms kernel: %s",
                      itest_dump(j));
}
END_TEST

/* ---- InvalidGpuMapping ----------------------------------------------------- */

static void assert_bad_mapping(const cJSON *j, pid_t pid, const char *method, const char *uuid)
{
        itest_assert_error(j, CUDACKPT_ERROR_INVALID_GPU_MAPPING);
        itest_assert_int(j, "pid", pid);
        itest_assert_str(j, "method", method);
        const char *reason = itest_str(j, "reason");
        ck_assert_msg(reason && *reason, "no reason in %s", itest_dump(j));
        itest_assert_str_opt(j, "state", "checkpointed");
        if (uuid) {
                const char *u = itest_str(j, "uuid");
                ck_assert_msg(u && strcmp(itest_uuid_norm(u), itest_uuid_norm(uuid)) == 0,
                              "expected uuid %s in %s", uuid, itest_dump(j));
        }
}

static cJSON *restore_with(struct itest_conn *c, const char *method, pid_t pid, const char *mapping)
{
        return itest_call(c, method, itest_strdupf("{\"pid\":%d,\"gpu_mapping\":%s}", (int)pid, mapping));
}

START_TEST(mapping_to_no_device)
{
        struct itest_daemon *d;
        struct itest_conn *c;
        pid_t pid = itest_sim_conn(&d, &c);
        suspend(c, pid);
        cJSON *j = restore_with(c, CUDACKPT_METHOD_RESTORE, pid, "{\"" ITEST_GPU0 "\":\"" ITEST_GPU_NONE "\"}");
        assert_bad_mapping(j, pid, "Restore", NULL);
        itest_assert_str_opt(j, "uuid", ITEST_GPU_NONE);
        itest_assert_state_now(c, pid, "checkpointed");

        j = restore_with(c, CUDACKPT_METHOD_RESUME, pid, "{\"" ITEST_GPU0 "\":\"" ITEST_GPU_NONE "\"}");
        assert_bad_mapping(j, pid, "Resume", NULL);
        itest_assert_state_now(c, pid, "checkpointed");

        /* Through the library too. */
        cudackpt_client *cl = itest_client(d);
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        const char *const map[] = { ITEST_GPU0, ITEST_GPU_NONE, NULL };
        itest_assert_reply_error(cudackpt_restore(cl, pid, map, &r), &r, CUDACKPT_ERROR_INVALID_GPU_MAPPING);
        ck_assert_int_eq(r.pid, pid);
        cudackpt_reply_clear(&r);

        /* Nothing was harmed: a plain Resume works. */
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_RESUME, pid), pid, "running");
}
END_TEST

START_TEST(mapping_malformed_uuid)
{
        struct itest_conn *c;
        pid_t pid = itest_sim_conn(NULL, &c);
        suspend(c, pid);
        static const char *const bad[] = {
                "GPU-1234",
                "GPU-00000000-5157-4000-8000-00000000000g",
                "0000000051574000800000000000000",   /* 31 digits */
                "000000005157400080000000000000011", /* 33 digits */
                "",
                NULL,
        };
        for (size_t i = 0; bad[i]; i++) {
                /* On the new side ... */
                cJSON *j = restore_with(c, CUDACKPT_METHOD_RESTORE, pid,
                                        itest_strdupf("{\"" ITEST_GPU0 "\":\"%s\"}", bad[i]));
                assert_bad_mapping(j, pid, "Restore", NULL);
                itest_assert_str(j, "uuid", bad[i]);
                /* ... and on the old side. */
                j = restore_with(c, CUDACKPT_METHOD_RESTORE, pid, itest_strdupf("{\"%s\":\"" ITEST_GPU0 "\"}", bad[i]));
                assert_bad_mapping(j, pid, "Restore", NULL);
                itest_assert_str(j, "uuid", bad[i]);
                itest_assert_state_now(c, pid, "checkpointed");
        }
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_RESUME, pid), pid, "running");
}
END_TEST

START_TEST(mapping_duplicate_new_uuid)
{
        static const char *const env[] = { "CUDACKPT_SIM_DEVICE_COUNT=2", NULL };
        struct itest_daemon_opts o = { .env = env };
        struct itest_daemon *d = itest_daemon_start(&o);
        pid_t pid = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_GPUS=0,1", NULL);
        struct itest_conn *c = itest_connect(d);
        suspend(c, pid);
        cJSON *j = restore_with(c, CUDACKPT_METHOD_RESTORE, pid,
                                "{\"" ITEST_GPU0 "\":\"" ITEST_GPU1 "\",\"" ITEST_GPU1 "\":\"" ITEST_GPU1 "\"}");
        assert_bad_mapping(j, pid, "Restore", ITEST_GPU1);
        itest_assert_state_now(c, pid, "checkpointed");
        /* The same UUID in another spelling is still the same GPU. */
        j = restore_with(c, CUDACKPT_METHOD_RESUME, pid,
                         "{\"" ITEST_GPU0 "\":\"" ITEST_GPU1 "\",\"" ITEST_GPU1 "\":\"00000000515740008000000000000002\"}");
        assert_bad_mapping(j, pid, "Resume", ITEST_GPU1);
        itest_assert_state_now(c, pid, "checkpointed");
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_RESUME, pid), pid, "running");
}
END_TEST

/* ---- ProcessChanged, unknown states, QueueFull ----------------------------- */

START_TEST(process_changed)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_sim_target();
        unsigned long long st = (unsigned long long)itest_start_time(pid);
        struct itest_conn *c = itest_connect(d);
        for (size_t i = 0; itest_process_methods[i]; i++) {
                cJSON *j = itest_call(c, itest_process_methods[i],
                                      itest_strdupf("{\"pid\":%d,\"start_time\":%llu}", (int)pid, st + 1));
                itest_assert_error(j, CUDACKPT_ERROR_PROCESS_CHANGED);
                itest_assert_int(j, "pid", pid);
                itest_assert_int(j, "start_time", st + 1);
                itest_assert_int(j, "actual_start_time", st);
        }
        /* Not one of them acted. */
        itest_assert_state_now(c, pid, "running");
}
END_TEST

START_TEST(unknown_state_value)
{
        /* The simulator may read the value from either environment. */
        static const char *const env[] = { "CUDACKPT_SIM_STATE_VALUE=7", NULL };
        struct itest_daemon_opts o = { .env = env };
        struct itest_daemon *d = itest_daemon_start(&o);
        pid_t pid = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_STATE_VALUE=7", NULL);
        struct itest_conn *c = itest_connect(d);
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, pid), pid, "unknown-7");
        cudackpt_client *cl = itest_client(d);
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        itest_assert_reply_state(cudackpt_get_state(cl, pid, &r), &r, pid, "unknown-7");
        cudackpt_reply_clear(&r);
}
END_TEST

/* max_queue_per_pid refuses an unprivileged user's calls (as root, the
 * test makes them as another uid); root's pass it. */
START_TEST(queue_full)
{
        struct itest_daemon_opts o = { .config_json = "{\"max_queue_per_pid\":2}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        uid_t u = geteuid() == 0 ? ITEST_OTHER_UID : (uid_t)-1;
        /* A checkpoint of about 2 s holds the queue. */
        pid_t pid = itest_target_as(u, "CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=2048", "CUDACKPT_SIM_CKPT_MIBPS=1024",
                                    NULL);
        struct itest_conn *op = itest_connect_unprivileged(d, u);
        struct itest_conn *watch = itest_connect_unprivileged(d, u);
        struct itest_conn *root = u == (uid_t)-1 ? NULL : itest_connect(d);
        itest_assert_state(itest_call_pid(op, CUDACKPT_METHOD_LOCK, pid), pid, "locked");
        itest_send_call(op, CUDACKPT_METHOD_CHECKPOINT, itest_strdupf("{\"pid\":%d}", (int)pid));
        itest_await_in_flight(watch, pid, "Checkpoint", 3000);

        enum { N = 5 };
        struct itest_conn *more[N];
        for (int i = 0; i < N; i++) {
                more[i] = itest_connect_unprivileged(d, u);
                itest_send_call(more[i], CUDACKPT_METHOD_UNLOCK, itest_strdupf("{\"pid\":%d}", (int)pid));
        }
        if (root)
                itest_send_call(root, CUDACKPT_METHOD_UNLOCK, itest_strdupf("{\"pid\":%d}", (int)pid));
        int full = 0;
        for (int i = 0; i < N; i++) {
                cJSON *j = itest_recv(more[i]);
                const char *e = itest_error(j);
                if (e && strcmp(e, CUDACKPT_ERROR_QUEUE_FULL) == 0) {
                        itest_assert_int(j, "pid", pid);
                        itest_assert_int(j, "limit", 2);
                        full++;
                } else {
                        /* Those queued ran after the checkpoint. */
                        ck_assert_msg(e && strcmp(e, CUDACKPT_ERROR_INVALID_STATE) == 0, "queued Unlock: %s",
                                      itest_dump(j));
                        itest_assert_str(j, "state", "checkpointed");
                }
        }
        /* At most 2 queued or running for the pid: the Checkpoint and at most
         * one more, or two more if the running one does not count. */
        ck_assert_msg(full >= N - 2, "only %d of %d Unlocks behind a Checkpoint were refused", full, N);
        itest_assert_state(itest_recv(op), pid, "checkpointed");
        if (root) {
                /* Queued past the limit, it ran after the checkpoint. */
                cJSON *j = itest_recv(root);
                itest_assert_error(j, CUDACKPT_ERROR_INVALID_STATE);
                itest_assert_str(j, "state", "checkpointed");
        }
}
END_TEST

static Suite *errors_suite(void)
{
        const TTest *tests[] = { no_such_process, daemon_itself_refused, not_cuda_process,
                invalid_state_on_running, invalid_state_on_locked, invalid_state_on_checkpointed,
                lock_timeout, suspend_timeout, lock_waits_for_kernel, mapping_to_no_device,
                mapping_malformed_uuid, mapping_duplicate_new_uuid, process_changed, unknown_state_value,
                queue_full, NULL };
        TCase *tc;
        Suite *s = itest_suite("integration.errors", "errors", 40, tests, &tc);

        errors_driver_add_tests(tc);
        return s;
}

int main(void)
{
        return itest_main(errors_suite());
}
