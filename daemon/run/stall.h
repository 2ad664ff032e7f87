/* stall.h: why a long operation has not returned, for the log.
 *
 * A driver call cannot be cancelled, and one made just as its process was
 * stopped (ops.c checks right before each call) waits until the process
 * runs again.  So that the log says so, the scheduler's stall timer
 * (sched.c) hands each operation that has run for stall_warning_ms to
 * stall_check_start(), which has a pool thread (the loop reads no /proc)
 * check whether its process is stopped and then warns once.  Below sched:
 * it sees only the target's published record (schedtarget.h). */
#ifndef CUDACKPT_STALL_H
#define CUDACKPT_STALL_H

#include <stdint.h>
#include <uv.h>

#include "varlink/proto.h"
#include "run/schedtarget.h"

/* Loop thread: warns about method, running on t for elapsed_ms; at once
 * when the op has not pinned its process yet (it waits for a worker), else
 * after a look at the process on a pool thread.  Nothing on failure. */
void stall_check_start(uv_loop_t *loop, struct sched_target *t, enum proto_method method, uint64_t elapsed_ms);

#endif
