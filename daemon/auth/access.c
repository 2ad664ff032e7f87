/* access.c: the rule of access.h. */
#include "auth/access.h"

#include "host/pidns.h"

bool access_privileged(const struct config *cfg, const struct policy_caller *caller)
{
        /* Root of a container is root of its namespace, not of the node:
         * it has no claim on the reserves that keep the node's root, the
         * operators and the daemon's own work going. */
        if (caller->pidns.other)
                return false;
        return caller->uid == 0 || policy_is_operator(cfg, caller);
}

bool access_sees(const struct policy_caller *caller, pid_t pid, pid_t *ret_vpid)
{
        pid_t v;

        if (pid <= 0 || pidns_to_caller(&caller->pidns, pid, &v) < 0)
                return false;
        if (ret_vpid)
                *ret_vpid = v;
        return true;
}

bool access_may_read(const struct config *cfg, const struct policy_caller *caller,
                     const struct policy_target *owner)
{
        return policy_allowed(policy_decide(cfg, caller, owner, true));
}

bool access_may_act(const struct config *cfg, const struct policy_caller *caller,
                    const struct policy_target *owner)
{
        return policy_allowed(policy_decide(cfg, caller, owner, false));
}

bool access_may_manage_lease(const struct config *cfg, const struct policy_caller *caller, uid_t taker,
                             const struct access_proc *procs, size_t n)
{
        bool taker_here = caller->uid == taker;

        if (n == 0)
                return false;
        for (size_t i = 0; i < n; i++) {
                if (!access_sees(caller, procs[i].pid, NULL))
                        return false;
                if (!taker_here && !access_may_act(cfg, caller, &procs[i].owner))
                        return false;
        }
        return true;
}
