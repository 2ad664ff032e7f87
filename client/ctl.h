/* ctl.h: names shared by the rooms of cudackptctl, each section under the
 * name of the file that defines it.
 *
 * cudackptctl.c runs the native command line (cmdline.c), compat.c the
 * cuda-checkpoint compatible one; both parse the same kinds of arguments
 * (args.c, selector.c) and describe daemon errors in the same words
 * (describe.c); the other files are commands (group.c, ps.c, watch.c,
 * status.c, lease.c, exporter.c) or parts of them (progress.c).  Private
 * to client/: nothing here is part of libcudackpt. */
#ifndef CUDACKPT_CTL_H
#define CUDACKPT_CTL_H

#include <cudackpt/client.h>

#include <cJSON.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* ---- args.c ---- */

/* A decimal pid: digits only, 1..INT_MAX.  -EINVAL or -ERANGE otherwise. */
int ctl_parse_pid(const char *s, int *ret_pid);

/* A decimal count: digits only, 0..max.  -EINVAL or -ERANGE otherwise. */
int ctl_parse_uint(const char *s, unsigned long long max, unsigned long long *ret_value);

/* A GPU mapping being collected from OLD=NEW[,OLD=NEW...] arguments, in the
 * form cudackpt_restore() takes: old0, new0, old1, new1, ..., NULL. */
typedef struct ctl_map {
        char **items;   /* NULL until the first pair; then NULL-terminated */
        size_t n_items; /* strings in items, twice the number of pairs */
} ctl_map;

/* Append the pairs of one argument.  -EINVAL for a malformed argument (an
 * empty list or side, a pair without exactly one '='), -EEXIST when an old
 * UUID is named twice, -ENOMEM.  The map is unchanged on failure. */
int ctl_map_add(ctl_map *m, const char *arg);
void ctl_map_free(ctl_map *m);

/* A usage error of a command line: "NAME: MESSAGE" and then tail (the
 * hint and the newline) on stderr; returns status, the exit status. */
__attribute__((format(printf, 4, 5)))
int ctl_usage_fail(int status, const char *name, const char *tail, const char *fmt, ...);

/* The socket to use: option, else $CUDACKPT_SOCKET when not empty, else
 * the default.  Resolved here, not in the library, to name it in errors. */
const char *ctl_socket_path(const char *option);

/* What to do when the daemon cannot be reached (doctor advises it too). */
#define CTL_UNREACHABLE_ADVICE \
        "systemctl start cudackptd.socket (or name the socket with --socket or $" CUDACKPT_SOCKET_ENV ")"

/* Connects *ret_client to the daemon at path.  A path with no socket file
 * is said at once, on stderr after prefix, before connecting waits for a
 * daemon that may be starting; a failure is said with the path, the reason
 * and CTL_UNREACHABLE_ADVICE.  0, or CUDACKPT_EXIT_UNREACHABLE. */
int ctl_connect_daemon(const char *prefix, const char *path, cudackpt_client **ret_client);

/* ---- describe.c ---- */

/* Replace terminal control bytes (C0, DEL, UTF-8 encoded C1) in s with '?',
 * so that text from the daemon cannot drive the terminal. */
void ctl_sanitize(char *s);

/* Write s to f sanitised. */
void ctl_fputs_safe(const char *s, FILE *f);

/* "Name: sentence" for the error of r (r->error not NULL), from its
 * parameters; e.g. "InvalidState: process is locked".  Sanitised; the
 * caller frees it.  NULL when out of memory. */
char *ctl_describe_error(const cudackpt_reply *r);

/* What failed when a call returned r < 0 ("no reply from cudackptd: ...").
 * Static storage, valid until the next call. */
const char *ctl_describe_call_failure(int r);

/* Exit status for a call that returned r < 0: CUDACKPT_EXIT_UNREACHABLE
 * when the daemon went away or did not answer in time, else
 * CUDACKPT_EXIT_FAILURE. */
int ctl_call_failure_exit_code(int r);

/* Columns a sanitised s takes: one per UTF-8 code point (0 for NULL). */
size_t ctl_text_width(const char *s);

/* s sanitised, then padded with spaces to width columns: a table's cell. */
void ctl_put_cell(FILE *f, const char *s, size_t width);

/* {"error": NAME, "parameters": {...}} for r, as one line of JSON; the
 * caller frees it.  NULL when out of memory. */
char *ctl_error_json(const cudackpt_reply *r);

/* ---- selector.c ---- */

/* Which processes a group form or ps acts on. */
typedef enum ctl_selector_kind {
        CTL_SELECT_NONE,
        CTL_SELECT_PIDS,        /* --pids PID[:START_TIME][,...] */
        CTL_SELECT_CGROUP,      /* --cgroup PATH */
        CTL_SELECT_TREE,        /* --tree PID */
} ctl_selector_kind;

typedef struct ctl_selector {
        ctl_selector_kind kind;
        const char *arg;        /* the option's argument, as given */
        cJSON *json;            /* the protocol's Selector object, owned */
} ctl_selector;

/* "--pids", "--cgroup", "--tree" ("" for CTL_SELECT_NONE). */
const char *ctl_selector_option(ctl_selector_kind kind);

/* Parse the argument of a selector option into *sel (replacing what it
 * held).  -EINVAL for a malformed argument (an empty list or item, a bad
 * pid or start time, a cgroup path that is not absolute or has an empty,
 * "." or ".." component), -EEXIST for a pid listed twice, -ENOMEM.  sel
 * is unchanged on failure. */
int ctl_selector_parse(ctl_selector *sel, ctl_selector_kind kind, const char *arg);
void ctl_selector_free(ctl_selector *sel);

/* ---- group.c ---- */

/* One group operation. */
struct ctl_held;

typedef struct ctl_group {
        const char *prefix;             /* "cudackptctl: suspend --pids 1,2: ", for errors */
        const char *method;             /* CUDACKPT_METHOD_*_GROUP */
        const ctl_selector *selector;
        long long lock_timeout;         /* timeout_ms, -1 for the daemon's default */
        const char *const *map;         /* gpu_mapping as ctl_map holds it, or NULL */
        bool force;                     /* restore, resume: force (no check of the fit) */
        bool json;                      /* print the reply's parameters as JSON */
        bool progress;                  /* ask for progress and show it on stderr */
        bool progress_tty;              /* ... rewriting a line per phase in place */
        long long lease_ms;             /* lock, suspend: lease_ms, -1 for none */
        bool lease_on_close;            /* lock, suspend: a lease held by this connection */
        struct ctl_held *ret_lease;     /* on success, when not NULL: the lease granted */
        cJSON **ret_members;            /* on success, when not NULL: a Selector of exactly the
                                         * members, pinned by start time (NULL when none) */
        bool quiet;                     /* print nothing on success (dump, restore --images
                                         * report the whole job themselves) */
} ctl_group;

/* Run g and print its result; returns the exit status. */
int ctl_group_run(cudackpt_client *client, const ctl_group *g);

/* ---- ps.c ---- */

/* ps: ListProcesses. */
typedef struct ctl_ps {
        const char *prefix;             /* "cudackptctl: ps: " */
        const ctl_selector *selector;   /* NULL or CTL_SELECT_NONE: every process */
        bool json;                      /* a JSON list of the daemon's objects */
} ctl_ps;

int ctl_ps_run(cudackpt_client *client, const ctl_ps *p);

/* ---- watch.c ---- */

/* watch: the Watch stream, one line per event until the daemon closes it. */
typedef struct ctl_watch {
        const char *prefix;             /* "cudackptctl: watch: " */
        const ctl_selector *selector;   /* NULL or CTL_SELECT_NONE: every process */
        bool json;                      /* each event as one line of JSON */
} ctl_watch;

int ctl_watch_run(cudackpt_client *client, const ctl_watch *w);

/* metrics: GetMetrics's text on stdout, or into output (written beside it
 * and renamed over it, for node_exporter's textfile collector). */
int ctl_metrics_run(cudackpt_client *client, const char *prefix, const char *output);

/* ---- status.c ---- */

/* What GetStatus says of the daemon's driver.  Strings sanitised. */
typedef struct ctl_driver_status {
        bool available;
        bool simulated;
        int version;            /* 13000 for CUDA 13.0; 0 when not known */
        long long gpus;         /* -1 when not said */
        char path[512];         /* the library as the daemon was told it */
        char reason[512];       /* why it is not available */
} ctl_driver_status;

/* The driver of GetStatus's parameters: 0, or -EBADMSG when they hold none. */
int ctl_status_driver(const cJSON *params, ctl_driver_status *ret);

/* "CUDA 13.0, 2 GPUs, from libcuda.so.1", "SIMULATED CUDA 13.0, ... (no GPU
 * is involved)" or "no usable CUDA driver (PATH): REASON". */
void ctl_status_describe_driver(const ctl_driver_status *d, char *buf, size_t size);

/* status: GetStatus in lines, or its parameters as JSON.  Returns the exit
 * status: CUDACKPT_EXIT_DRIVER_UNAVAILABLE when the daemon has no usable
 * driver (having printed its status all the same). */
int ctl_status_run(cudackpt_client *client, const char *prefix, bool json);

/* ---- exporter.c ---- */

/* metrics --listen: serve GET /metrics over HTTP, one GetMetrics call per
 * scrape, until SIGTERM or SIGINT; returns the exit status. */
typedef struct ctl_exporter {
        const char *prefix;             /* "cudackptctl: metrics: " */
        const char *socket;             /* the daemon's socket */
        const char *listen;             /* ":PORT", "IPV4:PORT" or "[IPV6]:PORT" */
        int timeout_ms;                 /* each GetMetrics call's limit, > 0 */
        long long deadline_ms;          /* for a request to arrive (from the connection's
                                         * opening or the previous answer) and to be
                                         * answered (from its arrival); > timeout_ms */
        unsigned per_address;           /* connections at once from one address, > 0 */
} ctl_exporter;

int ctl_exporter_run(const ctl_exporter *e);

/* ---- progress.c ---- */

/* Shows the progress of the checkpoint of pid on stderr (a line
 * rewritten in place when tty) until ctl_progress_stop(), from a Watch on a
 * connection of its own.  -errno when it cannot watch (then no progress). */
typedef struct ctl_progress ctl_progress;
int ctl_progress_start(const char *socket_path, int pid, bool tty, ctl_progress **ret);
void ctl_progress_stop(ctl_progress *p); /* accepts NULL */

/* ---- lease.c ---- */

/* lock or suspend of one PID with a lease, and --hold. */
typedef struct ctl_lease_op {
        const char *prefix;
        const char *method;             /* CUDACKPT_METHOD_LOCK or _SUSPEND */
        const char *undo_method;        /* CUDACKPT_METHOD_UNLOCK or _RESUME */
        int pid;
        long long lock_timeout;         /* -1: the daemon's default */
        long long lease_ms;             /* -1: none */
        bool hold;                      /* lease_on_close, held until command ends or a signal */
        char **command;                 /* NULL-terminated, or NULL: hold until SIGINT/SIGTERM/SIGHUP */
        bool json;
        const char *socket;             /* to connect again after a daemon restart */
        int timeout_ms;                 /* --timeout, for such a connection */
} ctl_lease_op;

/* --hold: when the daemon closes the connection meanwhile (a restart),
 * connects again and claims the lease (ClaimLease), so *clientp may be
 * replaced. */
int ctl_lease_run(cudackpt_client **clientp, const ctl_lease_op *o);

/* The lease a --hold holds (a single process's or a group's), to claim it
 * again after a daemon restart. */
typedef struct ctl_held {
        long long id;                   /* 0: none in the reply */
        char secret[65];                /* "": none */
        bool connected;                 /* the connection that holds it is open */
        bool lost;                      /* the daemon no longer knows it as ours */
} ctl_held;
/* The lease of a reply's parameters (the grant's "lease"). */
void ctl_held_of(const char *parameters_json, ctl_held *h);
/* --hold's wait: runs o->command (or waits for a stop signal), passing a
 * stop signal on to it, while keeping h held across daemon restarts (uses
 * o->prefix, command, socket, timeout_ms); then, if the holding connection
 * is still lost, connects again and claims it.  Returns the command's
 * status (0 without one), or a failure exit code when the daemon cannot be
 * reached again; h->lost when the daemon undid the lease meanwhile. */
int ctl_hold_keep(const ctl_lease_op *o, cudackpt_client **clientp, ctl_held *h);

/* --hold: ctl_hold_signals() before the operation makes SIGINT, SIGTERM
 * and SIGHUP end the hold rather than the client; ctl_hold_wait() then
 * runs command (passing such a signal on to it) or, without one, waits for
 * such a signal.  Returns the command's exit status (0 without one). */
void ctl_hold_signals(void);
int ctl_hold_wait(const char *prefix, char **command);

/* release LEASE, renew LEASE MS. */
int ctl_lease_manage(cudackpt_client *client, const char *prefix, long long lease, long long renew_ms, bool json);

/* ---- compat.c ---- */

/* main() of the cuda-checkpoint compatible mode. */
int compat_main(int argc, char **argv);

#endif
