/* jobcmd.h: cudackptctl job: a user's jobs that the daemon runs, saves and
 * restores for them (the daemon's StartJob, SaveJob, RestoreJob,
 * ListJobs, ListSaves, RemoveSave).  For any user: the daemon acts as
 * root and only on the caller's own jobs and saves.  Private to
 * cudackptctl. */
#ifndef CUDACKPT_CTL_SAVES_JOBCMD_H
#define CUDACKPT_CTL_SAVES_JOBCMD_H

/* main() of `cudackptctl job SUBCOMMAND ...`. */
int ctl_jobcmd_main(int argc, char **argv);

#endif
