/* leasehooks.c: the lease table behind the groups' lease hooks
 * (leasehooks.h). */
#include "jobs/leasehooks.h"

static bool group_lease_admit_cb(void *ctx, const struct policy_caller *caller, struct share_refusal *ret)
{
        return lease_admit(ctx, caller, ret);
}

static void group_lease_unadmit_cb(void *ctx, const struct policy_caller *caller, struct proto_lease *want)
{
        lease_unadmit(ctx, caller, want);
}

static void group_lease_intend_cb(void *ctx, const struct policy_caller *caller, enum proto_method m,
                                  struct proto_lease *want, const struct lease_member *members, size_t n)
{
        (void)lease_intend(ctx, caller, m, want, members, n);
}

static void group_lease_grant_cb(void *ctx, struct conn *c, enum proto_method m, const struct proto_lease *want,
                                 const struct lease_member *members, size_t n, cJSON *reply)
{
        lease_grant(ctx, c, m, want, members, n, reply);
}

void leasehooks_of(struct lease_table *t, struct group_lease_hooks *ret)
{
        *ret = (struct group_lease_hooks){ .admit_cb = group_lease_admit_cb,
                                           .unadmit_cb = group_lease_unadmit_cb,
                                           .intend_cb = group_lease_intend_cb,
                                           .grant_cb = group_lease_grant_cb,
                                           .ctx = t };
}
