/* libcudackpt-sim.so: a simulated CUDA driver, for tests only.
 *
 * It stands in for libcuda.so.1 (cudackptd loads it with --driver=PATH) and
 * exports the few driver entry points the daemon uses: cuInit, the error and
 * device queries, and the cuCheckpointProcess* API, of the driver's types
 * (include-private/cuda-api.h, checked against cuda.h by the build).  Any
 * ordinary process becomes a "CUDA process" by carrying CUDACKPT_SIM=1 in
 * its environment; the sim reads that environment from
 * /proc/PID/environ and keeps the process's checkpoint state here, inside the
 * daemon's memory, keyed by pid and start time, and in the process itself
 * (the state slot, below).  Results, the state machine
 * and timings imitate the real driver as measured in
 * shared/reference/driver-behaviour.md.  It is never installed and must never
 * be used as a real driver: it moves no memory and touches no GPU.
 * This file holds the driver's exported entry points; sim.h lists the
 * library's other files, each one concern, and what they share.
 *
 * The DAEMON's environment (read once): CUDACKPT_SIM_DEVICES=uuid,... (the
 * GPUs reported; default GPU-00000000-5157-4000-8000-000000000001 and, with
 * CUDACKPT_SIM_DEVICE_COUNT=N, ...0002 up to N), CUDACKPT_SIM_GPU_MEM_MIB=N (the
 * memory of each GPU, 81920), CUDACKPT_SIM_DRIVER_VERSION=N
 * (default 13000), CUDACKPT_SIM_INIT_ERROR=N or a CUDA_ERROR_ name (cuInit's
 * result); NVML's model names, PCI bus ids and driver version are
 * sim_nvml_info.c's (CUDACKPT_SIM_GPU_NAMES, CUDACKPT_SIM_PCI_BUS_IDS,
 * CUDACKPT_SIM_NVML_DRIVER_VERSION), and CUDACKPT_SIM_NVML_DELAY_MS=N
 * makes each of NVML's memory queries take N ms longer (sim_nvml.c).  A TARGET's environment (read at every call): CUDACKPT_SIM=1 (it
 * is a CUDA process), CUDACKPT_SIM_MEM_MIB (64), CUDACKPT_SIM_CKPT_MIBPS
 * (2048), CUDACKPT_SIM_RESTORE_MIBPS (4096), CUDACKPT_SIM_GPUS=index|uuid,...
 * (device 0), CUDACKPT_SIM_BUSY_MS (a kernel in flight at lock time),
 * CUDACKPT_SIM_MANAGED=1 (checkpoint fails NOT_SUPPORTED, then UNKNOWN),
 * CUDACKPT_SIM_FAIL=op:CUDA_ERROR_X[:failed],... (op: lock, checkpoint,
 * restore, unlock, getstate, tid; ":failed" leaves the state FAILED),
 * CUDACKPT_SIM_STATE_VALUE=N (GetState reports N), CUDACKPT_SIM_STATE=X (the
 * state slot, below), CUDACKPT_SIM_STEP=- (the step slot, below),
 * CUDACKPT_SIM_PRE_WAIT_MS=N (lock, checkpoint, restore and unlock sleep N ms
 * between step 3 and step 4, below: a window in which a test can stop the
 * target after the daemon's own check and before the call's).  Numbers are
 * decimal, strictly; a bad value means the default.
 *
 * The state slot: the real driver keeps its state inside the target, so a
 * daemon that restarts finds every process as it left it, and a process
 * restored by CRIU (same pid, new start time, memory from the image) still
 * reads "checkpointed".  The sim does the same by default: every
 * state-changing call writes the letter of the state it leaves, r (running),
 * l (locked), c (checkpointed) or f (failed), into the target's own memory,
 * in place of the value of its CUDACKPT_SIM=1 (which then reads
 * CUDACKPT_SIM=c, say, and still names a CUDA process), at env_start (field
 * 50 of /proc/PID/stat) plus the character's offset in /proc/PID/environ,
 * with process_vm_writev (failing quietly: the table alone then holds the
 * state).  When the sim meets a pid and start time it has no entry for (a
 * daemon restarted, an image restored), it takes the state from the slot.
 * A target that carries CUDACKPT_SIM_STATE=X, X one of those letters, has
 * its slot there instead; any other value of CUDACKPT_SIM_STATE (say "-")
 * means no slot: the state lives in the daemon's memory alone and a restart
 * forgets it.  A child that a target forks or execs inherits the letter:
 * start children while it reads running.  The write checks first that the
 * pinned process still lives, which leaves a window of a few microseconds
 * in which a reused pid could be written to instead (at an address the new
 * process must map writable); the tests' pids are not reused that fast.
 *
 * The step slot: a target that carries CUDACKPT_SIM_STEP=X, X one
 * character, lets a test see where a state-changing call on it is (in
 * /proc/PID/environ, written the same way as the state slot): once lock,
 * checkpoint, restore or unlock is past step 3 below and holds the process
 * (no other operation on it works), before its CUDACKPT_SIM_PRE_WAIT_MS and
 * step 4, the slot reads the first letter of its name in upper case, L, C,
 * R or U; once it is past steps 4 and 5 (it no longer waits for a stopped
 * target and will do its work), that letter in lower case, l, c, r or u;
 * when the call ends, "-".  A test that means to act while a call works
 * (stop the target, say) awaits the lower-case letter; one that means to
 * act once the call has reached the driver, past the daemon's own checks
 * (a stop the call itself must wait for), awaits the upper-case one.  Not
 * the daemon's in_flight: it shows that before the call reaches the
 * driver, before the daemon has pinned or checked the process.
 *
 * Stopped targets: while every live thread of the target is stopped (state
 * T or t in /proc/PID/task/TID/stat, as under SIGSTOP or CRIU's seize;
 * threads in Z or X do not count, and at least one thread must be stopped),
 * every call but GetRestoreThreadId waits until a thread runs again, polling
 * every SIM_STOPPED_POLL_NS, then goes on as usual; if the target dies
 * meanwhile the call returns OPERATING_SYSTEM.  Like the real driver's, the
 * wait has no bound: lock's timeoutMs does not cut it short, and a target
 * stopped for good keeps the caller forever.  GetRestoreThreadId answers at
 * once, with a live thread of the target: CRIU lets only that thread run for
 * the checkpoint and restore, which ends the wait of those calls.
 *
 * Threading: the daemon calls in from many worker threads.  One mutex guards
 * the process table and is never held while an operation "works" (sleeps)
 * or waits for a stopped target, so operations on different processes
 * overlap in real time.  Operations on the same process are serialised here
 * too (the daemon does it already), while GetState answers at once with the
 * state before the operation.
 *
 * Order of checks in every checkpoint call, which tests may rely on:
 *  1. a NULL output pointer or a non-zero reserved field: INVALID_VALUE;
 *  2. pid <= 0, no such process, a zombie, or (caller not root) a target of
 *     another real uid: OPERATING_SYSTEM;
 *  3. no CUDACKPT_SIM=1 in the target's environment: NOT_INITIALIZED (a
 *     process caught before or inside its exec reads the same way, as a real
 *     one that has not yet initialised CUDA would); then a target whose
 *     /proc is not its own pid namespace's (/proc/<its pid there>, seen
 *     through /proc/PID/root, is another process or none): OPERATING_SYSTEM,
 *     as the real driver's cuInit fails in such a process (a pid namespace
 *     of its own and the node's /proc: measured on the H200, driver 580);
 *  4. all but GetRestoreThreadId: a stopped target is waited for (above);
 *     OPERATING_SYSTEM if it dies meanwhile.  Lock, checkpoint, restore and
 *     unlock wait here after an operation already working on the same
 *     process has ended;
 *  5. the state machine: ILLEGAL_STATE, state unchanged (the state is the
 *     table's, or the slot's for a process the table does not know);
 *  6. restore only: a bad GPU mapping: INVALID_VALUE, at once;
 *  7. the work: lock waits out CUDACKPT_SIM_BUSY_MS, checkpoint and restore
 *     sleep for the time of the copy; a restore whose memory does not fit
 *     in what its GPUs have free (CUDACKPT_SIM_GPU_MEM_MIB less what the
 *     processes NVML lists there hold) fails OUT_OF_MEMORY at once and, as
 *     the real driver's, leaves the process checkpointed for good: every
 *     later restore fails OPERATING_SYSTEM;
 *  8. a target that died meanwhile: OPERATING_SYSTEM; managed memory
 *     (checkpoint): NOT_SUPPORTED; then an injected CUDACKPT_SIM_FAIL result
 *     (getstate: right after step 4; tid: right after step 3). */

#include "sim.h"

#include <stdatomic.h>
#include <string.h>

/* ------------------------------------------------------- the exported API */

/* The driver's entry points, declared with their types from cuda-api.h (a
 * mismatch with a definition below fails to compile). */
SIM_EXPORT cuda_cuGetErrorName_fn cuGetErrorName;
SIM_EXPORT cuda_cuGetErrorString_fn cuGetErrorString;
SIM_EXPORT cuda_cuInit_fn cuInit;
SIM_EXPORT cuda_cuDriverGetVersion_fn cuDriverGetVersion;
SIM_EXPORT cuda_cuDeviceGetCount_fn cuDeviceGetCount;
SIM_EXPORT cuda_cuDeviceGet_fn cuDeviceGet;
SIM_EXPORT cuda_cuDeviceGetUuid_fn cuDeviceGetUuid_v2;
SIM_EXPORT cuda_cuDeviceGetUuid_fn cuDeviceGetUuid;
SIM_EXPORT cuda_cuCheckpointProcessGetState_fn cuCheckpointProcessGetState;
SIM_EXPORT cuda_cuCheckpointProcessGetRestoreThreadId_fn cuCheckpointProcessGetRestoreThreadId;
SIM_EXPORT cuda_cuCheckpointProcessLock_fn cuCheckpointProcessLock;
SIM_EXPORT cuda_cuCheckpointProcessCheckpoint_fn cuCheckpointProcessCheckpoint;
SIM_EXPORT cuda_cuCheckpointProcessRestore_fn cuCheckpointProcessRestore;
SIM_EXPORT cuda_cuCheckpointProcessUnlock_fn cuCheckpointProcessUnlock;

SIM_EXPORT int cudackptSimIsSimulator(void);
SIM_EXPORT int cudackptSimIsSimulator(void) {
        return 1;
}

/* cuGetErrorName and cuGetErrorString: error's name, or its text. */
static CUresult sim_error_describe(CUresult error, bool text, const char **pStr) {
        const struct sim_error *e = sim_error_by_code(error);

        if (!pStr)
                return CUDA_ERROR_INVALID_VALUE;
        if (!e) {
                *pStr = NULL;
                return CUDA_ERROR_INVALID_VALUE;
        }
        *pStr = text ? e->text : e->name;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr) {
        return sim_error_describe(error, false, pStr);
}

SIM_EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr) {
        return sim_error_describe(error, true, pStr);
}

SIM_EXPORT CUresult cuInit(unsigned int Flags) {
        sim_driver_load();
        if (Flags != 0)
                return CUDA_ERROR_INVALID_VALUE;
        if (sim_driver.init_error != CUDA_SUCCESS)
                return sim_driver.init_error;
        atomic_store(&sim_initialized, true);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDriverGetVersion(int *driverVersion) {
        sim_driver_load();
        if (!driverVersion)
                return CUDA_ERROR_INVALID_VALUE;
        *driverVersion = sim_driver.version;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetCount(int *count) {
        if (!atomic_load(&sim_initialized))
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!count)
                return CUDA_ERROR_INVALID_VALUE;
        *count = sim_driver.n_devices;
        return CUDA_SUCCESS;
}

/* What a call about device dev, answering in *out, checks first: the driver
 * initialised, out given, dev one of the sim's devices. */
static CUresult sim_check_device_call(const void *out, int dev) {
        if (!atomic_load(&sim_initialized))
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!out)
                return CUDA_ERROR_INVALID_VALUE;
        if (dev < 0 || dev >= sim_driver.n_devices)
                return CUDA_ERROR_INVALID_DEVICE;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) {
        CUresult r = sim_check_device_call(device, ordinal);

        if (r != CUDA_SUCCESS)
                return r;
        *device = ordinal;
        return CUDA_SUCCESS;
}

/* libcuda exports both cuDeviceGetUuid_v2 (which cuda.h calls
 * cuDeviceGetUuid) and the legacy cuDeviceGetUuid, of the same type and
 * behaviour here: a loader asking for either finds it. */
SIM_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) {
        CUresult r = sim_check_device_call(uuid, dev);

        if (r != CUDA_SUCCESS)
                return r;
        *uuid = sim_driver.devices[dev];
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) {
        return cuDeviceGetUuid_v2(uuid, dev);
}

SIM_EXPORT CUresult cuCheckpointProcessGetState(int pid, CUprocessState *state) {
        struct sim_target t;
        CUresult r;

        if (!state)
                return CUDA_ERROR_INVALID_VALUE;
        r = sim_target_open(pid, &t);
        if (r != CUDA_SUCCESS)
                return r;
        r = sim_target_wait_running(&t);
        if (r != CUDA_SUCCESS) {
                /* died while stopped */
        } else if (t.cfg.fail[SIM_OP_GETSTATE].set) {
                r = t.cfg.fail[SIM_OP_GETSTATE].code;
        } else if (t.cfg.state_value_set) {
                *state = (CUprocessState) t.cfg.state_value;
        } else {
                *state = sim_proc_peek_state(&t);
        }
        sim_target_close(&t);
        return r;
}

SIM_EXPORT CUresult cuCheckpointProcessGetRestoreThreadId(int pid, int *tid) {
        struct sim_target t;
        CUresult r;
        int best = 0;

        if (!tid)
                return CUDA_ERROR_INVALID_VALUE;
        r = sim_target_open(pid, &t);
        if (r != CUDA_SUCCESS)
                return r;
        if (t.cfg.fail[SIM_OP_TID].set)
                r = t.cfg.fail[SIM_OP_TID].code;
        else if (sim_target_highest_tid(&t, &best) < 0)
                r = CUDA_ERROR_OPERATING_SYSTEM;
        else
                *tid = best;
        sim_target_close(&t);
        return r;
}

/* The injected failure of op, if any: its result, and the state it leaves. */
static bool sim_injected(const struct sim_target *t, enum sim_op op, CUprocessState *state, CUresult *r) {
        const struct sim_fail *f = &t->cfg.fail[op];

        if (!f->set)
                return false;
        *r = f->code;
        if (f->to_failed)
                *state = CU_PROCESS_STATE_FAILED;
        return true;
}

SIM_EXPORT CUresult cuCheckpointProcessLock(int pid, CUcheckpointLockArgs *args) {
        bool args_ok = !args || (args->reserved0 == 0 && sim_all_zero(args->reserved1, sizeof(args->reserved1)));
        struct sim_call c;

        if (!sim_op_begin(pid, SIM_OP_LOCK, args_ok, CU_PROCESS_STATE_RUNNING, &c))
                return c.r;
        if (sim_injected(&c.t, SIM_OP_LOCK, &c.state, &c.r)) {
                /* nothing else happens */
        } else if (c.t.cfg.busy_ms > 0 && args && args->timeoutMs > 0 && args->timeoutMs < c.t.cfg.busy_ms) {
                /* The kernel in flight outlasts the timeout: the driver gives
                 * up and leaves the process running. */
                sim_sleep_ns((unsigned long long) args->timeoutMs * 1000000ull);
                c.r = sim_target_alive(&c.t) ? CUDA_ERROR_NOT_READY : CUDA_ERROR_OPERATING_SYSTEM;
        } else {
                sim_sleep_ns(c.t.cfg.busy_ms * 1000000ull);
                if (sim_target_alive(&c.t))
                        c.state = CU_PROCESS_STATE_LOCKED;
                else
                        c.r = CUDA_ERROR_OPERATING_SYSTEM;
        }
        return sim_op_end(&c);
}

SIM_EXPORT CUresult cuCheckpointProcessCheckpoint(int pid, CUcheckpointCheckpointArgs *args) {
        struct sim_call c;

        if (!sim_op_begin(pid, SIM_OP_CHECKPOINT, !args || sim_all_zero(args, sizeof(*args)),
                          CU_PROCESS_STATE_LOCKED, &c))
                return c.r;
        if (c.p->managed_broken) {
                /* What the driver says after a managed-memory checkpoint failed. */
                c.r = CUDA_ERROR_UNKNOWN;
        } else {
                /* The work happens (or fails) after the time of the copy. */
                sim_sleep_ns(sim_transfer_ns(c.t.cfg.mem_mib, c.t.cfg.ckpt_mibps));
                if (!sim_target_alive(&c.t)) {
                        c.r = CUDA_ERROR_OPERATING_SYSTEM;
                } else if (c.t.cfg.managed) {
                        c.r = CUDA_ERROR_NOT_SUPPORTED;
                        c.p->managed_broken = true; /* c.p is ours while busy */
                } else if (!sim_injected(&c.t, SIM_OP_CHECKPOINT, &c.state, &c.r)) {
                        c.state = CU_PROCESS_STATE_CHECKPOINTED;
                }
        }
        return sim_op_end(&c);
}

/* Whether every one of gpus is a device of this (simulated) machine.  The
 * driver restores a process onto the GPUs it was checkpointed on unless a
 * map says otherwise; on a machine without one of them (another node, the
 * job moved with no map) it refuses, as it refuses a pair whose new UUID is
 * not a GPU: CUDA_ERROR_INVALID_VALUE, the process left checkpointed. */
static bool sim_gpus_present(const CUuuid *gpus, int n_gpus) {
        for (int g = 0; g < n_gpus; g++) {
                bool known = false;

                for (int d = 0; d < sim_driver.n_devices && !known; d++)
                        known = sim_uuid_eq(&gpus[g], &sim_driver.devices[d]);
                if (!known)
                        return false;
        }
        return true;
}

/* Checks a restore's GPU pairs against the sim's devices and the GPUs the
 * process was checkpointed on; fills the GPUs it will use afterwards. */
static CUresult sim_check_mapping(const CUcheckpointRestoreArgs *args, const CUuuid *gpus, int n_gpus,
                                  CUuuid *ret_gpus) {
        const CUcheckpointGpuPair *pairs = args->gpuPairs;
        unsigned n = args->gpuPairsCount;

        if (!pairs || n > SIM_MAX_GPU_PAIRS)
                return CUDA_ERROR_INVALID_VALUE;
        for (unsigned i = 0; i < n; i++) {
                bool known = false;

                for (int d = 0; d < sim_driver.n_devices; d++)
                        if (sim_uuid_eq(&pairs[i].newUuid, &sim_driver.devices[d]))
                                known = true;
                if (!known)
                        return CUDA_ERROR_INVALID_VALUE;
                /* One GPU cannot be restored onto two, nor two onto one. */
                for (unsigned j = 0; j < i; j++)
                        if (sim_uuid_eq(&pairs[i].oldUuid, &pairs[j].oldUuid) ||
                            sim_uuid_eq(&pairs[i].newUuid, &pairs[j].newUuid))
                                return CUDA_ERROR_INVALID_VALUE;
        }
        for (int g = 0; g < n_gpus; g++) {
                unsigned i;

                for (i = 0; i < n; i++)
                        if (sim_uuid_eq(&pairs[i].oldUuid, &gpus[g]))
                                break;
                if (i == n)
                        return CUDA_ERROR_INVALID_VALUE; /* a GPU of the process is not mapped */
                ret_gpus[g] = pairs[i].newUuid;
        }
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCheckpointProcessRestore(int pid, CUcheckpointRestoreArgs *args) {
        bool args_ok = !args || (sim_all_zero(args->reserved, sizeof(args->reserved)) && args->reserved1 == 0);
        struct sim_call c;
        CUuuid mapped[SIM_MAX_DEVICES];
        bool remap;

        if (!sim_op_begin(pid, SIM_OP_RESTORE, args_ok, CU_PROCESS_STATE_CHECKPOINTED, &c))
                return c.r;
        remap = args && args->gpuPairsCount > 0;
        const CUuuid *gpus = c.p->gpus_remapped ? c.p->gpus : c.t.cfg.gpus;
        int n_gpus = c.p->gpus_remapped ? c.p->n_gpus : c.t.cfg.n_gpus;

        if (remap)
                c.r = sim_check_mapping(args, gpus, n_gpus, mapped);
        else if (!sim_gpus_present(gpus, n_gpus))
                c.r = CUDA_ERROR_INVALID_VALUE; /* as a map onto a GPU that is not there */
        if (c.r == CUDA_SUCCESS && c.p->restore_broken)
                c.r = CUDA_ERROR_OPERATING_SYSTEM;
        if (c.r == CUDA_SUCCESS && !sim_fits(remap ? mapped : gpus, n_gpus, c.t.cfg.mem_mib)) {
                c.r = CUDA_ERROR_OUT_OF_MEMORY;
                c.p->restore_broken = true;
        }
        if (c.r == CUDA_SUCCESS) {
                sim_sleep_ns(sim_transfer_ns(c.t.cfg.mem_mib, c.t.cfg.restore_mibps));
                sim_restoring(remap ? mapped : gpus, n_gpus, -(long long) c.t.cfg.mem_mib);
                if (!sim_target_alive(&c.t)) {
                        c.r = CUDA_ERROR_OPERATING_SYSTEM;
                } else if (!sim_injected(&c.t, SIM_OP_RESTORE, &c.state, &c.r)) {
                        c.state = CU_PROCESS_STATE_LOCKED;
                        if (remap) {
                                memcpy(c.p->gpus, mapped, sizeof(mapped[0]) * (size_t) n_gpus);
                                c.p->n_gpus = n_gpus;
                                c.p->gpus_remapped = true;
                        }
                }
        }
        return sim_op_end(&c);
}

SIM_EXPORT CUresult cuCheckpointProcessUnlock(int pid, CUcheckpointUnlockArgs *args) {
        struct sim_call c;

        if (!sim_op_begin(pid, SIM_OP_UNLOCK, !args || sim_all_zero(args, sizeof(*args)), CU_PROCESS_STATE_LOCKED,
                          &c))
                return c.r;
        if (!sim_injected(&c.t, SIM_OP_UNLOCK, &c.state, &c.r))
                c.state = CU_PROCESS_STATE_RUNNING;
        return sim_op_end(&c);
}

