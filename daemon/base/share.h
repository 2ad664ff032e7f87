/* share.h: fair shares of one bounded resource among the callers' uids.
 *
 * Every resource that callers of different users compete for (worker
 * threads, queued operations, groups in flight, leases, watchers,
 * connections) is counted in a share: a global limit, a limit per
 * unprivileged uid, and a reserve of the global limit that unprivileged
 * callers together cannot take.  Privileged callers (root, the operator
 * groups, the daemon's own work such as a lease's undo) are bound by the
 * global limit only, and always find the reserve free of unprivileged use:
 * no unprivileged uid, nor all of them together, can starve them.
 *
 * The limits come from the configuration; a reserve is at most half of its
 * limit.  Loop thread only. */
#ifndef CUDACKPT_SHARE_H
#define CUDACKPT_SHARE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct share_uid {
        uid_t uid;
        bool privileged;        /* a privileged caller's count apart from an
                                 * unprivileged one of the same uid (a
                                 * container's root) */
        unsigned count;
};

struct share {
        /* The configuration keys of the three limits, for refusals. */
        const char *key_limit, *key_per_uid, *key_reserved;
        unsigned limit;         /* in all */
        unsigned per_uid;       /* for one unprivileged uid */
        unsigned reserved;      /* of limit, for privileged callers only */
        bool per_uid_everyone;  /* per_uid binds privileged uids too (connections) */
        unsigned used;          /* in all */
        unsigned used_unprivileged;
        struct share_uid *uids; /* uids holding some, privileged ones only when
                                 * per_uid_everyone (owned) */
        size_t n_uids, cap_uids;
};

/* Which limit a refusal hit. */
enum share_verdict {
        SHARE_OK,
        SHARE_FULL,             /* the global limit */
        SHARE_UNPRIVILEGED_FULL, /* what all unprivileged uids may hold */
        SHARE_UID_FULL,         /* the caller's uid's share */
};

/* What a refused caller is told: the limit and its configuration key. */
struct share_refusal {
        enum share_verdict verdict;
        const char *key;
        unsigned limit;
};

/* keys: the limit's, the per-uid one's and the reserve's configuration
 * keys, for the refusals (static strings). */
void share_init(struct share *s, const char *const keys[3], unsigned limit, unsigned per_uid, unsigned reserved);
void share_free(struct share *s);

/* Whether one more could be taken for uid now (SHARE_OK), and if not which
 * limit is in the way (*ret, may be NULL).  Takes nothing. */
enum share_verdict share_check(const struct share *s, uid_t uid, bool privileged, struct share_refusal *ret);
/* Takes one for uid: 0, or -EAGAIN with *ret (may be NULL) saying which
 * limit refused, or -ENOMEM. */
int share_take(struct share *s, uid_t uid, bool privileged, struct share_refusal *ret);
/* Counts one for uid whatever the limits say: for what was admitted by
 * share_check() earlier and cannot be refused now. */
void share_take_anyway(struct share *s, uid_t uid, bool privileged);
/* Gives back one that share_take() gave uid with the same privilege. */
void share_give(struct share *s, uid_t uid, bool privileged);
/* How many uid holds as an unprivileged caller (privileged ones are
 * counted per uid only when per_uid_everyone). */
unsigned share_held(const struct share *s, uid_t uid);

#endif
