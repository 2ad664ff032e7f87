/* policy.c: the authorisation rule, as a pure function of the caller, the
 * target's user ids and the configuration. */
#include "auth/policy.h"

static bool caller_in_group(const struct policy_caller *caller, gid_t gid)
{
        if (caller->gid == gid)
                return true;
        for (size_t i = 0; i < caller->n_groups; i++)
                if (caller->groups[i] == gid)
                        return true;
        return false;
}

bool policy_is_operator(const struct config *c, const struct policy_caller *caller)
{
        for (size_t i = 0; i < c->n_operator_gids; i++)
                if (caller_in_group(caller, c->operator_gids[i]))
                        return true;
        return false;
}

enum policy_verdict policy_decide(const struct config *c, const struct policy_caller *caller,
                                  const struct policy_target *t, bool read_only)
{
        if (caller->uid == 0)
                return POLICY_ALLOW_ROOT;
        /* A process that changed or is changing user (setuid programs) is not
         * wholly the caller's: all three ids must match. */
        if (t->ruid == caller->uid && t->euid == caller->uid && t->suid == caller->uid)
                return POLICY_ALLOW_OWNER;
        if (read_only && c->read_only_unrestricted)
                return POLICY_ALLOW_READ;
        if (policy_is_operator(c, caller)) {
                bool root_target = t->ruid == 0 || t->euid == 0 || t->suid == 0;
                if (!root_target || c->operators_may_act_on_root)
                        return POLICY_ALLOW_OPERATOR;
        }
        return POLICY_DENY;
}
