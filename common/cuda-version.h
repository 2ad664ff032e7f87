/* cuda-version.h: what the project needs of the CUDA driver, said once for
 * the daemon (daemon/driver.c refuses a driver without it) and for
 * cudackptctl's doctor (which tells the operator before the daemon does).
 *
 * Versions are cuDriverGetVersion() values: 1000 * major + 10 * minor. */
#ifndef CUDACKPT_CUDA_VERSION_H
#define CUDACKPT_CUDA_VERSION_H

/* The checkpoint API came with CUDA 12.8 (driver 570). */
#define CUDA_VERSION_MIN 12080
/* GPU pairs in CUcheckpointRestoreArgs (restore onto other GPUs) came
 * with CUDA 13.0 (driver 580). */
#define CUDA_VERSION_REMAP 13000

/* The checkpoint API's symbols, as X(field, "name"): field is the name
 * daemon/driver.h gives the resolved pointer.  The driver lacks them when
 * it is older than CUDA_VERSION_MIN.  The queries, then the actions: the
 * daemon resolves them in that order and names the first one missing;
 * doctor lists every one missing, the actions first. */
#define CUDA_CHECKPOINT_QUERY_SYMBOLS(X)                                        \
        X(cu_get_state, "cuCheckpointProcessGetState")                          \
        X(cu_get_restore_tid, "cuCheckpointProcessGetRestoreThreadId")
#define CUDA_CHECKPOINT_ACTION_SYMBOLS(X)                                       \
        X(cu_lock, "cuCheckpointProcessLock")                                   \
        X(cu_checkpoint, "cuCheckpointProcessCheckpoint")                       \
        X(cu_restore, "cuCheckpointProcessRestore")                             \
        X(cu_unlock, "cuCheckpointProcessUnlock")
#define CUDA_CHECKPOINT_SYMBOLS(X) CUDA_CHECKPOINT_QUERY_SYMBOLS(X) CUDA_CHECKPOINT_ACTION_SYMBOLS(X)

#endif
