/* metrics.h: counters of what the daemon did, in the Prometheus text
 * exposition format (version 0.0.4), served by GetMetrics.
 *
 * Everything here runs on the loop thread: counting is an increment, and
 * the text is made only when asked for.  Names and labels follow the
 * Prometheus conventions: the cudackpt_ prefix, _total for counters,
 * _seconds for durations; docs/operations.md lists them. */
#ifndef CUDACKPT_METRICS_H
#define CUDACKPT_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "varlink/proto.h"

#define METRICS_BUCKETS 14
#define METRICS_MAX_RESULTS 64 /* (method, result) pairs: a bound, never reached */

enum metrics_counter {
        METRICS_CONNECTIONS_ACCEPTED,
        METRICS_REFUSED_MAX_CONNECTIONS,
        METRICS_REFUSED_MAX_PER_UID,
        METRICS_ACCEPT_PAUSED_DESCRIPTORS, /* accept4 failed: EMFILE or ENFILE (accept.h) */
        METRICS_ACCEPT_PAUSED_OTHER,       /* ... anything else, such as a seccomp filter's EPERM */
        METRICS_CUT_SLOW_READER,
        METRICS_CUT_MESSAGE_TOO_LARGE,
        METRICS_CUT_INVALID_REQUEST,
        METRICS_CUT_IDLE,
        METRICS_LEASES_GRANTED,
        METRICS_LEASES_RELEASED,  /* ReleaseLease */
        METRICS_LEASES_FINISHED,  /* every process came back to running by a call */
        METRICS_LEASES_EXPIRED,   /* lease_ms passed: undone */
        METRICS_LEASES_CLOSED,    /* the connection closed: undone */
        METRICS_LEASES_EXITED,    /* every process exited */
        METRICS_LEASES_SUPERSEDED, /* every process taken by a newer lease */
        METRICS_LEASES_NOT_HONOURED, /* the daemon stopped and could not keep it in its lease store */
        METRICS_UNDOS_OK,
        METRICS_UNDOS_FAILED,
        METRICS_WATCH_EVENTS,
        METRICS_JOBS_STARTED,     /* StartJob and RestoreJob: the job runs */
        METRICS_JOBS_ENDED,       /* ... and ended on its own or was stopped */
        METRICS_JOBS_SAVED,       /* ... and a SaveJob ended it */
        METRICS_SAVES_FAILED,     /* SaveJob failed after its checks */
        METRICS_COUNTERS,
};

struct metrics_result {
        enum proto_method method;
        const char *result;     /* static: "ok" or an error's short name */
        uint64_t n;
};

struct metrics_histogram {
        uint64_t bucket[METRICS_BUCKETS]; /* counts <= each bound, not cumulative */
        uint64_t count;
        double sum;             /* seconds */
};

struct metrics {
        uint64_t counter[METRICS_COUNTERS];
        struct metrics_result results[METRICS_MAX_RESULTS];
        size_t n_results;
        struct metrics_histogram duration[PROTO_METHODS];
        double start_time;      /* the daemon's start, seconds since the epoch */
};

/* What the server knows now, for the gauges. */
struct metrics_gauges {
        unsigned connections;
        unsigned running;       /* operations on worker threads */
        unsigned queued;        /* operations waiting for their process or a thread */
        unsigned groups;        /* group operations and listings in flight */
        unsigned leases;
        unsigned leased_processes;
        bool lease_store_durable; /* the leases held will outlive a restart */
        unsigned watchers;
        unsigned workers;
        bool driver;            /* a usable driver is loaded */
        bool simulated;
        int driver_version;     /* 13000 for 13.0 */
        unsigned gpus;
        bool process_index;     /* the BPF process index is in use */
        const char *index_hook; /* how it sees mmaps: "fentry", "tracepoint"; NULL: no index */
        uint64_t index_processes; /* processes it held at its last reading */
        uint64_t scans_index, scans_proc; /* candidate lists read from each */
};

void metrics_init(struct metrics *m);
/* One call answered: method, "ok" or the error's short name (a string that
 * lives as long as the daemon), and the time from its arrival. */
void metrics_op(struct metrics *m, enum proto_method method, const char *result, uint64_t duration_ns);
static inline void metrics_count(struct metrics *m, enum metrics_counter c)
{
        m->counter[c]++;
}
/* The exposition text (malloc'ed), or NULL when out of memory. */
char *metrics_text(const struct metrics *m, const struct metrics_gauges *g);

#endif
