/* job.h: cudackptctl dump and restore --images, a whole job to disk and
 * back through CRIU.
 *
 * job.c parses their command line; dump.c and jobrestore.c run the steps;
 * criu.c finds and runs CRIU (several trees at once, the dump's barrier);
 * manifest.c reads and writes the image directory's manifest.json;
 * proctree.c reads the process tree from /proc.  Private to client/. */
#ifndef CUDACKPT_JOB_H
#define CUDACKPT_JOB_H

#include "ctl.h"
#include "safedir.h"

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* The most trees a job may have: one criu of each runs at once. */
#define CTL_JOB_MAX_TREES 256
#define CTL_JOB_MAX_TREES_TEXT "256"

/* The parsed command line of dump or restore --images. */
typedef struct ctl_job_args {
        bool dump;                /* dump; else restore --images */
        const char *socket;       /* --socket, NULL: environment/default */
        bool json;                /* --json: one JSON object on stdout at the end */
        long long lock_timeout;   /* dump --lock-timeout, -1: the daemon's default */
        ctl_selector selector;    /* dump: --tree, --pids or --cgroup */
        const char *images;       /* --images DIR */
        bool leave_running;       /* dump --leave-running */
        bool no_sync;             /* dump --no-sync: the images not synced before the job ends */
        bool force;               /* restore --force: the ResumeGroup forces */
        ctl_map map;              /* restore --device-map (or --map) */
        bool progress;            /* progress lines on stderr */
        bool progress_tty;        /* ... stderr is a terminal */
        char **criu_argv;         /* what follows "--", NULL-terminated (may be empty) */
        char *prefix;             /* "cudackptctl: dump --tree 42: ", for errors */
} ctl_job_args;

/* One criu run among several started together. */
typedef struct ctl_criu_run {
        char **argv;              /* criu's, NULL-terminated; argv[0] the path */
        int dir_fd;               /* the tree's image directory, criu's -D /proc/self/fd/N; 0: none */
        const char *log;          /* criu's -o log (its path, for people), shown when it fails */
        const char *log_name;     /* ... its name in dir_fd, where it is read */
        int status;               /* exit status, 128+N for signal N, -1: not run */
        bool early;               /* exited 0 before the barrier let it go: it dumped nothing */
        char *output;             /* its stdout and stderr (up to 64 KiB), to free() */
        double ms;                /* how long it ran */
} ctl_criu_run;

struct ctl_manifest; /* manifest.c, below */

/* ---- job.c ---- */

/* Whether argv is a dump, a restore with --images, or the dump's barrier
 * (run by CRIU as an action script): those go to ctl_job_main(). */
bool ctl_job_wanted(int argc, char **argv);
int ctl_job_main(int argc, char **argv);

/* Milliseconds of CLOCK_MONOTONIC. */
double ctl_job_now_ms(void);

/* dump's step 0 for DIR: created if needed (0700), opened as
 * ctl_safedir_open() wants it (*ret_dir_fd), without a finished dump in
 * it, the manifest's temporary file created (*ret_part_fd, its name in
 * part_name: manifest.json.tmp-RANDOM, O_EXCL|O_NOFOLLOW).  The exit
 * status; on failure said on stderr ("nothing was suspended"). */
int ctl_job_dump_dir(const ctl_job_args *a, int *ret_dir_fd, int *ret_part_fd, char *part_name, size_t size);
/* DIR/NAME (a tree's directory) made, or one of this user's, writable by no
 * one else, already there (its dump.log removed), opened into *ret_fd;
 * else -EEXIST, said. */
int ctl_job_tree_dir(const ctl_job_args *a, int dir_fd, const char *name, int *ret_fd);

/* A group method on sel for the job (progress as a asks, nothing printed on
 * success, the error and members' table on stderr on failure); returns the
 * exit status.  lease_on_close: held by client's connection.  ret_members:
 * as ctl_group's. */
int ctl_job_group(cudackpt_client *client, const ctl_job_args *a, const char *method, const cJSON *sel,
                  bool lease_on_close, cJSON **ret_members);

/* The pids of a Selector {"pids": [{"pid": N, ...}]}; count in *ret_n. */
int *ctl_job_selector_pids(const cJSON *sel, size_t *ret_n);

/* On stderr: what each failed run of m's trees (runs[i] for tree i)
 * printed and the end of its log. */
void ctl_job_print_criu_failures(const ctl_job_args *a, const char *verb, const ctl_criu_run *runs,
                                 const struct ctl_manifest *m);

/* --json's "trees": per tree of m, its root, with_images its directory,
 * its number of processes and, when runs is not NULL, its criu's status
 * and time.  NULL when out of memory; a tree that does not fit is left
 * out. */
cJSON *ctl_job_trees_json(const struct ctl_manifest *m, const ctl_criu_run *runs, bool with_images);

/* --json: o as one line on stdout; frees o (accepts NULL). */
void ctl_job_print_json(cJSON *o);

/* argv of n strings, some of which may have failed to be allocated (NULL):
 * argv when none did, else NULL with argv and its strings freed. */
char **ctl_job_argv_checked(char **argv, size_t n);

/* Whether a's progress lines are on: one line "criu VERB: TEXT" on stderr. */
void ctl_job_progress(const ctl_job_args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* syncfs() of the file system of every run's dir_fd (each once): what
 * criu wrote there on stable storage.  0 or the first -errno. */
int ctl_job_sync_dirs(const ctl_criu_run *runs, size_t n);

/* How long the job's processes get to end after SIGKILL (dump). */
#define CTL_JOB_END_MS 10000

/* ---- dump.c, jobrestore.c ---- */

int ctl_job_dump(const ctl_job_args *a);
int ctl_job_restore(const ctl_job_args *a);

/* ---- proctree.c ---- */

/* A snapshot of /proc: every pid with its parent. */
typedef struct ctl_proctree {
        int *pid;
        int *ppid;
        size_t n;
} ctl_proctree;

int ctl_proctree_scan(ctl_proctree *ret);
void ctl_proctree_free(ctl_proctree *t);
/* pid and every descendant of it in t (pid first); -ESRCH when pid is not in t. */
int ctl_proctree_subtree(const ctl_proctree *t, int pid, int **ret, size_t *ret_n);
/* The members of set (n pids) that have no proper ancestor in set, in the
 * order of set. */
int ctl_proctree_roots(const ctl_proctree *t, const int *set, size_t n, int **ret, size_t *ret_n);
/* The pids of t whose cgroup v2 path is cgroup or below it. */
int ctl_proctree_cgroup(const ctl_proctree *t, const char *cgroup, int **ret, size_t *ret_n);
/* Field 22 of /proc/PID/stat; 0 when it cannot be read. */
uint64_t ctl_proc_start_time(int pid);
/* Fields 4 (ppid) and 22 (start time) of /proc/PID/stat (either NULL). */
int ctl_proc_stat(int pid, int *ret_ppid, uint64_t *ret_start);

/* ---- jobpin.c ---- */

/* A process pinned while criu held it: pidfd, and what it was then. */
typedef struct ctl_pin {
        int pid;
        int pidfd;
        uint64_t start_time;
} ctl_pin;

typedef struct ctl_pins {
        ctl_pin *v;
        size_t n;
} ctl_pins;

/* Pins root and its descendants in t (a scan made while criu holds them);
 * one gone or a zombie is left out. */
int ctl_pins_add_tree(ctl_pins *s, const ctl_proctree *t, int root);
const ctl_pin *ctl_pins_find(const ctl_pins *s, int pid);
/* Whether p's process has not exited. */
bool ctl_pin_alive(const ctl_pin *p);
/* sig to every pinned process still there; the first error but ESRCH. */
int ctl_pins_signal(const ctl_pins *s, int sig);
/* Waits up to timeout_ms for every pinned process to exit; how many have not. */
size_t ctl_pins_await_gone(const ctl_pins *s, int timeout_ms);
void ctl_pins_free(ctl_pins *s);

/* ---- criu.c ---- */

/* The criu to run: $CUDACKPT_CRIU, else criu on PATH; its version must be
 * 4 or newer.  On failure, a sentence in err. */
int ctl_criu_find(char *path, size_t size, char *version, size_t version_size, char *err, size_t err_size);

/* The barrier of ctl_criu_run_all(): sock, the socket the runs' action
 * scripts connect to at post-dump or post-restore (ctl_criu_barrier_main);
 * at_barrier, when not NULL, is called once all have connected (every
 * tree held by its criu; criu_pids the parents of the connected scripts,
 * the criu processes that wait, in no particular order), before they are
 * let go: below 0, none is. */
typedef struct ctl_criu_barrier {
        const char *sock;
        int (*at_barrier)(void *data, const int *criu_pids, size_t n);
        void *data;
} ctl_criu_barrier;

/* Runs every run at once with env and waits for all.  With barrier, every
 * run's script is let go once all have connected, and none if a run fails
 * first; a run that exits 0 before they are let go never got there (criu
 * -V, --help, ...): it failed (early set).  Returns 0 when all exited 0
 * (through the barrier), -EIO when any failed, -errno when some could not
 * be started (those have status -1). */
int ctl_criu_run_all(ctl_criu_run *runs, size_t n, char **env, const ctl_criu_barrier *barrier);
void ctl_criu_run_free(ctl_criu_run *run);
/* Frees runs[0..n) (their argv, log path and output) and runs itself;
 * accepts NULL. */
void ctl_criu_runs_free(ctl_criu_run *runs, size_t n);

/* While criu runs, this process must not die or stop (criu stopped
 * halfway leaves the tasks it froze in no known state; dump's lease and
 * restore's step 2 wait on it): SIGINT, SIGTERM, SIGHUP and SIGQUIT are
 * noted in ctl_criu_signal, SIGTSTP, SIGTTIN and SIGTTOU ignored (not in
 * criu: criu_spawn puts them back).  ctl_criu_signals_restore() undoes it. */
typedef struct ctl_criu_signals {
        struct sigaction old[7];
} ctl_criu_signals;
extern volatile sig_atomic_t ctl_criu_signal;
void ctl_criu_signals_hold(ctl_criu_signals *s);
void ctl_criu_signals_restore(const ctl_criu_signals *s);

/* Writes the last lines of the criu log name in dir_fd to stderr, indented. */
void ctl_criu_print_log_tail(int dir_fd, const char *name, int lines);
/* Writes text from criu to stderr line by line, indented, each line
 * sanitised. */
void ctl_criu_print_lines(const char *text);

/* environ with PATH replaced by "dir:PATH" (dir NULL: unchanged); to
 * ctl_criu_env_free(). */
char **ctl_criu_env(const char *path_dir);
void ctl_criu_env_free(char **env);

/* ---- criubarrier.c ---- */

/* The barrier's side in the action script: "criu-barrier SOCKET"; it waits
 * at post-dump and post-restore. */
int ctl_criu_barrier_main(const char *sock);
/* The barrier's action script DIR/barrier.sh (DIR: a private directory of
 * this process), which runs the user's --action-script options of
 * criu_argv first, then waits at the barrier sock; its path, to free(), or
 * NULL with errno set (said on stderr with prefix). */
char *ctl_criu_barrier_script(const char *prefix, const char *dir, const char *sock, char **criu_argv);
/* Whether criu_argv[k] is an --action-script option (*ret_skip: words it takes). */
bool ctl_criu_is_action_script(char **criu_argv, size_t k, size_t *ret_skip);

/* ---- manifest.c ---- */

#define CTL_MANIFEST_NAME "manifest.json"

typedef struct ctl_manifest_tree {
        int root;
        char *images;             /* directory name inside the image directory: "tree-ROOT" */
        int *pids;                /* every process dumped with it */
        size_t n_pids;
} ctl_manifest_tree;

typedef struct ctl_manifest_member {
        int pid;
        uint64_t start_time;      /* at the dump */
        int tree;                 /* its tree's root */
        char **gpus;              /* UUIDs it held memory on before the dump; NULL: not known */
        size_t n_gpus;
} ctl_manifest_member;

typedef struct ctl_manifest {
        cJSON *selector;          /* the dump's selector (owned) */
        char *criu_version;
        bool left_running;
        ctl_manifest_tree *trees;
        size_t n_trees;
        ctl_manifest_member *members;
        size_t n_members;
} ctl_manifest;

/* Writes m as DIR/manifest.json through fd (DIR/part_name, open for
 * writing), renamed into place in dir_fd (DIR) once synced, DIR synced
 * after. */
int ctl_manifest_write(const ctl_manifest *m, int dir_fd, int fd, const char *part_name);
/* DIR/manifest.json.tmp-RANDOM, made afresh in dir_fd (O_EXCL|O_NOFOLLOW,
 * mode 0600): its name in name, the descriptor returned, or -errno. */
int ctl_manifest_create_part(int dir_fd, char *name, size_t size);
/* Reads DIR/manifest.json through dir_fd (DIR, as ctl_job_open_dir gives
 * it) and checks it as restore needs it (trees and members agree, at most
 * CTL_JOB_MAX_TREES trees); err gets a sentence on failure. */
int ctl_manifest_read(int dir_fd, const char *dir, ctl_manifest *ret, char *err, size_t err_size);
void ctl_manifest_free(ctl_manifest *m);

#endif
