/* leasehooks.c: the lease table behind the groups' lease hooks
 * (leasehooks.h). */
#include "jobs/leasehooks.h"

#include <stdlib.h>

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

/* A group waiting for the store's write. */
struct hook_wait {
        struct lease_wait w; /* first: the callback's argument is this */
        void (*done)(void *arg);
        void *arg;
};

static void hook_written_cb(struct lease_wait *w)
{
        struct hook_wait hw = *(struct hook_wait *)w;

        free(w);
        hw.done(hw.arg);
}

/* Out of memory, the store is written now and the group goes on. */
static bool group_lease_when_written_cb(void *ctx, void (*done)(void *arg), void *arg)
{
        struct lease_table *t = ctx;
        struct hook_wait *hw = calloc(1, sizeof(*hw));

        if (!hw) {
                if (t->dirty)
                        lease_persist_now(t);
                return false;
        }
        *hw = (struct hook_wait){ .w.cb = hook_written_cb, .done = done, .arg = arg };
        if (lease_when_written(t, &hw->w))
                return true;
        free(hw);
        return false;
}

void leasehooks_of(struct lease_table *t, struct group_lease_hooks *ret)
{
        *ret = (struct group_lease_hooks){ .admit_cb = group_lease_admit_cb,
                                           .unadmit_cb = group_lease_unadmit_cb,
                                           .intend_cb = group_lease_intend_cb,
                                           .grant_cb = group_lease_grant_cb,
                                           .when_written_cb = group_lease_when_written_cb,
                                           .ctx = t };
}
