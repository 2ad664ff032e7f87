/* fit_itest.h: what the suites of restores that must fit on their GPU
 * share (test_fit.c, test_fit_hostile.c; fit_itest.c): the daemon started
 * again with the check on, and the refusal of an estimated need. */
#ifndef CUDACKPT_FIT_ITEST_H
#define CUDACKPT_FIT_ITEST_H

#include "harness.h"

/* c closed, d stopped and started again with o; once NVML is open (its
 * log, which holds every start's lines, says for the nth time that
 * restores are checked against the GPUs' free memory, within 10 s), a
 * connection to the new daemon. */
struct itest_conn *fit_restart(struct itest_daemon **d, struct itest_conn *c, const struct itest_daemon_opts *o,
                               int nth);

/* j is an InsufficientGpuMemory refusal of an estimate: a small program's
 * resident memory (under 256 MiB) and the margin of margin_mib. */
void fit_assert_estimate_refused(const cJSON *j, int margin_mib);

#endif
