/* restorewait.h: restore --images' options for cudackptd, which restores
 * a user's saved job for its caller (restorewait.c):
 *
 *   --owner=UID         the images must be of one run job (one tree, a pid
 *                       namespace of its own, the run record dump --run
 *                       wrote) that ran as UID: refused before anything is
 *                       restored otherwise (exit status 12);
 *   --cgroups-of=PIDFD  this command joins that process's cgroups
 *                       (runjoin.h) before criu runs, and criu leaves the
 *                       restored tasks in them (--manage-cgroups=ignore);
 *   --wait              a run job only: this command is made a subreaper
 *                       before criu runs (criu restore -d's detached root
 *                       becomes its child), and once the job runs it
 *                       forwards the job's signals to its init, ends with
 *                       its exit status and removes its name, as run does;
 *   --die-with-parent   with --wait: runparent.h;
 *   --ready-fd=FD       runready.h's line once the job runs under its name.
 * With --wait or --ready-fd the job must get its name back: a job that
 * cannot (the name is another running job's) is ended, the images
 * untouched, and the restore fails. */
#ifndef CUDACKPT_CTL_RESTOREWAIT_H
#define CUDACKPT_CTL_RESTOREWAIT_H

#include "jobpin.h"
#include "jobstep.h"
#include "manifest.h"
#include "runreg.h"

/* With the manifest read, before anything is touched: --owner's and
 * --wait's checks.  The exit status (said). */
int ctl_restore_daemon_check(const ctl_job_args *a, const ctl_manifest *m);
/* Before criu runs: --die-with-parent armed, the subreaper, --cgroups-of
 * joined.  The exit status (said). */
int ctl_restore_daemon_arm(const ctl_job_args *a);
/* criu's words for --cgroups-of (NULL: none). */
const char *ctl_restore_daemon_criu_word(const ctl_job_args *a);
/* Once the job is restored and resumed, its name's recording done (r
 * ctl_run_restored()'s result, rec its record): the ready line, and with
 * --wait the job to its end, signal (not 0: one criu's run noted) sent to
 * it first.  The exit status: the job's with --wait. */
int ctl_restore_daemon_after(const ctl_job_args *a, const ctl_pins *pins, int r, const ctl_run_record *rec,
                             int signal);

#endif
