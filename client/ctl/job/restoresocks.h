/* restoresocks.h: the sockets of a restored job made its owner's, and
 * checked for a port its owner could not have taken, before it runs. */
#ifndef CUDACKPT_CTL_RESTORESOCKS_H
#define CUDACKPT_CTL_RESTORESOCKS_H

#include "jobpin.h"

#include <stddef.h>
#include <sys/types.h>

/* Every socket each pinned process but init holds made uid's (criu made
 * them as root: the kernel's owner of a socket, which decides whether it
 * may join another's SO_REUSEPORT group, and which sock_diag reports);
 * then refused: a TCP or UDP socket bound to a port below its network
 * namespace's ip_unprivileged_port_start, and a listening TCP or a UDP
 * socket that shares its port (at an address that overlaps) with a socket
 * the job does not hold, unless that one is uid's and the job's has
 * SO_REUSEPORT (what uid could have joined itself).  Called while criu
 * still holds the processes.  0; -EACCES, what and why in refused; -errno,
 * said on stderr with prefix, when the check could not be made. */
int ctl_restore_socks_check(const ctl_pins *pins, int init, uid_t uid, const char *prefix, char *refused,
                            size_t size);

#endif
