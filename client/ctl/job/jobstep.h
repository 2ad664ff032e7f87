/* jobstep.h: what dump and restore --images share: their parsed command
 * line, the image directory's checks, the group calls, the report of
 * failed criu runs, --json's trees and progress lines. */
#ifndef CUDACKPT_CTL_JOBSTEP_H
#define CUDACKPT_CTL_JOBSTEP_H

#include "args.h"
#include "criu.h"
#include "manifest.h"
#include "runreg.h"
#include "selector.h"

#include <cudackpt/client.h>
#include <cJSON.h>

#include <stdbool.h>
#include <stddef.h>

/* The parsed command line of dump or restore --images. */
typedef struct ctl_job_args {
        bool dump;                /* dump; else restore --images */
        const char *socket;       /* --socket, NULL: environment/default */
        bool json;                /* --json: one JSON object on stdout at the end */
        long long lock_timeout;   /* dump --lock-timeout, -1: the daemon's default */
        ctl_selector selector;    /* dump: --tree, --pids or --cgroup (or --run, as --tree) */
        const char *run_name;     /* dump --run: the job's name (runreg.h) */
        char run_tree[16];        /* ... its init's pid, the --tree it stands for */
        ctl_run_record run;       /* ... its record (its init by pid and start time) */
        const char *images;       /* --images DIR */
        bool leave_running;       /* dump --leave-running */
        bool no_sync;             /* dump --no-sync: the images not synced before the job ends */
        bool force;               /* restore --force: the ResumeGroup forces */
        ctl_map map;              /* restore --device-map (or --map) */
        bool dry_run;             /* restore --dry-run: the device plan and its checks, nothing touched */
        bool progress;            /* progress lines on stderr */
        bool progress_tty;        /* ... stderr is a terminal */
        char **criu_argv;         /* what follows "--", NULL-terminated (may be empty) */
        char *prefix;             /* "cudackptctl: dump --tree 42: ", for errors */
        bool verify;              /* cudackptctl verify */
        bool no_verify;           /* restore --no-verify: the digests not checked */
        const char *archive;      /* --archive FILE|-: through one stream (archivejob.c); NULL: none */
        const char *work_dir;     /* --work-dir: where --archive's private image directory goes */
        unsigned long long archive_max_files, archive_max_bytes; /* restore, verify --archive: limits */
        /* cudackptd's (restorewait.h): */
        bool owner_given;         /* dump --run, restore: --owner */
        uid_t owner;              /* ... the uid the job must run as */
        bool wait;                /* restore --wait: this command the restored job's parent, to its end */
        int ready_fd;             /* restore --ready-fd, or -1 */
        int barrier_fd;           /* dump, restore --barrier-fd (crossbarrier.h), or -1 */
        int cgroups_of;           /* restore --cgroups-of (a pidfd), or -1 */
        bool die_with_parent;     /* restore --wait --die-with-parent */
        /* dump: run once the manifest is written, before the job is ended
         * (dump --archive streams there); 0 or -errno, said. */
        int (*before_end)(void *data, int dir_fd, const struct ctl_manifest *m);
        /* ... and when the dump is taken back after it (the barrier across
         * the job's parts not passed): what before_end made undone, or said
         * where it cannot be.  NULL: nothing to undo. */
        void (*taken_back)(void *data);
        void *before_end_data;
} ctl_job_args;

/* dump's step 0 for DIR: created if needed (0700), opened as
 * ctl_safedir_open() wants it (*ret_dir_fd), without a finished dump in
 * it, the manifest's temporary file created (*ret_part_fd, its name in
 * part_name: manifest.json.tmp-RANDOM, O_EXCL|O_NOFOLLOW).  The exit
 * status; on failure said on stderr ("nothing was suspended"). */
int ctl_job_dump_dir(const ctl_job_args *a, int *ret_dir_fd, int *ret_part_fd, char *part_name, size_t size);
/* dump's DIR/manifest.json removed and DIR synced, and what a's
 * before_end made taken back (taken_back): the dump does not stand. */
void ctl_job_dump_take_back(const ctl_job_args *a, int dir_fd);
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
/* o's "archive" (--archive FILE or "-") or else "images" (DIR): what the
 * user named, never --archive's private directory, gone once the command
 * ends. */
void ctl_job_json_source(cJSON *o, const ctl_job_args *a);
/* What a failed restore leaves to restore from, and what to do next. */
const char *ctl_job_restore_left(const ctl_job_args *a);

/* argv of n strings, some of which may have failed to be allocated (NULL):
 * argv when none did, else NULL with argv and its strings freed. */
char **ctl_job_argv_checked(char **argv, size_t n);

/* criu's command line for a's job: criu, then words (NULL-terminated),
 * then "--action-script script" when script is not NULL, then the user's
 * CRIU options but their --action-script ones (which script runs).  NULL
 * when out of memory. */
char **ctl_job_criu_argv(const ctl_job_args *a, const char *criu, const char *const *words, const char *script);

/* The barrier of a's runs in rundir: its socket rundir/barrier (into sock,
 * size bytes) and its script (ctl_criu_barrier_script()), to free(); NULL
 * with *ret_r -errno (said on stderr). *ret_r 0 otherwise. */
char *ctl_job_barrier(const ctl_job_args *a, const char *rundir, char *sock, size_t size, int *ret_r);

/* A criu run of a's job: argv (taken; NULL: out of memory), its log
 * log_name in its directory, shown as IMAGES/TREE_IMAGES/LOG_NAME.  0 or
 * -ENOMEM. */
int ctl_job_run_set(const ctl_job_args *a, ctl_criu_run *run, char **argv, const char *tree_images,
                    const char *log_name);

/* When a's progress lines are on (--progress, or stderr a terminal): one
 * line "criu VERB: TEXT" on stderr; else nothing. */
void ctl_job_progress(const ctl_job_args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* syncfs() of the file system of every run's dir_fd (each once): what
 * criu wrote there on stable storage.  0 or the first -errno. */
int ctl_job_sync_dirs(const ctl_criu_run *runs, size_t n);

/* How long the job's processes get to end after SIGKILL (dump). */
#define CTL_JOB_END_MS 10000

#endif
