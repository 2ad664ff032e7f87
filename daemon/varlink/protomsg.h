/* protomsg.h: Varlink messages in and out: the methods the daemon serves,
 * the call object (parsed strictly: a violation means the peer does not
 * speak Varlink), replies and errors, and serialising them.  The
 * parameters of each method are proto.h's, above this room. */
#ifndef CUDACKPT_PROTOMSG_H
#define CUDACKPT_PROTOMSG_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

enum proto_method {
        PROTO_GET_STATE,
        PROTO_GET_RESTORE_THREAD_ID,
        PROTO_LOCK,
        PROTO_CHECKPOINT,
        PROTO_RESTORE,
        PROTO_UNLOCK,
        PROTO_SUSPEND,
        PROTO_RESUME,
        PROTO_PROCESS_METHODS, /* the ones above act on one process */
        PROTO_LOCK_GROUP = PROTO_PROCESS_METHODS,
        PROTO_CHECKPOINT_GROUP,
        PROTO_RESTORE_GROUP,
        PROTO_UNLOCK_GROUP,
        PROTO_SUSPEND_GROUP,
        PROTO_RESUME_GROUP,
        PROTO_LIST_PROCESSES,
        PROTO_RELEASE_LEASE,
        PROTO_RENEW_LEASE,
        PROTO_CLAIM_LEASE,
        PROTO_WATCH,
        PROTO_GET_METRICS,
        PROTO_GET_STATUS,
        PROTO_LIST_GPUS,
        PROTO_START_JOB,
        PROTO_SAVE_JOB,
        PROTO_RESTORE_JOB,
        PROTO_LIST_SAVES,
        PROTO_REMOVE_SAVE,
        PROTO_LIST_JOBS,
        PROTO_PASS_BARRIER,
        PROTO_INTERFACE_METHODS, /* the ones above are io.cudackpt.Process's */
        PROTO_GET_INFO = PROTO_INTERFACE_METHODS,
        PROTO_GET_INTERFACE_DESCRIPTION,
        PROTO_METHODS,
};

struct proto_call {
        cJSON *root;              /* owned: the whole message */
        enum proto_method method;
        const cJSON *parameters;  /* inside root; NULL when absent */
        bool oneway;              /* send no reply */
        bool more;                /* the peer accepts several replies (we send one) */
};

/* 0, or -EPROTO with *ret_reply set to the error to send before closing, or
 * -ENOENT/-EINVAL with *ret_reply set to a non-fatal error reply. */
int proto_parse_call(const char *msg, size_t len, struct proto_call *ret_call, cJSON **ret_reply);
void proto_call_free(struct proto_call *call);

bool proto_method_is_group(enum proto_method m);   /* LockGroup ... ResumeGroup */
/* The single-process method a group method repeats (Suspend for
 * SuspendGroup); m itself otherwise. */
enum proto_method proto_group_single(enum proto_method m);
/* {"parameters": params, "continues": true}: one reply of several. */
cJSON *proto_reply_continues(cJSON *params);

bool proto_method_read_only(enum proto_method m);
const char *proto_method_name(enum proto_method m); /* "Suspend" */

/* The state word for a driver state value; unknown values give "unknown-N". */
const char *proto_state_string(int state, char *buf, size_t len);

/* {"parameters": params} and {"error": name, "parameters": params}; both take
 * ownership of params (NULL means an empty object). */
cJSON *proto_reply_new(cJSON *params);
cJSON *proto_error_new(const char *name, cJSON *params);
cJSON *proto_invalid_parameter(const char *parameter);

/* Serialises msg with its NUL terminator; *ret_len counts the NUL. */
char *proto_serialize(const cJSON *msg, size_t *ret_len);

/* The interface description served by GetInterfaceDescription (the IDL file,
 * embedded at build time). */
extern const char proto_idl_text[];

/* Whether a key before item in obj has item's name (cJSON keeps both). */
bool proto_key_repeated(const cJSON *obj, const cJSON *item);

#endif
