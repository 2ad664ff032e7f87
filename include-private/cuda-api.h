/* cuda-api.h: the part of the CUDA driver API that cudackptd uses, declared
 * by the project itself, so that the daemon, the client, the simulator and
 * the tests build without the CUDA Toolkit.
 *
 * Nothing here is linked: the daemon, cudackptctl doctor and the benchmarks
 * load libcuda.so.1 (or the simulator) with dlopen() and call it through
 * pointers of the function types below; the simulator defines functions of
 * these types.  The declarations follow NVIDIA's CUDA Driver API reference
 * (the "Error Handling", "Device Management" and "Checkpointing" modules and
 * the data types they name, CUDA 13.0) and have the driver's ABI: the same
 * sizes, field order, alignment and enum values.  tests/unit/cuda_abi.c
 * checks every one of them against the Toolkit's cuda.h at compile time
 * whenever the build finds one (it does on the CI machines), so a
 * difference fails the build.
 *
 * Only what the project uses is declared.  A new driver call, type or
 * CUresult code goes here and into tests/unit/cuda_abi.c together (that
 * file then fails to compile until it checks the new name).  Linux only:
 * CUDAAPI, the calling convention macro of cuda.h, is empty there. */
#ifndef CUDACKPT_CUDA_API_H
#define CUDACKPT_CUDA_API_H

#include <stdint.h>

/* The result of every driver call.  An enum, as in the driver's headers
 * (4 bytes, the codes below are its values); the driver may return codes
 * not named here, which are reported by number or by cuGetErrorName(). */
typedef enum {
        CUDA_SUCCESS = 0,
        CUDA_ERROR_INVALID_VALUE = 1,
        CUDA_ERROR_OUT_OF_MEMORY = 2,
        CUDA_ERROR_NOT_INITIALIZED = 3,
        CUDA_ERROR_NO_DEVICE = 100,
        CUDA_ERROR_INVALID_DEVICE = 101,
        CUDA_ERROR_OPERATING_SYSTEM = 304,
        CUDA_ERROR_ILLEGAL_STATE = 401,
        CUDA_ERROR_NOT_READY = 600,
        CUDA_ERROR_NOT_SUPPORTED = 801,
        CUDA_ERROR_UNKNOWN = 999,
} CUresult;

/* A device ordinal's handle (an int). */
typedef int CUdevice;

/* A GPU's UUID, 16 bytes. */
typedef struct {
        char bytes[16];
} CUuuid;

/* cuCheckpointProcessGetState's answer. */
typedef enum {
        CU_PROCESS_STATE_RUNNING = 0,
        CU_PROCESS_STATE_LOCKED = 1,
        CU_PROCESS_STATE_CHECKPOINTED = 2,
        CU_PROCESS_STATE_FAILED = 3,
} CUprocessState;

/* The arguments of the checkpoint calls: 64 bytes each, every reserved
 * field zeroed by the caller. */
typedef struct {
        unsigned int timeoutMs; /* 0: wait without end */
        unsigned int reserved0;
        uint64_t reserved1[7];
} CUcheckpointLockArgs;

typedef struct {
        uint64_t reserved[8];
} CUcheckpointCheckpointArgs;

/* One GPU of the checkpoint and the GPU to restore its work onto. */
typedef struct {
        CUuuid oldUuid;
        CUuuid newUuid;
} CUcheckpointGpuPair;

typedef struct {
        CUcheckpointGpuPair *gpuPairs; /* NULL: restore onto the same GPUs */
        unsigned int gpuPairsCount;
        char reserved[52 - sizeof(CUcheckpointGpuPair *)];
        uint64_t reserved1;
} CUcheckpointRestoreArgs;

typedef struct {
        uint64_t reserved[8];
} CUcheckpointUnlockArgs;

/* The types of the driver functions used, named after them: a pointer to
 * cuda_cuInit_fn holds dlsym(driver, "cuInit"). */
typedef CUresult cuda_cuInit_fn(unsigned int flags);
typedef CUresult cuda_cuDriverGetVersion_fn(int *version);
typedef CUresult cuda_cuGetErrorName_fn(CUresult error, const char **name);
typedef CUresult cuda_cuGetErrorString_fn(CUresult error, const char **text);
typedef CUresult cuda_cuDeviceGetCount_fn(int *count);
typedef CUresult cuda_cuDeviceGet_fn(CUdevice *device, int ordinal);
/* Exported as cuDeviceGetUuid_v2 and, older, cuDeviceGetUuid: same type. */
typedef CUresult cuda_cuDeviceGetUuid_fn(CUuuid *uuid, CUdevice device);
typedef CUresult cuda_cuCheckpointProcessGetState_fn(int pid, CUprocessState *state);
typedef CUresult cuda_cuCheckpointProcessGetRestoreThreadId_fn(int pid, int *tid);
typedef CUresult cuda_cuCheckpointProcessLock_fn(int pid, CUcheckpointLockArgs *args);
typedef CUresult cuda_cuCheckpointProcessCheckpoint_fn(int pid, CUcheckpointCheckpointArgs *args);
typedef CUresult cuda_cuCheckpointProcessRestore_fn(int pid, CUcheckpointRestoreArgs *args);
typedef CUresult cuda_cuCheckpointProcessUnlock_fn(int pid, CUcheckpointUnlockArgs *args);

#endif
