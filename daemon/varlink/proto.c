/* proto.c: strict parsing of the parameters of the daemon's calls (see
 * proto.h).
 *
 * cJSON's plain getters compare keys case-insensitively and its numbers are
 * doubles, so every key is compared with strcmp() and every integer checked
 * for being integral and in range. */
#include "varlink/proto.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudackpt/protocol.h"
#include "cgroup-path.h"
#include "json.h"
#include "varlink/protoparam.h"
#include "varlink/uuid.h"

enum { P_PID = 1, P_START = 2, P_TIMEOUT = 4, P_MAPPING = 8, P_LEASE_MS = 16, P_LEASE_CLOSE = 32, P_FORCE = 64 };

/* The P_ flag of a parameter of a single call, 0 for an unknown one. */
static unsigned param_flag(const char *name)
{
        static const struct {
                const char *name;
                unsigned flag;
        } params[] = { { "pid", P_PID },           { "start_time", P_START },   { "timeout_ms", P_TIMEOUT },
                       { "gpu_mapping", P_MAPPING }, { "lease_ms", P_LEASE_MS }, { "lease_on_close", P_LEASE_CLOSE },
                       { "force", P_FORCE } };

        for (size_t i = 0; i < sizeof(params) / sizeof(params[0]); i++)
                if (strcmp(name, params[i].name) == 0)
                        return params[i].flag;
        return 0;
}

static unsigned allowed_params(enum proto_method m)
{
        switch (m) {
        case PROTO_LOCK:
        case PROTO_SUSPEND:
                return P_PID | P_START | P_TIMEOUT | P_LEASE_MS | P_LEASE_CLOSE;
        case PROTO_RESTORE:
        case PROTO_RESUME:
                return P_PID | P_START | P_MAPPING | P_FORCE;
        default:
                return P_PID | P_START;
        }
}

/* One parameter of a single call (which, its P_ flag) into req; mapping
 * is kept to be checked once pid is known.  -EINVAL when its value is
 * bad. */
static int parse_param(const cJSON *item, unsigned which, struct proto_request *req, const cJSON **mapping)
{
        double v;

        switch (which) {
        case P_PID:
                if (protoparam_integer(item, 1, INT_MAX, &v) < 0)
                        return -EINVAL;
                req->pid = req->caller_pid = (pid_t)v;
                return 0;
        case P_START:
                if (protoparam_integer(item, 0, 9007199254740992.0, &v) < 0)
                        return -EINVAL;
                req->start_time = (uint64_t)v;
                req->has_start_time = true;
                return 0;
        case P_TIMEOUT:
                if (protoparam_integer(item, 0, 4294967295.0, &v) < 0)
                        return -EINVAL;
                req->timeout_ms = (uint32_t)v;
                req->has_timeout = true;
                return 0;
        case P_MAPPING:
                *mapping = item;
                return 0;
        case P_LEASE_MS:
        case P_LEASE_CLOSE:
                return protoparam_lease(item, &req->lease) < 0 ? -EINVAL : 0;
        case P_FORCE:
                return protoparam_force(item, &req->force);
        default:
                return -EINVAL;
        }
}

int proto_parse_request(const struct proto_call *call, unsigned max_pairs,
                        struct proto_request *ret_req, cJSON **ret_reply)
{
        struct proto_request req = { 0 };
        unsigned allowed = allowed_params(call->method);
        bool have_pid = false;
        const cJSON *item, *mapping = NULL;
        int r;

        if (call->parameters)
                cJSON_ArrayForEach(item, call->parameters) {
                        unsigned which = param_flag(item->string);
                        /* "?" types in Varlink may be null: null means absent. */
                        if (!(which & allowed) || proto_key_repeated(call->parameters, item) ||
                            (!(cJSON_IsNull(item) && which != P_PID) && parse_param(item, which, &req, &mapping) < 0)) {
                                *ret_reply = proto_invalid_parameter(item->string);
                                r = -EINVAL;
                                goto fail;
                        }
                        have_pid = have_pid || which == P_PID;
                }
        if (!have_pid) {
                *ret_reply = proto_invalid_parameter("pid");
                r = -EINVAL;
                goto fail;
        }
        if (mapping) {
                r = protoparam_mapping(mapping, req.pid, call->method, max_pairs, &req.pairs, &req.n_pairs,
                                       ret_reply);
                if (r < 0)
                        goto fail;
        }
        *ret_req = req;
        return 0;
fail:
        proto_request_free(&req);
        if (r == -ENOMEM && !*ret_reply)
                *ret_reply = proto_invalid_parameter("gpu_mapping");
        return r == -ENOMEM ? -EINVAL : r;
}

void proto_request_free(struct proto_request *req)
{
        free(req->pairs);
        req->pairs = NULL;
        req->n_pairs = 0;
}

/* ---- groups ---------------------------------------------------------------- */

/* {"pid": P, "start_time": T?} of a group's pids into *r: 0 or -EINVAL. */
static int parse_pid_ref(const cJSON *ref, struct proto_pid_ref *r)
{
        const cJSON *item;
        bool have_pid = false;
        double v;

        if (!cJSON_IsObject(ref))
                return -EINVAL;
        cJSON_ArrayForEach(item, ref) {
                if (proto_key_repeated(ref, item))
                        return -EINVAL;
                if (strcmp(item->string, "pid") == 0) {
                        if (protoparam_integer(item, 1, INT_MAX, &v) < 0)
                                return -EINVAL;
                        r->pid = (pid_t)v;
                        have_pid = true;
                } else if (strcmp(item->string, "start_time") == 0) {
                        if (cJSON_IsNull(item))
                                continue;
                        if (protoparam_integer(item, 0, 9007199254740992.0, &v) < 0)
                                return -EINVAL;
                        r->start_time = (uint64_t)v;
                        r->has_start_time = true;
                } else {
                        return -EINVAL;
                }
        }
        return have_pid ? 0 : -EINVAL;
}

static int parse_pids(const cJSON *arr, unsigned max_members, struct proto_group_request *req,
                      cJSON **ret_reply)
{
        const cJSON *ref;
        unsigned n = 0;

        if (!cJSON_IsArray(arr))
                goto bad;
        cJSON_ArrayForEach(ref, arr)
                n++;
        if (n == 0)
                goto bad;
        if (n > max_members) {
                cJSON *p = cJSON_CreateObject();
                if (p) {
                        cJSON_AddNumberToObject(p, "limit", max_members);
                        cJSON_AddNumberToObject(p, "members", n);
                }
                *ret_reply = proto_error_new(CUDACKPT_ERROR_GROUP_TOO_LARGE, p);
                return -E2BIG;
        }
        req->pids = calloc(n, sizeof(*req->pids));
        if (!req->pids)
                goto bad;
        cJSON_ArrayForEach(ref, arr) {
                struct proto_pid_ref *r = &req->pids[req->n_pids];
                if (parse_pid_ref(ref, r) < 0)
                        goto bad;
                for (unsigned i = 0; i < req->n_pids; i++)
                        if (req->pids[i].pid == r->pid)
                                goto bad; /* a member named twice */
                req->n_pids++;
        }
        return 0;
bad:
        *ret_reply = proto_invalid_parameter("selector");
        return -EINVAL;
}

/* A cgroup v2 path as /proc/PID/cgroup writes it (common/cgroup-path.h);
 * a trailing slash is dropped. */
static int parse_cgroup(const cJSON *item, struct proto_group_request *req)
{
        const char *s = cJSON_IsString(item) ? item->valuestring : NULL;
        size_t n;

        if (!s || cgroup_path_check(s, &n) < 0)
                return -EINVAL;
        req->cgroup = strndup(s, n);
        return req->cgroup ? 0 : -EINVAL;
}

static int parse_selector(const cJSON *sel, unsigned max_members, struct proto_group_request *req,
                          cJSON **ret_reply)
{
        const cJSON *item;
        unsigned given = 0;
        double v;

        if (!cJSON_IsObject(sel))
                goto bad;
        cJSON_ArrayForEach(item, sel) {
                if (proto_key_repeated(sel, item))
                        goto bad;
                if (cJSON_IsNull(item))
                        continue;
                if (++given > 1)
                        goto bad;
                if (strcmp(item->string, "pids") == 0) {
                        int r = parse_pids(item, max_members, req, ret_reply);
                        req->kind = PROTO_SELECT_PIDS;
                        if (r < 0)
                                return r;
                } else if (strcmp(item->string, "cgroup") == 0) {
                        req->kind = PROTO_SELECT_CGROUP;
                        if (parse_cgroup(item, req) < 0)
                                goto bad;
                } else if (strcmp(item->string, "tree") == 0) {
                        req->kind = PROTO_SELECT_TREE;
                        if (protoparam_integer(item, 1, INT_MAX, &v) < 0)
                                goto bad;
                        req->tree = (pid_t)v;
                } else
                        goto bad;
        }
        if (given != 1)
                goto bad;
        return 0;
bad:
        *ret_reply = proto_invalid_parameter("selector");
        return -EINVAL;
}

/* One parameter of a group call of method m other than its selector into
 * req: false when it is not one m takes, or its value is bad. */
static bool parse_group_param(const cJSON *item, enum proto_method m, unsigned max_pairs,
                              struct proto_group_request *req)
{
        const bool takes_timeout = m == PROTO_LOCK_GROUP || m == PROTO_SUSPEND_GROUP;
        const bool takes_mapping = m == PROTO_RESTORE_GROUP || m == PROTO_RESUME_GROUP;
        /* A RestoreGroup's lease is undone by checkpointing its members
         * again (lease.c): a restore held from its first driver call. */
        const bool takes_lease = takes_timeout || m == PROTO_RESTORE_GROUP;
        cJSON *err = NULL;
        double v;
        int r;

        if (strcmp(item->string, "timeout_ms") == 0 && takes_timeout) {
                if (cJSON_IsNull(item))
                        return true;
                if (protoparam_integer(item, 0, 4294967295.0, &v) < 0)
                        return false;
                req->timeout_ms = (uint32_t)v;
                req->has_timeout = true;
                return true;
        }
        if (takes_lease && (r = protoparam_lease(item, &req->lease)) != 0)
                return r > 0;
        if (strcmp(item->string, "gpu_mapping") == 0 && takes_mapping) {
                if (cJSON_IsNull(item))
                        return true;
                if (protoparam_mapping(item, 0, m, max_pairs, &req->pairs, &req->n_pairs, &err) == 0)
                        return true;
                cJSON_Delete(err); /* a group's mapping error names no pid */
                return false;
        }
        return takes_mapping && strcmp(item->string, "force") == 0 && protoparam_force(item, &req->force) == 0;
}

int proto_parse_group(const struct proto_call *call, unsigned max_pairs, unsigned max_members,
                      struct proto_group_request *ret_req, cJSON **ret_reply)
{
        struct proto_group_request req = { .kind = PROTO_SELECT_ALL };
        const bool list = call->method == PROTO_LIST_PROCESSES || call->method == PROTO_WATCH;
        const cJSON *item, *selector = NULL;
        const char *bad = NULL;
        int r;

        *ret_reply = NULL;
        if (call->parameters)
                cJSON_ArrayForEach(item, call->parameters) {
                        if (proto_key_repeated(call->parameters, item)) {
                                bad = item->string;
                                break;
                        }
                        if (strcmp(item->string, "selector") == 0) {
                                if (!(cJSON_IsNull(item) && list))
                                        selector = item;
                        } else if (!parse_group_param(item, call->method, max_pairs, &req)) {
                                bad = item->string;
                                break;
                        }
                }
        if (bad || (!selector && !list)) {
                *ret_reply = proto_invalid_parameter(bad ? bad : "selector");
                r = -EINVAL;
                goto fail;
        }
        if (selector) {
                r = parse_selector(selector, max_members, &req, ret_reply);
                if (r < 0)
                        goto fail;
        }
        *ret_req = req;
        return 0;
fail:
        proto_group_request_free(&req);
        return r;
}

/* The value of other ("lease_ms" or "secret") into *ret_ms or *ret_secret;
 * false when it is not one. */
static bool parse_lease_other(const cJSON *item, uint32_t *ret_ms, const char **ret_secret)
{
        double v;

        if (strcmp(item->string, "lease_ms") == 0) {
                if (protoparam_integer(item, 1, 4294967295.0, &v) < 0)
                        return false;
                *ret_ms = (uint32_t)v;
                return true;
        }
        if (!cJSON_IsString(item) || strlen(item->valuestring) > 256)
                return false;
        *ret_secret = item->valuestring;
        return true;
}

/* The parameters of the lease calls: "lease" and, unless other is NULL,
 * the parameter it names; both required, nothing else allowed. */
static int parse_lease_params(const struct proto_call *call, const char *other, uint64_t *ret_id,
                              uint32_t *ret_ms, const char **ret_secret, cJSON **ret_reply)
{
        bool have_id = false, have_other = !other;
        const cJSON *item;
        double v;

        if (call->parameters)
                cJSON_ArrayForEach(item, call->parameters) {
                        if (proto_key_repeated(call->parameters, item))
                                goto bad;
                        if (strcmp(item->string, "lease") == 0 && protoparam_integer(item, 1, 9007199254740992.0, &v) == 0) {
                                *ret_id = (uint64_t)v;
                                have_id = true;
                        } else if (other && strcmp(item->string, other) == 0 &&
                                   parse_lease_other(item, ret_ms, ret_secret)) {
                                have_other = true;
                        } else {
                        bad:
                                *ret_reply = proto_invalid_parameter(item->string);
                                return -EINVAL;
                        }
                }
        if (!have_id || !have_other) {
                *ret_reply = proto_invalid_parameter(have_id ? other : "lease");
                return -EINVAL;
        }
        return 0;
}

int proto_parse_lease_call(const struct proto_call *call, uint64_t *ret_id, uint32_t *ret_ms, cJSON **ret_reply)
{
        const char *secret;

        *ret_ms = 0;
        return parse_lease_params(call, call->method == PROTO_RENEW_LEASE ? "lease_ms" : NULL, ret_id, ret_ms,
                                  &secret, ret_reply);
}

int proto_parse_claim_lease(const struct proto_call *call, uint64_t *ret_id, const char **ret_secret,
                            cJSON **ret_reply)
{
        uint32_t ms;

        *ret_secret = NULL;
        return parse_lease_params(call, "secret", ret_id, &ms, ret_secret, ret_reply);
}

cJSON *proto_unknown_gpu(pid_t pid, enum proto_method m, const CUuuid *u)
{
        char text[UUID_STRING_MAX];
        cJSON *p = cJSON_CreateObject();

        uuid_format(u, text);
        if (p) {
                if (pid > 0)
                        cJSON_AddNumberToObject(p, "pid", pid);
                cJSON_AddStringToObject(p, "method", proto_method_name(m));
                cJSON_AddStringToObject(p, "reason", "no GPU with this UUID on this machine");
                cJSON_AddStringToObject(p, "uuid", text);
        }
        return proto_error_new(CUDACKPT_ERROR_INVALID_GPU_MAPPING, p);
}

void proto_group_request_free(struct proto_group_request *req)
{
        free(req->pids);
        free(req->cgroup);
        free(req->pairs);
        *req = (struct proto_group_request){ 0 };
}
