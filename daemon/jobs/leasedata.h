/* leasedata.h: a lease as data: what the lease table (lease.h) holds and
 * the lease store (leasestore.h) writes and reads back, and the members a
 * group hands it (grouplease.h).  Only the table changes a lease; the
 * store sees the list whole when it saves. */
#ifndef CUDACKPT_LEASEDATA_H
#define CUDACKPT_LEASEDATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "net/conn.h"
#include "base/metrics.h"
#include "auth/policy.h"
#include "varlink/proto.h"

struct lease_table;

struct lease_member {
        pid_t pid;              /* in the daemon's pid namespace */
        pid_t vpid;             /* as the taker named it */
        uint64_t start_time;
        struct policy_target owner; /* its uids when the lease was taken */
};

#define LEASE_SECRET_BYTES 16

/* A lease held.  The store (leasestore.h) writes and reads these. */
struct lease {
        struct lease *prev, *next;
        struct lease_table *table;      /* the table it is in */
        uint64_t id;
        struct conn *conn;              /* on_close: the holder (pinned); NULL once it closed */
        struct conn_hook closing;       /* on conn: its closing undoes the lease */
        bool on_close;
        uint32_t ms;                    /* 0: no expiry */
        uint64_t expires;               /* uv_now() deadline; 0: none */
        uint64_t deadline;              /* the same in CLOCK_BOOTTIME ms, for the store */
        uid_t uid;                      /* who took it */
        bool privileged;                /* ... with a reserve in the share (access.h) */
        pid_t caller_pid;
        enum proto_method method;
        struct lease_member *m;         /* owned */
        size_t n;
        bool has_secret;                /* on_close: the secret that claims it (ClaimLease) */
        uint8_t secret[LEASE_SECRET_BYTES];
        bool unclaimed;                 /* read back at start: waits for ClaimLease until */
        uint64_t claim_by;              /* ... this uv_now() */
        bool pending;                   /* written before its call's first driver step, not granted yet */
        bool undoing;                   /* its undo group runs, or (parked) is left to the next start */
        bool parked;
        enum metrics_counter why;       /* what set the undo off; counted when it ends */
};

#endif
