/* progress.h: a checkpoint's progress on stderr, from a Watch of its own. */
#ifndef CUDACKPT_CTL_PROGRESS_H
#define CUDACKPT_CTL_PROGRESS_H

#include <stdbool.h>

/* Shows the progress of the checkpoint of pid on stderr (a line
 * rewritten in place when tty) until ctl_progress_stop(), from a Watch on a
 * connection of its own.  -errno when it cannot watch (then no progress). */
typedef struct ctl_progress ctl_progress;
int ctl_progress_start(const char *socket_path, int pid, bool tty, ctl_progress **ret);
void ctl_progress_stop(ctl_progress *p); /* accepts NULL */

#endif
