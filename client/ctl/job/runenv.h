/* runenv.h: run --env-fd, the exact environment of a job's command
 * (runenv.c): read by root from a descriptor its caller (cudackptd) gave
 * it, checked and bounded, and handed to cudackpt-init as a sealed memfd
 * that only the command's process reads, as the user, at its exec
 * (runuser.h). */
#ifndef CUDACKPT_CTL_RUNENV_H
#define CUDACKPT_CTL_RUNENV_H

#include <stddef.h>

/* The bounds: bytes in all and entries. */
#define CTL_RUN_ENV_MAX_BYTES (256 * 1024)
#define CTL_RUN_ENV_MAX_ENTRIES 4096
#define CTL_RUN_ENV_BOUNDS_TEXT "256 KiB, 4096 entries"

/* fd read to its end (it may be non-blocking): NUL-separated KEY=VALUE
 * entries (a last NUL optional), each with a KEY of at least one byte and
 * '=', within the bounds.  A sealed memfd of them, each NUL-terminated
 * (above the standard descriptors, close-on-exec), or -errno with a
 * sentence in err. */
int ctl_run_env_read(int fd, char *err, size_t err_size);

#endif
