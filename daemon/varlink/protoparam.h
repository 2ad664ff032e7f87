/* protoparam.h: the parameters that the calls on one process and the
 * group calls share (proto.h has their parsers): each read strictly, an
 * integer integral and in range, a key compared with strcmp(). */
#ifndef CUDACKPT_PROTOPARAM_H
#define CUDACKPT_PROTOPARAM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>
#include "cuda-api.h"

#include "varlink/protomsg.h"

/* The lease a Lock or Suspend (single or group) asks for (lease.h). */
struct proto_lease {
        bool wanted;                /* lease_ms or lease_on_close given */
        uint32_t ms;                /* undo this long after the reply; 0 = no expiry */
        bool on_close;              /* undo when the connection closes */
        bool admitted;              /* the daemon counts it in its caller's lease
                                     * share until it is granted or not (lease.h) */
        uint64_t pending;           /* the id of its lease written before the
                                     * first driver step, until granted (lease.h) */
};

/* item, a number that is an integer in [min, max], into *ret: 0, or
 * -EINVAL. */
int protoparam_integer(const cJSON *item, double min, double max, double *ret);
/* gpu_mapping of method m ({"old UUID": "new UUID", ...}, at most
 * max_pairs, no GPU twice on either side) into *ret_pairs (owned by the
 * caller, also on failure) and *ret_n.  0; -EINVAL with *ret_reply set
 * (InvalidParameter, or InvalidGpuMapping naming pid when pid > 0);
 * -ENOMEM. */
int protoparam_mapping(const cJSON *obj, pid_t pid, enum proto_method m, unsigned max_pairs,
                       CUcheckpointGpuPair **ret_pairs, unsigned *ret_n, cJSON **ret_reply);
/* lease_ms and lease_on_close, the same for single and group calls.  1 when
 * item is one of them (parsed into *lease), 0 when it is not, -EINVAL when
 * its value is bad. */
int protoparam_lease(const cJSON *item, struct proto_lease *lease);
/* force of Restore, Resume and their groups: 0 (null is absent), or
 * -EINVAL when it is not a boolean. */
int protoparam_force(const cJSON *item, bool *ret);

#endif
