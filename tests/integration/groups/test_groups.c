/* test_groups.c: the group methods (LockGroup ... ResumeGroup) on the
 * simulator, against the real daemon: cycles, barriers between phases,
 * convergence, groups side by side and progress replies.  Their failures
 * and limits are test_group_failures.c's; selections by tree and cgroup and
 * ListProcesses are test_selection.c's (helpers: groups_itest.h).
 *
 * A group acts on every member of one selection: pinned and authorised
 * before any driver call, one phase at a time on all members (no member
 * checkpointed before every member is locked, none unlocked before every
 * member is restored), converging from wherever the members are, rolling
 * back on failure.  Every test checks the states the members are left in
 * with GetState afterwards, not only what the reply says.
 *
 * The binary doubles as a target: --itest-tree (see groups_itest.h). */
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

/* ---- basic cycles -------------------------------------------------------------- */

START_TEST(suspend_resume_group)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t p[3] = { itest_small_target(), itest_small_target(), itest_small_target() };
        struct itest_conn *c = itest_connect(d);

        cJSON *j = gitest_group_pids(c, CUDACKPT_METHOD_SUSPEND_GROUP, 3, p);
        gitest_assert_group_ok(j, 3, p, "checkpointed");
        gitest_assert_skipped(j, 0, NULL);
        gitest_assert_all_now(c, 3, p, "checkpointed");

        j = gitest_group_pids(c, CUDACKPT_METHOD_RESUME_GROUP, 3, p);
        gitest_assert_group_ok(j, 3, p, "running");
        gitest_assert_all_now(c, 3, p, "running");

        /* One audit line for the group, with its member count. */
        double deadline = itest_now_ms() + 3000;
        int n = 0;
        while (!gitest_log_line_count(d, "method=SuspendGroup", NULL, &n) || n == 0)
                ck_assert_msg(itest_now_ms() < deadline, "no audit line for SuspendGroup");
        ck_assert_msg(n == 1, "%d audit lines for one SuspendGroup", n);
        ck_assert_msg(gitest_log_line_count(d, "method=SuspendGroup", "3 member", &n) && n == 1,
                      "the SuspendGroup audit line does not give the member count 3");
}
END_TEST

START_TEST(phase_groups_cycle)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t p[3] = { itest_small_target(), itest_small_target(), itest_small_target() };
        struct itest_conn *c = itest_connect(d);
        /* Pinned this time, each to its start time. */
        const char *sel = itest_strdupf("{\"pids\":[{\"pid\":%d,\"start_time\":%llu},{\"pid\":%d,\"start_time\":%llu},"
                                        "{\"pid\":%d}]}",
                                        (int)p[0], (unsigned long long)itest_start_time(p[0]), (int)p[1],
                                        (unsigned long long)itest_start_time(p[1]), (int)p[2]);
        static const struct {
                const char *method;
                const char *state;
        } steps[] = {
                { CUDACKPT_METHOD_LOCK_GROUP, "locked" },
                { CUDACKPT_METHOD_CHECKPOINT_GROUP, "checkpointed" },
                { CUDACKPT_METHOD_RESTORE_GROUP, "locked" },
                { CUDACKPT_METHOD_UNLOCK_GROUP, "running" },
        };
        for (size_t i = 0; i < N_OF(steps); i++) {
                cJSON *j = gitest_group(c, steps[i].method, sel, NULL);
                gitest_assert_group_ok(j, 3, p, steps[i].state);
                gitest_assert_all_now(c, 3, p, steps[i].state);
        }
        /* LockGroup with its timeout. */
        cJSON *j = gitest_group(c, CUDACKPT_METHOD_LOCK_GROUP, sel, "\"timeout_ms\":5000");
        gitest_assert_group_ok(j, 3, p, "locked");
        gitest_assert_all_now(c, 3, p, "locked");
        gitest_assert_group_ok(gitest_group(c, CUDACKPT_METHOD_UNLOCK_GROUP, sel, NULL), 3, p, "running");
        gitest_assert_all_now(c, 3, p, "running");
}
END_TEST

/* One gpu_mapping for every member reaches the driver: refused where the
 * members' GPU is not named (driver's INVALID_VALUE), accepted where it is. */
START_TEST(group_gpu_mapping)
{
        static const char *const env[] = { "CUDACKPT_SIM_DEVICE_COUNT=2", NULL };
        struct itest_daemon_opts o = { .env = env };
        struct itest_daemon *d = itest_daemon_start(&o);
        /* Both on the second GPU. */
        pid_t p[2] = { itest_target(SIM, SMALL, "CUDACKPT_SIM_GPUS=1", NULL),
                       itest_target(SIM, SMALL, "CUDACKPT_SIM_GPUS=1", NULL) };
        struct itest_conn *c = itest_connect(d);
        const char *sel = gitest_sel_pids(2, p);
        gitest_assert_group_ok(gitest_group(c, CUDACKPT_METHOD_SUSPEND_GROUP, sel, NULL), 2, p, "checkpointed");

        /* GPU0 -> GPU1 leaves their GPU1 unnamed. */
        cJSON *j = gitest_group(c, CUDACKPT_METHOD_RESUME_GROUP, sel,
                         "\"gpu_mapping\":{\"" ITEST_GPU0 "\":\"" ITEST_GPU1 "\"}");
        itest_assert_error(j, CUDACKPT_ERROR_GROUP_FAILED);
        itest_assert_str(j, "phase", CUDACKPT_PHASE_RESTORE);
        itest_assert_str(j, "error", CUDACKPT_ERROR_INVALID_GPU_MAPPING);
        itest_assert_bool(j, "rolled_back", false);
        gitest_assert_all_now(c, 2, p, "checkpointed");

        j = gitest_group(c, CUDACKPT_METHOD_RESTORE_GROUP, sel, "\"gpu_mapping\":{\"" ITEST_GPU1 "\":\"" ITEST_GPU0 "\"}");
        gitest_assert_group_ok(j, 2, p, "locked");
        gitest_assert_all_now(c, 2, p, "locked");
        gitest_assert_group_ok(gitest_group(c, CUDACKPT_METHOD_UNLOCK_GROUP, sel, NULL), 2, p, "running");

        /* And ResumeGroup with one. */
        gitest_assert_group_ok(gitest_group(c, CUDACKPT_METHOD_SUSPEND_GROUP, sel, NULL), 2, p, "checkpointed");
        /* Now on the first GPU: back to the second. */
        j = gitest_group(c, CUDACKPT_METHOD_RESUME_GROUP, sel, "\"gpu_mapping\":{\"" ITEST_GPU0 "\":\"" ITEST_GPU1 "\"}");
        gitest_assert_group_ok(j, 2, p, "running");
        gitest_assert_all_now(c, 2, p, "running");
}
END_TEST

/* ---- barriers ------------------------------------------------------------------ */

/* One member slow to lock (a 1.5 s kernel): while its lock runs, the fast
 * members are locked, not checkpointed. */
START_TEST(barrier_lock_before_checkpoint)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t slow = itest_target(SIM, SMALL, "CUDACKPT_SIM_BUSY_MS=1500", NULL);
        pid_t p[3] = { itest_small_target(), itest_small_target(), slow };
        struct itest_conn *op = itest_connect(d);
        struct itest_conn *watch = itest_connect(d);
        gitest_send_group(op, CUDACKPT_METHOD_SUSPEND_GROUP, gitest_sel_pids(3, p), "\"timeout_ms\":10000");

        int seen = 0, samples = 0;
        double deadline = itest_now_ms() + 10000;
        while (!itest_conn_readable(op)) {
                ck_assert_msg(itest_now_ms() < deadline, "SuspendGroup did not answer within 10 s");
                const char *a = gitest_state_of(watch, p[0], NULL);
                const char *b = gitest_state_of(watch, p[1], NULL);
                /* Asked after the fast ones: if the slow one is not locked
                 * yet, it was not when they were asked either. */
                const char *s = gitest_state_of(watch, slow, NULL);
                samples++;
                if (!gitest_streq(s, "running"))
                        continue;
                ck_assert_msg(!gitest_streq(a, "checkpointed") && !gitest_streq(b, "checkpointed"),
                              "a member was checkpointed (%s, %s) while the slow member was still locking", a, b);
                seen += gitest_streq(a, "locked") && gitest_streq(b, "locked");
        }
        ck_assert_msg(seen > 0, "never saw the fast members locked while the slow one locked (%d samples)", samples);
        cJSON *j = gitest_recv_reply(op, 1000);
        gitest_assert_group_ok(j, 3, p, "checkpointed");
        gitest_assert_all_now(watch, 3, p, "checkpointed");
}
END_TEST

/* One member slow to restore (2 s): while it restores, the fast members
 * are locked, not running. */
START_TEST(barrier_restore_before_unlock)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t slow = itest_target(SIM, SLOW_CKPT_MEM, SLOW_RESTORE_RATE, NULL);
        pid_t p[3] = { itest_small_target(), itest_small_target(), slow };
        struct itest_conn *op = itest_connect(d);
        struct itest_conn *watch = itest_connect(d);
        gitest_assert_group_ok(gitest_group_pids(op, CUDACKPT_METHOD_SUSPEND_GROUP, 3, p), 3, p, "checkpointed");

        gitest_send_group(op, CUDACKPT_METHOD_RESUME_GROUP, gitest_sel_pids(3, p), NULL);
        int seen = 0, samples = 0;
        double deadline = itest_now_ms() + 10000;
        while (!itest_conn_readable(op)) {
                ck_assert_msg(itest_now_ms() < deadline, "ResumeGroup did not answer within 10 s");
                const char *a = gitest_state_of(watch, p[0], NULL);
                const char *b = gitest_state_of(watch, p[1], NULL);
                const char *s = gitest_state_of(watch, slow, NULL);
                samples++;
                if (!gitest_streq(s, "checkpointed"))
                        continue;
                ck_assert_msg(!gitest_streq(a, "running") && !gitest_streq(b, "running"),
                              "a member was unlocked (%s, %s) while the slow member was still restoring", a, b);
                seen += gitest_streq(a, "locked") && gitest_streq(b, "locked");
        }
        ck_assert_msg(seen > 0, "never saw the fast members locked while the slow one restored (%d samples)",
                      samples);
        gitest_assert_group_ok(gitest_recv_reply(op, 1000), 3, p, "running");
        gitest_assert_all_now(watch, 3, p, "running");
}
END_TEST

/* ---- convergence ------------------------------------------------------------- */

START_TEST(converge_suspend_and_resume)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t p[4] = { itest_small_target(), itest_small_target(), itest_small_target(), itest_small_target() };
        /* running, locked, checkpointed, running. */
        gitest_op_ok(c, CUDACKPT_METHOD_LOCK, p[1], "locked");
        gitest_op_ok(c, CUDACKPT_METHOD_SUSPEND, p[2], "checkpointed");
        cJSON *j = gitest_group_pids(c, CUDACKPT_METHOD_SUSPEND_GROUP, 4, p);
        gitest_assert_group_ok(j, 4, p, "checkpointed");
        gitest_assert_all_now(c, 4, p, "checkpointed");

        /* checkpointed, locked, running, checkpointed. */
        gitest_op_ok(c, CUDACKPT_METHOD_RESTORE, p[1], "locked");
        gitest_op_ok(c, CUDACKPT_METHOD_RESUME, p[2], "running");
        j = gitest_group_pids(c, CUDACKPT_METHOD_RESUME_GROUP, 4, p);
        gitest_assert_group_ok(j, 4, p, "running");
        gitest_assert_all_now(c, 4, p, "running");
}
END_TEST

/* Members already where the method leads: nothing to do, success. */
START_TEST(converge_nothing_to_do)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t p[2] = { itest_small_target(), itest_small_target() };
        gitest_assert_group_ok(gitest_group_pids(c, CUDACKPT_METHOD_UNLOCK_GROUP, 2, p), 2, p, "running");
        gitest_assert_group_ok(gitest_group_pids(c, CUDACKPT_METHOD_RESUME_GROUP, 2, p), 2, p, "running");
        gitest_assert_all_now(c, 2, p, "running");
        gitest_assert_group_ok(gitest_group_pids(c, CUDACKPT_METHOD_LOCK_GROUP, 2, p), 2, p, "locked");
        gitest_assert_group_ok(gitest_group_pids(c, CUDACKPT_METHOD_LOCK_GROUP, 2, p), 2, p, "locked");
        gitest_assert_group_ok(gitest_group_pids(c, CUDACKPT_METHOD_RESTORE_GROUP, 2, p), 2, p, "locked");
        gitest_assert_all_now(c, 2, p, "locked");
        gitest_assert_group_ok(gitest_group_pids(c, CUDACKPT_METHOD_CHECKPOINT_GROUP, 2, p), 2, p, "checkpointed");
        gitest_assert_group_ok(gitest_group_pids(c, CUDACKPT_METHOD_CHECKPOINT_GROUP, 2, p), 2, p, "checkpointed");
        gitest_assert_group_ok(gitest_group_pids(c, CUDACKPT_METHOD_SUSPEND_GROUP, 2, p), 2, p, "checkpointed");
        gitest_assert_all_now(c, 2, p, "checkpointed");
        /* One locked, one checkpointed: CheckpointGroup converges. */
        gitest_op_ok(c, CUDACKPT_METHOD_RESTORE, p[0], "locked");
        gitest_assert_group_ok(gitest_group_pids(c, CUDACKPT_METHOD_CHECKPOINT_GROUP, 2, p), 2, p, "checkpointed");
        /* And RestoreGroup from the mix the other way. */
        gitest_op_ok(c, CUDACKPT_METHOD_RESTORE, p[1], "locked");
        gitest_assert_group_ok(gitest_group_pids(c, CUDACKPT_METHOD_RESTORE_GROUP, 2, p), 2, p, "locked");
        /* UnlockGroup from locked + running. */
        gitest_op_ok(c, CUDACKPT_METHOD_UNLOCK, p[0], "running");
        gitest_assert_group_ok(gitest_group_pids(c, CUDACKPT_METHOD_UNLOCK_GROUP, 2, p), 2, p, "running");
        gitest_assert_all_now(c, 2, p, "running");
}
END_TEST

/* A member in a state the method cannot converge from: InvalidState in
 * phase state, and nothing changed. */
START_TEST(invalid_state_in_phase_state)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        static const struct {
                const char *method;
                const char *good; /* the other member's state */
                const char *bad;  /* the refused member's state */
        } rows[] = {
                { CUDACKPT_METHOD_LOCK_GROUP, "running", "checkpointed" },
                { CUDACKPT_METHOD_LOCK_GROUP, "running", "failed" },
                { CUDACKPT_METHOD_CHECKPOINT_GROUP, "locked", "running" },
                { CUDACKPT_METHOD_RESTORE_GROUP, "checkpointed", "running" },
                { CUDACKPT_METHOD_UNLOCK_GROUP, "locked", "checkpointed" },
                { CUDACKPT_METHOD_SUSPEND_GROUP, "running", "failed" },
                { CUDACKPT_METHOD_RESUME_GROUP, "checkpointed", "failed" },
        };
        for (size_t i = 0; i < N_OF(rows); i++) {
                pid_t pair[2];
                const char *states[2] = { rows[i].good, rows[i].bad };
                for (int k = 0; k < 2; k++) {
                        const char *s = states[k];
                        if (strcmp(s, "failed") == 0) {
                                /* A lock that fails and leaves the state FAILED. */
                                pair[k] = itest_target(SIM, SMALL, "CUDACKPT_SIM_FAIL=lock:CUDA_ERROR_UNKNOWN:failed",
                                                       NULL);
                                cJSON *j = itest_call_pid(c, CUDACKPT_METHOD_LOCK, (int)pair[k]);
                                itest_assert_error(j, CUDACKPT_ERROR_DRIVER_ERROR);
                        } else {
                                pair[k] = itest_small_target();
                                if (strcmp(s, "locked") == 0)
                                        gitest_op_ok(c, CUDACKPT_METHOD_LOCK, pair[k], "locked");
                                else if (strcmp(s, "checkpointed") == 0)
                                        gitest_op_ok(c, CUDACKPT_METHOD_SUSPEND, pair[k], "checkpointed");
                        }
                        itest_assert_state_now(c, pair[k], s);
                }
                cJSON *j = gitest_group_pids(c, rows[i].method, 2, pair);
                gitest_assert_group_failed(j, rows[i].method, CUDACKPT_PHASE_STATE, pair[1], CUDACKPT_ERROR_INVALID_STATE);
                itest_assert_state_now(c, pair[0], rows[i].good);
                itest_assert_state_now(c, pair[1], rows[i].bad);
        }
}
END_TEST

/* ---- groups together ----------------------------------------------------------- */

/* SuspendGroup {A, B} then ResumeGroup {B, C} on another connection: the
 * second waits for the first (they share B), then both end right. */
START_TEST(overlapping_groups)
{
        struct itest_daemon *d = itest_daemon_start_default();
        /* A 4 s checkpoint: a loaded machine may take a while to see it run. */
        pid_t a = itest_target(SIM, "CUDACKPT_SIM_MEM_MIB=512", SLOW_CKPT_RATE, NULL);
        pid_t b = itest_small_target(), cc = itest_small_target();
        struct itest_conn *c1 = itest_connect(d);
        struct itest_conn *c2 = itest_connect(d);
        struct itest_conn *watch = itest_connect(d);
        gitest_op_ok(watch, CUDACKPT_METHOD_SUSPEND, cc, "checkpointed");

        pid_t g1[2] = { a, b }, g2[2] = { b, cc };
        gitest_send_group(c1, CUDACKPT_METHOD_SUSPEND_GROUP, gitest_sel_pids(2, g1), NULL);
        /* A's checkpoint runs (locked, in flight): the first group is under way.
         * Its Lock in flight, or the gap between the phases, is too early: a
         * loaded machine may show those first. */
        itest_await_in_flight(watch, a, "Checkpoint", 5000);
        gitest_send_group(c2, CUDACKPT_METHOD_RESUME_GROUP, gitest_sel_pids(2, g2), NULL);

        int seen = 0;
        double deadline = itest_now_ms() + 10000;
        for (;;) {
                ck_assert_msg(itest_now_ms() < deadline, "the first group did not end within 10 s");
                const char *sc = gitest_state_of(watch, cc, NULL);
                bool f = false;
                const char *sa = gitest_state_of(watch, a, &f);
                if (!f || !gitest_streq(sa, "locked"))
                        break;
                /* The first group still runs: the second has not begun. */
                ck_assert_msg(gitest_streq(sc, "checkpointed"), "ResumeGroup acted on %d (%s) while the SuspendGroup it "
                              "overlaps was still running", (int)cc, sc);
                ck_assert_msg(!itest_conn_readable(c2), "ResumeGroup answered while the SuspendGroup it overlaps ran: %s",
                              itest_dump(itest_recv(c2)));
                seen++;
        }
        ck_assert_msg(seen > 0, "never saw the first group running");
        cJSON *j1 = gitest_recv_reply(c1, 10000);
        cJSON *j2 = gitest_recv_reply(c2, 10000);
        gitest_assert_group_ok(j1, 2, g1, "checkpointed");
        gitest_assert_group_ok(j2, 2, g2, "running");
        itest_assert_state_now(watch, a, "checkpointed");
        itest_assert_state_now(watch, b, "running");
        itest_assert_state_now(watch, cc, "running");
}
END_TEST

START_TEST(client_disconnects)
{
        struct itest_daemon *d = itest_daemon_start_default();
        /* 64 MiB at 128 MiB/s: half a second each, long past the close. */
        pid_t p[2] = { itest_target(SIM, "CUDACKPT_SIM_MEM_MIB=64", SLOW_CKPT_RATE, NULL),
                       itest_target(SIM, "CUDACKPT_SIM_MEM_MIB=64", SLOW_CKPT_RATE, NULL) };
        struct itest_conn *op = itest_connect(d);
        struct itest_conn *watch = itest_connect(d);
        gitest_send_group(op, CUDACKPT_METHOD_SUSPEND_GROUP, gitest_sel_pids(2, p), NULL);
        itest_conn_close(op);
        itest_await_state(watch, p[0], "checkpointed", 10000);
        itest_await_state(watch, p[1], "checkpointed", 10000);
        ck_assert_msg(!itest_daemon_exited(d), "the daemon died");
        gitest_assert_group_ok(gitest_group_pids(watch, CUDACKPT_METHOD_RESUME_GROUP, 2, p), 2, p, "running");

        /* The same with the sending side shut right after the call. */
        struct itest_conn *op2 = itest_connect(d);
        gitest_send_group(op2, CUDACKPT_METHOD_SUSPEND_GROUP, gitest_sel_pids(2, p), NULL);
        ck_assert_int_eq(shutdown(op2->fd, SHUT_WR), 0);
        gitest_assert_group_ok(gitest_recv_reply(op2, 10000), 2, p, "checkpointed");
        itest_assert_eof(op2, 5000);
        gitest_assert_all_now(watch, 2, p, "checkpointed");
}
END_TEST

/* ---- "more": progress replies ---------------------------------------------------- */

struct progress_log {
        int n;
        char phase[64][16];
        pid_t pid[64];
        char state[64][16];
        double done[64], total[64];
};

/* Reads replies until one without "continues"; checks and logs every
 * progress reply.  Returns the final reply. */
static cJSON *recv_with_progress(struct itest_conn *c, struct progress_log *log, size_t n, const pid_t *pids)
{
        memset(log, 0, sizeof(*log));
        for (;;) {
                cJSON *j = itest_recv_within(c, ITEST_REPLY_TIMEOUT_MS);
                const cJSON *cont = cJSON_GetObjectItemCaseSensitive(j, "continues");
                if (!cont)
                        return j;
                ck_assert_msg(cJSON_IsTrue(cont), "\"continues\" that is not true: %s", itest_dump(j));
                ck_assert_msg(!itest_error(j), "an error reply with continues: %s", itest_dump(j));
                const cJSON *p = itest_get(j, "progress");
                ck_assert_msg(cJSON_IsObject(p), "a reply with continues but no progress: %s", itest_dump(j));
                ck_assert_msg(!itest_has(j, "members"), "a progress reply with members: %s", itest_dump(j));
                const char *phase = gitest_ostr(p, "phase");
                const cJSON *m = cJSON_GetObjectItemCaseSensitive(p, "member");
                double pid, done, total;
                ck_assert_msg(phase && cJSON_IsObject(m) && gitest_onum(m, "pid", &pid) && gitest_onum(p, "done", &done) &&
                                      gitest_onum(p, "total", &total),
                              "a progress reply without phase, member, done or total: %s", itest_dump(j));
                ck_assert_msg(gitest_in_set((pid_t)pid, n, pids), "progress for a non-member: %s", itest_dump(j));
                ck_assert_msg(done >= 1 && done <= total, "progress done %.0f of %.0f: %s", done, total, itest_dump(j));
                ck_assert_msg(log->n < 64, "too many progress replies");
                snprintf(log->phase[log->n], 16, "%s", phase);
                snprintf(log->state[log->n], 16, "%s", gitest_ostr(m, "state") ? gitest_ostr(m, "state") : "");
                log->pid[log->n] = (pid_t)pid;
                log->done[log->n] = done;
                log->total[log->n] = total;
                log->n++;
        }
}

/* Every member has one progress reply for phase, in the state given; all of
 * them come after every reply of the phase before (prev, may be NULL) and
 * count up. */
static void assert_phase_progress(const struct progress_log *log, const char *phase, const char *prev, size_t n,
                                  const pid_t *pids, const char *state)
{
        int first = -1, last_prev = -1;
        double last_done = 0;
        for (int i = 0; i < log->n; i++) {
                if (prev && strcmp(log->phase[i], prev) == 0)
                        last_prev = i;
                if (strcmp(log->phase[i], phase) != 0)
                        continue;
                if (first < 0)
                        first = i;
                ck_assert_msg(log->done[i] >= last_done, "progress of %s counts down (%.0f after %.0f)", phase,
                              log->done[i], last_done);
                last_done = log->done[i];
                ck_assert_msg(strcmp(log->state[i], state) == 0, "progress of %s for %d says state \"%s\", not %s",
                              phase, (int)log->pid[i], log->state[i], state);
        }
        for (size_t k = 0; k < n; k++) {
                int count = 0;
                for (int i = 0; i < log->n; i++)
                        count += strcmp(log->phase[i], phase) == 0 && log->pid[i] == pids[k];
                ck_assert_msg(count == 1, "%d progress replies of phase %s for member %d, not 1", count, phase,
                              (int)pids[k]);
        }
        if (prev)
                ck_assert_msg(first > last_prev, "progress of %s came before the end of %s", phase, prev);
}

START_TEST(more_progress)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t p[3] = { itest_small_target(), itest_small_target(), itest_small_target() };
        struct progress_log log;

        itest_sendf(c, "{\"method\":\"" CUDACKPT_METHOD_SUSPEND_GROUP "\",\"parameters\":%s,\"more\":true}",
                    gitest_group_params(gitest_sel_pids(3, p), NULL));
        cJSON *j = recv_with_progress(c, &log, 3, p);
        gitest_assert_group_ok(j, 3, p, "checkpointed");
        ck_assert_msg(log.n >= 6, "%d progress replies for 3 members locked and checkpointed", log.n);
        assert_phase_progress(&log, CUDACKPT_PHASE_LOCK, NULL, 3, p, "locked");
        assert_phase_progress(&log, CUDACKPT_PHASE_CHECKPOINT, CUDACKPT_PHASE_LOCK, 3, p, "checkpointed");

        itest_sendf(c, "{\"method\":\"" CUDACKPT_METHOD_RESUME_GROUP "\",\"parameters\":%s,\"more\":true}",
                    gitest_group_params(gitest_sel_pids(3, p), NULL));
        j = recv_with_progress(c, &log, 3, p);
        gitest_assert_group_ok(j, 3, p, "running");
        assert_phase_progress(&log, CUDACKPT_PHASE_RESTORE, NULL, 3, p, "locked");
        assert_phase_progress(&log, CUDACKPT_PHASE_UNLOCK, CUDACKPT_PHASE_RESTORE, 3, p, "running");
        gitest_assert_all_now(c, 3, p, "running");

        /* Without "more", one reply (recv_reply checks there is no "continues"). */
        gitest_assert_group_ok(gitest_group_pids(c, CUDACKPT_METHOD_LOCK_GROUP, 3, p), 3, p, "locked");
        ck_assert_msg(!itest_conn_readable(c), "a further reply after the one of a call without \"more\"");
        gitest_assert_group_ok(gitest_group_pids(c, CUDACKPT_METHOD_UNLOCK_GROUP, 3, p), 3, p, "running");
}
END_TEST

/* A failing group with "more": progress, then the error as the final reply. */
START_TEST(more_progress_failure)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t bad = itest_target(SIM, SMALL, "CUDACKPT_SIM_FAIL=checkpoint:CUDA_ERROR_UNKNOWN", NULL);
        pid_t p[3] = { itest_small_target(), itest_small_target(), bad };
        struct progress_log log;
        itest_sendf(c, "{\"method\":\"" CUDACKPT_METHOD_SUSPEND_GROUP "\",\"parameters\":%s,\"more\":true}",
                    gitest_group_params(gitest_sel_pids(3, p), NULL));
        cJSON *j = recv_with_progress(c, &log, 3, p);
        gitest_assert_group_failed(j, CUDACKPT_METHOD_SUSPEND_GROUP, CUDACKPT_PHASE_CHECKPOINT, bad,
                            CUDACKPT_ERROR_DRIVER_ERROR);
        assert_phase_progress(&log, CUDACKPT_PHASE_LOCK, NULL, 3, p, "locked");
        gitest_assert_all_now(c, 3, p, "running");
        /* The connection goes on. */
        ck_assert_msg(!itest_conn_readable(c), "a further reply after the final one");
        itest_assert_state_now(c, bad, "running");
}
END_TEST

int main(int argc, char **argv)
{
        const TTest *tests[] = { suspend_resume_group, phase_groups_cycle, group_gpu_mapping,
                barrier_lock_before_checkpoint, barrier_restore_before_unlock, converge_suspend_and_resume,
                converge_nothing_to_do, invalid_state_in_phase_state, overlapping_groups, client_disconnects,
                more_progress, more_progress_failure, NULL };

        if (argc >= 2 && strcmp(argv[1], "--itest-tree") == 0)
                return gitest_tree_mode(argc, argv);
        return itest_run("integration.groups", "groups", 60, tests);
}
