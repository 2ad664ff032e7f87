/* barrier-line.h: what passes on the barrier descriptor between cudackptd
 * and the `cudackptctl dump|restore --barrier-fd` it runs (the daemon's
 * daemon/saves/savebarrier.h, the command's client/ctl/job/crossbarrier.h):
 * the command writes the ready line, newline-ended, once its part waits at
 * its barrier, then waits for one byte; the go byte lets it go on, anything
 * else or the descriptor's end closed lets none of its criu go on. */
#ifndef CUDACKPT_BARRIER_LINE_H
#define CUDACKPT_BARRIER_LINE_H

#define BARRIER_LINE_READY "{\"barrier\":\"ready\"}"
#define BARRIER_LINE_GO 'g'

#endif
