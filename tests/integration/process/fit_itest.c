/* fit_itest.c: see fit_itest.h. */
#include "fit_itest.h"

#include <cudackpt/client.h>

#include <unistd.h>

#define FIT_MIB (1024.0 * 1024.0)

struct itest_conn *fit_restart(struct itest_daemon **d, struct itest_conn *c, const struct itest_daemon_opts *o,
                               int nth)
{
        itest_conn_close(c);
        itest_daemon_stop(*d);
        *d = itest_daemon_restart(*d, o);
        double t0 = itest_now_ms();
        while (itest_count(itest_daemon_log(*d), "Restores are checked against the GPUs' free memory") < nth) {
                ck_assert_msg(itest_now_ms() - t0 < 10000, "the restarted daemon never opened NVML");
                usleep(20 * 1000);
        }
        return itest_connect(*d);
}

void fit_assert_estimate_refused(const cJSON *j, int margin_mib)
{
        long long need;

        itest_assert_error(j, CUDACKPT_ERROR_INSUFFICIENT_GPU_MEMORY);
        ck_assert(itest_int(j, "needed_bytes", &need));
        ck_assert_msg(need > margin_mib * FIT_MIB && need < (margin_mib + 256) * FIT_MIB, "needed %lld", need);
}
