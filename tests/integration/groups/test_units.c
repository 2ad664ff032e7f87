/* test_units.c: compound operations are units (issue 29, A6 and B7 a, d),
 * on the simulator, against the real daemon.
 *
 * A group's member, and a lease's undo's, belongs to it from its first step
 * to its last: a call sent between two of its steps waits until the group
 * lets go, so it can split no phase pair (SuspendGroup's lock and
 * checkpoint, ResumeGroup's restore and unlock, a rollback's restore and
 * unlock, an undo's restore and unlock).  Each test sends the call at the
 * moment the member's first step is over, learnt from the group's progress
 * replies ("more": true) or from GetState's in_flight, and checks that the
 * group succeeded (or rolled back) whole, and that the call came after it.
 *
 * An undo the stop cuts short stays in the lease store and is redone by
 * the next start; an undo beside a queue full of a user's calls still gets
 * its steps in (the daemon's own work has the reserve on every queue). */
#include "groups_itest.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* A restore of about 2 s, a checkpoint of about 250 ms. */
#define SLOW_RESTORE_MEM "CUDACKPT_SIM_MEM_MIB=256"
#define SLOT "CUDACKPT_SIM_STATE=r"

/* Sends group method m on pids with "more": true. */
static void send_group_more(struct itest_conn *c, const char *m, size_t n, const pid_t *pids)
{
        itest_sendf(c, "{\"method\":\"%s\",\"parameters\":%s,\"more\":true}", m,
                    gitest_group_params(gitest_sel_pids(n, pids), NULL));
}

/* Reads c's progress replies until one says that pid ended a step of phase;
 * asserts the group does not end first. */
static void await_progress(struct itest_conn *c, const char *phase, pid_t pid)
{
        for (;;) {
                cJSON *j = itest_recv_within(c, 10000);
                const cJSON *p = itest_get(j, "progress");
                ck_assert_msg(p && cJSON_GetObjectItemCaseSensitive(j, "continues"),
                              "the group ended before %d's %s step: %s", (int)pid, phase, itest_dump(j));
                const cJSON *mb = cJSON_GetObjectItemCaseSensitive(p, "member");
                double got = 0;
                if (strcmp(gitest_ostr(p, "phase"), phase) == 0 && gitest_onum(mb, "pid", &got) && got == pid)
                        return;
        }
}

/* The group's last reply, after its progress replies. */
static cJSON *final_of(struct itest_conn *c)
{
        for (;;) {
                cJSON *j = itest_recv_within(c, 10000);
                if (!cJSON_GetObjectItemCaseSensitive(j, "continues"))
                        return j;
        }
}

/* Sends method on pid through q and asserts no reply comes for wait_ms:
 * it waits behind the group. */
static void send_waiting(struct itest_conn *q, const char *method, pid_t pid, int wait_ms)
{
        cJSON *j = NULL;

        itest_sendf(q, "{\"method\":\"%s\",\"parameters\":{\"pid\":%d}}", method, (int)pid);
        ck_assert_msg(itest_recv_raw(q, wait_ms, &j) == -ETIMEDOUT,
                      "%s on %d was answered between the group's steps: %s", method, (int)pid, itest_dump(j));
}

/* The group method on c, sent once p[1] reached its progress step, with
 * waiting sent on p[1] through q in between: waiting waits for the group,
 * which brings both members to state, and then meets that state and is
 * refused (InvalidState). */
static void assert_call_waits_between(struct itest_conn *c, struct itest_conn *q, const char *method,
                                      const char *progress, const char *waiting, pid_t p[2], const char *state)
{
        cJSON *j;

        send_group_more(c, method, 2, p);
        await_progress(c, progress, p[1]);
        send_waiting(q, waiting, p[1], 300);
        j = final_of(c);
        itest_assert_ok(j);
        gitest_assert_member(j, p[0], state);
        gitest_assert_member(j, p[1], state);
        itest_assert_error(itest_recv_within(q, 5000), CUDACKPT_ERROR_INVALID_STATE);
        gitest_assert_all_now(c, 2, p, state);
}

/* SuspendGroup: a call between a member's lock and its checkpoint waits.
 * a's lock takes 1.5 s (a kernel in flight), so b is locked long before
 * the checkpoint phase. */
START_TEST(suspend_group_lock_checkpoint)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d), *q = itest_connect(d);
        pid_t p[2] = { itest_target(SIM, SMALL, "CUDACKPT_SIM_BUSY_MS=1500", NULL), itest_small_target() };

        /* The Unlock comes after the group: the process is checkpointed. */
        assert_call_waits_between(c, q, CUDACKPT_METHOD_SUSPEND_GROUP, "lock", CUDACKPT_METHOD_UNLOCK, p,
                                  "checkpointed");
}
END_TEST

/* A caller who may not act on a held member is refused at once, from what
 * the group's steps learnt of it, rather than made to wait for the group. */
START_TEST(stranger_refused_while_held)
{
        struct itest_daemon *d;
        struct itest_conn *c, *q;
        pid_t p[2];
        double t0;

        if (geteuid() != 0) {
                fprintf(stderr, "stranger_refused_while_held: needs root (another uid); not checked\n");
                return;
        }
        d = itest_daemon_start_default();
        c = itest_connect(d);
        q = itest_connect_as(d, ITEST_OTHER_UID);
        p[0] = itest_target(SIM, SMALL, "CUDACKPT_SIM_BUSY_MS=3000", NULL);
        p[1] = itest_small_target();
        send_group_more(c, CUDACKPT_METHOD_SUSPEND_GROUP, 2, p);
        await_progress(c, "lock", p[1]);
        t0 = itest_now_ms();
        itest_assert_error(itest_call_pid(q, CUDACKPT_METHOD_UNLOCK, p[1]), CUDACKPT_ERROR_PERMISSION_DENIED);
        ck_assert_msg(itest_now_ms() - t0 < 1000, "the stranger's Unlock waited %.0f ms", itest_now_ms() - t0);
        itest_assert_ok(final_of(c));
}
END_TEST

/* ResumeGroup: a call between a member's restore and its unlock waits. */
START_TEST(resume_group_restore_unlock)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d), *q = itest_connect(d);
        pid_t p[2] = { itest_target(SIM, SLOW_RESTORE_MEM, SLOW_RESTORE_RATE, NULL), itest_small_target() };

        itest_assert_ok(gitest_group_pids(c, CUDACKPT_METHOD_SUSPEND_GROUP, 2, p));
        assert_call_waits_between(c, q, CUDACKPT_METHOD_RESUME_GROUP, "restore", CUDACKPT_METHOD_CHECKPOINT, p,
                                  "running");
}
END_TEST

/* A rollback: a call between a member's restore and its unlock waits, and
 * the rollback brings every member back to running. */
START_TEST(rollback_restore_unlock)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d), *q = itest_connect(d);
        pid_t p[3] = { itest_target(SIM, SLOW_RESTORE_MEM, SLOW_RESTORE_RATE, NULL), itest_small_target(),
                       itest_target(SIM, SMALL, "CUDACKPT_SIM_FAIL=checkpoint:CUDA_ERROR_UNKNOWN", NULL) };
        cJSON *j;

        send_group_more(c, CUDACKPT_METHOD_SUSPEND_GROUP, 3, p);
        await_progress(c, "checkpoint", p[1]);
        await_progress(c, "restore", p[1]);
        send_waiting(q, CUDACKPT_METHOD_CHECKPOINT, p[1], 300);
        j = final_of(c);
        itest_assert_error(j, CUDACKPT_ERROR_GROUP_FAILED);
        itest_assert_bool(j, "rolled_back", true);
        itest_assert_error(itest_recv_within(q, 5000), CUDACKPT_ERROR_INVALID_STATE);
        gitest_assert_all_now(c, 3, p, "running");
}
END_TEST

/* A lease's undo: a Checkpoint sent while the undo restores waits for its
 * unlock (it used to run in between, and the undo failed in its unlock). */
START_TEST(undo_restore_unlock)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d), *q = itest_connect(d);
        pid_t a = itest_target(SIM, SLOW_RESTORE_MEM, SLOW_RESTORE_RATE, NULL);

        (void)itest_lease_id(itest_call(c, CUDACKPT_METHOD_SUSPEND, itest_strdupf("{\"pid\":%d,\"lease_ms\":200}", (int)a)));
        (void)itest_await_in_flight(c, a, "Restore", 5000);
        send_waiting(q, CUDACKPT_METHOD_CHECKPOINT, a, 300);
        itest_assert_error(itest_recv_within(q, 5000), CUDACKPT_ERROR_INVALID_STATE);
        itest_await_log(d, "undone, 1 processes running again", 5000);
        ck_assert_msg(!strstr(itest_daemon_log(d), "the undo failed"), "the undo failed:\n%s", itest_daemon_log(d));
        itest_assert_state_now(c, a, "running");
}
END_TEST

/* GetStatus's "queued" reaches at least n within 5 s. */
static void await_queued(struct itest_conn *c, long long n)
{
        for (int k = 0; k < 500; k++) {
                cJSON *j = itest_call(c, CUDACKPT_METHOD_GET_STATUS, NULL);
                long long got = 0;
                if (itest_int(j, "queued", &got) && got >= n)
                        return;
                (void)j;
                usleep(10000);
        }
        ck_abort_msg("fewer than %lld operations queued after 5 s", n);
}

/* SIGTERM while an undo's step waits in a queue (behind a 4 s checkpoint
 * its owner asked for): the undo is kept in the store, and the next start
 * makes it. */
START_TEST(undo_cut_by_stop_is_kept)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d), *q = itest_connect(d);
        pid_t a = itest_target(SIM, SLOT, "CUDACKPT_SIM_MEM_MIB=256", "CUDACKPT_SIM_CKPT_MIBPS=64", NULL);

        (void)itest_lease_id(itest_call(c, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"lease_ms\":800}", (int)a)));
        itest_send_call(q, CUDACKPT_METHOD_CHECKPOINT, itest_strdupf("{\"pid\":%d}", (int)a));
        itest_await_log(d, "undoing its Lock", 5000);
        await_queued(c, 1); /* the undo's first step, behind the checkpoint */
        ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
        itest_assert_ok(itest_recv_within(q, 10000)); /* the running checkpoint ends */
        ck_assert_msg(WIFEXITED(itest_daemon_await_exit(d, 10000)), "the daemon did not exit");
        d = itest_daemon_restart(d, NULL);
        c = itest_connect(d);
        itest_await_state(c, a, "running", 5000);
        ck_assert_msg(strstr(itest_daemon_log(d), "kept in the lease store, the next start undoes it"),
                      "the undo was not kept:\n%s", itest_daemon_log(d));
}
END_TEST

/* An undo beside a queue that a user filled up to max_queue_per_pid: its
 * steps still get in, and the process comes back to running. */
START_TEST(undo_beside_full_queue)
{
        struct itest_daemon_opts o = { .config_json = "{\"max_queue_per_pid\":3}" };
        struct itest_daemon *d;
        struct itest_conn *c, *q[3];
        pid_t a;

        if (geteuid() != 0) {
                fprintf(stderr, "undo_beside_full_queue: needs root (another uid); not checked\n");
                return;
        }
        d = itest_daemon_start(&o);
        c = itest_connect_as(d, ITEST_OTHER_UID);
        for (size_t k = 0; k < N_OF(q); k++)
                q[k] = itest_connect_as(d, ITEST_OTHER_UID);
        a = itest_target_as(ITEST_OTHER_UID, SIM, SLOW_CKPT_MEM, SLOW_CKPT_RATE, NULL);
        (void)itest_lease_id(itest_call(c, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"lease_ms\":1000}", (int)a)));
        /* A 2 s checkpoint runs, two calls wait behind it: the queue is full. */
        itest_send_call(q[0], CUDACKPT_METHOD_CHECKPOINT, itest_strdupf("{\"pid\":%d}", (int)a));
        (void)itest_await_in_flight(c, a, "Checkpoint", 5000);
        itest_send_call(q[1], CUDACKPT_METHOD_UNLOCK, itest_strdupf("{\"pid\":%d}", (int)a));
        itest_send_call(q[2], CUDACKPT_METHOD_UNLOCK, itest_strdupf("{\"pid\":%d}", (int)a));
        await_queued(c, 2);
        itest_assert_error(itest_call_pid(c, CUDACKPT_METHOD_UNLOCK, a), CUDACKPT_ERROR_QUEUE_FULL);
        itest_await_log(d, "undone, 1 processes running again", 10000);
        ck_assert_msg(!strstr(itest_daemon_log(d), "the undo failed"), "the undo failed:\n%s", itest_daemon_log(d));
        itest_assert_state_now(c, a, "running");
}
END_TEST

int main(int argc, char **argv)
{
        const TTest *tests[] = { suspend_group_lock_checkpoint, stranger_refused_while_held,
                resume_group_restore_unlock, rollback_restore_unlock, undo_restore_unlock,
                undo_cut_by_stop_is_kept, undo_beside_full_queue, NULL };

        if (argc > 1 && strcmp(argv[1], "--itest-tree") == 0)
                return gitest_tree_mode(argc, argv);
        return itest_run("integration.units", "units", 60, tests);
}
