/* test_methods.c: every method of io.cudackpt.Process on the happy path,
 * once through the client library and once as raw Varlink bytes, plus the
 * full lock -> checkpoint -> restore -> unlock cycle with the state checked
 * at each step, Suspend/Resume, GPU mappings in every accepted spelling,
 * and the client library's own transport behaviour against the daemon. */
#include "harness.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* GetState through the library and raw, as one call then as expected. */
static void check_state_both(struct itest_daemon *d, cudackpt_client *c, pid_t pid, const char *state)
{
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        itest_assert_reply_state(cudackpt_get_state(c, pid, &r), &r, pid, state);
        ck_assert_ptr_null(r.in_flight);
        cudackpt_reply_clear(&r);

        struct itest_conn *raw = itest_connect(d);
        cJSON *j = itest_call_pid(raw, CUDACKPT_METHOD_GET_STATE, pid);
        itest_assert_state(j, pid, state);
        itest_assert_absent(j, "in_flight");
        itest_conn_close(raw);
}

START_TEST(client_get_state)
{
        struct itest_daemon *d;
        cudackpt_client *c;
        pid_t pid = itest_sim_client(&d, &c);
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        itest_assert_reply_state(cudackpt_get_state(c, pid, &r), &r, pid, "running");
        ck_assert_ptr_null(r.in_flight);
        ck_assert_int_eq(r.restore_thread_id, -1);
        cudackpt_reply_clear(&r);

        /* The same call through the generic entry point. */
        char params[64];
        snprintf(params, sizeof(params), "{\"pid\":%d}", (int)pid);
        itest_assert_reply_state(cudackpt_call(c, CUDACKPT_METHOD_GET_STATE, params, &r), &r, pid, "running");
        cJSON *j = itest_reply_json(&r);
        itest_assert_absent(j, "in_flight");
        cudackpt_reply_clear(&r);
}
END_TEST

START_TEST(raw_get_state)
{
        struct itest_daemon *d;
        struct itest_conn *c;
        pid_t pid = itest_sim_conn(&d, &c);
        cJSON *j = itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, pid);
        itest_assert_state(j, pid, "running");
        itest_assert_absent(j, "in_flight");

        /* The right start_time is accepted. */
        char *params = itest_strdupf("{\"pid\":%d,\"start_time\":%llu}", (int)pid,
                                     (unsigned long long)itest_start_time(pid));
        itest_assert_state(itest_call(c, CUDACKPT_METHOD_GET_STATE, params), pid, "running");
}
END_TEST

START_TEST(client_restore_thread_id)
{
        cudackpt_client *c;
        pid_t pid = itest_sim_client(NULL, &c);
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        itest_assert_reply_ok(cudackpt_get_restore_thread_id(c, pid, &r), &r);
        ck_assert_int_eq(r.pid, pid);
        ck_assert_int_gt(r.restore_thread_id, 0);
        /* The one call that learns nothing of the state says none. */
        ck_assert_ptr_null(r.state);
        cudackpt_reply_clear(&r);
}
END_TEST

START_TEST(raw_restore_thread_id)
{
        struct itest_conn *c;
        pid_t pid = itest_sim_conn(NULL, &c);
        cJSON *j = itest_call_pid(c, CUDACKPT_METHOD_GET_RESTORE_THREAD_ID, pid);
        itest_assert_ok(j);
        itest_assert_int(j, "pid", pid);
        itest_assert_absent(j, "state");
        long long tid = 0;
        ck_assert_msg(itest_int(j, "restore_thread_id", &tid) && tid > 0, "restore_thread_id in %s",
                      itest_dump(j));
}
END_TEST

/* An operation's reply: success, the pid, the state, a sane duration. */
#define assert_op(rc, r, pid, state) do { \
        itest_assert_reply_state((rc), (r), (pid), (state)); \
        ck_assert_msg((r)->duration_ms >= 0 && (r)->duration_ms < 20000, "duration_ms %f", \
                      (r)->duration_ms); \
} while (0)
/* assert_op(), then r cleared for the next call. */
#define assert_op_clear(rc, r, pid, state) do { \
        assert_op((rc), (r), (pid), (state)); \
        cudackpt_reply_clear(r); \
} while (0)

START_TEST(client_full_cycle)
{
        struct itest_daemon *d;
        cudackpt_client *c;
        pid_t pid = itest_sim_client(&d, &c);
        cudackpt_reply r;
        cudackpt_reply_init(&r);

        check_state_both(d, c, pid, "running");
        assert_op_clear(cudackpt_lock(c, pid, -1, &r), &r, pid, "locked");
        check_state_both(d, c, pid, "locked");
        assert_op_clear(cudackpt_checkpoint(c, pid, &r), &r, pid, "checkpointed");
        check_state_both(d, c, pid, "checkpointed");
        assert_op_clear(cudackpt_restore(c, pid, NULL, &r), &r, pid, "locked");
        check_state_both(d, c, pid, "locked");
        assert_op_clear(cudackpt_unlock(c, pid, &r), &r, pid, "running");
        check_state_both(d, c, pid, "running");

        /* And a second round, with an explicit lock timeout. */
        assert_op_clear(cudackpt_lock(c, pid, 5000, &r), &r, pid, "locked");
        assert_op_clear(cudackpt_checkpoint(c, pid, &r), &r, pid, "checkpointed");
        const char *const empty[] = { NULL };
        assert_op_clear(cudackpt_restore(c, pid, empty, &r), &r, pid, "locked");
        assert_op_clear(cudackpt_unlock(c, pid, &r), &r, pid, "running");
}
END_TEST

/* A raw operation reply: success, pid, state, a float duration. */
static void assert_raw_op(const cJSON *j, pid_t pid, const char *state)
{
        itest_assert_state(j, pid, state);
        const cJSON *dur = cJSON_GetObjectItemCaseSensitive(itest_params(j), "duration_ms");
        ck_assert_msg(cJSON_IsNumber(dur) && dur->valuedouble >= 0, "duration_ms in %s", itest_dump(j));
}

/* Lock (with lock_params, or by pid alone where NULL), checkpoint, restore
 * with restore_params and unlock, each answered in the state it leads to. */
static void raw_cycle_restoring_with(struct itest_conn *c, pid_t pid, const char *lock_params, const char *restore_params)
{
        assert_raw_op(lock_params ? itest_call(c, CUDACKPT_METHOD_LOCK, lock_params)
                                  : itest_call_pid(c, CUDACKPT_METHOD_LOCK, pid),
                      pid, "locked");
        assert_raw_op(itest_call_pid(c, CUDACKPT_METHOD_CHECKPOINT, pid), pid, "checkpointed");
        assert_raw_op(itest_call(c, CUDACKPT_METHOD_RESTORE, restore_params), pid, "locked");
        assert_raw_op(itest_call_pid(c, CUDACKPT_METHOD_UNLOCK, pid), pid, "running");
}

START_TEST(raw_full_cycle)
{
        struct itest_daemon *d;
        struct itest_conn *c;
        pid_t pid = itest_sim_conn(&d, &c);
        char *lock = itest_strdupf("{\"pid\":%d,\"timeout_ms\":0}", (int)pid);

        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, pid), pid, "running");
        assert_raw_op(itest_call(c, CUDACKPT_METHOD_LOCK, lock), pid, "locked");
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, pid), pid, "locked");
        assert_raw_op(itest_call_pid(c, CUDACKPT_METHOD_CHECKPOINT, pid), pid, "checkpointed");
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, pid), pid, "checkpointed");
        {
                cJSON *j = itest_call_pid(c, CUDACKPT_METHOD_GET_RESTORE_THREAD_ID, pid);
                itest_assert_ok(j);
                itest_assert_absent(j, "state");
        }
        assert_raw_op(itest_call_pid(c, CUDACKPT_METHOD_RESTORE, pid), pid, "locked");
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, pid), pid, "locked");
        assert_raw_op(itest_call_pid(c, CUDACKPT_METHOD_UNLOCK, pid), pid, "running");
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, pid), pid, "running");

        /* An empty mapping restores in place. */
        raw_cycle_restoring_with(c, pid, lock, itest_strdupf("{\"pid\":%d,\"gpu_mapping\":{}}", (int)pid));
}
END_TEST

START_TEST(client_suspend_resume)
{
        struct itest_daemon *d;
        cudackpt_client *c;
        pid_t pid = itest_sim_client(&d, &c);
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        for (int round = 0; round < 2; round++) {
                assert_op_clear(cudackpt_suspend(c, pid, round == 0 ? -1 : 0, &r), &r, pid, "checkpointed");
                check_state_both(d, c, pid, "checkpointed");
                assert_op_clear(cudackpt_resume(c, pid, NULL, &r), &r, pid, "running");
                check_state_both(d, c, pid, "running");
        }
}
END_TEST

START_TEST(raw_suspend_resume)
{
        struct itest_daemon *d;
        struct itest_conn *c;
        pid_t pid = itest_sim_conn(&d, &c);
        assert_raw_op(itest_call(c, CUDACKPT_METHOD_SUSPEND, itest_strdupf("{\"pid\":%d,\"timeout_ms\":5000}", (int)pid)),
                      pid, "checkpointed");
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, pid), pid, "checkpointed");
        assert_raw_op(itest_call_pid(c, CUDACKPT_METHOD_RESUME, pid), pid, "running");
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, pid), pid, "running");
        /* The largest timeout the driver takes is accepted. */
        assert_raw_op(itest_call(c, CUDACKPT_METHOD_SUSPEND,
                                 itest_strdupf("{\"pid\":%d,\"timeout_ms\":4294967295}", (int)pid)),
                      pid, "checkpointed");
        assert_raw_op(itest_call(c, CUDACKPT_METHOD_RESUME, itest_strdupf("{\"pid\":%d,\"gpu_mapping\":{}}", (int)pid)),
                      pid, "running");
}
END_TEST

/* The simulated speeds show in duration_ms: 512 MiB at 2048 MiB/s is a
 * 250 ms checkpoint, at 4096 MiB/s a 125 ms restore; and a duration is
 * never longer than the call as the client saw it. */
START_TEST(durations_follow_memory)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=512", NULL);
        cudackpt_client *c = itest_client(d);
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        assert_op_clear(cudackpt_lock(c, pid, -1, &r), &r, pid, "locked");
        double t0 = itest_now_ms();
        assert_op(cudackpt_checkpoint(c, pid, &r), &r, pid, "checkpointed");
        double seen = itest_now_ms() - t0;
        ck_assert_msg(r.duration_ms >= 200 && r.duration_ms <= seen + 1,
                      "checkpoint of 512 MiB took %.1f ms (client saw %.1f ms), expected ~250", r.duration_ms,
                      seen);
        cudackpt_reply_clear(&r);
        t0 = itest_now_ms();
        assert_op(cudackpt_restore(c, pid, NULL, &r), &r, pid, "locked");
        seen = itest_now_ms() - t0;
        ck_assert_msg(r.duration_ms >= 100 && r.duration_ms <= seen + 1,
                      "restore of 512 MiB took %.1f ms (client saw %.1f ms), expected ~125", r.duration_ms, seen);
        cudackpt_reply_clear(&r);
        assert_op(cudackpt_unlock(c, pid, &r), &r, pid, "running");
        ck_assert_msg(r.duration_ms < 100, "unlock took %.1f ms", r.duration_ms);
        cudackpt_reply_clear(&r);
}
END_TEST

/* Restore with the identity mapping, in each spelling the protocol takes. */
START_TEST(restore_identity_mapping)
{
        cudackpt_client *c;
        pid_t pid = itest_sim_client(NULL, &c);
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        const char *const maps[][3] = {
                { ITEST_GPU0, ITEST_GPU0_PLAIN, NULL },
                { ITEST_GPU0_PLAIN, ITEST_GPU0, NULL },
                { ITEST_GPU0, ITEST_GPU0, NULL },
                { "00000000-5157-4000-8000-000000000001", ITEST_GPU0_PLAIN, NULL },
        };
        for (size_t i = 0; i < sizeof(maps) / sizeof(maps[0]); i++) {
                assert_op_clear(cudackpt_lock(c, pid, -1, &r), &r, pid, "locked");
                assert_op_clear(cudackpt_checkpoint(c, pid, &r), &r, pid, "checkpointed");
                int rc = cudackpt_restore(c, pid, maps[i], &r);
                ck_assert_msg(rc == 0 && r.error == NULL, "restore with %s -> %s: %s %s", maps[i][0], maps[i][1],
                              rc ? strerror(-rc) : "", r.error ? r.parameters_json : "");
                ck_assert_str_eq(r.state, "locked");
                cudackpt_reply_clear(&r);
                assert_op_clear(cudackpt_unlock(c, pid, &r), &r, pid, "running");
        }
}
END_TEST

START_TEST(raw_restore_identity_mapping)
{
        struct itest_daemon *d;
        struct itest_conn *c;
        pid_t pid = itest_sim_conn(&d, &c);
        raw_cycle_restoring_with(c, pid, NULL,
                                 itest_strdupf("{\"pid\":%d,\"gpu_mapping\":{\"%s\":\"%s\"}}", (int)pid, ITEST_GPU0,
                                               ITEST_GPU0_PLAIN));
}
END_TEST

START_TEST(resume_identity_mapping)
{
        struct itest_daemon *d;
        cudackpt_client *c;
        pid_t pid = itest_sim_client(&d, &c);
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        assert_op_clear(cudackpt_suspend(c, pid, -1, &r), &r, pid, "checkpointed");
        const char *const map[] = { ITEST_GPU0_PLAIN, ITEST_GPU0, NULL };
        assert_op_clear(cudackpt_resume(c, pid, map, &r), &r, pid, "running");

        struct itest_conn *raw = itest_connect(d);
        assert_raw_op(itest_call_pid(raw, CUDACKPT_METHOD_SUSPEND, pid), pid, "checkpointed");
        assert_raw_op(itest_call(raw, CUDACKPT_METHOD_RESUME,
                                 itest_strdupf("{\"pid\":%d,\"gpu_mapping\":{\"%s\":\"%s\"}}", (int)pid, ITEST_GPU0,
                                               ITEST_GPU0_PLAIN)),
                      pid, "running");
}
END_TEST

/* A process on two GPUs restored with the two swapped. */
START_TEST(restore_swapped_gpus)
{
        static const char *const env[] = { "CUDACKPT_SIM_DEVICE_COUNT=2", NULL };
        struct itest_daemon_opts o = { .env = env };
        struct itest_daemon *d = itest_daemon_start(&o);
        pid_t pid = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_GPUS=0,1", NULL);
        cudackpt_client *c = itest_client(d);
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        assert_op_clear(cudackpt_suspend(c, pid, -1, &r), &r, pid, "checkpointed");
        const char *const map[] = { ITEST_GPU0, ITEST_GPU1, ITEST_GPU1, ITEST_GPU0, NULL };
        assert_op_clear(cudackpt_resume(c, pid, map, &r), &r, pid, "running");
}
END_TEST

START_TEST(client_get_info)
{
        struct itest_daemon *d = itest_daemon_start_default();
        cudackpt_client *c = itest_client(d);
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        itest_assert_reply_ok(cudackpt_call(c, "org.varlink.service.GetInfo", NULL, &r), &r);
        cJSON *j = itest_reply_json(&r);
        itest_assert_lists_interface(j);
        cudackpt_reply_clear(&r);

        itest_assert_reply_ok(cudackpt_call(c, "org.varlink.service.GetInterfaceDescription",
                                            "{\"interface\":\"" CUDACKPT_INTERFACE "\"}", &r),
                              &r);
        j = itest_reply_json(&r);
        const char *desc = itest_str(j, "description");
        ck_assert_msg(desc && strstr(desc, "interface " CUDACKPT_INTERFACE), "description in %s", itest_dump(j));
        cudackpt_reply_clear(&r);
}
END_TEST

/* The library against a daemon: a missing socket, a call that outlives the
 * client's timeout (the daemon carries it out anyway), errors decoded. */
START_TEST(client_transport)
{
        struct itest_daemon *d = itest_daemon_start_default();
        cudackpt_client *c = NULL;
        char *missing = itest_strdupf("%s/nosuchsock", d->dir);
        ck_assert_int_eq(cudackpt_client_connect(missing, &c), -ENOENT);
        ck_assert_ptr_null(c);

        /* 2048 MiB at 1024 MiB/s: a checkpoint of about 2 s. */
        pid_t pid = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=2048", "CUDACKPT_SIM_CKPT_MIBPS=1024", NULL);
        c = itest_client(d);
        itest_assert_suspend_times_out(c, pid, 400, 560);
        cudackpt_reply r;
        cudackpt_reply_init(&r);

        /* The Suspend goes on: Unlock queues behind it and finds the
         * process checkpointed. */
        cudackpt_client *c2 = itest_client(d);
        itest_assert_reply_error(cudackpt_unlock(c2, pid, &r), &r, CUDACKPT_ERROR_INVALID_STATE);
        ck_assert_int_eq(r.pid, pid);
        ck_assert_str_eq(r.state, "checkpointed");
        cudackpt_reply_clear(&r);
        itest_assert_reply_state(cudackpt_get_state(c2, pid, &r), &r, pid, "checkpointed");
        cudackpt_reply_clear(&r);

        /* An error reply: decoded fields and parameters_json. */
        pid_t dead = itest_dead_pid();
        itest_assert_reply_error(cudackpt_get_state(c2, dead, &r), &r, CUDACKPT_ERROR_NO_SUCH_PROCESS);
        ck_assert_int_eq(r.pid, dead);
        itest_assert_int(itest_reply_json(&r), "pid", dead);
        cudackpt_reply_clear(&r);

        /* Bad arguments never reach the daemon. */
        ck_assert_int_eq(cudackpt_get_state(c2, 0, &r), -EINVAL);
        const char *const odd[] = { ITEST_GPU0, NULL };
        ck_assert_int_eq(cudackpt_restore(c2, pid, odd, &r), -EINVAL);
        itest_assert_reply_state(cudackpt_get_state(c2, pid, &r), &r, pid, "checkpointed");
        cudackpt_reply_clear(&r);
}
END_TEST

int main(void)
{
        const TTest *tests[] = { client_get_state, raw_get_state, client_restore_thread_id,
                raw_restore_thread_id, client_full_cycle, raw_full_cycle, client_suspend_resume,
                raw_suspend_resume, durations_follow_memory, restore_identity_mapping,
                raw_restore_identity_mapping, resume_identity_mapping, restore_swapped_gpus, client_get_info,
                client_transport, NULL };

        return itest_run("integration.methods", "methods", 30, tests);
}
