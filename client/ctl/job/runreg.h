/* runreg.h: the names of the jobs `cudackptctl run` started, kept by root
 * in a directory of its own (CTL_RUN_DIR_DEFAULT, or $CUDACKPT_RUN_DIR):
 * one file per name, written through the directory's checked descriptor,
 * holding the job's init by pid AND start time, so that a pid reused by
 * another process is never taken for the job. */
#ifndef CUDACKPT_CTL_RUNREG_H
#define CUDACKPT_CTL_RUNREG_H

#include <cJSON.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define CTL_RUN_DIR_DEFAULT "/run/cudackpt-jobs"
#define CTL_RUN_DIR_ENV "CUDACKPT_RUN_DIR"
/* A name: 1 to 64 of [A-Za-z0-9_.-], not starting with '.' or '-'. */
#define CTL_RUN_NAME_MAX 64
/* How many jobs may have a name at once, in all and per uid ($CUDACKPT_RUN_MAX_JOBS,
 * $CUDACKPT_RUN_MAX_JOBS_PER_UID). */
#define CTL_RUN_MAX_JOBS 1024
#define CTL_RUN_MAX_JOBS_PER_UID 64
#define CTL_RUN_MAX_JOBS_ENV "CUDACKPT_RUN_MAX_JOBS"
#define CTL_RUN_MAX_JOBS_PER_UID_ENV "CUDACKPT_RUN_MAX_JOBS_PER_UID"

typedef struct ctl_run_record {
        char name[CTL_RUN_NAME_MAX + 1];
        uid_t uid;                /* whom the job runs as */
        gid_t gid;
        int init_pid;             /* the job's init, a host pid */
        uint64_t init_start_time; /* ... and its start time (field 22 of /proc/PID/stat) */
        char cgroup[512];         /* its cgroup v2 directory; "": none */
} ctl_run_record;

bool ctl_run_name_valid(const char *name);
/* rec as JSON (the record's text, and the manifest's "run"), or NULL. */
cJSON *ctl_run_record_json(const ctl_run_record *rec);
/* A record from JSON o (its name valid): 0 or -EBADMSG. */
int ctl_run_record_from_json(const cJSON *o, ctl_run_record *ret);
/* The directory (as ctl_safedir_open() wants it: root's, no one else may
 * write it), made with create; its descriptor, or -errno with a sentence
 * in err. */
int ctl_run_dir_open(bool create, int *ret_fd, char *err, size_t err_size);
/* name's record, read through dir_fd: 0, -ENOENT, or -EBADMSG (not a
 * record root wrote). */
int ctl_run_record_read(int dir_fd, const char *name, ctl_run_record *ret);
/* Whether rec's init still runs: its pid has its start time. */
bool ctl_run_record_live(const ctl_run_record *rec);
/* rec written under its name, which no live job may hold (a stale record
 * is removed), within the bounds: 0, -EEXIST (the name is a live job's),
 * -EUSERS (*ret_limit: the bound reached, *ret_per_uid whether it was the
 * uid's), or -errno. */
int ctl_run_record_add(int dir_fd, const ctl_run_record *rec, long *ret_limit, bool *ret_per_uid);
/* rec's name removed, if it still names rec's init. */
void ctl_run_record_remove(int dir_fd, const ctl_run_record *rec);
/* name to its live job's record (for dump --run); -ENOENT (no such name,
 * or its job has ended: the record is stale), with a sentence in err. */
int ctl_run_resolve(const char *name, ctl_run_record *ret, char *err, size_t err_size);
/* The live jobs, one line each (or a JSON array with json), to f. */
int ctl_run_list(FILE *f, bool json);

#endif
