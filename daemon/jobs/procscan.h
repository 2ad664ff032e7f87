/* procscan.h: the scan that finds CUDA processes appearing and exiting,
 * for Watch.
 *
 * While someone wants it (procscan_kick() after the first watcher is set
 * up, procscan_stop() when the last one leaves), a worker thread lists the
 * CUDA processes every period_ms (the process index's candidates, or
 * /proc: select_candidates()), with each one's owner, command, cgroup and
 * ancestors.  On the loop thread the new list is compared with the last:
 * exited_cb for each process gone (judged by what the last scan knew of
 * it), appeared_cb for each new one.  The last list answers
 * procscan_find(), which Watch's cgroup and tree selectors follow.  The
 * first scan only sets the baseline.  Nothing here knows of watchers. */
#ifndef CUDACKPT_PROCSCAN_H
#define CUDACKPT_PROCSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#include "base/life.h"
#include "auth/policy.h"
#include "jobs/select.h"

/* A process's pid in another pid namespace (by its inode). */
struct procscan_vpid {
        ino_t ns;
        pid_t vpid;
};

/* A CUDA process a scan found. */
struct procscan_proc {
        pid_t pid;
        uint64_t start_time;
        struct policy_target owner;
        char comm[32];
        char *cgroup;                   /* owned; NULL when unknown */
        pid_t *ancestors;               /* owned: parent, its parent, ... up to 1 */
        size_t n_ancestors;
        /* Its pid in the pid namespaces of watchers of other namespaces,
         * taken while it lived: once it has exited the kernel cannot tell. */
        struct procscan_vpid *vpids;    /* owned */
        size_t n_vpids;
};

struct procscan {
        uv_loop_t *loop;
        struct select_source *source;
        struct life *life;              /* no scan starts once stopping */
        uint64_t period_ms;             /* watch_scan_ms; 0: no scans */
        /* On the loop thread: a scan's list before it is compared (to note
         * pids in it), then each process gone and each new one. */
        void (*found_cb)(struct procscan *ps, struct procscan_proc *procs, size_t n);
        void (*exited_cb)(struct procscan *ps, const struct procscan_proc *p);
        void (*appeared_cb)(struct procscan *ps, const struct procscan_proc *p);
        bool wanted;                    /* between procscan_kick() and procscan_stop() */
        uv_timer_t timer;
        bool scanning;                  /* a scan is on a worker thread */
        bool have_baseline;             /* procs holds a scan's result */
        struct procscan_proc *procs;    /* the last scan: CUDA processes by pid */
        size_t n_procs;
};

/* Sets up the timer; the fields above "wanted" are the caller's to set. */
void procscan_init(struct procscan *ps);
/* Closes the timer and forgets the list; the loop must run once more. */
void procscan_close(struct procscan *ps);
/* Scans from now on, the first at once unless one runs or is due. */
void procscan_kick(struct procscan *ps);
/* No more scans; the list is forgotten (no baseline for a later start). */
void procscan_stop(struct procscan *ps);
/* What the last scan knew of pid (with this start time; 0: any). */
const struct procscan_proc *procscan_find(const struct procscan *ps, pid_t pid, uint64_t start_time);
/* Notes p's pid vpid in pid namespace ns. */
void procscan_note_vpid(struct procscan_proc *p, ino_t ns, pid_t vpid);

#endif
