/* driver.h: the only door to the CUDA driver.
 *
 * The driver is loaded at run time with dlopen() (libcuda.so.1 by default,
 * or any library with the same symbols, such as the test simulator), so one
 * binary builds and starts on machines without a GPU.  driver_open() only
 * loads and resolves symbols; driver_start() makes the first driver calls
 * (cuInit, version, devices) and must run on a worker thread.  Every other
 * call is made from worker threads only, never from the event loop. */
#ifndef CUDACKPT_DRIVER_H
#define CUDACKPT_DRIVER_H

#include <stdbool.h>
#include <stddef.h>

#include "cuda-api.h"
#include "cuda-version.h"

#define DRIVER_MIN_VERSION CUDA_VERSION_MIN
#define DRIVER_MAX_DEVICES 64

struct driver {
        void *handle;            /* dlopen() handle, NULL when not loaded */
        bool simulated;          /* the library says it is the simulator */
        bool available;          /* loaded, new enough, cuInit succeeded */
        char reason[512];        /* why not available, for DriverUnavailable */
        int version;             /* cuDriverGetVersion(), e.g. 13000 */
        unsigned n_devices;      /* GPUs the driver reports */
        CUuuid devices[DRIVER_MAX_DEVICES];

        cuda_cuInit_fn *cu_init;
        cuda_cuDriverGetVersion_fn *cu_driver_get_version;
        cuda_cuGetErrorName_fn *cu_get_error_name;
        cuda_cuDeviceGetCount_fn *cu_device_get_count;
        cuda_cuDeviceGet_fn *cu_device_get;
        cuda_cuDeviceGetUuid_fn *cu_device_get_uuid;
        cuda_cuCheckpointProcessGetState_fn *cu_get_state;
        cuda_cuCheckpointProcessGetRestoreThreadId_fn *cu_get_restore_tid;
        cuda_cuCheckpointProcessLock_fn *cu_lock;
        cuda_cuCheckpointProcessCheckpoint_fn *cu_checkpoint;
        cuda_cuCheckpointProcessRestore_fn *cu_restore;
        cuda_cuCheckpointProcessUnlock_fn *cu_unlock;
};

/* Loads path and resolves every symbol.  On failure d->reason says why and
 * the daemon keeps serving with DriverUnavailable. */
int driver_open(struct driver *d, const char *path);
/* cuInit(0), the version check and the device list.  Worker thread only. */
int driver_start(struct driver *d);
void driver_close(struct driver *d);

/* The CUDA error name of r ("CUDA_ERROR_NOT_READY"), or "CUDA_ERROR_<r>". */
const char *driver_error_name(const struct driver *d, CUresult r, char *buf, size_t len);
bool driver_has_device(const struct driver *d, const CUuuid *u);
/* The first new GPU of a restore's mapping that this machine does not have,
 * or NULL.  The old ones may come from another machine: not looked up. */
const CUuuid *driver_unknown_new_gpu(const struct driver *d, const CUcheckpointGpuPair *pairs, unsigned n);

/* The calls, with the arguments the daemon uses. */
CUresult driver_get_state(const struct driver *d, int pid, int *ret_state);
CUresult driver_get_restore_tid(const struct driver *d, int pid, int *ret_tid);
CUresult driver_lock(const struct driver *d, int pid, unsigned timeout_ms);
CUresult driver_checkpoint(const struct driver *d, int pid);
CUresult driver_restore(const struct driver *d, int pid, CUcheckpointGpuPair *pairs, unsigned n);
CUresult driver_unlock(const struct driver *d, int pid);

#endif
