/* runparent.c: --die-with-parent (runparent.h). */
#include "runparent.h"

#include <errno.h>
#include <sys/prctl.h>
#include <unistd.h>

int ctl_run_parent_arm(void) {
        pid_t parent = getppid();
        sigset_t set;

        sigemptyset(&set);
        sigaddset(&set, CTL_RUN_PARENT_SIGNAL);
        if (sigprocmask(SIG_BLOCK, &set, NULL) < 0 || prctl(PR_SET_PDEATHSIG, CTL_RUN_PARENT_SIGNAL) < 0)
                return -errno;
        /* Ended before it was asked for: no signal will come. */
        return getppid() != parent ? -ESRCH : 0;
}
