/* protomsg.c: Varlink messages with cJSON: the call object, strictly
 * parsed, the method table, and replies and errors (see protomsg.h).
 *
 * cJSON's plain getters compare keys case-insensitively, so every key is
 * compared with strcmp(). */
#include "varlink/protomsg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudackpt/protocol.h"

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
        [PROTO_LIST_GPUS] = "ListGpus",
        [PROTO_START_JOB] = "StartJob",
        [PROTO_SAVE_JOB] = "SaveJob",
        [PROTO_RESTORE_JOB] = "RestoreJob",
        [PROTO_LIST_SAVES] = "ListSaves",
        [PROTO_REMOVE_SAVE] = "RemoveSave",
        [PROTO_LIST_JOBS] = "ListJobs",
        [PROTO_PASS_BARRIER] = "PassBarrier",
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

bool proto_key_repeated(const cJSON *obj, const cJSON *item)
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

/* The JSON of a message: valid UTF-8 without NULs, one object and
 * nothing after it but white space.  0, or -EPROTO with *ret_reply set. */
static int parse_object(const char *msg, size_t len, cJSON **ret_root, cJSON **ret_reply)
{
        const char *end = NULL;
        cJSON *root;

        if (!utf8_valid((const unsigned char *)msg, len)) {
                *ret_reply = invalid_request("message is not valid UTF-8");
                return -EPROTO;
        }
        if (has_escaped_nul(msg, len)) {
                *ret_reply = invalid_request("a string holds a NUL character (\\u0000)");
                return -EPROTO;
        }
        root = cJSON_ParseWithLengthOpts(msg, len, &end, 0);
        if (!root) {
                *ret_reply = invalid_request("message is not valid JSON");
                return -EPROTO;
        }
        /* Anything after the JSON value other than white space is garbage. */
        while (end && end < msg + len && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r'))
                end++;
        if (end && end < msg + len && *end != '\0') {
                *ret_reply = invalid_request("garbage after the JSON value");
                cJSON_Delete(root);
                return -EPROTO;
        }
        if (!cJSON_IsObject(root)) {
                *ret_reply = invalid_request("message is not a JSON object");
                cJSON_Delete(root);
                return -EPROTO;
        }
        *ret_root = root;
        return 0;
}

/* One key of the call object into call (*ret_method for "method").  NULL,
 * or the reason it is refused. */
static const char *parse_call_key(const cJSON *item, struct proto_call *call, const cJSON **ret_method)
{
        if (proto_key_repeated(call->root, item))
                return "a key of the call object is given twice";
        if (strcmp(item->string, "method") == 0) {
                if (!cJSON_IsString(item))
                        return "\"method\" must be a string";
                *ret_method = item;
        } else if (strcmp(item->string, "parameters") == 0) {
                if (cJSON_IsNull(item))
                        return NULL;
                if (!cJSON_IsObject(item))
                        return "\"parameters\" must be an object";
                call->parameters = item;
        } else if (strcmp(item->string, "oneway") == 0 || strcmp(item->string, "more") == 0 ||
                   strcmp(item->string, "upgrade") == 0) {
                if (!cJSON_IsBool(item))
                        return "\"oneway\", \"more\" and \"upgrade\" must be booleans";
                if (item->string[0] == 'o')
                        call->oneway = cJSON_IsTrue(item);
                else if (item->string[0] == 'm')
                        call->more = cJSON_IsTrue(item);
                else if (cJSON_IsTrue(item))
                        return "connection upgrades are not supported";
        } else {
                return "unknown key in the call object";
        }
        return NULL;
}

int proto_parse_call(const char *msg, size_t len, struct proto_call *ret_call, cJSON **ret_reply)
{
        struct proto_call call = { 0 };
        const cJSON *item, *method = NULL;
        const char *why = NULL;
        int r;

        r = parse_object(msg, len, &call.root, ret_reply);
        if (r < 0)
                return r;
        cJSON_ArrayForEach(item, call.root) {
                why = parse_call_key(item, &call, &method);
                if (why)
                        break;
        }
        if (!why && !method)
                why = "the call object has no \"method\"";
        if (!why && call.oneway && call.more)
                why = "\"oneway\" and \"more\" exclude each other";
        if (why) {
                *ret_reply = invalid_request(why);
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

void proto_call_free(struct proto_call *call)
{
        cJSON_Delete(call->root);
        call->root = NULL;
}
