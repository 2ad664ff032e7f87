/* The simulated driver's inner interface: what the files of
 * libcudackpt-sim.so share (sim.c says what the library is and does).
 * Nothing here is exported: the library is built with hidden visibility and
 * only SIM_EXPORT names the driver's and NVML's entry points.
 *
 * The files, bottom first: sim_util.c (errors, strict parsing, time),
 * sim_driver.c (the daemon-side configuration), sim_procfs.c (reading
 * /proc), sim_config.c (a target's configuration from its environment),
 * sim_target.c (the process a call is about: pinning, stopped threads, the
 * state slot), sim_table.c (the process table and a state-changing call's
 * begin and end), sim_nvml.c (the NVML stand-in and the GPU memory a restore
 * needs), sim_nvml_info.c (NVML's model, PCI bus id and driver version),
 * sim.c (the driver's exported entry points). */
#ifndef CUDACKPT_SIM_H
#define CUDACKPT_SIM_H

#include "cuda-api.h"

#include <dirent.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define SIM_EXPORT __attribute__((visibility("default")))

/* The most devices the sim reports, and the most GPUs one process may use. */
#define SIM_MAX_DEVICES 64
/* Bound on the process table; entries of dead processes are dropped first. */
#define SIM_MAX_PROCS 4096
/* Largest environment read from /proc/PID/environ (the kernel's own limit on
 * argv+envp at exec is a quarter of the stack limit, far below this). */
#define SIM_MAX_ENVIRON (16u * 1024 * 1024)
/* How long to wait for a target caught inside execve: 20 x 0.5 ms. */
#define SIM_EXEC_RETRIES 20
#define SIM_EXEC_RETRY_NS 500000ull
/* Largest mapping accepted by restore; a real mapping names a few GPUs. */
#define SIM_MAX_GPU_PAIRS 4096
/* How often a call waiting for a stopped target looks again: 1 ms, a scan
 * of /proc/PID/task that ends at the first thread seen running. */
#define SIM_STOPPED_POLL_NS 1000000ull
/* The target's environment variable that holds its state slot. */
#define SIM_SLOT_NAME "CUDACKPT_SIM_STATE"
/* The target's environment variable that holds its step slot, and what the
 * slot reads while no state-changing call works on the target. */
#define SIM_STEP_SLOT_NAME "CUDACKPT_SIM_STEP"
#define SIM_STEP_IDLE '-'

/* ------------------------------------------------------------ sim_util.c */

struct sim_error {
        CUresult code;
        const char *name;
        const char *text;
};

const struct sim_error *sim_error_by_code(CUresult code);
const struct sim_error *sim_error_by_name(const char *name, size_t len);
int sim_parse_ulong(const char *s, size_t len, unsigned long long max, unsigned long long *ret_value);
int sim_parse_ulong_str(const char *s, unsigned long long max, unsigned long long *ret_value);
int sim_parse_uuid(const char *s, size_t len, CUuuid *ret_uuid);
bool sim_uuid_eq(const CUuuid *a, const CUuuid *b);
int sim_for_each_item(const char *s, int (*fn)(const char *item, size_t len, void *userdata), void *userdata);
void sim_sleep_ns(unsigned long long ns);
unsigned long long sim_transfer_ns(unsigned long long mem_mib, unsigned long long mibps);
bool sim_all_zero(const void *p, size_t n);

/* ---------------------------------------------------------- sim_driver.c */

/* What the simulated driver itself is, from the DAEMON's environment, read
 * once by sim_driver_load().  Never changes after that. */
struct sim_driver {
        CUuuid devices[SIM_MAX_DEVICES]; /* what cuDeviceGetUuid reports, by ordinal */
        int n_devices;                   /* what cuDeviceGetCount reports */
        int version;                     /* what cuDriverGetVersion reports */
        CUresult init_error;             /* what cuInit returns */
        unsigned long long gpu_mem_mib;  /* each GPU's memory */
};

extern struct sim_driver sim_driver;
/* Set once cuInit succeeded: the device queries need it, as in libcuda. */
extern atomic_bool sim_initialized;

void sim_driver_load(void);

/* ---------------------------------------------------------- sim_procfs.c */

/* What the sim reads from a stat file. */
struct sim_stat {
        char state;                    /* field 3: R, S, D, T, t, Z, X, ... */
        unsigned long long flags;      /* field 9: the task's PF_* flags */
        unsigned long long start_time; /* field 22 */
        unsigned long long env_start;  /* field 50; 0 where the kernel does not show it */
};

/* The task flag of a thread that has begun to exit (include/linux/sched.h). */
#define SIM_PF_EXITING 0x4ull

int sim_read_at(int dir_fd, const char *name, size_t max, char **ret_buf, size_t *ret_len);
int sim_read_stat_at(int dir_fd, const char *name, struct sim_stat *ret_stat);
int sim_read_stat(int proc_fd, char *ret_state, unsigned long long *ret_start_time);
int sim_read_real_uid(int proc_fd, uid_t *ret_uid);
/* Whether the /proc the process sees (in its mount namespace) shows it as
 * /proc/<its pid in its own pid namespace>, as the real driver's cuInit
 * needs (else it fails CUDA_ERROR_OPERATING_SYSTEM: a process in a pid
 * namespace of its own with the node's /proc).  True when it cannot be
 * told (no NSpid, the mount namespace not readable by the caller). */
bool sim_proc_is_own(int proc_fd);

/* ---------------------------------------------------------- sim_config.c */

enum sim_op {
        SIM_OP_LOCK,
        SIM_OP_CHECKPOINT,
        SIM_OP_RESTORE,
        SIM_OP_UNLOCK,
        SIM_OP_GETSTATE,
        SIM_OP_TID,
        SIM_OP_COUNT,
};

/* A failure injected with CUDACKPT_SIM_FAIL. */
struct sim_fail {
        bool set;
        CUresult code;
        bool to_failed; /* ":failed": the process ends in CU_PROCESS_STATE_FAILED */
};

/* What one target process simulates, from its environment at the time of
 * the call (re-read on every call: a process that is about to exec, like
 * `env CUDACKPT_SIM=1 sleep`, gets its variables only once it has). */
struct sim_config {
        bool cuda;                 /* CUDACKPT_SIM=1 */
        unsigned long long mem_mib;
        unsigned long long ckpt_mibps;
        unsigned long long restore_mibps;
        unsigned long long busy_ms; /* 0: no kernel in flight */
        unsigned long long pre_wait_ms; /* a state-changing call's sleep before its step 4 */
        bool managed;
        struct sim_fail fail[SIM_OP_COUNT];
        bool state_value_set;
        unsigned state_value;
        int n_gpus;
        CUuuid gpus[SIM_MAX_DEVICES];
        bool slot_set;             /* CUDACKPT_SIM_STATE holds one known letter */
        size_t slot_offset;        /* that letter's byte offset in /proc/PID/environ */
        CUprocessState slot_state; /* the state the letter names */
        bool step_slot_set;        /* CUDACKPT_SIM_STEP holds one character */
        size_t step_slot_offset;   /* that character's byte offset in /proc/PID/environ */
};

char sim_slot_letter(CUprocessState state);
const char *sim_op_name(enum sim_op op);
void sim_config_parse(const char *env, size_t len, bool is_self, struct sim_config *ret_cfg);

/* ---------------------------------------------------------- sim_target.c */

/* The process a call is about, pinned by a /proc/PID directory fd: files
 * opened through it belong to that very process even if it dies and its
 * pid is reused meanwhile (they then fail with ESRCH). */
struct sim_target {
        int pid;
        int proc_fd;
        unsigned long long start_time; /* field 22 of /proc/PID/stat */
        unsigned long long env_start;  /* field 50: the environment's address in the target, 0 if not shown */
        struct sim_config cfg;
};

void sim_target_close(struct sim_target *t);
CUresult sim_target_open(int pid, struct sim_target *ret_target);
bool sim_target_alive(const struct sim_target *t);
int sim_target_highest_tid(const struct sim_target *t, int *ret_tid);
CUresult sim_target_wait_running(const struct sim_target *t);
void sim_slot_write(const struct sim_target *t, CUprocessState state);
void sim_step_write(const struct sim_target *t, char letter);

/* ----------------------------------------------------------- sim_table.c */

/* The checkpoint state of one target process, as the real driver keeps it
 * inside the target; here it lives in the daemon and dies with it (a copy
 * of state lives in the target's slot, if it has one). */
struct sim_proc {
        struct sim_proc *next;
        int pid;
        unsigned long long start_time; /* with pid, names the process */
        CUprocessState state;          /* driver state between operations */
        bool busy;                     /* an operation on it is working (sleeping) */
        unsigned refs;                 /* threads that hold a pointer to it */
        bool managed_broken;           /* a managed-memory checkpoint failed: later ones say UNKNOWN */
        bool restore_broken;           /* a restore ran out of GPU memory: later ones say OPERATING_SYSTEM */
        bool gpus_remapped;            /* a restore moved it: gpus replaces its CUDACKPT_SIM_GPUS */
        int n_gpus;
        CUuuid gpus[SIM_MAX_DEVICES];
};

/* A state-changing operation under way: the target, its entry in the
 * table, the state to leave it in and the result so far. */
struct sim_call {
        struct sim_target t;
        struct sim_proc *p;
        CUprocessState state;
        CUresult r;
};

bool sim_op_begin(int pid, enum sim_op op, bool args_ok, CUprocessState want, struct sim_call *c);
CUresult sim_op_end(struct sim_call *c);
CUprocessState sim_proc_peek_state(const struct sim_target *t);
void sim_proc_moved_gpus(struct sim_target *t);

/* ------------------------------------------------------------ sim_nvml.c */

bool sim_fits(const CUuuid *gpus, int n_gpus, unsigned long long mem_mib);
void sim_restoring(const CUuuid *gpus, int n_gpus, long long mib);

#endif
