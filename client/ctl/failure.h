/* failure.h: the one way cudackptctl says that a call to the daemon
 * failed, and the exit status it earns. */
#ifndef CUDACKPT_CTL_FAILURE_H
#define CUDACKPT_CTL_FAILURE_H

#include <cudackpt/client.h>

#include <stdbool.h>

/* For a call that returned r: r < 0 (no reply) says "PREFIXwhat failed" on
 * stderr; else reply->error (not NULL) says "PREFIXName: sentence" and,
 * with json, the error as one line of JSON on stdout.  Returns the exit
 * status (ctl_call_failure_exit_code(), ctl_reply_exit_code()). */
int ctl_call_failed(const char *prefix, int r, const cudackpt_reply *reply, bool json);

#endif
