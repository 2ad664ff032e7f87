/* scmpeek.h: the descriptors in flight in a unix socket's queue, read
 * without taking them. */
#ifndef CUDACKPT_CTL_SCMPEEK_H
#define CUDACKPT_CTL_SCMPEEK_H

/* Called with each descriptor in flight (SCM_RIGHTS) in the receive queue
 * of the unix socket fd, and in the queues of those that are unix sockets
 * themselves, down to depth levels: a descriptor of ours (close-on-exec),
 * which the callback takes over; 0 or -errno (which ends the walk).  The
 * queues are left as they were (MSG_PEEK, at a peek offset put back
 * afterwards).  0; the callback's -errno; -ELOOP when descriptors are in
 * flight deeper than depth; -E2BIG past a queue of 65536 messages; -errno. */
int ctl_scm_peek(int fd, int depth, int (*cb)(void *data, int fd), void *data);
/* ctl_scm_peek() of the socket at descriptor target of the process pidfd
 * names, if it is the socket of inode ino (else -ESTALE); a queue that
 * cannot be read (a listener's, holding only its connections; an
 * unconnected seqpacket socket's) has none. */
int ctl_scm_peek_of(int pidfd, int target, unsigned long ino, int depth, int (*cb)(void *data, int fd), void *data);

#endif
