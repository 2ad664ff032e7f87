/* crossbarrier.h: the barrier across the parts of a job that separate
 * commands dump or restore (a job's parts on several nodes, each dumped by
 * its node's cudackptd): `dump|restore --barrier-fd=FD`.  Where this
 * command's own criu runs all wait (criu.h's barrier: a dump's images
 * durable, its job frozen and its connections under criu's network lock;
 * a restore's trees restored, not yet running, the lock still on), it says
 * so on FD (common/barrier-line.h) and waits for whoever holds the other
 * end, which lets every part go on, or none.  Private to cudackptctl. */
#ifndef CUDACKPT_CTL_CROSSBARRIER_H
#define CUDACKPT_CTL_CROSSBARRIER_H

/* Says ready on fd (-1: no such barrier, 0 at once) and waits for the go:
 * 0, or -ECANCELED (said on stderr after prefix: verb's parts were let go
 * on by none) or -errno. */
int ctl_cross_barrier_wait(int fd, const char *verb, const char *prefix);

#endif
