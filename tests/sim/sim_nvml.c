/* The NVML stand-in: the few entry points of libnvidia-ml.so.1 that
 * cudackptd calls (its "nvml" setting pointed at this library): the GPUs, by the same UUIDs as
 * the driver's, and the compute processes on each.  A process is on a GPU
 * while it carries CUDACKPT_SIM=1, is not checkpointed (the real one then
 * holds no GPU memory and NVML does not list it) and that GPU is one of its
 * own (CUDACKPT_SIM_GPUS, or where a restore moved it), holding
 * CUDACKPT_SIM_MEM_MIB there.  Found by reading /proc (no retries: a
 * process caught inside its exec is simply not listed). */

#include "sim.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
        sim_proc_moved_gpus(&t);
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

void sim_restoring(const CUuuid *gpus, int n_gpus, long long mib) {
        pthread_mutex_lock(&sim_restoring_lock);
        sim_restoring_add(gpus, n_gpus, mib);
        pthread_mutex_unlock(&sim_restoring_lock);
}

/* Whether mem_mib more fit on each of gpus now; if so, they are counted
 * there as restoring until sim_restoring() takes them back. */
bool sim_fits(const CUuuid *gpus, int n_gpus, unsigned long long mem_mib) {
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

/* A slow NVML: each memory query first sleeps CUDACKPT_SIM_NVML_DELAY_MS
 * (default 0), as a real one can while the GPU is busy or hung. */
static void sim_nvml_delay(void) {
        const char *v = secure_getenv("CUDACKPT_SIM_NVML_DELAY_MS");
        long ms = v ? strtol(v, NULL, 10) : 0;

        if (ms > 0)
                usleep((useconds_t) (ms < 60000 ? ms : 60000) * 1000);
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
        sim_nvml_delay();
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
