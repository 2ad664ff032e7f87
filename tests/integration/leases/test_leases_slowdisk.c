/* test_leases_slowdisk.c: the lease store written off the loop thread
 * (leaseflush.c).  The daemon runs with slowsync.so, whose fsync() takes
 * a second: a change of the leases is written on a worker, while the loop
 * goes on answering another client's calls (each within 400 ms, where a
 * write on the loop thread holds them a second and more), and the reply
 * of the call that made the change comes only once the write is done (its
 * fsyncs of the file and of the directory: two seconds). */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DELAY_MS 1000
#define PING_MAX_MS 400.0

/* Sends method(params) on c, and GetInfo on probe until c's reply comes,
 * each answered within PING_MAX_MS; returns c's reply and, in *ret_ms,
 * how long it took. */
static cJSON *call_beside_probe(struct itest_conn *c, struct itest_conn *probe, const char *method,
                                const char *params, double *ret_ms)
{
        double t0 = itest_now_ms(), worst = 0;
        int pings = 0;

        itest_send_call(c, method, params);
        while (!itest_conn_readable(c) && itest_now_ms() - t0 < 20000) {
                double p0 = itest_now_ms();
                itest_assert_ok(itest_call(probe, "org.varlink.service.GetInfo", NULL));
                double took = itest_now_ms() - p0;
                worst = took > worst ? took : worst;
                pings++;
                usleep(20000); /* pacing, not waiting: the probe is not to load the machine */
        }
        cJSON *j = itest_recv_within(c, 20000);
        *ret_ms = itest_now_ms() - t0;
        fprintf(stderr, "%s: replied after %.0f ms; %d GetInfo meanwhile, the slowest %.1f ms\n", method, *ret_ms,
                pings, worst);
        ck_assert_msg(worst < PING_MAX_MS, "a GetInfo took %.0f ms while the lease store was written for %s", worst,
                      method);
        return j;
}

static struct itest_daemon *slow_daemon(void)
{
        const char *lib = getenv("CUDACKPT_TEST_SLOWSYNC");
        ck_assert_msg(lib && *lib, "CUDACKPT_TEST_SLOWSYNC is not set");
        const char *env[] = { itest_preload(lib),
                              itest_strdupf("CUDACKPT_TEST_FSYNC_DELAY_MS=%d", DELAY_MS), NULL };
        struct itest_daemon_opts o = { .env = env };

        return itest_daemon_start(&o);
}

/* A LockGroup with a lease: its pending lease is written before its first
 * driver step and its grant before its reply, two writes of two fsyncs. */
START_TEST(group_grant_off_the_loop)
{
        struct itest_daemon *d = slow_daemon();
        struct itest_conn *c = itest_connect(d), *probe = itest_connect(d);
        pid_t a = itest_small_target(), b = itest_small_target();
        double ms;
        cJSON *j = call_beside_probe(
                c, probe, CUDACKPT_METHOD_LOCK_GROUP,
                itest_strdupf("{\"selector\":{\"pids\":[{\"pid\":%d},{\"pid\":%d}]},\"lease_ms\":600000}", (int)a,
                              (int)b),
                &ms);

        (void)itest_lease_id(j);
        ck_assert_msg(ms >= 4 * DELAY_MS - 100, "LockGroup's reply came %.0f ms after the call, before its two "
                      "writes of the lease store (%d ms each)", ms, 2 * DELAY_MS);
        ck_assert_msg(strstr(itest_read_text(itest_strdupf("%s/leases.json", d->dir)), "\"pending\"") == NULL,
                      "the store still holds the pending lease after the grant's reply");
}
END_TEST

/* ReleaseLease answered after the store has the lease gone. */
START_TEST(release_off_the_loop)
{
        struct itest_daemon *d = slow_daemon();
        struct itest_conn *c = itest_connect(d), *probe = itest_connect(d);
        pid_t pid = itest_small_target();
        double ms;
        const char *lock = itest_strdupf("{\"pid\":%d,\"lease_ms\":600000}", (int)pid);
        long long id = itest_lease_id(call_beside_probe(c, probe, CUDACKPT_METHOD_LOCK, lock, &ms));
        cJSON *j = call_beside_probe(c, probe, CUDACKPT_METHOD_RELEASE_LEASE, itest_strdupf("{\"lease\":%lld}", id),
                                     &ms);

        itest_assert_ok(j);
        ck_assert_msg(ms >= 2 * DELAY_MS - 100, "ReleaseLease's reply came %.0f ms after the call, before the "
                      "store's write (%d ms)", ms, 2 * DELAY_MS);
}
END_TEST

int main(void)
{
        const TTest *tests[] = { group_grant_off_the_loop, release_off_the_loop, NULL };

        return itest_run("integration.leases_slowdisk", "slowdisk", 60, tests);
}
