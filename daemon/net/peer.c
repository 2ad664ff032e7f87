/* peer.c: who is at the other end of a connection (peer.h). */
#include "net/peer.h"

#include <string.h>
#include <sys/socket.h>

#include "host/pidns.h"
#include "kernel-abi.h"

void peer_read(int fd, struct policy_caller *caller)
{
        struct ucred cred;
        socklen_t len = sizeof(cred);
        gid_t groups[POLICY_MAX_GROUPS];
        int pidfd = -1;

        /* Without credentials the peer is nobody: it gets refused, not trusted. */
        caller->uid = (uid_t)-1;
        caller->gid = (gid_t)-1;
        caller->pid = 0;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && len == sizeof(cred)) {
                caller->uid = cred.uid;
                caller->gid = cred.gid;
                caller->pid = cred.pid;
        }
        len = sizeof(groups);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) == 0) {
                caller->n_groups = len / sizeof(gid_t);
                memcpy(caller->groups, groups, caller->n_groups * sizeof(gid_t));
        }
        /* The kernel's pidfd of the process that connected: unlike the pid,
         * it cannot come to name another process.  Older kernels say
         * ENOPROTOOPT and the daemon does without. */
        len = sizeof(pidfd);
        caller->has_pidfd = caller->pid > 0 &&
                            getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0 && pidfd >= 0;
        caller->pidfd = caller->has_pidfd ? pidfd : -1;
        pidns_of_peer(caller->pid, caller->pidfd, &caller->pidns);
}
