/* proto.c: strict Varlink parsing and reply construction with cJSON.
 *
 * cJSON's plain getters compare keys case-insensitively and its numbers are
 * doubles, so every key is compared with strcmp() and every integer checked
 * for being integral and in range. */
#include "proto.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudackpt/protocol.h"
#include "cgroup-path.h"
#include "json.h"
#include "uuid.h"

#define SERVICE_INTERFACE "org.varlink.service"

static const char *const method_names[PROTO_METHODS] = {
        [PROTO_GET_STATE] = "GetState",
        [PROTO_GET_RESTORE_THREAD_ID] = "GetRestoreThreadId",
        [PROTO_LOCK] = "Lock",
        [PROTO_CHECKPOINT] = "Checkpoint",
        [PROTO_RESTORE] = "Restore",
        [PROTO_UNLOCK] = "Unlock",
        [PROTO_SUSPEND] = "Suspend",
        [PROTO_RESUME] = "Resume",
        [PROTO_LOCK_GROUP] = "LockGroup",
        [PROTO_CHECKPOINT_GROUP] = "CheckpointGroup",
        [PROTO_RESTORE_GROUP] = "RestoreGroup",
        [PROTO_UNLOCK_GROUP] = "UnlockGroup",
        [PROTO_SUSPEND_GROUP] = "SuspendGroup",
        [PROTO_RESUME_GROUP] = "ResumeGroup",
        [PROTO_LIST_PROCESSES] = "ListProcesses",
        [PROTO_RELEASE_LEASE] = "ReleaseLease",
        [PROTO_RENEW_LEASE] = "RenewLease",
        [PROTO_CLAIM_LEASE] = "ClaimLease",
        [PROTO_WATCH] = "Watch",
        [PROTO_GET_METRICS] = "GetMetrics",
        [PROTO_GET_STATUS] = "GetStatus",
        [PROTO_GET_INFO] = "GetInfo",
        [PROTO_GET_INTERFACE_DESCRIPTION] = "GetInterfaceDescription",
};

const char *proto_method_name(enum proto_method m)
{
        return m < PROTO_METHODS ? method_names[m] : "?";
}

bool proto_method_read_only(enum proto_method m)
{
        return m == PROTO_GET_STATE || m == PROTO_GET_RESTORE_THREAD_ID || m == PROTO_LIST_PROCESSES;
}

bool proto_method_is_group(enum proto_method m)
{
        return m >= PROTO_LOCK_GROUP && m <= PROTO_RESUME_GROUP;
}

enum proto_method proto_group_single(enum proto_method m)
{
        switch (m) {
        case PROTO_LOCK_GROUP:
                return PROTO_LOCK;
        case PROTO_CHECKPOINT_GROUP:
                return PROTO_CHECKPOINT;
        case PROTO_RESTORE_GROUP:
                return PROTO_RESTORE;
        case PROTO_UNLOCK_GROUP:
                return PROTO_UNLOCK;
        case PROTO_SUSPEND_GROUP:
                return PROTO_SUSPEND;
        case PROTO_RESUME_GROUP:
                return PROTO_RESUME;
        default:
                return m;
        }
}

const char *proto_state_string(int state, char *buf, size_t len)
{
        static const char *const words[] = { CUDACKPT_STATE_RUNNING, CUDACKPT_STATE_LOCKED,
                                             CUDACKPT_STATE_CHECKPOINTED, CUDACKPT_STATE_FAILED };

        if (state >= 0 && state < 4)
                return words[state];
        snprintf(buf, len, "unknown-%d", state);
        return buf;
}

/* {"error": name, "parameters": params}, or without "error" when name is NULL. */
static cJSON *message_new(const char *name, cJSON *params)
{
        cJSON *m = cJSON_CreateObject();

        if (!params)
                params = cJSON_CreateObject();
        if (!m || !params) {
                cJSON_Delete(m);
                cJSON_Delete(params);
                return NULL;
        }
        if (name)
                cJSON_AddStringToObject(m, "error", name);
        cJSON_AddItemToObject(m, "parameters", params);
        return m;
}

cJSON *proto_reply_new(cJSON *params)
{
        return message_new(NULL, params);
}

cJSON *proto_error_new(const char *name, cJSON *params)
{
        return message_new(name, params);
}

cJSON *proto_reply_continues(cJSON *params)
{
        cJSON *m = message_new(NULL, params);

        if (m)
                cJSON_AddTrueToObject(m, "continues");
        return m;
}

cJSON *proto_invalid_parameter(const char *parameter)
{
        cJSON *p = cJSON_CreateObject();

        if (p)
                cJSON_AddStringToObject(p, "parameter", parameter);
        return proto_error_new(CUDACKPT_VARLINK_INVALID_PARAMETER, p);
}

static cJSON *invalid_request(const char *reason)
{
        cJSON *p = cJSON_CreateObject();

        if (p)
                cJSON_AddStringToObject(p, "reason", reason);
        return proto_error_new(CUDACKPT_ERROR_INVALID_REQUEST, p);
}

char *proto_serialize(const cJSON *msg, size_t *ret_len)
{
        char *s = cJSON_PrintUnformatted(msg);
        size_t n;

        if (!s)
                return NULL;
        n = strlen(s);
        /* cJSON's buffer is exactly strlen+1: its NUL is the Varlink terminator. */
        *ret_len = n + 1;
        return s;
}

static bool has_duplicate_key(const cJSON *obj, const cJSON *item)
{
        for (const cJSON *prev = obj->child; prev && prev != item; prev = prev->next)
                if (strcmp(prev->string, item->string) == 0)
                        return true;
        return false;
}

static int lookup_method(const char *full, enum proto_method *ret, cJSON **ret_reply)
{
        const char *dot = strrchr(full, '.');
        size_t ilen;
        int first, last;

        if (!dot || dot == full || dot[1] == '\0') {
                *ret_reply = invalid_request("\"method\" must be an interface name, a dot and a method name");
                return -EPROTO;
        }
        ilen = (size_t)(dot - full);
        if (ilen == strlen(CUDACKPT_INTERFACE) && strncmp(full, CUDACKPT_INTERFACE, ilen) == 0) {
                first = 0;
                last = PROTO_INTERFACE_METHODS;
        } else if (ilen == strlen(SERVICE_INTERFACE) && strncmp(full, SERVICE_INTERFACE, ilen) == 0) {
                first = PROTO_INTERFACE_METHODS;
                last = PROTO_METHODS;
        } else {
                cJSON *p = cJSON_CreateObject();
                char *iface = strndup(full, ilen);
                if (p && iface)
                        cJSON_AddStringToObject(p, "interface", iface);
                free(iface);
                *ret_reply = proto_error_new(CUDACKPT_VARLINK_INTERFACE_NOT_FOUND, p);
                return -ENOENT;
        }
        for (int m = first; m < last; m++)
                if (strcmp(dot + 1, method_names[m]) == 0) {
                        *ret = (enum proto_method)m;
                        return 0;
                }
        cJSON *p = cJSON_CreateObject();
        if (p)
                cJSON_AddStringToObject(p, "method", full);
        *ret_reply = proto_error_new(CUDACKPT_VARLINK_METHOD_NOT_FOUND, p);
        return -ENOENT;
}

/* Whether a JSON string escapes a NUL (\u0000): cJSON would cut the string
 * there, so "GetState\u0000x" would read as "GetState".  A backslash run of
 * odd length ends in an escape; an even one is escaped backslashes. */
static bool has_escaped_nul(const char *msg, size_t len)
{
        for (size_t i = 0; i < len; i++) {
                size_t run = 0;
                if (msg[i] != '\\')
                        continue;
                while (i + run < len && msg[i + run] == '\\')
                        run++;
                i += run;
                if (run % 2 == 1 && len - i >= 5 && memcmp(msg + i, "u0000", 5) == 0)
                        return true;
        }
        return false;
}

/* Whether s is well-formed UTF-8 (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF).  Replies quote names the client sent;
 * they must stay valid JSON for every client. */
static bool utf8_valid(const unsigned char *s, size_t len)
{
        size_t i = 0;

        while (i < len) {
                unsigned char c = s[i];
                size_t n;
                unsigned char lo = 0x80, hi = 0xBF; /* bounds of the second byte */

                if (c < 0x80) {
                        i++;
                        continue;
                }
                if (c >= 0xC2 && c <= 0xDF)
                        n = 1;
                else if (c >= 0xE0 && c <= 0xEF) {
                        n = 2;
                        if (c == 0xE0)
                                lo = 0xA0; /* overlong */
                        else if (c == 0xED)
                                hi = 0x9F; /* surrogates */
                } else if (c >= 0xF0 && c <= 0xF4) {
                        n = 3;
                        if (c == 0xF0)
                                lo = 0x90; /* overlong */
                        else if (c == 0xF4)
                                hi = 0x8F; /* above U+10FFFF */
                } else
                        return false;
                if (len - i <= n || s[i + 1] < lo || s[i + 1] > hi)
                        return false;
                for (size_t k = 2; k <= n; k++)
                        if ((s[i + k] & 0xC0) != 0x80)
                                return false;
                i += n + 1;
        }
        return true;
}

int proto_parse_call(const char *msg, size_t len, struct proto_call *ret_call, cJSON **ret_reply)
{
        struct proto_call call = { 0 };
        const cJSON *item, *method = NULL;
        int r;

        const char *end = NULL;

        if (!utf8_valid((const unsigned char *)msg, len)) {
                *ret_reply = invalid_request("message is not valid UTF-8");
                return -EPROTO;
        }
        if (has_escaped_nul(msg, len)) {
                *ret_reply = invalid_request("a string holds a NUL character (\\u0000)");
                return -EPROTO;
        }

        call.root = cJSON_ParseWithLengthOpts(msg, len, &end, 0);
        if (!call.root) {
                *ret_reply = invalid_request("message is not valid JSON");
                return -EPROTO;
        }
        /* Anything after the JSON value other than white space is garbage. */
        while (end && end < msg + len && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r'))
                end++;
        if (end && end < msg + len && *end != '\0') {
                *ret_reply = invalid_request("garbage after the JSON value");
                r = -EPROTO;
                goto fail;
        }
        if (!cJSON_IsObject(call.root)) {
                *ret_reply = invalid_request("message is not a JSON object");
                r = -EPROTO;
                goto fail;
        }
        cJSON_ArrayForEach(item, call.root) {
                if (has_duplicate_key(call.root, item)) {
                        *ret_reply = invalid_request("a key of the call object is given twice");
                        r = -EPROTO;
                        goto fail;
                }
                if (strcmp(item->string, "method") == 0) {
                        if (!cJSON_IsString(item)) {
                                *ret_reply = invalid_request("\"method\" must be a string");
                                r = -EPROTO;
                                goto fail;
                        }
                        method = item;
                } else if (strcmp(item->string, "parameters") == 0) {
                        if (cJSON_IsNull(item))
                                continue;
                        if (!cJSON_IsObject(item)) {
                                *ret_reply = invalid_request("\"parameters\" must be an object");
                                r = -EPROTO;
                                goto fail;
                        }
                        call.parameters = item;
                } else if (strcmp(item->string, "oneway") == 0 || strcmp(item->string, "more") == 0 ||
                           strcmp(item->string, "upgrade") == 0) {
                        if (!cJSON_IsBool(item)) {
                                *ret_reply = invalid_request("\"oneway\", \"more\" and \"upgrade\" must be booleans");
                                r = -EPROTO;
                                goto fail;
                        }
                        if (item->string[0] == 'o')
                                call.oneway = cJSON_IsTrue(item);
                        else if (item->string[0] == 'm')
                                call.more = cJSON_IsTrue(item);
                        else if (cJSON_IsTrue(item)) {
                                *ret_reply = invalid_request("connection upgrades are not supported");
                                r = -EPROTO;
                                goto fail;
                        }
                } else {
                        *ret_reply = invalid_request("unknown key in the call object");
                        r = -EPROTO;
                        goto fail;
                }
        }
        if (!method) {
                *ret_reply = invalid_request("the call object has no \"method\"");
                r = -EPROTO;
                goto fail;
        }
        if (call.oneway && call.more) {
                *ret_reply = invalid_request("\"oneway\" and \"more\" exclude each other");
                r = -EPROTO;
                goto fail;
        }
        r = lookup_method(method->valuestring, &call.method, ret_reply);
        if (r < 0)
                goto fail;
        *ret_call = call;
        return 0;
fail:
        cJSON_Delete(call.root);
        return r;
}

void proto_call_done(struct proto_call *call)
{
        cJSON_Delete(call->root);
        call->root = NULL;
}

static int get_integer(const cJSON *item, double min, double max, double *ret)
{
        if (!json_is_integer(item, min, max))
                return -EINVAL;
        *ret = item->valuedouble;
        return 0;
}

static cJSON *mapping_error(const struct proto_request *req, enum proto_method m,
                            const char *reason, const char *uuid)
{
        cJSON *p = cJSON_CreateObject();

        if (p) {
                cJSON_AddNumberToObject(p, "pid", req->pid);
                cJSON_AddStringToObject(p, "method", proto_method_name(m));
                cJSON_AddStringToObject(p, "reason", reason);
                if (uuid)
                        cJSON_AddStringToObject(p, "uuid", uuid);
        }
        return proto_error_new(CUDACKPT_ERROR_INVALID_GPU_MAPPING, p);
}

static int parse_mapping(const cJSON *obj, enum proto_method m, unsigned max_pairs,
                         struct proto_request *req, cJSON **ret_reply)
{
        const cJSON *item;
        unsigned n = 0;

        if (!cJSON_IsObject(obj)) {
                *ret_reply = proto_invalid_parameter("gpu_mapping");
                return -EINVAL;
        }
        cJSON_ArrayForEach(item, obj) {
                if (!cJSON_IsString(item)) {
                        *ret_reply = proto_invalid_parameter("gpu_mapping");
                        return -EINVAL;
                }
                n++;
        }
        if (n == 0)
                return 0;
        if (n > max_pairs) {
                *ret_reply = mapping_error(req, m, "the mapping has more entries than the daemon accepts", NULL);
                return -EINVAL;
        }
        req->pairs = calloc(n, sizeof(*req->pairs));
        if (!req->pairs)
                return -ENOMEM;
        cJSON_ArrayForEach(item, obj) {
                CUcheckpointGpuPair *pair = &req->pairs[req->n_pairs];
                if (uuid_parse(item->string, &pair->oldUuid) < 0) {
                        *ret_reply = mapping_error(req, m, "not a GPU UUID", item->string);
                        return -EINVAL;
                }
                if (uuid_parse(item->valuestring, &pair->newUuid) < 0) {
                        *ret_reply = mapping_error(req, m, "not a GPU UUID", item->valuestring);
                        return -EINVAL;
                }
                /* Spellings differ, UUIDs must not: a GPU named twice on either
                 * side makes the mapping ambiguous. */
                for (unsigned i = 0; i < req->n_pairs; i++) {
                        if (uuid_equal(&req->pairs[i].oldUuid, &pair->oldUuid)) {
                                *ret_reply = mapping_error(req, m, "GPU named twice among the old GPUs", item->string);
                                return -EINVAL;
                        }
                        if (uuid_equal(&req->pairs[i].newUuid, &pair->newUuid)) {
                                *ret_reply = mapping_error(req, m, "GPU named twice among the new GPUs", item->valuestring);
                                return -EINVAL;
                        }
                }
                req->n_pairs++;
        }
        return 0;
}

enum { P_PID = 1, P_START = 2, P_TIMEOUT = 4, P_MAPPING = 8, P_LEASE_MS = 16, P_LEASE_CLOSE = 32 };

/* lease_ms and lease_on_close, the same for single and group calls.  1 when
 * item is one of them (parsed into *lease), 0 when it is not, -EINVAL when
 * its value is bad. */
static int parse_lease_item(const cJSON *item, struct proto_lease *lease)
{
        double v;

        if (strcmp(item->string, "lease_ms") == 0) {
                if (cJSON_IsNull(item))
                        return 1;
                if (get_integer(item, 1, 4294967295.0, &v) < 0)
                        return -EINVAL;
                lease->ms = (uint32_t)v;
                lease->wanted = true;
                return 1;
        }
        if (strcmp(item->string, "lease_on_close") == 0) {
                if (cJSON_IsNull(item))
                        return 1;
                if (!cJSON_IsBool(item))
                        return -EINVAL;
                lease->on_close = cJSON_IsTrue(item);
                lease->wanted = lease->wanted || lease->on_close;
                return 1;
        }
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
                return P_PID | P_START | P_MAPPING;
        default:
                return P_PID | P_START;
        }
}

int proto_parse_request(const struct proto_call *call, unsigned max_pairs,
                        struct proto_request *ret_req, cJSON **ret_reply)
{
        struct proto_request req = { 0 };
        unsigned allowed = allowed_params(call->method);
        bool have_pid = false;
        const cJSON *item, *mapping = NULL;
        double v;
        int r;

        if (call->parameters)
                cJSON_ArrayForEach(item, call->parameters) {
                        unsigned which = strcmp(item->string, "pid") == 0           ? P_PID
                                         : strcmp(item->string, "start_time") == 0  ? P_START
                                         : strcmp(item->string, "timeout_ms") == 0  ? P_TIMEOUT
                                         : strcmp(item->string, "gpu_mapping") == 0 ? P_MAPPING
                                         : strcmp(item->string, "lease_ms") == 0    ? P_LEASE_MS
                                         : strcmp(item->string, "lease_on_close") == 0 ? P_LEASE_CLOSE
                                                                                    : 0;
                        if (!(which & allowed) || has_duplicate_key(call->parameters, item)) {
                                *ret_reply = proto_invalid_parameter(item->string);
                                r = -EINVAL;
                                goto fail;
                        }
                        /* "?" types in Varlink may be null: null means absent. */
                        if (cJSON_IsNull(item) && which != P_PID)
                                continue;
                        switch (which) {
                        case P_PID:
                                if (get_integer(item, 1, INT_MAX, &v) < 0)
                                        goto bad;
                                req.pid = req.caller_pid = (pid_t)v;
                                have_pid = true;
                                break;
                        case P_START:
                                if (get_integer(item, 0, 9007199254740992.0, &v) < 0)
                                        goto bad;
                                req.start_time = (uint64_t)v;
                                req.has_start_time = true;
                                break;
                        case P_TIMEOUT:
                                if (get_integer(item, 0, 4294967295.0, &v) < 0)
                                        goto bad;
                                req.timeout_ms = (uint32_t)v;
                                req.has_timeout = true;
                                break;
                        case P_MAPPING:
                                mapping = item; /* checked once pid is known */
                                break;
                        case P_LEASE_MS:
                        case P_LEASE_CLOSE:
                                if (parse_lease_item(item, &req.lease) < 0)
                                        goto bad;
                                break;
                        }
                        continue;
                bad:
                        *ret_reply = proto_invalid_parameter(item->string);
                        r = -EINVAL;
                        goto fail;
                }
        if (!have_pid) {
                *ret_reply = proto_invalid_parameter("pid");
                r = -EINVAL;
                goto fail;
        }
        if (mapping) {
                r = parse_mapping(mapping, call->method, max_pairs, &req, ret_reply);
                if (r < 0)
                        goto fail;
        }
        *ret_req = req;
        return 0;
fail:
        proto_request_done(&req);
        if (r == -ENOMEM && !*ret_reply)
                *ret_reply = proto_invalid_parameter("gpu_mapping");
        return r == -ENOMEM ? -EINVAL : r;
}

void proto_request_done(struct proto_request *req)
{
        free(req->pairs);
        req->pairs = NULL;
        req->n_pairs = 0;
}

/* ---- groups ---------------------------------------------------------------- */

static int parse_pids(const cJSON *arr, unsigned max_members, struct proto_group_request *req,
                      cJSON **ret_reply)
{
        const cJSON *ref, *item;
        unsigned n = 0;
        double v;

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
                bool have_pid = false;

                if (!cJSON_IsObject(ref))
                        goto bad;
                cJSON_ArrayForEach(item, ref) {
                        if (has_duplicate_key(ref, item))
                                goto bad;
                        if (strcmp(item->string, "pid") == 0) {
                                if (get_integer(item, 1, INT_MAX, &v) < 0)
                                        goto bad;
                                r->pid = (pid_t)v;
                                have_pid = true;
                        } else if (strcmp(item->string, "start_time") == 0) {
                                if (cJSON_IsNull(item))
                                        continue;
                                if (get_integer(item, 0, 9007199254740992.0, &v) < 0)
                                        goto bad;
                                r->start_time = (uint64_t)v;
                                r->has_start_time = true;
                        } else
                                goto bad;
                }
                if (!have_pid)
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
                if (has_duplicate_key(sel, item))
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
                        if (get_integer(item, 1, INT_MAX, &v) < 0)
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

int proto_parse_group(const struct proto_call *call, unsigned max_pairs, unsigned max_members,
                      struct proto_group_request *ret_req, cJSON **ret_reply)
{
        struct proto_group_request req = { .kind = PROTO_SELECT_ALL };
        const bool list = call->method == PROTO_LIST_PROCESSES || call->method == PROTO_WATCH;
        const bool takes_timeout = call->method == PROTO_LOCK_GROUP || call->method == PROTO_SUSPEND_GROUP;
        const bool takes_mapping = call->method == PROTO_RESTORE_GROUP || call->method == PROTO_RESUME_GROUP;
        const cJSON *item, *selector = NULL;
        const char *bad = NULL;
        double v;
        int r;

        *ret_reply = NULL;
        if (call->parameters)
                cJSON_ArrayForEach(item, call->parameters) {
                        if (has_duplicate_key(call->parameters, item)) {
                                bad = item->string;
                                break;
                        }
                        if (strcmp(item->string, "selector") == 0) {
                                if (!(cJSON_IsNull(item) && list))
                                        selector = item;
                        } else if (strcmp(item->string, "timeout_ms") == 0 && takes_timeout) {
                                if (cJSON_IsNull(item))
                                        continue;
                                if (get_integer(item, 0, 4294967295.0, &v) < 0) {
                                        bad = item->string;
                                        break;
                                }
                                req.timeout_ms = (uint32_t)v;
                                req.has_timeout = true;
                        } else if (takes_timeout && parse_lease_item(item, &req.lease) != 0) {
                                if (parse_lease_item(item, &req.lease) < 0) {
                                        bad = item->string;
                                        break;
                                }
                        } else if (strcmp(item->string, "gpu_mapping") == 0 && takes_mapping) {
                                struct proto_request tmp = { 0 };
                                cJSON *err = NULL;
                                if (cJSON_IsNull(item))
                                        continue;
                                if (parse_mapping(item, call->method, max_pairs, &tmp, &err) < 0) {
                                        /* A group's mapping error names no pid. */
                                        cJSON_Delete(err);
                                        proto_request_done(&tmp);
                                        bad = item->string;
                                        break;
                                }
                                req.pairs = tmp.pairs;
                                req.n_pairs = tmp.n_pairs;
                        } else {
                                bad = item->string;
                                break;
                        }
                }
        if (bad) {
                *ret_reply = proto_invalid_parameter(bad);
                r = -EINVAL;
                goto fail;
        }
        if (!selector && !list) {
                *ret_reply = proto_invalid_parameter("selector");
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
        proto_group_request_done(&req);
        return r;
}

int proto_parse_lease_call(const struct proto_call *call, uint64_t *ret_id, uint32_t *ret_ms, cJSON **ret_reply)
{
        const bool renew = call->method == PROTO_RENEW_LEASE;
        bool have_id = false, have_ms = false;
        const cJSON *item;
        double v;

        *ret_ms = 0;
        if (call->parameters)
                cJSON_ArrayForEach(item, call->parameters) {
                        if (has_duplicate_key(call->parameters, item))
                                goto bad;
                        if (strcmp(item->string, "lease") == 0 && get_integer(item, 1, 9007199254740992.0, &v) == 0) {
                                *ret_id = (uint64_t)v;
                                have_id = true;
                        } else if (renew && strcmp(item->string, "lease_ms") == 0 &&
                                   get_integer(item, 1, 4294967295.0, &v) == 0) {
                                *ret_ms = (uint32_t)v;
                                have_ms = true;
                        } else {
                        bad:
                                *ret_reply = proto_invalid_parameter(item->string);
                                return -EINVAL;
                        }
                }
        if (!have_id || (renew && !have_ms)) {
                *ret_reply = proto_invalid_parameter(have_id ? "lease_ms" : "lease");
                return -EINVAL;
        }
        return 0;
}

int proto_parse_claim_lease(const struct proto_call *call, uint64_t *ret_id, const char **ret_secret,
                            cJSON **ret_reply)
{
        bool have_id = false;
        const cJSON *item;
        double v;

        *ret_secret = NULL;
        if (call->parameters)
                cJSON_ArrayForEach(item, call->parameters) {
                        if (has_duplicate_key(call->parameters, item))
                                goto bad;
                        if (strcmp(item->string, "lease") == 0 && get_integer(item, 1, 9007199254740992.0, &v) == 0) {
                                *ret_id = (uint64_t)v;
                                have_id = true;
                        } else if (strcmp(item->string, "secret") == 0 && cJSON_IsString(item) &&
                                   strlen(item->valuestring) <= 256) {
                                *ret_secret = item->valuestring;
                        } else {
                        bad:
                                *ret_reply = proto_invalid_parameter(item->string);
                                return -EINVAL;
                        }
                }
        if (!have_id || !*ret_secret) {
                *ret_reply = proto_invalid_parameter(have_id ? "secret" : "lease");
                return -EINVAL;
        }
        return 0;
}

void proto_group_request_done(struct proto_group_request *req)
{
        free(req->pids);
        free(req->cgroup);
        free(req->pairs);
        *req = (struct proto_group_request){ 0 };
}
