/* policy.h: who may act on which process.
 *
 * One decision function, called for every request, so the rule lives in one
 * place and is unit-tested as a table.  The daemon runs as root and the
 * driver obeys it, so this check is the only guard between a local user and
 * another user's GPU process. */
#ifndef CUDACKPT_POLICY_H
#define CUDACKPT_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/config.h"
#include "host/pidns.h"

#define POLICY_MAX_GROUPS 256

/* The peer of a connection, from SO_PEERCRED, SO_PEERGROUPS and (Linux 6.5
 * and later) SO_PEERPIDFD at accept. */
struct policy_caller {
        uid_t uid;
        gid_t gid;
        pid_t pid;
        bool has_pidfd;         /* pidfd below is valid (owned by the connection) */
        int pidfd;              /* the peer process, pinned */
        struct pidns pidns;     /* the peer's pid namespace (owned by the connection) */
        size_t n_groups;
        gid_t groups[POLICY_MAX_GROUPS];
};

struct policy_target {
        uid_t ruid, euid, suid;
};

enum policy_verdict {
        POLICY_ALLOW_ROOT,     /* the caller is root */
        POLICY_ALLOW_OWNER,    /* all the target's uids are the caller's */
        POLICY_ALLOW_OPERATOR, /* the caller is in an operator group */
        POLICY_ALLOW_READ,     /* read-only methods are open to all */
        POLICY_DENY,
};

enum policy_verdict policy_decide(const struct config *c, const struct policy_caller *caller,
                                  const struct policy_target *t, bool read_only);

/* Whether caller is in one of the operator groups. */
bool policy_is_operator(const struct config *c, const struct policy_caller *caller);

static inline bool policy_allowed(enum policy_verdict v)
{
        return v != POLICY_DENY;
}

#endif
