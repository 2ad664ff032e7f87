/* select.h: the selection engine: which processes a selector names, and
 * which of them a caller may see and act on.
 *
 * A selector (pids, a cgroup, a process tree; proto.h) is read on worker
 * threads: select_start() lists the candidates (the named pids, the tree
 * from /proc, every process, or for a listing the process index's CUDA
 * candidates), then examines them in chunks run in parallel: each is
 * pinned (pidfd, start time), translated into the caller's pid namespace,
 * and judged by the policy (access.h, ops_judge()).  The result comes back
 * on the loop thread through done_cb, sorted by pid, a process named twice
 * (by a thread id) once.
 *
 * Groups (group.h) select to act: a process they may not act on is a
 * failure, one another's is counted (hidden), one without CUDA reported
 * as skipped.  ListProcesses (list.h) selects to list: what the caller may
 * not see is left out, and each entry gets its command and cgroup.  Watch
 * (watch.h) reads the candidates and the caller's cgroup selector here too.
 *
 * The process index (procindex.h) belongs to a select_source: the server
 * opens it and sets it once; readers ask select_candidates(). */
#ifndef CUDACKPT_SELECT_H
#define CUDACKPT_SELECT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#include "base/config.h"
#include "host/discover.h"
#include "run/ops.h"
#include "auth/policy.h"
#include "varlink/proto.h"

struct procindex;

/* Bound on a tree walk, whatever max_group_members says: the walk itself
 * costs memory before members are counted. */
#define SELECT_TREE_MAX 65536

/* Where the candidate CUDA processes come from: the process index when
 * there is one, else /proc.  The server owns one and fills it in. */
struct select_source {
        struct discover_lib driver_lib; /* the loaded driver's file */
        /* The process index: set once on the loop thread when it is ready,
         * read by workers; NULL meanwhile or without one. */
        struct procindex *_Atomic index;
        atomic_bool index_lost;         /* it missed a process: scans from then on */
        atomic_ulong scans_index, scans_proc; /* candidate lists from each */
        unsigned index_max;             /* process_index_max, for the warning */
};

/* The processes that may be CUDA processes, for ListProcesses and Watch's
 * scans: the index's when there is one, else every process in /proc;
 * ascending, *ret_pids malloc()ed.  Worker threads. */
int select_candidates(struct select_source *src, pid_t **ret_pids, size_t *ret_n);

/* A cgroup selector of the caller (sel, "/" or "/a/b") in the daemon's
 * cgroup paths, below root, the caller's cgroup namespace's root ("" when
 * it is ours); *ret malloc()ed.  0 or -ENOMEM. */
int select_cgroup_in_ours(const char *root, const char *sel, char **ret);

enum select_purpose {
        SELECT_TO_ACT,  /* a group's members */
        SELECT_TO_LIST, /* ListProcesses's entries */
};

struct select_member {
        pid_t pid;              /* in the daemon's pid namespace */
        pid_t vpid;             /* as the caller sees it: what replies say */
        uint64_t start_time;
        int pidfd;              /* the pin, owned; -1 */
        struct policy_target owner; /* its uids */
        char comm[32];          /* SELECT_TO_LIST: the command */
        char *cgroup;           /* SELECT_TO_LIST: as the caller sees it, owned; NULL unknown */
        bool excluded;          /* not part of the selection after all (never in a result) */
        bool hidden;            /* a CUDA process the caller may not know of (access.h):
                                 * counted in a refusal, never named */
        bool skipped;           /* never initialised CUDA (cgroup, tree) */
        bool failed;            /* refused, err says why */
        enum proto_method err_method;
        struct ops_result err;
};

/* Closes the pin and frees the cgroup. */
void select_member_clear(struct select_member *m);

/* One selection: fields above "result" are the caller's to set before
 * select_start(), the rest select.c's. */
struct select_job {
        uv_loop_t *loop;
        const struct config *cfg;
        struct select_source *source;
        const struct policy_caller *caller; /* outlives the job */
        const struct proto_group_request *req; /* the selector; outlives the job */
        enum proto_method method;       /* the call's: its single method judges */
        enum select_purpose purpose;
        bool lenient;                   /* members gone or changed are left out, not errors */
        void (*done_cb)(struct select_job *j);
        /* The result, for done_cb.  error: 0; -ESRCH, the root of the tree
         * has gone (n 1: a failed member says so); -E2BIG, a tree over
         * SELECT_TREE_MAX; -EREMOTE, the caller's cgroup namespace is
         * unknown; -ENOENT, the selected cgroup does not exist; another
         * -errno, the selection could not be read. */
        int error;
        struct select_member *m;        /* owned: take them and set m NULL */
        size_t n;
        size_t n_cand;                  /* candidates examined */
        uint64_t t_scanned;             /* uv_hrtime() when they were known */
        /* select.c's */
        uv_work_t scan;
        pid_t *cand;
        unsigned chunks_left;
        char cgroup_root[DISCOVER_CGROUP_MAX]; /* the caller's cgroup namespace's, in ours */
        bool cgroup_hidden;             /* that root is not known: no paths shown */
        char *cgroup_sel;               /* a cgroup selector in ours (owned) */
};

/* Starts reading the selection (loop thread); done_cb follows, always. */
void select_start(struct select_job *j);
/* Frees what the job still owns (members not taken included). */
void select_job_clear(struct select_job *j);

/* The replies (selectreply.c).  The reply to a selection's error other
 * than -ESRCH, its short name (static) for the metrics, and the detail of
 * its audit record (NULL: it is not audited).  NULL for an error the
 * client cannot be told (the connection is then closed). */
cJSON *select_error_reply(const struct select_job *j, unsigned max_members, const char **ret_result,
                          const char **ret_audit_detail);
/* NoSuchCgroup naming the selector sel as the caller wrote it. */
cJSON *select_no_such_cgroup(const char *sel);
/* GroupTooLarge with its limit and the members counted. */
cJSON *select_too_large(unsigned limit, size_t n);
/* PermissionDenied for a cgroup selector of a caller whose cgroup
 * namespace's root the daemon cannot find (-EREMOTE). */
cJSON *select_cgroup_ns_unknown(void);

#endif
