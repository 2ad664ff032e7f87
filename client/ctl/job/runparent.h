/* runparent.h: --die-with-parent of run and restore --wait (runparent.c):
 * the job lives no longer than the process that started the command
 * (cudackptd's loop thread: PR_SET_PDEATHSIG is the thread's).  When it
 * ends, or sends CTL_RUN_PARENT_SIGNAL, the command SIGKILLs the job's
 * init (its own child: no pid-reuse race), reaps it and exits 137. */
#ifndef CUDACKPT_CTL_RUNPARENT_H
#define CUDACKPT_CTL_RUNPARENT_H

#include <signal.h>

/* SIGRTMIN+2: glibc's SIGRTMIN is not a constant. */
#define CTL_RUN_PARENT_SIGNAL (SIGRTMIN + 2)

/* CTL_RUN_PARENT_SIGNAL blocked (for ctl_run_supervise_or_kill(), which
 * takes it) and asked for at the parent's end; then the parent checked
 * still there (it may have ended before).  0, or -ESRCH (it has ended) or
 * -errno. */
int ctl_run_parent_arm(void);

#endif
