/* ns_itest.h: the pid namespaces of test_namespaces.c (ns_itest.c): a
 * namespace's pid 1 run as a forked child of the test, its simulated CUDA
 * processes and its Varlink calls, all reporting failures as messages (no
 * ck_assert in a namespace's child: its failure is its message). */
#ifndef CUDACKPT_NS_ITEST_H
#define CUDACKPT_NS_ITEST_H

#include "harness.h"

#define NS_MAX_TARGETS 4

/* What runs as pid 1 of a namespace: 0, or why it failed in msg. */
struct ns_ctx {
        const char *sock;
        const char *preload;         /* LD_PRELOAD= of the driver, open to every uid */
        long long lease;             /* a host lease the namespace must not manage */
        int reuse_go, reuse_done;    /* pipes to and from reuse_helper_main() */
        pid_t host_target;           /* a host CUDA process the caller must not see */
        pid_t seen[NS_MAX_TARGETS];  /* what the namespace started, in its pids */
        int n_seen;
};
typedef int (*ns_fn)(struct ns_ctx *x, char *msg, size_t size);

/* How ns_run_in() makes the namespace. */
struct ns_run {
        int depth;
        bool userns;
        uid_t uid;
};

/* Writes why into msg; returns -1 (the failure of a namespace's step). */
int ns_fail(char *msg, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The host pid of a child of this process (its pidfd's fdinfo, through
 * the host's /proc), or -1. */
pid_t ns_host_pid_of(pid_t child);
/* A simulated CUDA process started from inside the namespace: its pid
 * there, or -1.  Returns once it has exec'd (the simulator reads its
 * environment, which is the parent's until then): the end of a close-on-exec
 * pipe says so. */
pid_t ns_target(const struct ns_ctx *x);
/* One call; 0 with the reply (caller frees), or -1 with why in msg. */
int ns_call(struct ns_ctx *x, const char *method, const char *params, cJSON **ret, char *msg, size_t size);
/* Calls method on pid and checks the reply: error (NULL: success) and, on
 * success, state (NULL: not checked) and "pid" == pid. */
int ns_expect(struct ns_ctx *x, const char *method, pid_t pid, const char *error, const char *state, char *msg,
              size_t size);
/* Runs fn as pid 1 of a new pid namespace, depth namespaces down (2: a
 * namespace inside a namespace), as uid (with a user namespace mapping
 * root to it when userns) or as root.  fn reports the namespace's targets
 * in x->seen (their pids in the namespace).  Asserts that fn returned 0,
 * with its message as the failure's. */
void ns_run_in(const struct ns_run *how, ns_fn fn, struct ns_ctx *x);

#endif
