/* cudackpt/protocol.h: the names of the cudackptd wire protocol.
 *
 * cudackptd speaks Varlink (NUL-terminated JSON objects over an AF_UNIX
 * stream socket).  This header names the interface, its methods, its errors
 * and its state strings, so that clients written in C do not have to spell
 * them.  The interface's IDL, daemon/io.cudackpt.Process.varlink, is the
 * source of truth; docs/protocol.md explains every name below. */
#ifndef CUDACKPT_PROTOCOL_H
#define CUDACKPT_PROTOCOL_H

#define CUDACKPT_INTERFACE "io.cudackpt.Process"
#define CUDACKPT_DEFAULT_SOCKET "/run/cudackpt/io.cudackpt.Process"
#define CUDACKPT_SOCKET_ENV "CUDACKPT_SOCKET"

/* Methods of io.cudackpt.Process. */
#define CUDACKPT_METHOD_GET_STATE "io.cudackpt.Process.GetState"
#define CUDACKPT_METHOD_GET_RESTORE_THREAD_ID "io.cudackpt.Process.GetRestoreThreadId"
#define CUDACKPT_METHOD_LOCK "io.cudackpt.Process.Lock"
#define CUDACKPT_METHOD_CHECKPOINT "io.cudackpt.Process.Checkpoint"
#define CUDACKPT_METHOD_RESTORE "io.cudackpt.Process.Restore"
#define CUDACKPT_METHOD_UNLOCK "io.cudackpt.Process.Unlock"
#define CUDACKPT_METHOD_SUSPEND "io.cudackpt.Process.Suspend"
#define CUDACKPT_METHOD_RESUME "io.cudackpt.Process.Resume"
#define CUDACKPT_METHOD_LOCK_GROUP "io.cudackpt.Process.LockGroup"
#define CUDACKPT_METHOD_CHECKPOINT_GROUP "io.cudackpt.Process.CheckpointGroup"
#define CUDACKPT_METHOD_RESTORE_GROUP "io.cudackpt.Process.RestoreGroup"
#define CUDACKPT_METHOD_UNLOCK_GROUP "io.cudackpt.Process.UnlockGroup"
#define CUDACKPT_METHOD_SUSPEND_GROUP "io.cudackpt.Process.SuspendGroup"
#define CUDACKPT_METHOD_RESUME_GROUP "io.cudackpt.Process.ResumeGroup"
#define CUDACKPT_METHOD_LIST_PROCESSES "io.cudackpt.Process.ListProcesses"
#define CUDACKPT_METHOD_RELEASE_LEASE "io.cudackpt.Process.ReleaseLease"
#define CUDACKPT_METHOD_RENEW_LEASE "io.cudackpt.Process.RenewLease"
#define CUDACKPT_METHOD_CLAIM_LEASE "io.cudackpt.Process.ClaimLease"
#define CUDACKPT_METHOD_WATCH "io.cudackpt.Process.Watch"
#define CUDACKPT_METHOD_GET_METRICS "io.cudackpt.Process.GetMetrics"
#define CUDACKPT_METHOD_GET_STATUS "io.cudackpt.Process.GetStatus"
#define CUDACKPT_METHOD_LIST_GPUS "io.cudackpt.Process.ListGpus"
#define CUDACKPT_METHOD_START_JOB "io.cudackpt.Process.StartJob"
#define CUDACKPT_METHOD_SAVE_JOB "io.cudackpt.Process.SaveJob"
#define CUDACKPT_METHOD_RESTORE_JOB "io.cudackpt.Process.RestoreJob"
#define CUDACKPT_METHOD_LIST_SAVES "io.cudackpt.Process.ListSaves"
#define CUDACKPT_METHOD_REMOVE_SAVE "io.cudackpt.Process.RemoveSave"
#define CUDACKPT_METHOD_LIST_JOBS "io.cudackpt.Process.ListJobs"
#define CUDACKPT_METHOD_PASS_BARRIER "io.cudackpt.Process.PassBarrier"

/* State strings carried in "state".  A driver value this build does not
 * know is reported as "unknown-N" with N the driver's number. */
#define CUDACKPT_STATE_RUNNING "running"
#define CUDACKPT_STATE_LOCKED "locked"
#define CUDACKPT_STATE_CHECKPOINTED "checkpointed"
#define CUDACKPT_STATE_FAILED "failed"

/* Phases of a group operation, in GroupFailed and in progress replies. */
#define CUDACKPT_PHASE_SELECT "select"
#define CUDACKPT_PHASE_STATE "state"
#define CUDACKPT_PHASE_LOCK "lock"
#define CUDACKPT_PHASE_CHECKPOINT "checkpoint"
#define CUDACKPT_PHASE_RESTORE "restore"
#define CUDACKPT_PHASE_UNLOCK "unlock"
/* Why a process of a cgroup or tree selection was skipped. */
#define CUDACKPT_SKIP_NOT_CUDA "not-cuda"

/* Errors of io.cudackpt.Process. */
#define CUDACKPT_ERROR_NO_SUCH_PROCESS "io.cudackpt.Process.NoSuchProcess"
#define CUDACKPT_ERROR_NOT_CUDA_PROCESS "io.cudackpt.Process.NotCudaProcess"
#define CUDACKPT_ERROR_PERMISSION_DENIED "io.cudackpt.Process.PermissionDenied"
#define CUDACKPT_ERROR_INVALID_STATE "io.cudackpt.Process.InvalidState"
#define CUDACKPT_ERROR_TIMEOUT "io.cudackpt.Process.Timeout"
#define CUDACKPT_ERROR_INVALID_GPU_MAPPING "io.cudackpt.Process.InvalidGpuMapping"
#define CUDACKPT_ERROR_NOT_SUPPORTED "io.cudackpt.Process.NotSupported"
#define CUDACKPT_ERROR_PROCESS_GONE "io.cudackpt.Process.ProcessGone"
#define CUDACKPT_ERROR_PROCESS_CHANGED "io.cudackpt.Process.ProcessChanged"
#define CUDACKPT_ERROR_PROCESS_STOPPED "io.cudackpt.Process.ProcessStopped"
#define CUDACKPT_ERROR_DRIVER_UNAVAILABLE "io.cudackpt.Process.DriverUnavailable"
#define CUDACKPT_ERROR_DRIVER_ERROR "io.cudackpt.Process.DriverError"
#define CUDACKPT_ERROR_QUEUE_FULL "io.cudackpt.Process.QueueFull"
#define CUDACKPT_ERROR_GROUP_FAILED "io.cudackpt.Process.GroupFailed"
#define CUDACKPT_ERROR_GROUP_TOO_LARGE "io.cudackpt.Process.GroupTooLarge"
#define CUDACKPT_ERROR_SHUTTING_DOWN "io.cudackpt.Process.ShuttingDown"
#define CUDACKPT_ERROR_INVALID_REQUEST "io.cudackpt.Process.InvalidRequest"
#define CUDACKPT_ERROR_MESSAGE_TOO_LARGE "io.cudackpt.Process.MessageTooLarge"
#define CUDACKPT_ERROR_NO_SUCH_LEASE "io.cudackpt.Process.NoSuchLease"
#define CUDACKPT_ERROR_INSUFFICIENT_GPU_MEMORY "io.cudackpt.Process.InsufficientGpuMemory"
#define CUDACKPT_ERROR_NO_SUCH_CGROUP "io.cudackpt.Process.NoSuchCgroup"
#define CUDACKPT_ERROR_SAVES_DISABLED "io.cudackpt.Process.SavesDisabled"
#define CUDACKPT_ERROR_NO_SUCH_JOB "io.cudackpt.Process.NoSuchJob"
#define CUDACKPT_ERROR_JOB_EXISTS "io.cudackpt.Process.JobExists"
#define CUDACKPT_ERROR_NO_SUCH_SAVE "io.cudackpt.Process.NoSuchSave"
#define CUDACKPT_ERROR_SAVE_EXISTS "io.cudackpt.Process.SaveExists"
#define CUDACKPT_ERROR_SAVE_BUSY "io.cudackpt.Process.SaveBusy"
#define CUDACKPT_ERROR_COMMAND_FAILED "io.cudackpt.Process.CommandFailed"

/* Standard Varlink errors the daemon uses. */
#define CUDACKPT_VARLINK_INTERFACE_NOT_FOUND "org.varlink.service.InterfaceNotFound"
#define CUDACKPT_VARLINK_METHOD_NOT_FOUND "org.varlink.service.MethodNotFound"
#define CUDACKPT_VARLINK_INVALID_PARAMETER "org.varlink.service.InvalidParameter"
#define CUDACKPT_VARLINK_PERMISSION_DENIED "org.varlink.service.PermissionDenied"
#define CUDACKPT_VARLINK_EXPECTED_MORE "org.varlink.service.ExpectedMore"

#endif
