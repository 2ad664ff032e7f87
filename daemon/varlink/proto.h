/* proto.h: the parameters of the daemon's calls, parsed strictly.
 *
 * Parsing is in two layers.  proto_parse_call() (protomsg.h, below this
 * room) checks the call object itself (a violation there means the peer
 * does not speak Varlink: the error is sent and the connection closed).
 * The parsers here check the parameters of a method: proto_parse_request()
 * those of an io.cudackpt.Process method on one process, the others those
 * of groups, ListProcesses and the lease calls (a violation there is an
 * ordinary error reply).  This header includes protomsg.h, so its users
 * see the whole protocol.  Nothing here touches sockets. */
#ifndef CUDACKPT_PROTO_H
#define CUDACKPT_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>
#include "cuda-api.h"

#include "varlink/protomsg.h"
#include "varlink/protoparam.h"

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
        bool force;                 /* Restore, Resume: no check of the GPUs' free memory */
        bool fit_held;              /* not on the wire: a group checked the fit (fit.h) */
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
        bool force;                 /* RestoreGroup, ResumeGroup: as for Restore */
};

/* 0, or -EINVAL with *ret_reply set to the error to send. */
int proto_parse_request(const struct proto_call *call, unsigned max_pairs,
                        struct proto_request *ret_req, cJSON **ret_reply);
void proto_request_free(struct proto_request *req);

/* The parameters of a group method or of ListProcesses.  0; -EINVAL with
 * *ret_reply set (InvalidParameter); -E2BIG when pids names more than
 * max_members (*ret_reply: GroupTooLarge). */
int proto_parse_group(const struct proto_call *call, unsigned max_pairs, unsigned max_members,
                      struct proto_group_request *ret_req, cJSON **ret_reply);
void proto_group_request_free(struct proto_group_request *req);

/* InvalidGpuMapping for a new GPU u of a mapping that this machine does
 * not have, naming it; pid 0 for a group's mapping, refused before any
 * member was selected (no pid then). */
cJSON *proto_unknown_gpu(pid_t pid, enum proto_method m, const CUuuid *u);

/* ReleaseLease's lease and RenewLease's lease and lease_ms (0 for
 * ReleaseLease).  0, or -EINVAL with *ret_reply set. */
int proto_parse_lease_call(const struct proto_call *call, uint64_t *ret_id, uint32_t *ret_ms, cJSON **ret_reply);
/* ClaimLease's lease and secret (a string inside call).  0, or -EINVAL
 * with *ret_reply set. */
int proto_parse_claim_lease(const struct proto_call *call, uint64_t *ret_id, const char **ret_secret,
                            cJSON **ret_reply);

#endif
