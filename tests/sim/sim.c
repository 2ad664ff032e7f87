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
 *
 * The DAEMON's environment (read once): CUDACKPT_SIM_DEVICES=uuid,... (the
 * GPUs reported; default GPU-00000000-5157-4000-8000-000000000001 and, with
 * CUDACKPT_SIM_DEVICE_COUNT=N, ...0002 up to N), CUDACKPT_SIM_GPU_MEM_MIB=N (the
 * memory of each GPU, 81920), CUDACKPT_SIM_DRIVER_VERSION=N
 * (default 13000), CUDACKPT_SIM_INIT_ERROR=N or a CUDA_ERROR_ name (cuInit's
 * result); NVML's model names, PCI bus ids and driver version are
 * sim-nvml-info.c's (CUDACKPT_SIM_GPU_NAMES, CUDACKPT_SIM_PCI_BUS_IDS,
 * CUDACKPT_SIM_NVML_DRIVER_VERSION).  A TARGET's environment (read at every call): CUDACKPT_SIM=1 (it
 * is a CUDA process), CUDACKPT_SIM_MEM_MIB (64), CUDACKPT_SIM_CKPT_MIBPS
 * (2048), CUDACKPT_SIM_RESTORE_MIBPS (4096), CUDACKPT_SIM_GPUS=index|uuid,...
 * (device 0), CUDACKPT_SIM_BUSY_MS (a kernel in flight at lock time),
 * CUDACKPT_SIM_MANAGED=1 (checkpoint fails NOT_SUPPORTED, then UNKNOWN),
 * CUDACKPT_SIM_FAIL=op:CUDA_ERROR_X[:failed],... (op: lock, checkpoint,
 * restore, unlock, getstate, tid; ":failed" leaves the state FAILED),
 * CUDACKPT_SIM_STATE_VALUE=N (GetState reports N), CUDACKPT_SIM_STATE=X (the
 * state slot, below).  Numbers are decimal, strictly; a bad value means the
 * default.
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
 *     one that has not yet initialised CUDA would);
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

#include "cuda-api.h"
#include "sim-errors.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

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

/* ---------------------------------------------------------------- errors */

struct sim_error {
        CUresult code;
        const char *name;
        const char *text;
};

/* Every CUresult of the CUDA 13.0 API (sim-errors.h), by value: cuda-api.h
 * names only the codes the daemon itself uses. */
#define SIM_E(name, value, text) { (CUresult)(value), #name, text },
static const struct sim_error sim_errors[] = { SIM_ERRORS(SIM_E) };
#undef SIM_E

static const struct sim_error *sim_error_by_code(CUresult code) {
        for (size_t i = 0; i < sizeof(sim_errors) / sizeof(sim_errors[0]); i++)
                if (sim_errors[i].code == code)
                        return &sim_errors[i];
        return NULL;
}

static const struct sim_error *sim_error_by_name(const char *name, size_t len) {
        for (size_t i = 0; i < sizeof(sim_errors) / sizeof(sim_errors[0]); i++)
                if (strlen(sim_errors[i].name) == len && memcmp(sim_errors[i].name, name, len) == 0)
                        return &sim_errors[i];
        return NULL;
}

/* --------------------------------------------------------------- parsing */

/* Parses the decimal number s[0..len) strictly: digits only (no sign, no
 * blanks, no empty string), at most max. */
static int sim_parse_ulong(const char *s, size_t len, unsigned long long max,
                           unsigned long long *ret_value) {
        char buf[32];
        char *end;
        unsigned long long v;

        if (len == 0 || len >= sizeof(buf))
                return -EINVAL;
        for (size_t i = 0; i < len; i++)
                if (!isdigit((unsigned char) s[i]))
                        return -EINVAL;
        memcpy(buf, s, len);
        buf[len] = '\0';
        errno = 0;
        v = strtoull(buf, &end, 10);
        if (errno != 0 || *end != '\0' || v > max)
                return -EINVAL;
        *ret_value = v;
        return 0;
}

static int sim_parse_ulong_str(const char *s, unsigned long long max, unsigned long long *ret_value) {
        return sim_parse_ulong(s, strlen(s), max, ret_value);
}

static int sim_hexval(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* Parses a GPU UUID: "GPU-" and 8-4-4-4-12 hex digits as nvidia-smi prints
 * it; the prefix and the hyphens (only at those places) may be left out. */
static int sim_parse_uuid(const char *s, size_t len, CUuuid *ret_uuid) {
        CUuuid u;
        size_t nibbles = 0;

        if (len >= 4 && strncmp(s, "GPU-", 4) == 0) {
                s += 4;
                len -= 4;
        }
        memset(&u, 0, sizeof(u));
        for (size_t i = 0; i < len; i++) {
                int v;

                if (s[i] == '-') {
                        if (nibbles != 8 && nibbles != 12 && nibbles != 16 && nibbles != 20)
                                return -EINVAL;
                        if (i + 1 < len && s[i + 1] == '-')
                                return -EINVAL;
                        continue;
                }
                v = sim_hexval(s[i]);
                if (v < 0 || nibbles >= 32)
                        return -EINVAL;
                u.bytes[nibbles / 2] = (char) (unsigned char) ((unsigned char) u.bytes[nibbles / 2] |
                                                               (v << (nibbles % 2 ? 0 : 4)));
                nibbles++;
        }
        if (nibbles != 32 || (len > 0 && s[len - 1] == '-'))
                return -EINVAL;
        *ret_uuid = u;
        return 0;
}

static bool sim_uuid_eq(const CUuuid *a, const CUuuid *b) {
        return memcmp(a->bytes, b->bytes, sizeof(a->bytes)) == 0;
}

/* Calls fn for each comma-separated item of s (empty items included). */
static int sim_for_each_item(const char *s, int (*fn)(const char *item, size_t len, void *userdata),
                             void *userdata) {
        for (;;) {
                const char *comma = strchr(s, ',');
                size_t len = comma ? (size_t) (comma - s) : strlen(s);
                int r = fn(s, len, userdata);

                if (r < 0)
                        return r;
                if (!comma)
                        return 0;
                s = comma + 1;
        }
}

/* ------------------------------------------------- the daemon-side config */

/* What the simulated driver itself is, from the DAEMON's environment, read
 * once.  Never changes after sim_driver_once. */
static struct {
        CUuuid devices[SIM_MAX_DEVICES]; /* what cuDeviceGetUuid reports, by ordinal */
        int n_devices;                   /* what cuDeviceGetCount reports */
        int version;                     /* what cuDriverGetVersion reports */
        CUresult init_error;             /* what cuInit returns */
        unsigned long long gpu_mem_mib;  /* each GPU's memory */
} sim_driver;

static pthread_once_t sim_driver_once_control = PTHREAD_ONCE_INIT;
/* Set once cuInit succeeded: the device queries need it, as in libcuda. */
static atomic_bool sim_initialized;

static void sim_default_device(int ordinal, CUuuid *ret_uuid) {
        /* GPU-00000000-5157-4000-8000-0000000000NN: "QW" in the middle marks
         * it as the sim's, the version/variant nibbles make it a valid v4 UUID. */
        static const unsigned char base[16] = { 0x00, 0x00, 0x00, 0x00, 0x51, 0x57, 0x40, 0x00,
                                                0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00 };
        unsigned n = (unsigned) ordinal + 1;

        memcpy(ret_uuid->bytes, base, sizeof(base));
        ret_uuid->bytes[14] = (char) (n >> 8);
        ret_uuid->bytes[15] = (char) (n & 0xff);
}

static int sim_add_device_item(const char *item, size_t len, void *userdata) {
        int *n = userdata;

        if (*n >= SIM_MAX_DEVICES)
                return -E2BIG;
        if (sim_parse_uuid(item, len, &sim_driver.devices[*n]) < 0)
                return -EINVAL;
        for (int i = 0; i < *n; i++)
                if (sim_uuid_eq(&sim_driver.devices[i], &sim_driver.devices[*n]))
                        return -EEXIST;
        (*n)++;
        return 0;
}

static void sim_driver_once(void) {
        const char *v;
        unsigned long long n;
        int count = 1;

        /* secure_getenv: the daemon is privileged; a sim loaded into a program
         * that gained privileges at exec must not obey its caller. */
        v = secure_getenv("CUDACKPT_SIM_DEVICE_COUNT");
        if (v && sim_parse_ulong_str(v, SIM_MAX_DEVICES, &n) == 0)
                count = (int) n;
        for (int i = 0; i < count; i++)
                sim_default_device(i, &sim_driver.devices[i]);
        sim_driver.n_devices = count;

        v = secure_getenv("CUDACKPT_SIM_DEVICES");
        if (v && *v) {
                int listed = 0;

                if (sim_for_each_item(v, sim_add_device_item, &listed) == 0) {
                        sim_driver.n_devices = listed;
                } else {
                        /* A bad list falls back to the default one, and says
                         * so: a test that meant other GPUs would otherwise
                         * fail far from its cause. */
                        fprintf(stderr, "cudackpt-sim: bad CUDACKPT_SIM_DEVICES \"%s\", using defaults\n", v);
                        for (int i = 0; i < count; i++)
                                sim_default_device(i, &sim_driver.devices[i]);
                }
        }

        sim_driver.gpu_mem_mib = 81920;
        v = secure_getenv("CUDACKPT_SIM_GPU_MEM_MIB");
        if (v && sim_parse_ulong_str(v, 1ull << 40, &n) == 0)
                sim_driver.gpu_mem_mib = n;

        sim_driver.version = 13000;
        v = secure_getenv("CUDACKPT_SIM_DRIVER_VERSION");
        if (v && sim_parse_ulong_str(v, INT_MAX, &n) == 0)
                sim_driver.version = (int) n;

        sim_driver.init_error = CUDA_SUCCESS;
        v = secure_getenv("CUDACKPT_SIM_INIT_ERROR");
        if (v) {
                const struct sim_error *e = sim_error_by_name(v, strlen(v));

                if (e)
                        sim_driver.init_error = e->code;
                else if (sim_parse_ulong_str(v, INT_MAX, &n) == 0)
                        sim_driver.init_error = (CUresult) n;
        }
}

static void sim_driver_load(void) {
        (void) pthread_once(&sim_driver_once_control, sim_driver_once);
}

/* ------------------------------------------------------------------ time */

/* Sleeps ns nanoseconds of real time, whatever signals arrive. */
static void sim_sleep_ns(unsigned long long ns) {
        struct timespec deadline;

        if (ns == 0)
                return;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += (time_t) (ns / 1000000000ull);
        deadline.tv_nsec += (long) (ns % 1000000000ull);
        if (deadline.tv_nsec >= 1000000000L) {
                deadline.tv_sec++;
                deadline.tv_nsec -= 1000000000L;
        }
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL) == EINTR)
                ;
}

/* The time a transfer of mem_mib at mibps MiB/s takes. */
static unsigned long long sim_transfer_ns(unsigned long long mem_mib, unsigned long long mibps) {
        return mem_mib * 1000000000ull / mibps;
}

static bool sim_all_zero(const void *p, size_t n) {
        const unsigned char *b = p;

        for (size_t i = 0; i < n; i++)
                if (b[i])
                        return false;
        return true;
}

/* ------------------------------------------------------ the target process */

enum sim_op {
        SIM_OP_LOCK,
        SIM_OP_CHECKPOINT,
        SIM_OP_RESTORE,
        SIM_OP_UNLOCK,
        SIM_OP_GETSTATE,
        SIM_OP_TID,
        SIM_OP_COUNT,
};

static const char *const sim_op_names[SIM_OP_COUNT] = {
        [SIM_OP_LOCK] = "lock",           [SIM_OP_CHECKPOINT] = "checkpoint",
        [SIM_OP_RESTORE] = "restore",     [SIM_OP_UNLOCK] = "unlock",
        [SIM_OP_GETSTATE] = "getstate",   [SIM_OP_TID] = "tid",
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
        bool managed;
        struct sim_fail fail[SIM_OP_COUNT];
        bool state_value_set;
        unsigned state_value;
        int n_gpus;
        CUuuid gpus[SIM_MAX_DEVICES];
        bool slot_set;             /* CUDACKPT_SIM_STATE holds one known letter */
        size_t slot_offset;        /* that letter's byte offset in /proc/PID/environ */
        CUprocessState slot_state; /* the state the letter names */
};

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

/* Reads a whole /proc file through dir_fd, NUL-terminated (contents may hold
 * NULs too: *ret_len counts them). */
static int sim_read_at(int dir_fd, const char *name, size_t max, char **ret_buf, size_t *ret_len) {
        size_t cap = 4096, len = 0;
        char *buf;
        int fd, r = 0;

        fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        buf = malloc(cap);
        if (!buf) {
                close(fd);
                return -ENOMEM;
        }
        for (;;) {
                ssize_t n;

                if (len + 1 >= cap) {
                        char *bigger;

                        if (cap >= max)
                                break; /* keep what fits: only the start matters */
                        bigger = realloc(buf, cap * 2);
                        if (!bigger) {
                                r = -ENOMEM;
                                break;
                        }
                        buf = bigger;
                        cap *= 2;
                }
                n = read(fd, buf + len, cap - len - 1);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        r = -errno;
                        break;
                }
                if (n == 0)
                        break;
                len += (size_t) n;
        }
        close(fd);
        if (r < 0) {
                free(buf);
                return r;
        }
        buf[len] = '\0';
        *ret_buf = buf;
        *ret_len = len;
        return 0;
}

/* What the sim reads from a stat file. */
struct sim_stat {
        char state;                    /* field 3: R, S, D, T, t, Z, X, ... */
        unsigned long long flags;      /* field 9: the task's PF_* flags */
        unsigned long long start_time; /* field 22 */
        unsigned long long env_start;  /* field 50; 0 where the kernel does not show it */
};

/* The task flag of a thread that has begun to exit (include/linux/sched.h). */
#define SIM_PF_EXITING 0x4ull

/* Reads the stat file name under dir_fd: "stat" of a /proc/PID directory or
 * "TID/stat" of its task directory.  env_start reads 0 where the kernel does
 * not show it (a caller without ptrace access to the target, a kernel before
 * 3.5).  comm (field 2) may hold blanks and parentheses, so parsing starts
 * after the LAST ')'. */
static int sim_read_stat_at(int dir_fd, const char *name, struct sim_stat *ret_stat) {
        struct sim_stat st = { 0 };
        char *buf, *p;
        size_t len;
        int r;

        r = sim_read_at(dir_fd, name, 64 * 1024, &buf, &len);
        if (r < 0)
                return r;
        p = strrchr(buf, ')');
        if (!p || p[1] != ' ' || p[2] == '\0') {
                free(buf);
                return -EIO;
        }
        p += 2;
        st.state = *p; /* field 3 */
        for (int field = 3; field <= 50; field++) {
                char *end = strchr(p, ' ');
                size_t flen = end ? (size_t) (end - p) : strcspn(p, "\n");

                if ((field == 9 && sim_parse_ulong(p, flen, ULLONG_MAX, &st.flags) < 0) ||
                    (field == 22 && sim_parse_ulong(p, flen, ULLONG_MAX, &st.start_time) < 0)) {
                        r = -EIO;
                        break;
                }
                if (field == 50 && sim_parse_ulong(p, flen, ULLONG_MAX, &st.env_start) < 0)
                        st.env_start = 0;
                if (!end) {
                        if (field < 22)
                                r = -EIO; /* no start time: not a stat file */
                        break;            /* an older kernel's shorter line: no env_start */
                }
                p = end + 1;
        }
        free(buf);
        if (r < 0)
                return r;
        *ret_stat = st;
        return 0;
}

/* Reads the state letter and start time from /proc/PID/stat. */
static int sim_read_stat(int proc_fd, char *ret_state, unsigned long long *ret_start_time) {
        struct sim_stat st;
        int r = sim_read_stat_at(proc_fd, "stat", &st);

        if (r < 0)
                return r;
        *ret_state = st.state;
        *ret_start_time = st.start_time;
        return 0;
}

static int sim_read_real_uid(int proc_fd, uid_t *ret_uid) {
        char *buf, *p;
        size_t len;
        unsigned long long uid;
        int r;

        r = sim_read_at(proc_fd, "status", 64 * 1024, &buf, &len);
        if (r < 0)
                return r;
        p = strstr(buf, "\nUid:\t");
        if (!p) {
                free(buf);
                return -EIO;
        }
        p += strlen("\nUid:\t");
        r = sim_parse_ulong(p, strcspn(p, "\t\n"), UINT32_MAX, &uid);
        free(buf);
        if (r < 0)
                return -EIO;
        *ret_uid = (uid_t) uid;
        return 0;
}

/* The value of NAME in a NUL-separated environment block, first one wins as
 * with getenv(). */
static const char *sim_environ_get(const char *env, size_t len, const char *name) {
        size_t name_len = strlen(name);

        for (size_t off = 0; off < len;) {
                const char *entry = env + off;
                size_t entry_len = strlen(entry); /* the block ends with a NUL */

                if (entry_len > name_len && memcmp(entry, name, name_len) == 0 && entry[name_len] == '=')
                        return entry + name_len + 1;
                off += entry_len + 1;
        }
        return NULL;
}

static void sim_env_number(const char *env, size_t len, const char *name, unsigned long long min,
                           unsigned long long max, unsigned long long *value) {
        const char *v = sim_environ_get(env, len, name);
        unsigned long long n;

        if (v && sim_parse_ulong_str(v, max, &n) == 0 && n >= min)
                *value = n;
}

static bool sim_env_flag(const char *env, size_t len, const char *name) {
        unsigned long long v = 0;

        sim_env_number(env, len, name, 0, ULLONG_MAX, &v);
        return v != 0;
}

static int sim_add_gpu_item(const char *item, size_t len, void *userdata) {
        struct sim_config *cfg = userdata;
        unsigned long long index;
        CUuuid u;

        if (cfg->n_gpus >= SIM_MAX_DEVICES)
                return -E2BIG;
        if (sim_parse_ulong(item, len, INT_MAX, &index) == 0) {
                if (index >= (unsigned long long) sim_driver.n_devices)
                        return -ENODEV;
                u = sim_driver.devices[index];
        } else if (sim_parse_uuid(item, len, &u) < 0) {
                return -EINVAL;
        }
        for (int i = 0; i < cfg->n_gpus; i++)
                if (sim_uuid_eq(&cfg->gpus[i], &u))
                        return 0; /* named twice: one GPU */
        cfg->gpus[cfg->n_gpus++] = u;
        return 0;
}

/* One "op:CUDA_ERROR_NAME[:failed]" item of CUDACKPT_SIM_FAIL; a bad item is
 * ignored on its own.  The error may also be given as a number. */
static int sim_add_fail_item(const char *item, size_t len, void *userdata) {
        struct sim_config *cfg = userdata;
        const char *colon = memchr(item, ':', len), *name, *rest;
        size_t op_len, name_len;
        struct sim_fail f = { .set = true };
        int op = -1;

        if (!colon)
                return 0;
        op_len = (size_t) (colon - item);
        for (int i = 0; i < SIM_OP_COUNT; i++)
                if (strlen(sim_op_names[i]) == op_len && memcmp(sim_op_names[i], item, op_len) == 0)
                        op = i;
        if (op < 0)
                return 0;
        name = colon + 1;
        rest = memchr(name, ':', len - op_len - 1);
        name_len = rest ? (size_t) (rest - name) : len - op_len - 1;
        if (rest) {
                size_t rest_len = len - op_len - 1 - name_len;

                if (rest_len != strlen(":failed") || memcmp(rest, ":failed", rest_len) != 0)
                        return 0;
                f.to_failed = true;
        }
        {
                const struct sim_error *e = sim_error_by_name(name, name_len);
                unsigned long long n;

                if (e)
                        f.code = e->code;
                else if (sim_parse_ulong(name, name_len, INT_MAX, &n) == 0)
                        f.code = (CUresult) n;
                else
                        return 0;
        }
        cfg->fail[op] = f;
        return 0;
}

/* The letters of the state slot, by state. */
static const struct {
        CUprocessState state;
        char letter;
} sim_slot_letters[] = {
        { CU_PROCESS_STATE_RUNNING, 'r' },
        { CU_PROCESS_STATE_LOCKED, 'l' },
        { CU_PROCESS_STATE_CHECKPOINTED, 'c' },
        { CU_PROCESS_STATE_FAILED, 'f' },
};

static int sim_slot_state(char letter, CUprocessState *ret_state) {
        for (size_t i = 0; i < sizeof(sim_slot_letters) / sizeof(sim_slot_letters[0]); i++)
                if (sim_slot_letters[i].letter == letter) {
                        *ret_state = sim_slot_letters[i].state;
                        return 0;
                }
        return -EINVAL;
}

static char sim_slot_letter(CUprocessState state) {
        for (size_t i = 0; i < sizeof(sim_slot_letters) / sizeof(sim_slot_letters[0]); i++)
                if (sim_slot_letters[i].state == state)
                        return sim_slot_letters[i].letter;
        return '\0';
}

static void sim_config_parse(const char *env, size_t len, bool is_self, struct sim_config *ret_cfg) {
        struct sim_config cfg = {
                .mem_mib = 64,
                .ckpt_mibps = 2048,
                .restore_mibps = 4096,
        };
        CUprocessState cuda_state = CU_PROCESS_STATE_RUNNING;
        const char *v, *cuda;
        bool cuda_letter;

        /* The caller itself counts as a CUDA process once it called cuInit:
         * the real driver answers GetState on the caller with "running".
         * CUDACKPT_SIM holds the letter of a state once the default slot
         * (below) has been written, and still names a CUDA process. */
        cuda = sim_environ_get(env, len, "CUDACKPT_SIM");
        cuda_letter = cuda && cuda[0] != '\0' && cuda[1] == '\0' && sim_slot_state(cuda[0], &cuda_state) == 0;
        cfg.cuda = sim_env_flag(env, len, "CUDACKPT_SIM") || cuda_letter ||
                (is_self && atomic_load(&sim_initialized));
        /* Capped so that mem * 1e9 / speed cannot overflow 64 bits. */
        sim_env_number(env, len, "CUDACKPT_SIM_MEM_MIB", 0, 1ull << 24, &cfg.mem_mib);
        sim_env_number(env, len, "CUDACKPT_SIM_CKPT_MIBPS", 1, 1ull << 24, &cfg.ckpt_mibps);
        sim_env_number(env, len, "CUDACKPT_SIM_RESTORE_MIBPS", 1, 1ull << 24, &cfg.restore_mibps);
        sim_env_number(env, len, "CUDACKPT_SIM_BUSY_MS", 0, UINT32_MAX, &cfg.busy_ms);
        cfg.managed = sim_env_flag(env, len, "CUDACKPT_SIM_MANAGED");

        v = sim_environ_get(env, len, "CUDACKPT_SIM_STATE_VALUE");
        if (v) {
                unsigned long long n;

                if (sim_parse_ulong_str(v, INT_MAX, &n) == 0) {
                        cfg.state_value_set = true;
                        cfg.state_value = (unsigned) n;
                }
        }

        /* The slot is the entry getenv() would find, the first one; any value
         * but one known letter is no slot.  Without CUDACKPT_SIM_STATE, the
         * one character of CUDACKPT_SIM=1 is the slot: "1" until the first
         * change of state (running), then the letter. */
        v = sim_environ_get(env, len, SIM_SLOT_NAME);
        if (v && v[0] != '\0' && v[1] == '\0' && sim_slot_state(v[0], &cfg.slot_state) == 0) {
                cfg.slot_set = true;
                cfg.slot_offset = (size_t) (v - env);
        } else if (!v && (cuda_letter || (cuda && strcmp(cuda, "1") == 0))) {
                cfg.slot_set = true;
                cfg.slot_offset = (size_t) (cuda - env);
                cfg.slot_state = cuda_letter ? cuda_state : CU_PROCESS_STATE_RUNNING;
        }

        v = sim_environ_get(env, len, "CUDACKPT_SIM_GPUS");
        if (!v || !*v || sim_for_each_item(v, sim_add_gpu_item, &cfg) < 0) {
                /* Default, also for a bad list: the process uses device 0. */
                cfg.n_gpus = 0;
                if (sim_driver.n_devices > 0) {
                        cfg.gpus[0] = sim_driver.devices[0];
                        cfg.n_gpus = 1;
                }
        }

        v = sim_environ_get(env, len, "CUDACKPT_SIM_FAIL");
        if (v)
                (void) sim_for_each_item(v, sim_add_fail_item, &cfg);

        *ret_cfg = cfg;
}

/* Whether /proc/PID/cmdline is empty (or unreadable). */
static bool sim_cmdline_empty(int proc_fd) {
        char *buf;
        size_t len;

        if (sim_read_at(proc_fd, "cmdline", 4096, &buf, &len) < 0)
                return true;
        free(buf);
        return len == 0;
}

static void sim_target_close(struct sim_target *t) {
        if (t->proc_fd >= 0)
                close(t->proc_fd);
        t->proc_fd = -1;
}

/* Finds the target and decides whether the driver would talk to it at all:
 * CUDA_ERROR_OPERATING_SYSTEM for a bad pid, a dead or zombie process or one
 * the caller may not touch, CUDA_ERROR_NOT_INITIALIZED for a process that is
 * not (simulating) a CUDA process.  On success ret_target holds an fd that
 * sim_target_close() releases. */
static CUresult sim_target_open(int pid, struct sim_target *ret_target) {
        struct sim_target t = { .pid = pid, .proc_fd = -1 };
        char path[32], *env = NULL;
        struct sim_stat st;
        size_t env_len;
        uid_t euid = geteuid();

        sim_driver_load();
        if (pid <= 0)
                return CUDA_ERROR_OPERATING_SYSTEM;
        (void) snprintf(path, sizeof(path), "/proc/%d", pid);
        t.proc_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (t.proc_fd < 0)
                return CUDA_ERROR_OPERATING_SYSTEM;
        if (sim_read_stat_at(t.proc_fd, "stat", &st) < 0 || st.state == 'Z' || st.state == 'X')
                goto fail;
        t.start_time = st.start_time;
        t.env_start = st.env_start;
        if (euid != 0) {
                /* The driver's own check for callers that are not root. */
                uid_t uid;

                if (sim_read_real_uid(t.proc_fd, &uid) < 0 || uid != euid)
                        goto fail;
        }
        for (int tries = 0;; tries++) {
                if (sim_read_at(t.proc_fd, "environ", SIM_MAX_ENVIRON, &env, &env_len) < 0)
                        goto fail;
                /* Inside execve the new image's environment and arguments are
                 * both empty for a few microseconds, after close-on-exec fds
                 * are closed, so a test that waits for that (EOF on a CLOEXEC
                 * pipe) may ask in between.  A process after its exec has at
                 * least argv[0] or, with an empty argv, is not ours either;
                 * a kernel thread (neither) costs the few retries. */
                if (env_len > 0 || tries >= SIM_EXEC_RETRIES || !sim_cmdline_empty(t.proc_fd))
                        break;
                free(env);
                env = NULL;
                sim_sleep_ns(SIM_EXEC_RETRY_NS);
        }
        sim_config_parse(env, env_len, pid == getpid(), &t.cfg);
        free(env);
        if (!t.cfg.cuda) {
                sim_target_close(&t);
                return CUDA_ERROR_NOT_INITIALIZED;
        }
        *ret_target = t;
        return CUDA_SUCCESS;
fail:
        sim_target_close(&t);
        return CUDA_ERROR_OPERATING_SYSTEM;
}

/* Whether the pinned process still lives (is not a zombie either). */
static bool sim_target_alive(const struct sim_target *t) {
        unsigned long long start;
        char state;

        return sim_read_stat(t->proc_fd, &state, &start) == 0 && state != 'Z' && state != 'X' &&
               start == t->start_time;
}

/* Opens the target's task directory for reading. */
static int sim_target_open_tasks(const struct sim_target *t, DIR **ret_dir) {
        int fd;
        DIR *d;

        fd = openat(t->proc_fd, "task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                int r = -errno;

                close(fd);
                return r;
        }
        *ret_dir = d;
        return 0;
}

/* Whether a stat read shows a thread that is gone or on its way out. */
static bool sim_stat_exiting(const struct sim_stat *st) {
        return st->state == 'Z' || st->state == 'X' || (st->flags & SIM_PF_EXITING);
}

/* Whether thread name (its tid as a string) in task dir d lives: it can be
 * read, and it does not exit. */
static bool sim_task_live(DIR *d, const char *name, struct sim_stat *ret_stat) {
        char path[32];

        (void) snprintf(path, sizeof(path), "%s/stat", name);
        return sim_read_stat_at(dirfd(d), path, ret_stat) == 0 && !sim_stat_exiting(ret_stat);
}

/* The highest tid of a live thread in /proc/PID/task: for a single-threaded
 * process the pid.  It must be a thread that can run: CRIU lets only this
 * one go on while it checkpoints and restores the process, and the calls it
 * then makes wait until a thread runs (see sim_target_wait_running). */
static int sim_target_highest_tid(const struct sim_target *t, int *ret_tid) {
        int best = -1, r;
        DIR *d;
        struct dirent *de;

        r = sim_target_open_tasks(t, &d);
        if (r < 0)
                return r;
        while ((de = readdir(d))) {
                unsigned long long tid;
                struct sim_stat st;

                if (sim_parse_ulong_str(de->d_name, INT_MAX, &tid) < 0 || (int) tid <= best)
                        continue;
                /* A thread that exits (or exited) meanwhile is no answer. */
                if (!sim_task_live(d, de->d_name, &st))
                        continue;
                best = (int) tid;
        }
        closedir(d);
        if (best < 0)
                return -ESRCH;
        *ret_tid = best;
        return 0;
}

/* Whether every live thread of the target is stopped (T: a group stop, as
 * after SIGSTOP; t: a ptrace stop, as under CRIU's seize; a thread that
 * exits is not live): 1 if so, 0 if one runs or none is stopped (all
 * exiting), -errno if it cannot be told.  The
 * scan ends at the first thread that runs, so a running target costs one
 * read of its task directory and of one thread's stat. */
static int sim_target_stopped(const struct sim_target *t) {
        struct dirent *de;
        bool stopped = false;
        DIR *d;
        int r;

        r = sim_target_open_tasks(t, &d);
        if (r < 0)
                return r;
        while ((de = readdir(d))) {
                unsigned long long tid;
                struct sim_stat st;

                if (sim_parse_ulong_str(de->d_name, INT_MAX, &tid) < 0)
                        continue;
                if (!sim_task_live(d, de->d_name, &st))
                        continue; /* gone, or going: does not count */
                if (st.state != 'T' && st.state != 't') {
                        stopped = false;
                        break;
                }
                stopped = true;
        }
        closedir(d);
        return stopped;
}

/* Whether a SIGKILL is pending for the process (ShdPnd: kill()) or for
 * its main thread (SigPnd: any fatal signal, which the kernel turns into a
 * SIGKILL for every thread), from /proc/PID/status. */
static bool sim_target_sigkill_pending(const struct sim_target *t) {
        static const char *const fields[] = { "\nSigPnd:\t", "\nShdPnd:\t" };
        bool pending = false;
        char *buf;
        size_t len;

        if (sim_read_at(t->proc_fd, "status", 64 * 1024, &buf, &len) < 0)
                return false;
        for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
                const char *p = strstr(buf, fields[i]);
                char *end;
                unsigned long long mask;

                if (!p)
                        continue;
                errno = 0;
                mask = strtoull(p + strlen(fields[i]), &end, 16);
                if (errno == 0 && *end == '\n' && (mask & (1ull << (SIGKILL - 1))))
                        pending = true;
        }
        free(buf);
        return pending;
}

/* Whether the pinned process lives and is not being killed: its main thread
 * has not begun to exit and no SIGKILL waits for it.  A killed process's
 * threads are woken to exit, so they read as running for a moment (longer
 * on a loaded machine) before they exit. */
static bool sim_target_running_on(const struct sim_target *t) {
        struct sim_stat st;

        return sim_read_stat_at(t->proc_fd, "stat", &st) == 0 && !sim_stat_exiting(&st) &&
               st.start_time == t->start_time && !sim_target_sigkill_pending(t);
}

/* Step 4 of every call but GetRestoreThreadId: as the real driver does, waits
 * without bound while the target is stopped (the driver needs the target's
 * own threads to answer), polling; never called with the table lock held.
 * OPERATING_SYSTEM if the target died while waited for.  A killed target
 * runs again too, for the moment its threads take to begin their exit, so
 * after a wait the target must be seen running on (sim_target_running_on)
 * twice, a poll apart.  A target whose state cannot be told is taken to
 * run: later steps decide. */
static CUresult sim_target_wait_running(const struct sim_target *t) {
        bool waited = false, seen_running = false;

        for (;;) {
                if (sim_target_stopped(t) > 0) {
                        seen_running = false;
                } else {
                        if (!waited)
                                return CUDA_SUCCESS;
                        if (!sim_target_running_on(t))
                                return CUDA_ERROR_OPERATING_SYSTEM;
                        if (seen_running)
                                return CUDA_SUCCESS;
                        seen_running = true;
                }
                waited = true;
                sim_sleep_ns(SIM_STOPPED_POLL_NS);
        }
}

/* Writes the letter of state into the target's state slot, if it has one.
 * Best effort: without the right to write (or a shown env_start) the table
 * alone holds the state, as before slots existed. */
static void sim_slot_write(const struct sim_target *t, CUprocessState state) {
        char letter = sim_slot_letter(state);
        struct iovec local = { .iov_base = &letter, .iov_len = 1 }, remote;

        if (!t->cfg.slot_set || t->env_start == 0 || letter == '\0')
                return;
        if (t->env_start > UINTPTR_MAX - t->cfg.slot_offset)
                return;
        /* process_vm_writev names the target by pid only: make sure the pid
         * still names the pinned process (see the header on the window). */
        if (!sim_target_alive(t))
                return;
        remote.iov_base = (void *) (uintptr_t) (t->env_start + t->cfg.slot_offset);
        remote.iov_len = 1;
        (void) process_vm_writev(t->pid, &local, 1, &remote, 1, 0);
}

/* ---------------------------------------------------------- process table */

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

static pthread_mutex_t sim_table_lock = PTHREAD_MUTEX_INITIALIZER;
/* Signalled when an entry stops being busy. */
static pthread_cond_t sim_table_cond = PTHREAD_COND_INITIALIZER;
static struct sim_proc *sim_table;
static unsigned sim_table_size;

static struct sim_proc *sim_table_find(int pid, unsigned long long start_time) {
        for (struct sim_proc *p = sim_table; p; p = p->next)
                if (p->pid == pid && p->start_time == start_time)
                        return p;
        return NULL;
}

/* Whether the process an entry names is gone.  Reading /proc/PID/stat does
 * not block on the target, so this is done with the table lock held. */
static bool sim_proc_dead(const struct sim_proc *p, int live_pid, unsigned long long live_start) {
        char path[48], state;
        unsigned long long start;
        int fd;
        bool dead;

        if (p->pid == live_pid)
                return p->start_time != live_start; /* the pid now names another process */
        (void) snprintf(path, sizeof(path), "/proc/%d", p->pid);
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return true;
        dead = sim_read_stat(fd, &state, &start) < 0 || state == 'Z' || state == 'X' || start != p->start_time;
        close(fd);
        return dead;
}

/* Drops the entries of dead processes that no thread uses. */
static void sim_table_prune(int live_pid, unsigned long long live_start) {
        for (struct sim_proc **pp = &sim_table; *pp;) {
                struct sim_proc *p = *pp;

                if (p->refs == 0 && sim_proc_dead(p, live_pid, live_start)) {
                        *pp = p->next;
                        free(p);
                        sim_table_size--;
                } else {
                        pp = &p->next;
                }
        }
}

/* Takes the entry of t for one state-changing operation: waits until no
 * other operation on the same process works, then marks it busy.  Returns
 * with the table unlocked. */
static CUresult sim_proc_acquire(const struct sim_target *t, struct sim_proc **ret_proc) {
        struct sim_proc *p;

        pthread_mutex_lock(&sim_table_lock);
        p = sim_table_find(t->pid, t->start_time);
        if (!p) {
                /* A new process: the moment to forget the dead ones. */
                sim_table_prune(t->pid, t->start_time);
                if (sim_table_size >= SIM_MAX_PROCS || !(p = calloc(1, sizeof(*p)))) {
                        pthread_mutex_unlock(&sim_table_lock);
                        return CUDA_ERROR_OUT_OF_MEMORY;
                }
                p->pid = t->pid;
                p->start_time = t->start_time;
                /* A process the sim has not seen: as its slot says, running
                 * without one (or one restored by CRIU: as it was dumped). */
                p->state = t->cfg.slot_set ? t->cfg.slot_state : CU_PROCESS_STATE_RUNNING;
                p->next = sim_table;
                sim_table = p;
                sim_table_size++;
        }
        p->refs++;
        while (p->busy)
                pthread_cond_wait(&sim_table_cond, &sim_table_lock);
        p->busy = true;
        pthread_mutex_unlock(&sim_table_lock);
        *ret_proc = p;
        return CUDA_SUCCESS;
}

/* Ends the operation begun by sim_proc_acquire and sets the entry's state,
 * in the target's slot too (first, while the entry is still ours: the next
 * operation on the process must find the slot written). */
static void sim_proc_release(const struct sim_target *t, struct sim_proc *p, CUprocessState state) {
        sim_slot_write(t, state);
        pthread_mutex_lock(&sim_table_lock);
        p->state = state;
        p->busy = false;
        p->refs--;
        pthread_cond_broadcast(&sim_table_cond);
        pthread_mutex_unlock(&sim_table_lock);
}

/* A state-changing operation under way: the target, its entry in the
 * table, the state to leave it in and the result so far. */
struct sim_call {
        struct sim_target t;
        struct sim_proc *p;
        CUprocessState state;
        CUresult r;
};

/* Ends a state-changing operation, leaving the process in c->state;
 * returns its result, c->r. */
static CUresult sim_op_end(struct sim_call *c) {
        sim_proc_release(&c->t, c->p, c->state);
        sim_target_close(&c->t);
        return c->r;
}

/* Begins a state-changing operation on pid, whose arguments are valid where
 * args_ok (else CUDA_ERROR_INVALID_VALUE): opens its target into c->t and
 * takes its entry into c->p, then waits until the process runs.  Returns
 * true, sim_op_end to end the operation, with the entry's state in c->state
 * and CUDA_SUCCESS in c->r when that state is want.  Else false, with
 * nothing left open and the error in c->r: the target's or the entry's,
 * the wait's where the process died while stopped, or
 * CUDA_ERROR_ILLEGAL_STATE where the process is not in the state the
 * operation needs. */
static bool sim_op_begin(int pid, bool args_ok, CUprocessState want, struct sim_call *c) {
        c->r = CUDA_ERROR_INVALID_VALUE;
        if (!args_ok)
                return false;
        c->r = sim_target_open(pid, &c->t);
        if (c->r != CUDA_SUCCESS)
                return false;
        c->r = sim_proc_acquire(&c->t, &c->p);
        if (c->r != CUDA_SUCCESS) {
                sim_target_close(&c->t);
                return false;
        }
        c->r = sim_target_wait_running(&c->t);
        c->state = c->p->state;
        if (c->r == CUDA_SUCCESS && c->state != want)
                c->r = CUDA_ERROR_ILLEGAL_STATE;
        if (c->r != CUDA_SUCCESS) {
                sim_op_end(c);
                return false;
        }
        return true;
}

/* The state GetState reports: while an operation works, the state before it;
 * for a process the table does not know, its slot's. */
static CUprocessState sim_proc_peek_state(const struct sim_target *t) {
        CUprocessState s = t->cfg.slot_set ? t->cfg.slot_state : CU_PROCESS_STATE_RUNNING;
        struct sim_proc *p;

        pthread_mutex_lock(&sim_table_lock);
        p = sim_table_find(t->pid, t->start_time);
        if (p)
                s = p->state;
        pthread_mutex_unlock(&sim_table_lock);
        return s;
}

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

        if (!sim_op_begin(pid, args_ok, CU_PROCESS_STATE_RUNNING, &c))
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

        if (!sim_op_begin(pid, !args || sim_all_zero(args, sizeof(*args)), CU_PROCESS_STATE_LOCKED, &c))
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

static bool sim_fits(const CUuuid *gpus, int n_gpus, unsigned long long mem_mib);
static void sim_restoring(const CUuuid *gpus, int n_gpus, long long mib);

SIM_EXPORT CUresult cuCheckpointProcessRestore(int pid, CUcheckpointRestoreArgs *args) {
        bool args_ok = !args || (sim_all_zero(args->reserved, sizeof(args->reserved)) && args->reserved1 == 0);
        struct sim_call c;
        CUuuid mapped[SIM_MAX_DEVICES];
        bool remap;

        if (!sim_op_begin(pid, args_ok, CU_PROCESS_STATE_CHECKPOINTED, &c))
                return c.r;
        remap = args && args->gpuPairsCount > 0;
        const CUuuid *gpus = c.p->gpus_remapped ? c.p->gpus : c.t.cfg.gpus;
        int n_gpus = c.p->gpus_remapped ? c.p->n_gpus : c.t.cfg.n_gpus;

        if (remap)
                c.r = sim_check_mapping(args, gpus, n_gpus, mapped);
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

        if (!sim_op_begin(pid, !args || sim_all_zero(args, sizeof(*args)), CU_PROCESS_STATE_LOCKED, &c))
                return c.r;
        if (!sim_injected(&c.t, SIM_OP_UNLOCK, &c.state, &c.r))
                c.state = CU_PROCESS_STATE_RUNNING;
        return sim_op_end(&c);
}

/* ------------------------------------------------------------------ NVML
 *
 * The few entry points of libnvidia-ml.so.1 that cudackptd calls (its
 * "nvml" setting pointed at this library): the GPUs, by the same UUIDs as
 * the driver's, and the compute processes on each.  A process is on a GPU
 * while it carries CUDACKPT_SIM=1, is not checkpointed (the real one then
 * holds no GPU memory and NVML does not list it) and that GPU is one of its
 * own (CUDACKPT_SIM_GPUS, or where a restore moved it), holding
 * CUDACKPT_SIM_MEM_MIB there.  Found by reading /proc (no retries: a
 * process caught inside its exec is simply not listed). */

typedef int sim_nvml_return;
#define SIM_NVML_SUCCESS 0
#define SIM_NVML_ERROR_INVALID_ARGUMENT 2
#define SIM_NVML_ERROR_INSUFFICIENT_SIZE 7

/* nvmlProcessInfo_t of nvmlDeviceGetComputeRunningProcesses_v3. */
struct sim_nvml_process {
        unsigned int pid;
        unsigned long long used_gpu_memory;
        unsigned int gpu_instance_id;
        unsigned int compute_instance_id;
};

/* A device handle is its ordinal + 1. */
static int sim_nvml_ordinal(const void *device) {
        uintptr_t v = (uintptr_t) device;

        sim_driver_load();
        return v >= 1 && v <= (uintptr_t) sim_driver.n_devices ? (int) (v - 1) : -1;
}

SIM_EXPORT sim_nvml_return nvmlInit_v2(void);
SIM_EXPORT sim_nvml_return nvmlInit_v2(void) {
        sim_driver_load();
        return SIM_NVML_SUCCESS;
}

SIM_EXPORT sim_nvml_return nvmlShutdown(void);
SIM_EXPORT sim_nvml_return nvmlShutdown(void) {
        return SIM_NVML_SUCCESS;
}

SIM_EXPORT sim_nvml_return nvmlDeviceGetCount_v2(unsigned int *count);
SIM_EXPORT sim_nvml_return nvmlDeviceGetCount_v2(unsigned int *count) {
        if (!count)
                return SIM_NVML_ERROR_INVALID_ARGUMENT;
        sim_driver_load();
        *count = (unsigned int) sim_driver.n_devices;
        return SIM_NVML_SUCCESS;
}

SIM_EXPORT sim_nvml_return nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device);
SIM_EXPORT sim_nvml_return nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device) {
        sim_driver_load();
        if (!device || index >= (unsigned int) sim_driver.n_devices)
                return SIM_NVML_ERROR_INVALID_ARGUMENT;
        *device = (void *) (uintptr_t) (index + 1);
        return SIM_NVML_SUCCESS;
}

SIM_EXPORT sim_nvml_return nvmlDeviceGetUUID(void *device, char *uuid, unsigned int length);
SIM_EXPORT sim_nvml_return nvmlDeviceGetUUID(void *device, char *uuid, unsigned int length) {
        int d = sim_nvml_ordinal(device);
        const unsigned char *b;

        if (d < 0 || !uuid)
                return SIM_NVML_ERROR_INVALID_ARGUMENT;
        b = (const unsigned char *) sim_driver.devices[d].bytes;
        if (snprintf(uuid, length,
                     "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
                     b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]) >=
            (int) length)
                return SIM_NVML_ERROR_INSUFFICIENT_SIZE;
        return SIM_NVML_SUCCESS;
}

/* Whether pid is a sim process on device d now; its memory in *ret_bytes. */
static bool sim_nvml_on(int pid, int d, unsigned long long *ret_bytes) {
        struct sim_target t = { .pid = pid, .proc_fd = -1 };
        struct sim_stat st;
        struct sim_proc *p;
        char path[32], *env = NULL;
        size_t env_len = 0;
        bool on = false;

        (void) snprintf(path, sizeof(path), "/proc/%d", pid);
        t.proc_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (t.proc_fd < 0)
                return false;
        if (sim_read_stat_at(t.proc_fd, "stat", &st) < 0 || st.state == 'Z' || st.state == 'X' ||
            sim_read_at(t.proc_fd, "environ", SIM_MAX_ENVIRON, &env, &env_len) < 0 || env_len == 0)
                goto out;
        t.start_time = st.start_time;
        sim_config_parse(env, env_len, false, &t.cfg);
        if (!t.cfg.cuda || sim_proc_peek_state(&t) == CU_PROCESS_STATE_CHECKPOINTED)
                goto out;
        pthread_mutex_lock(&sim_table_lock);
        p = sim_table_find(t.pid, t.start_time);
        if (p && p->gpus_remapped) {
                t.cfg.n_gpus = p->n_gpus;
                memcpy(t.cfg.gpus, p->gpus, sizeof(p->gpus[0]) * (size_t) p->n_gpus);
        }
        pthread_mutex_unlock(&sim_table_lock);
        for (int i = 0; i < t.cfg.n_gpus && !on; i++)
                on = sim_uuid_eq(&t.cfg.gpus[i], &sim_driver.devices[d]);
        *ret_bytes = t.cfg.mem_mib << 20;
out:
        free(env);
        sim_target_close(&t);
        return on;
}

/* The memory the sim processes on device d hold now, in MiB. */
static unsigned long long sim_nvml_used_mib(int d) {
        unsigned long long used = 0;
        struct dirent *e;
        DIR *dir = opendir("/proc");

        while (dir && (e = readdir(dir))) {
                unsigned long long pid, bytes = 0;

                if (sim_parse_ulong_str(e->d_name, INT_MAX, &pid) == 0 && sim_nvml_on((int) pid, d, &bytes))
                        used += bytes >> 20;
        }
        if (dir)
                closedir(dir);
        return used;
}

/* What restores working now take on each device (MiB): their processes
 * are still checkpointed, NVML does not list them yet. */
static long long sim_restoring_mib[SIM_MAX_DEVICES];
static pthread_mutex_t sim_restoring_lock = PTHREAD_MUTEX_INITIALIZER;

/* Adds mib to what is restoring on each of gpus; sim_restoring_lock held. */
static void sim_restoring_add(const CUuuid *gpus, int n_gpus, long long mib) {
        for (int i = 0; i < n_gpus; i++)
                for (int d = 0; d < sim_driver.n_devices; d++)
                        if (sim_uuid_eq(&gpus[i], &sim_driver.devices[d]))
                                sim_restoring_mib[d] += mib;
}

static void sim_restoring(const CUuuid *gpus, int n_gpus, long long mib) {
        pthread_mutex_lock(&sim_restoring_lock);
        sim_restoring_add(gpus, n_gpus, mib);
        pthread_mutex_unlock(&sim_restoring_lock);
}

/* Whether mem_mib more fit on each of gpus now; if so, they are counted
 * there as restoring until sim_restoring() takes them back. */
static bool sim_fits(const CUuuid *gpus, int n_gpus, unsigned long long mem_mib) {
        bool fits = true;

        pthread_mutex_lock(&sim_restoring_lock);
        for (int i = 0; i < n_gpus; i++)
                for (int d = 0; d < sim_driver.n_devices; d++)
                        if (sim_uuid_eq(&gpus[i], &sim_driver.devices[d]) &&
                            sim_nvml_used_mib(d) + (unsigned long long) sim_restoring_mib[d] + mem_mib >
                                    sim_driver.gpu_mem_mib)
                                fits = false;
        if (fits)
                sim_restoring_add(gpus, n_gpus, (long long) mem_mib);
        pthread_mutex_unlock(&sim_restoring_lock);
        return fits;
}

/* nvmlMemory_t of nvmlDeviceGetMemoryInfo, in bytes. */
struct sim_nvml_memory {
        unsigned long long total;
        unsigned long long free;
        unsigned long long used;
};

SIM_EXPORT sim_nvml_return nvmlDeviceGetMemoryInfo(void *device, struct sim_nvml_memory *memory);
SIM_EXPORT sim_nvml_return nvmlDeviceGetMemoryInfo(void *device, struct sim_nvml_memory *memory) {
        int d = sim_nvml_ordinal(device);
        unsigned long long used;

        if (d < 0 || !memory)
                return SIM_NVML_ERROR_INVALID_ARGUMENT;
        used = sim_nvml_used_mib(d);
        memory->total = sim_driver.gpu_mem_mib << 20;
        memory->used = (used < sim_driver.gpu_mem_mib ? used : sim_driver.gpu_mem_mib) << 20;
        memory->free = memory->total - memory->used;
        return SIM_NVML_SUCCESS;
}

SIM_EXPORT sim_nvml_return nvmlDeviceGetComputeRunningProcesses_v3(void *device, unsigned int *count,
                                                                   struct sim_nvml_process *infos);
SIM_EXPORT sim_nvml_return nvmlDeviceGetComputeRunningProcesses_v3(void *device, unsigned int *count,
                                                                   struct sim_nvml_process *infos) {
        int d = sim_nvml_ordinal(device);
        unsigned int n = 0;
        struct dirent *e;
        DIR *dir;

        if (d < 0 || !count || (*count > 0 && !infos))
                return SIM_NVML_ERROR_INVALID_ARGUMENT;
        dir = opendir("/proc");
        if (!dir)
                return SIM_NVML_ERROR_INVALID_ARGUMENT;
        while ((e = readdir(dir))) {
                unsigned long long pid, bytes = 0;

                if (sim_parse_ulong_str(e->d_name, INT_MAX, &pid) < 0 || !sim_nvml_on((int) pid, d, &bytes))
                        continue;
                if (n < *count)
                        infos[n] = (struct sim_nvml_process){ .pid = (unsigned int) pid, .used_gpu_memory = bytes,
                                                              .gpu_instance_id = ~0u, .compute_instance_id = ~0u };
                n++;
        }
        closedir(dir);
        if (n > *count) {
                *count = n;
                return SIM_NVML_ERROR_INSUFFICIENT_SIZE;
        }
        *count = n;
        return SIM_NVML_SUCCESS;
}
