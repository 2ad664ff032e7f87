/* exitcode.h: cudackptctl's exit statuses, and the one a daemon reply or
 * error name earns.  The command's promise to scripts (see the man page),
 * not the library's: libcudackpt returns errors, cudackptctl exits. */
#ifndef CUDACKPT_CTL_EXITCODE_H
#define CUDACKPT_CTL_EXITCODE_H

#include <cudackpt/client.h>

/* Exit statuses of cudackptctl. */
#define CUDACKPT_EXIT_OK 0
#define CUDACKPT_EXIT_FAILURE 1             /* any other error, e.g. an invalid reply */
#define CUDACKPT_EXIT_USAGE 2               /* bad command line */
#define CUDACKPT_EXIT_UNREACHABLE 3         /* cannot connect, or no reply came */
#define CUDACKPT_EXIT_NO_SUCH_PROCESS 10
#define CUDACKPT_EXIT_NOT_CUDA_PROCESS 11
#define CUDACKPT_EXIT_PERMISSION_DENIED 12
#define CUDACKPT_EXIT_INVALID_STATE 13
#define CUDACKPT_EXIT_TIMEOUT 14
#define CUDACKPT_EXIT_INVALID_GPU_MAPPING 15
#define CUDACKPT_EXIT_NOT_SUPPORTED 16
#define CUDACKPT_EXIT_PROCESS_GONE 17
#define CUDACKPT_EXIT_DRIVER_UNAVAILABLE 18
#define CUDACKPT_EXIT_DRIVER_ERROR 19
#define CUDACKPT_EXIT_PROCESS_CHANGED 20
#define CUDACKPT_EXIT_QUEUE_FULL 21
#define CUDACKPT_EXIT_SHUTTING_DOWN 22
#define CUDACKPT_EXIT_PROTOCOL 23           /* InvalidRequest, MessageTooLarge, Varlink errors */
#define CUDACKPT_EXIT_PROCESS_STOPPED 24
#define CUDACKPT_EXIT_GROUP_TOO_LARGE 25
#define CUDACKPT_EXIT_INSUFFICIENT_GPU_MEMORY 26
#define CUDACKPT_EXIT_NO_SUCH_CGROUP 27     /* a cgroup selector names no cgroup */
#define CUDACKPT_EXIT_NO_DEVICE_PLAN 28     /* restore --images: no GPU of the model left, an older driver */
#define CUDACKPT_EXIT_IMAGES_DAMAGED 29     /* images or an archive not as dumped, or without digests */
#define CUDACKPT_EXIT_NO_SUCH_JOB 30        /* job: the caller has no such job or save */
#define CUDACKPT_EXIT_JOB_EXISTS 31         /* job: the name or save is taken, or busy */
#define CUDACKPT_EXIT_SAVES_DISABLED 32     /* job: the daemon has no saves directory */
#define CUDACKPT_EXIT_INCOMPLETE_SAVE 33    /* job start --slurm: no generation of the save whole on the nodes */

/* A GroupFailed has no status of its own: it exits with that of the
 * failing member's error (ctl_reply_exit_code()). */

/* Exit status for a Varlink error name: CUDACKPT_EXIT_OK for NULL,
 * CUDACKPT_EXIT_* of the error for the errors of io.cudackpt.Process,
 * CUDACKPT_EXIT_PERMISSION_DENIED for org.varlink.service.PermissionDenied,
 * CUDACKPT_EXIT_PROTOCOL for InvalidRequest, MessageTooLarge and the other
 * org.varlink.service errors, CUDACKPT_EXIT_FAILURE for any other name,
 * GroupFailed included (its status is in its parameters: use
 * ctl_reply_exit_code()). */
int ctl_error_exit_code(const char *error_name);

/* Exit status for a reply: CUDACKPT_EXIT_OK without an error; for a
 * GroupFailed, that of the failing member's error; else
 * ctl_error_exit_code(r->error). */
int ctl_reply_exit_code(const cudackpt_reply *r);

#endif
