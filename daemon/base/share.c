/* share.c: per-uid and global bounds of one resource (share.h). */
#include "base/share.h"

#include <errno.h>
#include <stdlib.h>

void share_init(struct share *s, const char *const keys[3], unsigned limit, unsigned per_uid, unsigned reserved)
{
        *s = (struct share){ .key_limit = keys[0], .key_per_uid = keys[1], .key_reserved = keys[2],
                             .limit = limit ? limit : 1 };
        /* A reserve takes at most half: a limit lowered without it leaves
         * the unprivileged their half. */
        s->reserved = reserved <= s->limit / 2 ? reserved : s->limit / 2;
        s->per_uid = per_uid ? per_uid : 1;
}

void share_free(struct share *s)
{
        free(s->uids);
        s->uids = NULL;
        s->n_uids = s->cap_uids = 0;
}

static struct share_uid *find(const struct share *s, uid_t uid, bool privileged)
{
        for (size_t i = 0; i < s->n_uids; i++)
                if (s->uids[i].uid == uid && s->uids[i].privileged == privileged)
                        return &s->uids[i];
        return NULL;
}

static unsigned held(const struct share *s, uid_t uid, bool privileged)
{
        const struct share_uid *u = find(s, uid, privileged);

        return u ? u->count : 0;
}

unsigned share_held(const struct share *s, uid_t uid)
{
        return held(s, uid, false);
}

static enum share_verdict refuse(struct share_refusal *ret, enum share_verdict v, const char *key,
                                 unsigned limit)
{
        if (ret)
                *ret = (struct share_refusal){ .verdict = v, .key = key, .limit = limit };
        return v;
}

enum share_verdict share_check(const struct share *s, uid_t uid, bool privileged, struct share_refusal *ret)
{
        if (s->used >= s->limit)
                return refuse(ret, SHARE_FULL, s->key_limit, s->limit);
        if (privileged && s->per_uid_everyone && held(s, uid, true) >= s->per_uid)
                return refuse(ret, SHARE_UID_FULL, s->key_per_uid, s->per_uid);
        if (privileged)
                return SHARE_OK;
        if (s->used_unprivileged >= s->limit - s->reserved)
                return refuse(ret, SHARE_UNPRIVILEGED_FULL, s->key_reserved, s->limit - s->reserved);
        if (share_held(s, uid) >= s->per_uid)
                return refuse(ret, SHARE_UID_FULL, s->key_per_uid, s->per_uid);
        return SHARE_OK;
}

static int count(struct share *s, uid_t uid, bool privileged)
{
        struct share_uid *u;

        if (!privileged || s->per_uid_everyone) {
                u = find(s, uid, privileged);
                if (!u) {
                        if (s->n_uids == s->cap_uids) {
                                size_t cap = s->cap_uids ? 2 * s->cap_uids : 8;
                                struct share_uid *nu = realloc(s->uids, cap * sizeof(*nu));
                                if (!nu)
                                        return -ENOMEM;
                                s->uids = nu;
                                s->cap_uids = cap;
                        }
                        u = &s->uids[s->n_uids++];
                        *u = (struct share_uid){ .uid = uid, .privileged = privileged };
                }
                u->count++;
                s->used_unprivileged += !privileged;
        }
        s->used++;
        return 0;
}

int share_take(struct share *s, uid_t uid, bool privileged, struct share_refusal *ret)
{
        if (share_check(s, uid, privileged, ret) != SHARE_OK)
                return -EAGAIN;
        return count(s, uid, privileged);
}

void share_take_anyway(struct share *s, uid_t uid, bool privileged)
{
        /* Without memory for a per-uid entry nothing is counted, which
         * share_give() tolerates. */
        (void)count(s, uid, privileged);
}

void share_give(struct share *s, uid_t uid, bool privileged)
{
        struct share_uid *u;

        if (s->used > 0)
                s->used--;
        if (privileged && !s->per_uid_everyone)
                return;
        if (!privileged && s->used_unprivileged > 0)
                s->used_unprivileged--;
        u = find(s, uid, privileged);
        if (u && --u->count == 0)
                *u = s->uids[--s->n_uids]; /* order does not matter */
}
