/* leasecall.c: the calls on leases: ReleaseLease, RenewLease and
 * ClaimLease (lease.h). */
#include "jobs/lease.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/access.h"
#include "net/conn.h"
#include "cudackpt/protocol.h"
#include "jobs/leasestore.h"
#include "base/log.h"

/* The lease of this id (undoing ones included, pending ones not), NULL
 * if none. */
static struct lease *find(struct lease_table *t, uint64_t id)
{
        for (struct lease *l = t->head; l; l = l->next)
                if (l->id == id && !l->pending)
                        return l;
        return NULL;
}

/* Whether caller may release, renew or claim l (access.h has the rule). */
static bool may_manage(const struct lease_table *t, const struct policy_caller *caller, const struct lease *l)
{
        struct access_proc procs[16] = { { 0 } }, *p = procs;
        bool ok;

        if (l->n > 16 && !(p = calloc(l->n, sizeof(*p))))
                return false;
        for (size_t i = 0; i < l->n; i++)
                p[i] = (struct access_proc){ .pid = l->m[i].pid, .owner = l->m[i].owner };
        ok = access_may_manage_lease(t->cfg, caller, l->uid, p, l->n);
        if (p != procs)
                free(p);
        return ok;
}

/* The audit line of a release or renewal names who did it, and whose
 * lease it was. */
static void audit_managed(const struct conn *c, const struct lease *l, const char *what, uint32_t ms)
{
        char detail[160];
        struct log_audit a = {
                .caller_uid = (unsigned)c->caller.uid,
                .caller_pid = (int)c->caller.pid,
                .target_pid = l->n > 0 ? (int)l->m[0].pid : 0,
                .method = what,
                .result = "ok",
                .detail = detail,
        };

        if (ms)
                snprintf(detail, sizeof(detail), "lease %" PRIu64 " of uid %u pid %d on %zu processes, now %u ms",
                         l->id, (unsigned)l->uid, (int)l->caller_pid, l->n, (unsigned)ms);
        else
                snprintf(detail, sizeof(detail), "lease %" PRIu64 " of uid %u pid %d on %zu processes", l->id,
                         (unsigned)l->uid, (int)l->caller_pid, l->n);
        log_audit(&a);
}

/* Whether secret is l's, in a time that does not depend on where they
 * differ. */
static bool secret_matches(const struct lease *l, const char *secret)
{
        uint8_t given[LEASE_SECRET_BYTES];
        volatile uint8_t diff = 0;

        if (!l->has_secret || leasestore_unhex(secret, given, sizeof(given)) < 0)
                return false;
        for (size_t i = 0; i < sizeof(given); i++)
                diff |= (uint8_t)(given[i] ^ l->secret[i]);
        return diff == 0;
}

/* NoSuchLease for call, audited as the refusal it is (a probe of other
 * users' lease ids or secrets shows in the trail); the line says no more
 * than the reply does. */
static cJSON *no_such_lease(const struct conn *c, const struct proto_call *call, uint64_t id)
{
        cJSON *p = cJSON_CreateObject();
        char detail[48];

        snprintf(detail, sizeof(detail), "lease %" PRIu64, id);
        log_audit(&(struct log_audit){ .caller_uid = (unsigned)c->caller.uid, .caller_pid = (int)c->caller.pid,
                                       .method = proto_method_name(call->method), .result = "NoSuchLease",
                                       .detail = detail });
        if (p)
                cJSON_AddNumberToObject(p, "lease", (double)id);
        return proto_error_new(CUDACKPT_ERROR_NO_SUCH_LEASE, p);
}

/* A reply that waits for the store's write of what its call changed. */
struct reply_wait {
        struct lease_wait w; /* first: the callback's argument is this */
        struct conn *c;
        cJSON *msg;
        bool oneway;
};

static void reply_written_cb(struct lease_wait *w)
{
        struct reply_wait *rw = (struct reply_wait *)w;
        struct conn *c = rw->c;

        if (rw->oneway || c->closing)
                cJSON_Delete(rw->msg);
        else
                conn_send(c, rw->msg);
        free(rw);
        conn_request_done(c);
        conn_unref(c);
}

/* Answers call with msg once the store has the change it made (lease.h's
 * promise); the connection reads no further request meanwhile.  Out of
 * memory, the store is written now. */
static void reply_when_written(struct lease_table *t, struct conn *c, const struct proto_call *call, cJSON *msg)
{
        struct reply_wait *rw = calloc(1, sizeof(*rw));

        if (!rw && t->dirty)
                lease_persist_now(t);
        if (rw) {
                *rw = (struct reply_wait){ .w.cb = reply_written_cb, .c = c, .msg = msg, .oneway = call->oneway };
                if (lease_when_written(t, &rw->w)) {
                        conn_ref(c);
                        conn_request_begin(c);
                        return;
                }
                free(rw);
        }
        conn_reply(c, call, msg);
}

/* ClaimLease: the caller's connection becomes the holder of an on-close
 * lease, by its secret. */
static void claim(struct lease_table *t, struct conn *c, const struct proto_call *call)
{
        const char *secret = NULL;
        cJSON *err = NULL, *p;
        struct lease *l;
        uint64_t id;

        if (proto_parse_claim_lease(call, &id, &secret, &err) < 0) {
                conn_reply(c, call, err);
                return;
        }
        l = find(t, id);
        /* Every refusal reads the same: a wrong secret learns nothing of
         * the lease. */
        if (!l || !secret_matches(l, secret) || !l->on_close || l->undoing || !may_manage(t, &c->caller, l)) {
                conn_reply(c, call, no_such_lease(c, call, id));
                return;
        }
        audit_managed(c, l, proto_method_name(call->method), 0);
        lease_claim(t, l, c);
        p = cJSON_CreateObject();
        if (p) {
                cJSON_AddNumberToObject(p, "lease", (double)id);
                if (l->ms && l->expires)
                        cJSON_AddNumberToObject(p, "lease_ms",
                                                (double)(l->expires > uv_now(t->loop) ? l->expires - uv_now(t->loop) : 0));
                cJSON_AddBoolToObject(p, "on_close", true);
        }
        reply_when_written(t, c, call, proto_reply_new(p));
}

void lease_call(struct lease_table *t, struct conn *c, struct proto_call *call)
{
        struct lease *l;
        cJSON *err = NULL, *p, *msg;
        uint64_t id;
        uint32_t ms;

        if (call->method == PROTO_CLAIM_LEASE) {
                claim(t, c, call);
                return;
        }
        if (proto_parse_lease_call(call, &id, &ms, &err) < 0) {
                conn_reply(c, call, err);
                return;
        }
        l = find(t, id);
        if (!l || l->undoing || !may_manage(t, &c->caller, l)) {
                /* Another's lease is answered as one that does not exist. */
                conn_reply(c, call, no_such_lease(c, call, id));
                return;
        }
        p = cJSON_CreateObject();
        if (p)
                cJSON_AddNumberToObject(p, "lease", (double)id);
        msg = proto_reply_new(p);
        audit_managed(c, l, proto_method_name(call->method), call->method == PROTO_RELEASE_LEASE ? 0 : ms);
        if (call->method == PROTO_RELEASE_LEASE) {
                lease_release(t, l);
        } else {
                lease_renew(t, l, ms);
                if (p)
                        cJSON_AddNumberToObject(p, "lease_ms", ms);
        }
        reply_when_written(t, c, call, msg);
}
