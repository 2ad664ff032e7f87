/* leasehooks.c: the lease table behind the groups' lease hooks
 * (leasehooks.h). */
#include "jobs/leasehooks.h"

#include <stdlib.h>

#include "base/log.h"

static bool group_lease_admit_cb(void *ctx, const struct policy_caller *caller, struct share_refusal *ret)
{
        return lease_admit(ctx, caller, ret);
}

static void group_lease_unadmit_cb(void *ctx, const struct policy_caller *caller, struct proto_lease *want)
{
        lease_unadmit(ctx, caller, want);
}

/* The group's members as a lease names them, or NULL (logged) when out
 * of memory: nothing may stay paused unguarded. */
static struct lease_member *lease_members_of(enum proto_method m, const struct group_member_id *members, size_t n)
{
        struct lease_member *lm = calloc(n ? n : 1, sizeof(*lm));

        if (!lm) {
                log_error("%s: out of memory for the lease; its members stay as they are", proto_method_name(m));
                return NULL;
        }
        for (size_t i = 0; i < n; i++)
                lm[i] = (struct lease_member){ .pid = members[i].pid, .vpid = members[i].vpid,
                                               .start_time = members[i].start_time, .owner = members[i].owner };
        return lm;
}

static void group_lease_intend_cb(void *ctx, const struct policy_caller *caller, enum proto_method m,
                                  struct proto_lease *want, const struct group_member_id *members, size_t n)
{
        struct lease_member *lm = lease_members_of(m, members, n);

        if (lm)
                lease_intend(ctx, caller, m, want, lm, n);
        free(lm);
}

static void group_lease_grant_cb(void *ctx, struct conn *c, enum proto_method m, const struct proto_lease *want,
                                 const struct group_member_id *members, size_t n, cJSON *reply)
{
        struct lease_member *lm = lease_members_of(m, members, n);

        if (lm)
                lease_grant(ctx, c, m, want, lm, n, reply);
        free(lm);
}

void leasehooks_of(struct lease_table *t, struct group_lease_hooks *ret)
{
        *ret = (struct group_lease_hooks){ .admit_cb = group_lease_admit_cb,
                                           .unadmit_cb = group_lease_unadmit_cb,
                                           .intend_cb = group_lease_intend_cb,
                                           .grant_cb = group_lease_grant_cb,
                                           .ctx = t };
}
