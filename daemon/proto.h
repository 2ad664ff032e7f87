/* proto.h: Varlink messages in and out.
 *
 * Parsing is strict, in two layers.  proto_parse_call() checks the call
 * object itself (a violation there means the peer does not speak Varlink:
 * the error is sent and the connection closed).  proto_parse_request()
 * checks the parameters of an io.cudackpt.Process method (a violation
 * there is an ordinary error reply).  Nothing here touches sockets. */
#ifndef CUDACKPT_PROTO_H
#define CUDACKPT_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>
#include "cuda-api.h"

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

/* The lease a Lock or Suspend (single or group) asks for (lease.h). */
struct proto_lease {
        bool wanted;                /* lease_ms or lease_on_close given */
        uint32_t ms;                /* undo this long after the reply; 0 = no expiry */
        bool on_close;              /* undo when the connection closes */
        bool admitted;              /* the daemon counts it in its caller's lease
                                     * share until it is granted or not (lease.h) */
};

struct proto_request {
        pid_t pid;                  /* in the daemon's pid namespace once dispatched */
        pid_t caller_pid;           /* as the caller wrote it: what replies say */
        bool has_start_time;
        uint64_t start_time;
        bool has_timeout;
        uint32_t timeout_ms;
        unsigned n_pairs;
        CUcheckpointGpuPair *pairs; /* owned, n_pairs entries */
        uint64_t deadline_ns;       /* not on the wire: a group's lock deadline
                                     * (uv_hrtime()), 0 for none */
        struct proto_lease lease;   /* Lock, Suspend */
};

/* A group's selection: exactly one of the three. */
enum proto_selector_kind {
        PROTO_SELECT_ALL,    /* ListProcesses without a selector */
        PROTO_SELECT_PIDS,
        PROTO_SELECT_CGROUP,
        PROTO_SELECT_TREE,
};

struct proto_pid_ref {
        pid_t pid;
        bool has_start_time;
        uint64_t start_time;
};

struct proto_group_request {
        enum proto_selector_kind kind;
        struct proto_pid_ref *pids; /* owned, n_pids entries, no pid twice */
        unsigned n_pids;
        char *cgroup;               /* owned: "/" or "/a/b", no "." or ".." parts */
        pid_t tree;
        bool has_timeout;
        uint32_t timeout_ms;
        unsigned n_pairs;
        CUcheckpointGpuPair *pairs; /* owned */
        struct proto_lease lease;   /* LockGroup, SuspendGroup */
};

/* 0, or -EPROTO with *ret_reply set to the error to send before closing, or
 * -ENOENT/-EINVAL with *ret_reply set to a non-fatal error reply. */
int proto_parse_call(const char *msg, size_t len, struct proto_call *ret_call, cJSON **ret_reply);
void proto_call_done(struct proto_call *call);

/* 0, or -EINVAL with *ret_reply set to the error to send. */
int proto_parse_request(const struct proto_call *call, unsigned max_pairs,
                        struct proto_request *ret_req, cJSON **ret_reply);
void proto_request_done(struct proto_request *req);

/* The parameters of a group method or of ListProcesses.  0; -EINVAL with
 * *ret_reply set (InvalidParameter); -E2BIG when pids names more than
 * max_members (*ret_reply: GroupTooLarge). */
int proto_parse_group(const struct proto_call *call, unsigned max_pairs, unsigned max_members,
                      struct proto_group_request *ret_req, cJSON **ret_reply);
void proto_group_request_done(struct proto_group_request *req);

/* ReleaseLease's lease and RenewLease's lease and lease_ms (0 for
 * ReleaseLease).  0, or -EINVAL with *ret_reply set. */
int proto_parse_lease_call(const struct proto_call *call, uint64_t *ret_id, uint32_t *ret_ms, cJSON **ret_reply);
/* ClaimLease's lease and secret (a string inside call).  0, or -EINVAL
 * with *ret_reply set. */
int proto_parse_claim_lease(const struct proto_call *call, uint64_t *ret_id, const char **ret_secret,
                            cJSON **ret_reply);

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

#endif
