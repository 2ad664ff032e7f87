/* test_group_failures.c: group methods that fail, on the simulator,
 * against the real daemon: a failure in each phase and its rollback,
 * members that exit, change, stop or belong to another user, and the
 * limits: size, groups in flight, parameters (helpers: groups_itest.h).
 * Every test checks the states the members are left in with GetState
 * afterwards, not only what the reply says.
 *
 * The other-uid tests need root; without it they say so and pass without
 * checking (as test_floods does).  The binary doubles as a target:
 * --itest-tree (see groups_itest.h). */
#include "groups_itest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- failures in each phase -------------------------------------------------- */

/* The group failed and was rolled back: every member says running, in the
 * reply and now. */
static void assert_rolled_back(struct itest_conn *c, const cJSON *j, size_t n, const pid_t *p)
{
        itest_assert_bool(j, "rolled_back", true);
        for (size_t k = 0; k < n; k++)
                gitest_assert_member(j, p[k], "running");
        gitest_assert_all_now(c, n, p, "running");
}

/* The group failed and was not rolled back: the two good members are in
 * state, the bad one in bad_state, in the reply and now. */
static void assert_left_apart(struct itest_conn *c, const cJSON *j, pid_t good1, pid_t good2, const char *state,
                              pid_t bad, const char *bad_state)
{
        itest_assert_bool(j, "rolled_back", false);
        gitest_assert_member(j, good1, state);
        gitest_assert_member_opt(j, bad, bad_state);
        gitest_assert_member(j, good2, state);
        itest_assert_state_now(c, good1, state);
        itest_assert_state_now(c, bad, bad_state);
        itest_assert_state_now(c, good2, state);
}

/* A group of three, one of which (bad_at) fails a phase: the group is
 * first brought to before_state by the method before, where given, then
 * the method fails in phase with error.  The others are then rolled back
 * to running, or left apart: in state, the bad one in bad_state. */
struct phase_failure {
        const char *bad_env; /* what makes the bad member fail */
        size_t bad_at;
        const char *before, *before_state;
        const char *method, *phase, *error;
        bool cuda_error; /* error_parameters name the CUDA error, CUDA_ERROR_UNKNOWN */
        const char *state, *bad_state; /* NULL: rolled back */
};

#define FAIL_LOCK "CUDACKPT_SIM_FAIL=lock:CUDA_ERROR_UNKNOWN"
#define FAIL_CKPT "CUDACKPT_SIM_FAIL=checkpoint:CUDA_ERROR_UNKNOWN"

static const struct phase_failure rolled_back[] = {
        { FAIL_LOCK, 1, NULL, NULL, CUDACKPT_METHOD_SUSPEND_GROUP, CUDACKPT_PHASE_LOCK, CUDACKPT_ERROR_DRIVER_ERROR,
          true, NULL, NULL },
        { FAIL_LOCK, 1, NULL, NULL, CUDACKPT_METHOD_LOCK_GROUP, CUDACKPT_PHASE_LOCK, CUDACKPT_ERROR_DRIVER_ERROR, true,
          NULL, NULL },
        /* SuspendGroup from running ... */
        { FAIL_CKPT, 1, NULL, NULL, CUDACKPT_METHOD_SUSPEND_GROUP, CUDACKPT_PHASE_CHECKPOINT,
          CUDACKPT_ERROR_DRIVER_ERROR, false, NULL, NULL },
        /* ... and CheckpointGroup from locked: back to running too. */
        { FAIL_CKPT, 2, CUDACKPT_METHOD_LOCK_GROUP, "locked", CUDACKPT_METHOD_CHECKPOINT_GROUP,
          CUDACKPT_PHASE_CHECKPOINT, CUDACKPT_ERROR_DRIVER_ERROR, false, NULL, NULL },
        /* Managed memory: the driver does not support its checkpoint. */
        { "CUDACKPT_SIM_MANAGED=1", 2, NULL, NULL, CUDACKPT_METHOD_SUSPEND_GROUP, CUDACKPT_PHASE_CHECKPOINT,
          CUDACKPT_ERROR_NOT_SUPPORTED, false, NULL, NULL },
};

/* A failed restore unlocks no member: the restored stay locked, the
 * failed one checkpointed. */
static const struct phase_failure restore_fails = {
        "CUDACKPT_SIM_FAIL=restore:CUDA_ERROR_UNKNOWN", 1, CUDACKPT_METHOD_SUSPEND_GROUP, "checkpointed",
        CUDACKPT_METHOD_RESUME_GROUP, CUDACKPT_PHASE_RESTORE, CUDACKPT_ERROR_DRIVER_ERROR, false, "locked",
        "checkpointed",
};

/* Not every member is running after a failed unlock. */
static const struct phase_failure unlock_fails = {
        "CUDACKPT_SIM_FAIL=unlock:CUDA_ERROR_UNKNOWN", 1, CUDACKPT_METHOD_LOCK_GROUP, "locked",
        CUDACKPT_METHOD_UNLOCK_GROUP, CUDACKPT_PHASE_UNLOCK, CUDACKPT_ERROR_DRIVER_ERROR, false, "running", "locked",
};

/* Runs f on a new group of three, p; returns the bad member. */
static pid_t fail_phase(struct itest_conn *c, const struct phase_failure *f, pid_t p[3])
{
        pid_t bad = itest_target(SIM, SMALL, f->bad_env, NULL);
        cJSON *j;

        for (size_t k = 0; k < 3; k++)
                p[k] = k == f->bad_at ? bad : itest_small_target();
        if (f->before)
                gitest_assert_group_ok(gitest_group_pids(c, f->before, 3, p), 3, p, f->before_state);
        j = gitest_group_pids(c, f->method, 3, p);
        gitest_assert_group_failed(j, f->method, f->phase, bad, f->error);
        if (f->cuda_error) {
                const char *ce = gitest_ostr(gitest_error_params(j), "cuda_error");
                ck_assert_msg(gitest_streq(ce, "CUDA_ERROR_UNKNOWN"), "error_parameters without the CUDA error: %s",
                              itest_dump(j));
        }
        if (!f->state) {
                assert_rolled_back(c, j, 3, p);
                return bad;
        }
        pid_t good[2] = { p[f->bad_at == 0 ? 1 : 0], p[f->bad_at == 2 ? 1 : 2] };
        assert_left_apart(c, j, good[0], good[1], f->state, bad, f->bad_state);
        return bad;
}

START_TEST(fail_rolls_back)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t p[3];

        for (size_t i = 0; i < N_OF(rolled_back); i++)
                fail_phase(c, &rolled_back[i], p);
}
END_TEST

/* A failed restore (restore_fails).  Once the failure is gone, a retried
 * ResumeGroup finishes the job. */
START_TEST(fail_restore_then_retry)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t p[3], bad = fail_phase(c, &restore_fails, p);

        /* The same from RestoreGroup. */
        cJSON *j = gitest_group_pids(c, CUDACKPT_METHOD_RESTORE_GROUP, 3, p);
        gitest_assert_group_failed(j, CUDACKPT_METHOD_RESTORE_GROUP, CUDACKPT_PHASE_RESTORE, bad,
                            CUDACKPT_ERROR_DRIVER_ERROR);
        itest_assert_bool(j, "rolled_back", false);
        itest_assert_state_now(c, p[0], "locked");
        itest_assert_state_now(c, bad, "checkpointed");

        gitest_disarm_fail(bad);
        j = gitest_group_pids(c, CUDACKPT_METHOD_RESUME_GROUP, 3, p);
        gitest_assert_group_ok(j, 3, p, "running");
        gitest_assert_all_now(c, 3, p, "running");
}
END_TEST

START_TEST(fail_unlock)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t p[3];
        cJSON *j;

        fail_phase(c, &unlock_fails, p);

        /* ResumeGroup's unlock phase: restored, then all but one unlocked. */
        pid_t bad2 = itest_target(SIM, SMALL, unlock_fails.bad_env, NULL);
        pid_t q[2] = { itest_small_target(), bad2 };
        gitest_assert_group_ok(gitest_group_pids(c, CUDACKPT_METHOD_SUSPEND_GROUP, 2, q), 2, q, "checkpointed");
        j = gitest_group_pids(c, CUDACKPT_METHOD_RESUME_GROUP, 2, q);
        gitest_assert_group_failed(j, CUDACKPT_METHOD_RESUME_GROUP, CUDACKPT_PHASE_UNLOCK, bad2, CUDACKPT_ERROR_DRIVER_ERROR);
        gitest_assert_member(j, q[0], "running");
        gitest_assert_member_opt(j, bad2, "locked");
        itest_assert_state_now(c, q[0], "running");
        itest_assert_state_now(c, bad2, "locked");

        /* Once the unlock works again, a retry converges. */
        gitest_disarm_fail(bad2);
        gitest_assert_group_ok(gitest_group_pids(c, CUDACKPT_METHOD_RESUME_GROUP, 2, q), 2, q, "running");
        gitest_assert_all_now(c, 2, q, "running");
}
END_TEST

/* A checkpoint fails, and bringing another member back fails too: that
 * member says why (rollback_error), rolled_back is false. */
START_TEST(fail_rollback)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t ck = itest_target(SIM, SMALL, "CUDACKPT_SIM_FAIL=checkpoint:CUDA_ERROR_UNKNOWN", NULL);
        pid_t un = itest_target(SIM, SMALL, "CUDACKPT_SIM_FAIL=unlock:CUDA_ERROR_UNKNOWN", NULL);
        pid_t p[3] = { itest_small_target(), ck, un };
        cJSON *j = gitest_group_pids(c, CUDACKPT_METHOD_SUSPEND_GROUP, 3, p);
        gitest_assert_group_failed(j, CUDACKPT_METHOD_SUSPEND_GROUP, CUDACKPT_PHASE_CHECKPOINT, ck,
                            CUDACKPT_ERROR_DRIVER_ERROR);
        itest_assert_bool(j, "rolled_back", false);
        const cJSON *m = gitest_assert_member_opt(j, un, "locked");
        ck_assert_msg(gitest_ostr(m, "rollback_error"), "member %d, whose unlock failed, has no rollback_error: %s", (int)un,
                      itest_dump(j));
        gitest_assert_member(j, p[0], "running");
        gitest_assert_member(j, ck, "running");
        itest_assert_state_now(c, p[0], "running");
        itest_assert_state_now(c, ck, "running");
        itest_assert_state_now(c, un, "locked");
}
END_TEST

/* timeout_ms bounds the whole lock phase: a member behind a 4 s kernel
 * times out, and the others are unlocked again.  The reply comes no
 * sooner than the timeout, and no later than it and GROUP_TIMEOUT_SLACK_MS
 * (the rollback of two small members, the reply, a loaded machine's
 * scheduling: not a second timeout). */
#define GROUP_TIMEOUT_MS 400
#define GROUP_TIMEOUT_SLACK_MS 200
START_TEST(lock_timeout_rolls_back)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t busy = itest_target(SIM, SMALL, "CUDACKPT_SIM_BUSY_MS=4000", NULL);
        pid_t p[3] = { itest_small_target(), busy, itest_small_target() };
        double t0 = itest_now_ms();
        cJSON *j = gitest_group(c, CUDACKPT_METHOD_SUSPEND_GROUP, gitest_sel_pids(3, p),
                                itest_strdupf("\"timeout_ms\":%d", GROUP_TIMEOUT_MS));
        double took = itest_now_ms() - t0;
        gitest_assert_group_failed(j, CUDACKPT_METHOD_SUSPEND_GROUP, CUDACKPT_PHASE_LOCK, busy, CUDACKPT_ERROR_TIMEOUT);
        itest_assert_bool(j, "rolled_back", true);
        printf("SuspendGroup with timeout_ms %d answered after %.0f ms\n", GROUP_TIMEOUT_MS, took);
        ck_assert_msg(took >= GROUP_TIMEOUT_MS && took < GROUP_TIMEOUT_MS + GROUP_TIMEOUT_SLACK_MS,
                      "SuspendGroup with timeout_ms %d answered after %.0f ms", GROUP_TIMEOUT_MS, took);
        gitest_assert_all_now(c, 3, p, "running");
}
END_TEST

/* ---- members that go, change, stop ---------------------------------------------- */

START_TEST(member_exits_mid_group)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t slow = itest_target(SIM, SLOW_CKPT_MEM, SLOW_CKPT_RATE, NULL);
        pid_t p[3] = { itest_small_target(), slow, itest_small_target() };
        struct itest_conn *op = itest_connect(d);
        struct itest_conn *watch = itest_connect(d);
        gitest_send_group(op, CUDACKPT_METHOD_SUSPEND_GROUP, gitest_sel_pids(3, p), NULL);
        /* The fast ones are checkpointed, the slow one's checkpoint runs. */
        gitest_await_state_any(watch, p[0], "checkpointed", 5000);
        gitest_await_state_any(watch, p[2], "checkpointed", 5000);
        bool f = false;
        const char *s = gitest_state_of(watch, slow, &f);
        ck_assert_msg(f && gitest_streq(s, "locked"), "the slow member is not checkpointing: %s%s", s,
                      f ? " (in flight)" : "");
        ck_assert_msg(!itest_conn_readable(op), "SuspendGroup answered before its slow checkpoint ended");
        itest_target_kill(slow);

        cJSON *j = gitest_recv_reply(op, 10000);
        gitest_assert_group_failed(j, CUDACKPT_METHOD_SUSPEND_GROUP, CUDACKPT_PHASE_CHECKPOINT, slow,
                            CUDACKPT_ERROR_PROCESS_GONE);
        gitest_assert_member(j, p[0], "running");
        gitest_assert_member(j, p[2], "running");
        itest_assert_state_now(watch, p[0], "running");
        itest_assert_state_now(watch, p[2], "running");
}
END_TEST

/* A caller that is not root names a process of another user among its
 * own: the whole group is refused in phase select, nothing changes. */
START_TEST(other_user_member_refused)
{
        if (itest_need_root())
                return;
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t own = itest_target_as(ITEST_OTHER_UID, SIM, SMALL, NULL);
        pid_t own2 = itest_target_as(ITEST_OTHER_UID, SIM, SMALL, NULL);
        pid_t roots = itest_small_target();
        struct itest_conn *c = itest_connect(d);
        pid_t p[3] = { own, roots, own2 };
        char msg[1024];
        for (size_t i = 0; i < N_OF(gitest_all_groups); i++) {
                struct gitest_as_ctx x = {
                        .sock = d->sock,
                        .json = itest_strdupf("{\"method\":\"%s\",\"parameters\":{\"selector\":%s}}", gitest_all_groups[i],
                                              gitest_sel_pids(3, p)),
                        .error = CUDACKPT_ERROR_GROUP_FAILED,
                        .phase = CUDACKPT_PHASE_SELECT,
                        .pid = roots,
                };
                int r = itest_run_as(ITEST_OTHER_UID, gitest_as_call, &x, msg, sizeof(msg));
                ck_assert_msg(r == 0, "%s as uid %d: %s", gitest_short_name(gitest_all_groups[i]), ITEST_OTHER_UID, msg);
                gitest_assert_all_now(c, 3, p, "running");
        }
        /* Its own processes alone: the group goes through. */
        pid_t mine[2] = { own, own2 };
        struct gitest_as_ctx ok = {
                .sock = d->sock,
                .json = itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_SUSPEND_GROUP "\",\"parameters\":{\"selector\":%s}}",
                                      gitest_sel_pids(2, mine)),
        };
        int r = itest_run_as(ITEST_OTHER_UID, gitest_as_call, &ok, msg, sizeof(msg));
        ck_assert_msg(r == 0, "SuspendGroup of its own as uid %d: %s", ITEST_OTHER_UID, msg);
        gitest_assert_all_now(c, 2, mine, "checkpointed");
        itest_assert_state_now(c, roots, "running");
}
END_TEST

/* Every group method with bad among good members refuses in phase with
 * error, and leaves the good ones running. */
static void assert_bad_member_refused(struct itest_conn *c, pid_t bad, const char *phase, const char *error)
{
        pid_t p[3] = { itest_small_target(), bad, itest_small_target() };

        for (size_t i = 0; i < N_OF(gitest_all_groups); i++) {
                cJSON *j = gitest_group_pids(c, gitest_all_groups[i], 3, p);
                gitest_assert_group_failed(j, gitest_all_groups[i], phase, bad, error);
                itest_assert_state_now(c, p[0], "running");
                itest_assert_state_now(c, p[2], "running");
        }
}

START_TEST(not_cuda_in_pids)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t plain = itest_target(SMALL, NULL);

        assert_bad_member_refused(c, plain, CUDACKPT_PHASE_STATE, CUDACKPT_ERROR_NOT_CUDA_PROCESS);
}
END_TEST

START_TEST(no_such_process_in_pids)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);

        assert_bad_member_refused(c, itest_dead_pid(), CUDACKPT_PHASE_SELECT, CUDACKPT_ERROR_NO_SUCH_PROCESS);
}
END_TEST

START_TEST(start_time_pins)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t a = itest_small_target(), b = itest_small_target();
        unsigned long long sa = (unsigned long long)itest_start_time(a), sb = (unsigned long long)itest_start_time(b);
        const char *wrong = itest_strdupf("{\"pids\":[{\"pid\":%d,\"start_time\":%llu},{\"pid\":%d,\"start_time\":%llu}]}",
                                          (int)a, sa, (int)b, sb + 1);
        for (size_t i = 0; i < N_OF(gitest_all_groups); i++) {
                cJSON *j = gitest_group(c, gitest_all_groups[i], wrong, NULL);
                gitest_assert_group_failed(j, gitest_all_groups[i], CUDACKPT_PHASE_SELECT, b, CUDACKPT_ERROR_PROCESS_CHANGED);
                const cJSON *ep = gitest_error_params(j);
                double v;
                ck_assert_msg(gitest_onum(ep, "start_time", &v) && v == (double)(sb + 1) && gitest_onum(ep, "actual_start_time", &v) &&
                                      v == (double)sb,
                              "ProcessChanged without the start times: %s", itest_dump(j));
                itest_assert_state_now(c, a, "running");
                itest_assert_state_now(c, b, "running");
        }
        const char *right = itest_strdupf("{\"pids\":[{\"pid\":%d,\"start_time\":%llu},{\"pid\":%d,\"start_time\":%llu}]}",
                                          (int)a, sa, (int)b, sb);
        pid_t p[2] = { a, b };
        gitest_assert_group_ok(gitest_group(c, CUDACKPT_METHOD_SUSPEND_GROUP, right, NULL), 2, p, "checkpointed");
        gitest_assert_all_now(c, 2, p, "checkpointed");
}
END_TEST

/* A stopped member: ProcessStopped in phase state, at once, nothing changed. */
START_TEST(stopped_member)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t st = itest_small_target();
        pid_t p[2] = { itest_small_target(), st };
        ck_assert_int_eq(kill(st, SIGSTOP), 0);
        itest_await_proc_state(st, 'T', true);
        double t0 = itest_now_ms();
        cJSON *j = gitest_group_pids(c, CUDACKPT_METHOD_SUSPEND_GROUP, 2, p);
        double took = itest_now_ms() - t0;
        gitest_assert_group_failed(j, CUDACKPT_METHOD_SUSPEND_GROUP, CUDACKPT_PHASE_STATE, st, CUDACKPT_ERROR_PROCESS_STOPPED);
        ck_assert_msg(gitest_streq(gitest_ostr(gitest_error_params(j), "stop"), "signal"), "no stop \"signal\" in %s", itest_dump(j));
        ck_assert_msg(took < 2000, "SuspendGroup with a stopped member took %.0f ms", took);
        itest_assert_state_now(c, p[0], "running");
        ck_assert_int_eq(kill(st, SIGCONT), 0);
        itest_await_proc_state(st, 'T', false);
        itest_assert_state_now(c, st, "running");
        gitest_assert_group_ok(gitest_group_pids(c, CUDACKPT_METHOD_SUSPEND_GROUP, 2, p), 2, p, "checkpointed");
}
END_TEST

/* ---- limits ---------------------------------------------------------------------- */

START_TEST(group_too_large)
{
        struct itest_daemon_opts o = { .config_json = "{\"max_group_members\":2}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct itest_conn *c = itest_connect(d);
        pid_t p[3] = { itest_small_target(), itest_small_target(), itest_small_target() };
        for (size_t i = 0; i < N_OF(gitest_all_groups); i++) {
                cJSON *j = gitest_group_pids(c, gitest_all_groups[i], 3, p);
                itest_assert_error(j, CUDACKPT_ERROR_GROUP_TOO_LARGE);
                itest_assert_int(j, "limit", 2);
                itest_assert_int(j, "members", 3);
        }
        gitest_assert_all_now(c, 3, p, "running");
        gitest_assert_group_ok(gitest_group_pids(c, CUDACKPT_METHOD_SUSPEND_GROUP, 2, p), 2, p, "checkpointed");

        /* A tree of three CUDA processes. */
        static const char *const specs[] = { "sim", "sim", NULL };
        pid_t root = gitest_start_tree(specs);
        cJSON *j = gitest_group(c, CUDACKPT_METHOD_SUSPEND_GROUP, gitest_sel_tree(root), NULL);
        itest_assert_error(j, CUDACKPT_ERROR_GROUP_TOO_LARGE);
        itest_assert_int(j, "limit", 2);
        long long m = 0;
        ck_assert_msg(itest_int(j, "members", &m) && m > 2, "GroupTooLarge for 3 with members <= 2: %s", itest_dump(j));
        itest_assert_state_now(c, root, "running");
}
END_TEST

START_TEST(groups_in_flight_queue_full)
{
        struct itest_daemon_opts o = { .config_json = "{\"max_groups_in_flight\":1}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        pid_t slow = itest_target(SIM, SLOW_CKPT_MEM, SLOW_CKPT_RATE, NULL);
        pid_t other = itest_small_target();
        struct itest_conn *c1 = itest_connect(d);
        struct itest_conn *c2 = itest_connect(d);
        struct itest_conn *watch = itest_connect(d);
        gitest_send_group(c1, CUDACKPT_METHOD_SUSPEND_GROUP, gitest_sel_pids(1, &slow), NULL);
        gitest_await_any_in_flight(watch, slow, 5000);
        cJSON *j = gitest_group_pids(c2, CUDACKPT_METHOD_SUSPEND_GROUP, 1, &other);
        itest_assert_error(j, CUDACKPT_ERROR_QUEUE_FULL);
        itest_assert_int(j, "limit", 1);
        itest_assert_absent(j, "pid");
        itest_assert_state_now(watch, other, "running");
        ck_assert_msg(!itest_conn_readable(c1), "the slow group ended too soon for the test");
        gitest_assert_group_ok(gitest_recv_reply(c1, 10000), 1, &slow, "checkpointed");
        /* Room again. */
        gitest_assert_group_ok(gitest_group_pids(c2, CUDACKPT_METHOD_SUSPEND_GROUP, 1, &other), 1, &other, "checkpointed");
}
END_TEST

START_TEST(invalid_parameters)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t a = itest_small_target();
        unsigned long long sa = (unsigned long long)itest_start_time(a);
        const char *bad[] = {
                itest_strdupf("{\"selector\":{\"pids\":[{\"pid\":%d}],\"tree\":%d}}", (int)a, (int)a),
                itest_strdupf("{\"selector\":{\"cgroup\":\"/\",\"tree\":%d}}", (int)a),
                "{\"selector\":{\"pids\":[]}}",
                itest_strdupf("{\"selector\":{\"pids\":[{\"pid\":%d},{\"pid\":%d}]}}", (int)a, (int)a),
                itest_strdupf("{\"selector\":{\"pids\":[{\"pid\":%d,\"start_time\":%llu},{\"pid\":%d}]}}", (int)a, sa,
                              (int)a),
                "{\"selector\":{\"pids\":[{\"pid\":0}]}}",
                itest_strdupf("{\"selector\":{\"pids\":[{\"pid\":%d},{\"pid\":0}]}}", (int)a),
                "{\"selector\":{\"pids\":[{\"pid\":-1}]}}",
                "{\"selector\":{}}",
                "{}",
                "{\"selector\":{\"tree\":0}}",
                itest_strdupf("{\"selector\":{\"pids\":[{\"pid\":%d}]},\"bogus\":1}", (int)a),
        };
        for (size_t i = 0; i < N_OF(gitest_all_groups); i++)
                for (size_t k = 0; k < N_OF(bad); k++) {
                        cJSON *j = itest_call(c, gitest_all_groups[i], bad[k]);
                        ck_assert_msg(gitest_streq(itest_error(j), "org.varlink.service.InvalidParameter"),
                                      "%s %s: expected InvalidParameter, got %s", gitest_short_name(gitest_all_groups[i]), bad[k],
                                      itest_dump(j));
                        ck_assert_msg(itest_str(j, "parameter"), "InvalidParameter names no parameter: %s",
                                      itest_dump(j));
                }
        itest_assert_state_now(c, a, "running");
        /* ListProcesses too, for a bad selector. */
        for (size_t k = 0; k < 9; k++) {
                cJSON *j = itest_call(c, CUDACKPT_METHOD_LIST_PROCESSES, bad[k]);
                ck_assert_msg(gitest_streq(itest_error(j), "org.varlink.service.InvalidParameter"),
                              "ListProcesses %s: expected InvalidParameter, got %s", bad[k], itest_dump(j));
        }
}
END_TEST

int main(int argc, char **argv)
{
        const TTest *tests[] = { fail_rolls_back, fail_restore_then_retry, fail_unlock, fail_rollback,
                lock_timeout_rolls_back, member_exits_mid_group, other_user_member_refused, not_cuda_in_pids,
                no_such_process_in_pids, start_time_pins, stopped_member, group_too_large,
                groups_in_flight_queue_full, invalid_parameters, NULL };

        if (argc >= 2 && strcmp(argv[1], "--itest-tree") == 0)
                return gitest_tree_mode(argc, argv);
        return itest_run("integration.group_failures", "group_failures", 60, tests);
}
