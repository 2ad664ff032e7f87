/* pidns.h: pids as the caller sees them.
 *
 * A caller in another pid namespace than the daemon's (a container) names
 * processes by the pids its namespace gives them, and may name only the
 * processes its namespace can see: its own namespace and those below it.
 * Every pid that comes from a caller is turned into the daemon's pid
 * (pidns_to_daemon) before anything else looks at it, and every pid that
 * goes back is turned into the caller's (pidns_to_caller); a pid the caller
 * cannot see fails both ways with -ESRCH, so it is answered NoSuchProcess
 * exactly as a pid that does not exist.
 *
 * The namespace is the connecting process's, taken at accept through its
 * pidfd (PIDFD_GET_PID_NAMESPACE, Linux 6.11) or /proc/PID/ns/pid (checked
 * against the pidfd afterwards, so a reused pid cannot lend its namespace).
 * Translation is exact: the nsfs ioctls NS_GET_PID_FROM_PIDNS and
 * NS_GET_PID_IN_PIDNS (Linux 6.7), one system call, no /proc.  On an older
 * kernel a caller in another namespace is refused (pidns_to_daemon says
 * -EOPNOTSUPP), never served with host pids.  A caller in the daemon's own
 * namespace costs nothing: no descriptor, no system call.
 *
 * Neither function blocks: both may run on the loop thread. */
#ifndef CUDACKPT_PIDNS_H
#define CUDACKPT_PIDNS_H

#include <stdbool.h>
#include <sys/types.h>

/* All zero (the daemon's own namespace) is a valid value. */
struct pidns {
        bool other;       /* the caller is in another namespace than the daemon */
        bool unsupported; /* ... and this kernel cannot translate (or it is unknown) */
        int fd;           /* other: that namespace, owned; -1 when unknown */
};

#define PIDNS_SAME ((struct pidns){ .other = false, .unsupported = false, .fd = -1 })

/* What a refused caller of another namespace is told. */
#define PIDNS_UNSUPPORTED_REASON \
        "the caller is in another pid namespace, and this kernel cannot translate pids (Linux 6.7 or later needed)"

/* The pid namespace of the peer (pid in the daemon's namespace, pidfd or
 * -1).  Never fails: a peer whose namespace cannot be read is treated as
 * one that cannot be translated (refused), never as the daemon's own. */
void pidns_of_peer(pid_t pid, int pidfd, struct pidns *ret);
void pidns_free(struct pidns *ns);

/* A pid the caller wrote into the daemon's pid: 0 or -ESRCH (no such
 * process in the caller's view), -EOPNOTSUPP (unsupported). */
int pidns_to_daemon(const struct pidns *ns, pid_t pid, pid_t *ret);
/* A daemon pid into the caller's: 0 or -ESRCH (the caller cannot see it). */
int pidns_to_caller(const struct pidns *ns, pid_t pid, pid_t *ret);

static inline bool pidns_is_same(const struct pidns *ns)
{
        return !ns->other;
}

#endif
