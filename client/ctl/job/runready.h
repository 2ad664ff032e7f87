/* runready.h: the descriptors cudackptd hands the root commands it
 * spawns (run's and restore's --ready-fd, --env-fd, --cgroups-of), and
 * the ready line (runready.c). */
#ifndef CUDACKPT_CTL_RUNREADY_H
#define CUDACKPT_CTL_RUNREADY_H

#include <stdint.h>

/* An option's FD: a number above 2 of an open descriptor, made
 * close-on-exec (the job never gets it); 0 or -EINVAL, -EBADF. */
int ctl_run_fd_arg(const char *s, int *ret);

/* Once the job runs (started, or restored and resumed) under its name:
 * {"name":"N","pid":INIT_HOST_PID,"start_time":INIT_START_TIME}\n written
 * on fd, which is closed.  0 or -errno (fd closed all the same). */
int ctl_run_ready_write(int fd, const char *name, int pid, uint64_t start_time);

#endif
