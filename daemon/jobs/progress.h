/* progress.h: samples of the checkpoints running now, for Watch.
 *
 * While started (the first watcher until the last leaves), every
 * interval_ms the process of each running checkpoint that has reported its
 * start is read on a worker thread (its resident memory grows as the
 * checkpoint writes GPU memory into it; ops.c takes the baseline), and
 * sample_cb gets how much it has moved on the loop thread.  A sample never
 * goes back: one a little below the last (the driver frees some memory
 * as it finishes) repeats the last.  This room keeps that high-water mark
 * per running operation itself; it reads the scheduler's running targets
 * (under their lock) and writes nothing of theirs.  No driver call. */
#ifndef CUDACKPT_PROGRESS_H
#define CUDACKPT_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#include "auth/policy.h"
#include "varlink/proto.h"

struct sched;

struct progress_sample {
        pid_t pid;                      /* the process (in the daemon's pid namespace) */
        uint64_t start_time;
        struct policy_target owner;
        enum proto_method method;       /* the operation */
        enum proto_method parent;       /* its group method, if it is a group's step */
        int64_t bytes;                  /* moved so far */
        int64_t total_bytes;            /* what it should move; -1 unknown */
};

/* The most one running operation has reported moved. */
struct progress_peak {
        pid_t target;                   /* the scheduler's target */
        uint64_t seq;                   /* which operation on it */
        uint64_t bytes;
};

struct progress {
        uv_loop_t *loop;
        struct sched *sched;
        uint64_t interval_ms;           /* progress_interval_ms; 0: none */
        void (*sample_cb)(struct progress *pg, const struct progress_sample *s);
        uv_timer_t timer;
        unsigned sampling;              /* samples on worker threads */
        struct progress_peak *peaks;    /* one per operation sampled that still runs */
        size_t n_peaks;
};

/* Sets up the timer; the fields above "timer" are the caller's to set. */
void progress_init(struct progress *pg);
/* Closes the timer; the loop must run once more. */
void progress_close(struct progress *pg);
void progress_start(struct progress *pg);
void progress_stop(struct progress *pg);

#endif
