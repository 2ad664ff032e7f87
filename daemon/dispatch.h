/* dispatch.h: what a request means.
 *
 * dispatch_message() takes one complete message of a connection: it parses
 * it, answers what can be answered at once (service methods, errors,
 * GetState while another operation on the process runs) and queues the
 * rest on the scheduler.  dispatch_op_done() is the scheduler's completion
 * callback: it writes the audit record and the reply. */
#ifndef CUDACKPT_DISPATCH_H
#define CUDACKPT_DISPATCH_H

#include <stddef.h>

#include "sched.h"

struct conn;

void dispatch_message(struct conn *c, const char *msg, size_t len);
void dispatch_op_done(struct sched *s, struct sched_op *op);

#endif
