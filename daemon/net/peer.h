/* peer.h: who is at the other end of a connection: the kernel's record of
 * the process that connected (SO_PEERCRED, SO_PEERGROUPS, SO_PEERPIDFD),
 * and its pid namespace. */
#ifndef CUDACKPT_PEER_H
#define CUDACKPT_PEER_H

#include "auth/policy.h"

/* Fills caller from fd, a connected Unix socket.  Without credentials
 * the caller is nobody (uid and gid -1, pid 0): refused, not trusted;
 * without a pidfd (older kernels), has_pidfd is false and pidfd -1. */
void peer_read(int fd, struct policy_caller *caller);

#endif
