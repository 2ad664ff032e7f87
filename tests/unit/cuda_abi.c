/* cuda_abi.c: include-private/cuda-api.h against the CUDA Toolkit's cuda.h.
 *
 * Compiled only when the build finds the Toolkit (CMakeLists.txt), as part
 * of every build: each check is a _Static_assert, so any difference between
 * the project's declarations and the driver's (a size, a field's offset or
 * size, an alignment, an enum value, a function's type) fails the build.
 * The program itself only says what it was checked against (ctest
 * unit-cuda-abi).
 *
 * Both headers declare the same names, so the project's header is included
 * with every name it declares renamed to prj_NAME; a name added to it and
 * not renamed here is declared twice and fails to compile, which keeps this
 * list whole.  The simulator's list of CUresult codes (tests/sim/
 * sim-errors.h) is checked here too. */
#include <cuda.h>

#include <stddef.h>
#include <stdio.h>

#define CUresult prj_CUresult
#define CUDA_SUCCESS prj_CUDA_SUCCESS
#define CUDA_ERROR_INVALID_VALUE prj_CUDA_ERROR_INVALID_VALUE
#define CUDA_ERROR_OUT_OF_MEMORY prj_CUDA_ERROR_OUT_OF_MEMORY
#define CUDA_ERROR_NOT_INITIALIZED prj_CUDA_ERROR_NOT_INITIALIZED
#define CUDA_ERROR_NO_DEVICE prj_CUDA_ERROR_NO_DEVICE
#define CUDA_ERROR_INVALID_DEVICE prj_CUDA_ERROR_INVALID_DEVICE
#define CUDA_ERROR_OPERATING_SYSTEM prj_CUDA_ERROR_OPERATING_SYSTEM
#define CUDA_ERROR_ILLEGAL_STATE prj_CUDA_ERROR_ILLEGAL_STATE
#define CUDA_ERROR_NOT_READY prj_CUDA_ERROR_NOT_READY
#define CUDA_ERROR_NOT_SUPPORTED prj_CUDA_ERROR_NOT_SUPPORTED
#define CUDA_ERROR_UNKNOWN prj_CUDA_ERROR_UNKNOWN
#define CUdevice prj_CUdevice
#define CUuuid prj_CUuuid
#define CUprocessState prj_CUprocessState
#define CU_PROCESS_STATE_RUNNING prj_CU_PROCESS_STATE_RUNNING
#define CU_PROCESS_STATE_LOCKED prj_CU_PROCESS_STATE_LOCKED
#define CU_PROCESS_STATE_CHECKPOINTED prj_CU_PROCESS_STATE_CHECKPOINTED
#define CU_PROCESS_STATE_FAILED prj_CU_PROCESS_STATE_FAILED
#define CUcheckpointLockArgs prj_CUcheckpointLockArgs
#define CUcheckpointCheckpointArgs prj_CUcheckpointCheckpointArgs
#define CUcheckpointGpuPair prj_CUcheckpointGpuPair
#define CUcheckpointRestoreArgs prj_CUcheckpointRestoreArgs
#define CUcheckpointUnlockArgs prj_CUcheckpointUnlockArgs
#include "cuda-api.h"
#undef CUresult
#undef CUDA_SUCCESS
#undef CUDA_ERROR_INVALID_VALUE
#undef CUDA_ERROR_OUT_OF_MEMORY
#undef CUDA_ERROR_NOT_INITIALIZED
#undef CUDA_ERROR_NO_DEVICE
#undef CUDA_ERROR_INVALID_DEVICE
#undef CUDA_ERROR_OPERATING_SYSTEM
#undef CUDA_ERROR_ILLEGAL_STATE
#undef CUDA_ERROR_NOT_READY
#undef CUDA_ERROR_NOT_SUPPORTED
#undef CUDA_ERROR_UNKNOWN
#undef CUdevice
#undef CUuuid
#undef CUprocessState
#undef CU_PROCESS_STATE_RUNNING
#undef CU_PROCESS_STATE_LOCKED
#undef CU_PROCESS_STATE_CHECKPOINTED
#undef CU_PROCESS_STATE_FAILED
#undef CUcheckpointLockArgs
#undef CUcheckpointCheckpointArgs
#undef CUcheckpointGpuPair
#undef CUcheckpointRestoreArgs
#undef CUcheckpointUnlockArgs

#include "sim-errors.h"

#if CUDA_VERSION < 12080
#error "the checkpoint API's declarations are checked against cuda.h of CUDA 12.8 or newer"
#endif

/* A type: size, alignment, and for enums the signedness of the values. */
#define SAME_TYPE(t)                                                                                   \
        _Static_assert(sizeof(prj_##t) == sizeof(t) && _Alignof(prj_##t) == _Alignof(t),                \
                       "cuda-api.h: " #t " differs from cuda.h in size or alignment")
#define SAME_SIGN(t)                                                                                   \
        _Static_assert(((prj_##t)-1 > (prj_##t)0) == ((t)-1 > (t)0), "cuda-api.h: " #t " differs in sign")
/* An enum constant. */
#define SAME_VALUE(c) _Static_assert((long long)prj_##c == (long long)c, "cuda-api.h: " #c " differs from cuda.h")
/* A field: offset and size. */
#define SAME_FIELD(t, f)                                                                               \
        _Static_assert(offsetof(prj_##t, f) == offsetof(t, f) &&                                        \
                               sizeof(((prj_##t *)0)->f) == sizeof(((t *)0)->f),                        \
                       "cuda-api.h: " #t "." #f " differs from cuda.h in offset or size")
/* A function: the project's type against its signature in the project's
 * types (P), and cuda.h's declaration against the same signature in
 * cuda.h's types (C); with the types the same, the functions are. */
#define P(t) prj_##t
#define C(t) t
#define SAME_FN(name, sig)                                                                             \
        _Static_assert(__builtin_types_compatible_p(cuda_##name##_fn, sig(P)),                          \
                       "cuda-api.h: the type of " #name " differs from its signature");                 \
        _Static_assert(__builtin_types_compatible_p(__typeof__(name), sig(C)),                          \
                       "cuda.h: " #name " has another signature than cuda-api.h's")

SAME_TYPE(CUresult);
SAME_SIGN(CUresult);
SAME_VALUE(CUDA_SUCCESS);
SAME_VALUE(CUDA_ERROR_INVALID_VALUE);
SAME_VALUE(CUDA_ERROR_OUT_OF_MEMORY);
SAME_VALUE(CUDA_ERROR_NOT_INITIALIZED);
SAME_VALUE(CUDA_ERROR_NO_DEVICE);
SAME_VALUE(CUDA_ERROR_INVALID_DEVICE);
SAME_VALUE(CUDA_ERROR_OPERATING_SYSTEM);
SAME_VALUE(CUDA_ERROR_ILLEGAL_STATE);
SAME_VALUE(CUDA_ERROR_NOT_READY);
SAME_VALUE(CUDA_ERROR_NOT_SUPPORTED);
SAME_VALUE(CUDA_ERROR_UNKNOWN);

SAME_TYPE(CUdevice);
SAME_SIGN(CUdevice);
SAME_TYPE(CUuuid);
SAME_FIELD(CUuuid, bytes);

SAME_TYPE(CUprocessState);
SAME_SIGN(CUprocessState);
SAME_VALUE(CU_PROCESS_STATE_RUNNING);
SAME_VALUE(CU_PROCESS_STATE_LOCKED);
SAME_VALUE(CU_PROCESS_STATE_CHECKPOINTED);
SAME_VALUE(CU_PROCESS_STATE_FAILED);

SAME_TYPE(CUcheckpointLockArgs);
SAME_FIELD(CUcheckpointLockArgs, timeoutMs);
SAME_FIELD(CUcheckpointLockArgs, reserved0);
SAME_FIELD(CUcheckpointLockArgs, reserved1);
SAME_TYPE(CUcheckpointCheckpointArgs);
SAME_FIELD(CUcheckpointCheckpointArgs, reserved);
SAME_TYPE(CUcheckpointGpuPair);
SAME_FIELD(CUcheckpointGpuPair, oldUuid);
SAME_FIELD(CUcheckpointGpuPair, newUuid);
SAME_TYPE(CUcheckpointRestoreArgs);
SAME_FIELD(CUcheckpointRestoreArgs, gpuPairs);
SAME_FIELD(CUcheckpointRestoreArgs, gpuPairsCount);
SAME_FIELD(CUcheckpointRestoreArgs, reserved);
SAME_FIELD(CUcheckpointRestoreArgs, reserved1);
SAME_TYPE(CUcheckpointUnlockArgs);
SAME_FIELD(CUcheckpointUnlockArgs, reserved);

#define SIG_INIT(T) T(CUresult)(unsigned int)
#define SIG_VERSION(T) T(CUresult)(int *)
#define SIG_ERROR(T) T(CUresult)(T(CUresult), const char **)
#define SIG_COUNT(T) T(CUresult)(int *)
#define SIG_DEVICE(T) T(CUresult)(T(CUdevice) *, int)
#define SIG_UUID(T) T(CUresult)(T(CUuuid) *, T(CUdevice))
#define SIG_STATE(T) T(CUresult)(int, T(CUprocessState) *)
#define SIG_TID(T) T(CUresult)(int, int *)
#define SIG_LOCK(T) T(CUresult)(int, T(CUcheckpointLockArgs) *)
#define SIG_CHECKPOINT(T) T(CUresult)(int, T(CUcheckpointCheckpointArgs) *)
#define SIG_RESTORE(T) T(CUresult)(int, T(CUcheckpointRestoreArgs) *)
#define SIG_UNLOCK(T) T(CUresult)(int, T(CUcheckpointUnlockArgs) *)

SAME_FN(cuInit, SIG_INIT);
SAME_FN(cuDriverGetVersion, SIG_VERSION);
SAME_FN(cuGetErrorName, SIG_ERROR);
SAME_FN(cuGetErrorString, SIG_ERROR);
SAME_FN(cuDeviceGetCount, SIG_COUNT);
SAME_FN(cuDeviceGet, SIG_DEVICE);
/* cuda.h names cuDeviceGetUuid_v2 cuDeviceGetUuid with a macro. */
_Static_assert(__builtin_types_compatible_p(cuda_cuDeviceGetUuid_fn, SIG_UUID(P)), "cuda-api.h: cuDeviceGetUuid");
_Static_assert(__builtin_types_compatible_p(__typeof__(cuDeviceGetUuid_v2), SIG_UUID(C)), "cuda.h: cuDeviceGetUuid_v2");
SAME_FN(cuCheckpointProcessGetState, SIG_STATE);
SAME_FN(cuCheckpointProcessGetRestoreThreadId, SIG_TID);
SAME_FN(cuCheckpointProcessLock, SIG_LOCK);
SAME_FN(cuCheckpointProcessCheckpoint, SIG_CHECKPOINT);
SAME_FN(cuCheckpointProcessRestore, SIG_RESTORE);
SAME_FN(cuCheckpointProcessUnlock, SIG_UNLOCK);

/* The simulator's codes: every one a CUresult of cuda.h, of that value. */
#define SIM_CHECK(name, value, text) _Static_assert(name == value, "tests/sim/sim-errors.h: " #name " is not " #value);
#if CUDA_VERSION >= 13000 /* the list is of CUDA 13.0; 12.x lacks some codes */
SIM_ERRORS(SIM_CHECK)
#endif

int main(void)
{
        printf("include-private/cuda-api.h and tests/sim/sim-errors.h match cuda.h of CUDA %d.%d\n",
               CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
        return 0;
}
