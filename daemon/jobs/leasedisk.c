/* leasedisk.c: the lease table on disk (lease.h): the store's directory,
 * checked once; whether leases will outlive a restart; the lease share of calls that ask for one, and the
 * lease such a call has written, pending, before its first driver step. */
#include "jobs/lease.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth/access.h"
#include "base/log.h"
#include "base/privdir.h"
#include "host/target.h"
#include "jobs/leasestore.h"

bool lease_store_durable(const struct lease_table *t, const char **ret_why)
{
        bool ok = t->store_fd >= 0 && !t->store_failing;

        if (ret_why)
                *ret_why = ok ? NULL : t->store_why;
        return ok;
}

/* The store's directory, if only root may change it: checked once, and
 * used through its descriptor from then on. */
void lease_open_store(struct lease_table *t, const char *dir)
{
        char why[256];
        int r = -EINVAL;

        t->store_fd = -1;
        t->store_dir = strdup(dir ? dir : "");
        if (dir && t->store_dir)
                r = privdir_open(dir, &t->store_fd, why, sizeof(why));
        else
                snprintf(why, sizeof(why), "%s", dir ? "out of memory" : "no runtime directory");
        if (r == 0)
                return;
        snprintf(t->store_why, sizeof(t->store_why), "no lease store in \"%s\": %s", dir ? dir : "", why);
        log_error("No lease store in the runtime directory \"%s\": %s; leases will not outlive a restart of the "
                  "daemon (use a directory only root may write: systemd's RuntimeDirectory=, /run/cudackpt)",
                  dir ? dir : "", why);
}

/* ---- the lease share, and pending leases ---------------------------------- */

bool lease_admit(struct lease_table *t, const struct policy_caller *caller, struct share_refusal *ret)
{
        return share_take(&t->share, caller->uid, access_privileged(t->cfg, caller), ret) == 0;
}

struct lease *lease_find_pending(struct lease_table *t, uint64_t id)
{
        for (struct lease *l = t->head; l; l = l->next)
                if (l->id == id && l->pending)
                        return l;
        return NULL;
}

/* Takes l out of the table's list, its counts untouched: pending leases
 * are in the list (the store writes the list) but are not counted among
 * the leases held (their calls are). */
void lease_unlist(struct lease_table *t, struct lease *l)
{
        if (l->prev)
                l->prev->next = l->next;
        else
                t->head = l->next;
        if (l->next)
                l->next->prev = l->prev;
        l->prev = l->next = NULL;
}

void lease_unadmit(struct lease_table *t, const struct policy_caller *caller, struct proto_lease *want)
{
        struct lease *p = want->pending ? lease_find_pending(t, want->pending) : NULL;

        share_give(&t->share, caller->uid, access_privileged(t->cfg, caller));
        want->pending = 0;
        if (!p)
                return; /* none, or granted */
        lease_unlist(t, p);
        free(p->m);
        free(p);
        lease_persist(t);
}

/* Whether caller may act on every member, by the one rule (access.h):
 * a lease is written only for processes its call may change, so that a
 * restart never undoes, as root, what a stranger asked for. */
static bool may_act_on_all(const struct lease_table *t, const struct policy_caller *caller,
                           const struct lease_member *members, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (!access_may_act(t->cfg, caller, &members[i].owner))
                        return false;
        return true;
}

int lease_intend(struct lease_table *t, const struct policy_caller *caller, enum proto_method m,
                 struct proto_lease *want, const struct lease_member *members, size_t n)
{
        struct lease *l;

        if (!want->admitted || want->pending || n == 0)
                return 0;
        if (!may_act_on_all(t, caller, members, n))
                return -EACCES;
        if (t->store_fd < 0)
                return 0;
        l = calloc(1, sizeof(*l));
        if (l)
                l->m = calloc(n, sizeof(*l->m));
        if (!l || !l->m) {
                free(l);
                log_error("%s by uid %u: out of memory for its pending lease; a daemon killed during the call "
                          "would not undo it",
                          proto_method_name(m), (unsigned)caller->uid);
                return 0;
        }
        memcpy(l->m, members, n * sizeof(*l->m));
        *l = (struct lease){ .table = t, .id = t->next_id++, .m = l->m, .n = n, .uid = caller->uid,
                             .privileged = access_privileged(t->cfg, caller), .caller_pid = caller->pid,
                             .method = m, .on_close = want->on_close, .ms = want->ms,
                             .deadline = want->ms ? leasestore_boottime_ms() + want->ms : 0, .pending = true };
        l->next = t->head;
        if (t->head)
                t->head->prev = l;
        t->head = l;
        want->pending = l->id;
        lease_persist(t);
        return 0;
}

bool lease_taker_may_act(const struct lease_table *t, const struct lease *l, const struct lease_member *m)
{
        struct policy_caller taker = { .uid = l->uid, .gid = (gid_t)-1, .pid = l->caller_pid, .pidfd = -1 };

        /* Privileged: root, or one of the operator groups configured now. */
        if (l->privileged && t->cfg->n_operator_gids > 0)
                taker.gid = t->cfg->operator_gids[0];
        return access_may_act(t->cfg, &taker, &m->owner);
}

/* pid's process (a thread id's process), its start time and its owner,
 * as /proc says now: -ESRCH when there is none. */
static int read_member(pid_t pid, struct lease_member *ret)
{
        char path[64], buf[4096];
        int fd;
        ssize_t n;
        pid_t tgid;

        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -ESRCH;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return -ESRCH;
        buf[n] = '\0';
        if (target_parse_tgid(buf, &tgid) < 0 ||
            target_parse_uids(buf, &ret->owner.ruid, &ret->owner.euid, &ret->owner.suid) < 0)
                return -ESRCH;
        ret->pid = tgid;
        ret->start_time = leasestore_start_time(tgid);
        return ret->start_time ? 0 : -ESRCH;
}

int lease_intend_pid(struct lease_table *t, const struct policy_caller *caller, enum proto_method m,
                     struct proto_request *req, struct ops_result *ret)
{
        struct lease_member mb = { .vpid = req->caller_pid };
        int r;

        if (!req->lease.admitted)
                return 0;
        r = read_member(req->pid, &mb);
        if (r < 0)
                return r;
        /* Judged as the worker would judge it (ops_judge), before anything
         * is written for it. */
        if (!ops_judge(t->cfg, caller, m, req, &mb.owner, mb.start_time, ret))
                return -EACCES;
        /* The call acts on the process its lease is written for, or on none. */
        if (!req->has_start_time) {
                req->has_start_time = true;
                req->start_time = mb.start_time;
        }
        return lease_intend(t, caller, m, &req->lease, &mb, 1);
}
