/* jobcall.h: the daemon's job and save methods as cudackptctl calls them
 * (StartJob, RestoreJob, SaveJob, ListSaves, RemoveSave, ListJobs of
 * io.cudackpt.Process): the requests built, the replies read.  Pure: no
 * connection here (jobwait.h waits on a job, jobcmd.h is the verb).
 * Private to cudackptctl. */
#ifndef CUDACKPT_CTL_SAVES_JOBCALL_H
#define CUDACKPT_CTL_SAVES_JOBCALL_H

#include <stdbool.h>

/* A job's or a save's name: 1 to CTL_JOB_NAME_MAX of [A-Za-z0-9_.-], not
 * first '.' or '-' (the daemon says the same). */
#define CTL_JOB_NAME_MAX 48
bool ctl_job_name_valid(const char *s);

/* One JobEvent: "started", "running", "ended" or "saved". */
typedef struct ctl_job_event {
        char event[16];
        char name[CTL_JOB_NAME_MAX + 1];
        int pid;                   /* -1: absent */
        long long start_time;      /* -1: absent */
        int exit_status;           /* -1: absent */
        char save[CTL_JOB_NAME_MAX + 1];
} ctl_job_event;

/* Reads {"job": JobEvent} (a reply's parameters, as text) into *ev.
 * -EBADMSG when it is not one (no event or name, a field out of range). */
int ctl_job_event_parse(const char *parameters_json, ctl_job_event *ev);

/* StartJob's parameters as JSON text (to free()): name, argv (NULL
 * terminated), envp (NULL terminated), directory, output (NULL: none).
 * NULL when out of memory. */
char *ctl_job_start_params(const char *name, char *const *argv, char *const *envp, const char *directory,
                           const char *output);

/* {"save": S} and {"name": N, "save": S, "leave_running": L, "replace": R}. */
char *ctl_job_save_param(const char *save);
char *ctl_job_save_params(const char *name, const char *save, bool leave_running, bool replace);

#endif
