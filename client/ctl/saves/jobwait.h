/* jobwait.h: a job the daemon runs for the caller, waited on: StartJob or
 * RestoreJob called with "more", each event said, and the signals that
 * reach this command while it waits handled.  A signal of save_on saves
 * the job (SaveJob on a second connection, replacing the save); any other
 * of HUP INT QUIT TERM USR1 USR2 ends this command, whose closing
 * connection makes the daemon stop the job.  Private to cudackptctl. */
#ifndef CUDACKPT_CTL_SAVES_JOBWAIT_H
#define CUDACKPT_CTL_SAVES_JOBWAIT_H

#include "jobcall.h"

#include <cudackpt/client.h>

#include <signal.h>
#include <stdbool.h>

typedef struct ctl_job_wait {
        const char *socket;     /* the daemon's socket */
        const char *prefix;     /* of every message: "cudackptctl: job: " */
        const char *method;     /* StartJob or RestoreJob */
        const char *params;     /* its parameters, JSON text */
        const char *save;       /* where save_on saves the job; NULL: nowhere */
        sigset_t save_on;
        bool json;              /* each event as a line of JSON on stdout */
} ctl_job_wait;

/* SIGS ("TERM,USR1": names with or without SIG) into *set: 0, or -EINVAL
 * for a name that is none of those ctl_job_wait_signals() gives. */
int ctl_job_parse_signals(const char *spec, sigset_t *set);

/* The signals this command handles while it waits. */
void ctl_job_wait_signals(sigset_t *set);

/* Calls and waits.  0: the call ended with *ret_reply, whose error (if
 * any) the caller says, else *ret_last is the last event ("ended" or
 * "saved") and *ret_saved_by the signal whose save ended it (0 none);
 * < 0: the call failed (said by the caller, ctl_call_failed()); > 0: the
 * daemon could not be reached (said), the exit status. */
int ctl_job_wait_run(const ctl_job_wait *w, ctl_job_event *ret_last, int *ret_saved_by, cudackpt_reply *ret_reply);

/* --requeue: after a save made on sig (but SIGTERM: Slurm ends the job
 * already; -ECANCELED), `scontrol requeue $SLURM_JOB_ID`, said on stderr.
 * 0 requeued, or -errno (nodes_slurm_requeue()). */
int ctl_job_requeue_after(const char *prefix, int sig);

#endif
