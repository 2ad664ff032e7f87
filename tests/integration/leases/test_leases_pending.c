/* test_leases_pending.c: pending leases (issue 29 B7c's review), on the
 * simulator, against the real daemon.
 *
 * A call that asks for a lease has it written to the store, pending,
 * before its first driver step, so that a daemon killed during the call
 * undoes it at its next start, as root.  Only a caller who may act on the
 * process may have one written: a stranger's call is refused before
 * anything is written, and a store that names a process its taker may not
 * act on has that process left as it is at the next start.  The writes of
 * a loop turn's leased calls are made once, so that a flood of them does
 * not hold other clients up behind one fsync each.
 *
 * The victims carry CUDACKPT_SIM_STATE=r (their state slot in their own
 * memory), so that the next daemon reads them as they were. */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIM "CUDACKPT_SIM=1"
#define SMALL "CUDACKPT_SIM_MEM_MIB=8"
#define SLOT "CUDACKPT_SIM_STATE=r"

static const char *store_path(const struct itest_daemon *d)
{
        return itest_strdupf("%s/leases.json", d->dir);
}

/* The store's text, "" when there is none. */
static const char *store_text(const struct itest_daemon *d)
{
        return itest_read_text(store_path(d));
}

/* Whether the store holds a lease on pid (a member's "pid", as the store
 * writes it). */
static bool store_names(const struct itest_daemon *d, pid_t pid)
{
        return strstr(store_text(d), itest_strdupf("{\"pid\":%d,\"vpid\"", (int)pid)) != NULL;
}

/* Replaces the store by text (root's, mode 0600, as the daemon writes it). */
static void write_store(const struct itest_daemon *d, const char *text)
{
        const char *tmp = itest_strdupf("%s/leases.json.edit", d->dir);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

        ck_assert(fd >= 0);
        ck_assert(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
        close(fd);
        ck_assert(rename(tmp, store_path(d)) == 0);
}

/* text with every `from` replaced by `to` (kept); asserts one at least. */
static const char *replaced(const char *text, const char *from, const char *to)
{
        size_t nf = strlen(from), nt = strlen(to), n = 0;
        char *out = itest_keep(calloc(1, strlen(text) * (nt + 1) + 1)), *o = out;

        ck_assert(out);
        for (const char *p = text; *p;) {
                if (strncmp(p, from, nf) == 0) {
                        memcpy(o, to, nt);
                        o += nt;
                        p += nf;
                        n++;
                } else {
                        *o++ = *p++;
                }
        }
        ck_assert_msg(n > 0, "no %s in %s", from, text);
        return out;
}

/* A root process, checkpointed on purpose by its owner. */
static pid_t suspended_victim(struct itest_conn *root)
{
        pid_t v = itest_target(SIM, SMALL, SLOT, NULL);

        itest_assert_state(itest_call_pid(root, CUDACKPT_METHOD_SUSPEND, v), v, "checkpointed");
        return v;
}

/* H1: a stranger whose worker share is full asks for a leased Lock of the
 * victim's process: the call is refused at once (PermissionDenied, as the
 * worker would), the store never names the victim, and a daemon killed
 * then leaves the victim checkpointed at its next start. */
START_TEST(stranger_pending_never_written)
{
        struct itest_daemon_opts o = { .config_json = "{\"workers_per_uid\":1}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct itest_conn *root = itest_connect(d), *busy = itest_connect_as(d, ITEST_OTHER_UID),
                          *atk = itest_connect_as(d, ITEST_OTHER_UID);
        pid_t v = suspended_victim(root);
        pid_t own = itest_target_as(ITEST_OTHER_UID, SIM, "CUDACKPT_SIM_BUSY_MS=30000", NULL);
        double until;
        cJSON *reply = NULL;
        int r;

        /* The attacker's one worker waits out its own process's kernel. */
        itest_send_call(busy, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d}", (int)own));
        (void)itest_await_in_flight(root, own, "Lock", 5000);
        itest_send_call(atk, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"lease_ms\":600000}", (int)v));
        until = itest_now_ms() + 1000;
        do {
                ck_assert_msg(!store_names(d, v), "the stranger's lease on %d is in the store: %s", (int)v,
                              store_text(d));
                r = itest_recv_raw(atk, 20, &reply);
        } while (r == -ETIMEDOUT && itest_now_ms() < until);
        ck_assert_msg(r == 0, "the stranger's leased Lock was not answered at once (%d)", r);
        itest_assert_error(reply, CUDACKPT_ERROR_PERMISSION_DENIED);
        ck_assert(!store_names(d, v));
        itest_await_log(d, itest_strdupf("method=Lock target_pid=%d result=PermissionDenied", (int)v), 1000);

        itest_daemon_kill(d);
        d = itest_daemon_restart(d, &o);
        root = itest_connect(d);
        itest_await_log(d, "read back", 2000);
        usleep(300 * 1000); /* an undo would have begun by now */
        itest_assert_state(itest_call_pid(root, CUDACKPT_METHOD_GET_STATE, v), v, "checkpointed");
        ck_assert(!strstr(itest_daemon_log(d), "never answered; undoing it"));
        itest_target_kill(own);
}
END_TEST

/* H1's second guard: a store (written before the first fix, or edited)
 * holding a pending lease of a stranger's uid on root's process.  The next
 * start leaves the process out of the lease, as it is, and says so. */
START_TEST(restart_leaves_what_taker_may_not_act_on)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *root = itest_connect(d);
        pid_t v = itest_target(SIM, SMALL, SLOT, NULL);
        const char *text;

        itest_assert_state(itest_call(root, CUDACKPT_METHOD_SUSPEND,
                                      itest_strdupf("{\"pid\":%d,\"lease_ms\":600000}", (int)v)),
                           v, "checkpointed");
        itest_daemon_kill(d);
        text = store_text(d);
        ck_assert_msg(store_names(d, v), "no lease on %d in %s", (int)v, text);
        text = replaced(text, "\"uid\":0,", itest_strdupf("\"uid\":%u,", (unsigned)ITEST_OTHER_UID));
        text = replaced(text, "\"privileged\":true", "\"privileged\":false,\"pending\":true");
        write_store(d, text);
        d = itest_daemon_restart(d, NULL);
        root = itest_connect(d);
        itest_await_log(d, "read back", 2000);
        usleep(300 * 1000); /* an undo would have begun by now */
        itest_assert_state(itest_call_pid(root, CUDACKPT_METHOD_GET_STATE, v), v, "checkpointed");
        itest_await_log(d, "is not one its taker may act on", 1000);
        ck_assert(!store_names(d, v));
}
END_TEST

/* ---- M1: a flood of leased calls and another client ----------------------- */

#define FLOOD_CONNS 4
#define FLOOD_BATCH 50

/* In a child: each connection pipelines FLOOD_BATCH Locks of its own
 * process (with a lease when leased) and reads their replies, until
 * ms have passed.  Returns the child's pid. */
static pid_t flood(struct itest_conn *const *cs, const pid_t *pids, bool leased, int ms)
{
        pid_t child = fork();

        ck_assert(child >= 0);
        if (child > 0)
                return child;
        double until = itest_now_ms() + ms;
        while (itest_now_ms() < until) {
                for (int k = 0; k < FLOOD_CONNS; k++) {
                        char one[160], *all = malloc(sizeof(one) * FLOOD_BATCH);
                        size_t len = 0;
                        int n = snprintf(one, sizeof(one),
                                         "{\"method\":\"" CUDACKPT_METHOD_LOCK "\",\"parameters\":{\"pid\":%d%s}}",
                                         (int)pids[k], leased ? ",\"lease_ms\":600000" : "");
                        if (!all)
                                _exit(1);
                        for (int i = 0; i < FLOOD_BATCH; i++) {
                                memcpy(all + len, one, (size_t)n + 1);
                                len += (size_t)n + 1;
                        }
                        if (itest_send_bytes(cs[k], all, len, false) < 0)
                                _exit(1);
                        free(all);
                }
                for (int k = 0; k < FLOOD_CONNS; k++)
                        for (int i = 0; i < FLOOD_BATCH; i++) {
                                cJSON *reply;
                                if (itest_recv_raw(cs[k], 30000, &reply) < 0)
                                        _exit(1);
                        }
        }
        _exit(0);
}

/* The mean of n GetStatus round trips on c, 20 ms apart, in ms. */
static double status_mean_ms(struct itest_conn *c, int n)
{
        double sum = 0;

        for (int i = 0; i < n; i++) {
                double t0 = itest_now_ms();
                ck_assert(itest_call(c, CUDACKPT_METHOD_GET_STATUS, NULL) != NULL);
                sum += itest_now_ms() - t0;
                usleep(20 * 1000);
        }
        return sum / n;
}

/* Another client's GetStatus during a flood of Locks (without, then with
 * leases), measured the same way; the child's flood must have worked. */
static double during_flood(struct itest_conn *probe, struct itest_conn *const *cs, const pid_t *pids, bool leased)
{
        pid_t child = flood(cs, pids, leased, 3000);
        double mean;
        int st;

        usleep(300 * 1000);
        mean = status_mean_ms(probe, 60);
        ck_assert(waitpid(child, &st, 0) == child);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the flood failed (%d)", st);
        return mean;
}

/* M1: each leased call wrote the store twice (pending, then granted or
 * dropped), with fsyncs, on the loop thread; four connections pipelining
 * them made another client's GetStatus wait behind dozens of fsyncs (35 ms
 * on average against 0.7 ms without leases, here).  Now a loop turn writes
 * once: the other client waits a few times longer than with the same flood
 * without leases at most. */
START_TEST(leased_flood_bounded)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *probe = itest_connect(d), *cs[FLOOD_CONNS];
        pid_t pids[FLOOD_CONNS];
        double base, leased;

        for (int k = 0; k < FLOOD_CONNS; k++) {
                cs[k] = itest_connect_as(d, ITEST_OTHER_UID);
                pids[k] = itest_target_as(ITEST_OTHER_UID, SIM, SMALL, NULL);
        }
        (void)status_mean_ms(probe, 5); /* warm */
        base = during_flood(probe, cs, pids, false);
        leased = during_flood(probe, cs, pids, true);
        fprintf(stderr, "GetStatus during the flood: %.2f ms mean without leases, %.2f ms with\n", base, leased);
        ck_assert_msg(leased <= 3 * base + 3.0,
                      "GetStatus took %.2f ms on average during a leased flood, %.2f ms during the same flood "
                      "without leases",
                      leased, base);
        for (int k = 0; k < FLOOD_CONNS; k++)
                itest_target_kill(pids[k]);
}
END_TEST

int main(void)
{
        const TTest *tests[] = { stranger_pending_never_written, restart_leaves_what_taker_may_not_act_on,
                leased_flood_bounded, NULL };

        return itest_run("leases_pending", "pending", 90, tests);
}
