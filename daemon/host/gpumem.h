/* gpumem.h: which GPUs each process uses and how much of their memory,
 * from NVML (libnvidia-ml.so.1), for ListProcesses, and what each GPU has
 * free, for the restores' fit (fit.h).
 *
 * NVML comes with the driver and, like it, is loaded at run time (dlopen),
 * so the daemon starts where it is missing and lists processes without
 * their GPUs.  It knows the processes that hold GPU memory now: running,
 * locked ones, not checkpointed ones (which hold none).  It answers from
 * the kernel module without involving the target processes, so a stopped
 * process cannot make it wait.  The "nvml" setting names the library ("" =
 * none); the tests point it at the simulator, which has both APIs.
 *
 * NVML names processes by their pids in the initial pid namespace: a daemon
 * elsewhere (a container without the host's pids) does without it.
 *
 * gpumem_open() loads and initialises (a worker or the start);
 * gpumem_usage() is thread-safe (NVML is), for the workers. */
#ifndef CUDACKPT_GPUMEM_H
#define CUDACKPT_GPUMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define GPUMEM_MAX_GPUS 64
#define GPUMEM_UUID_MAX 96
#define GPUMEM_NO_BYTES UINT64_MAX /* NVML could not say */
#define GPUMEM_NAME_MAX 96         /* NVML_DEVICE_NAME_V2_BUFFER_SIZE */
#define GPUMEM_PCI_MAX 32          /* NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE */
#define GPUMEM_DRIVER_MAX 80       /* NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE */

struct gpumem_use {
        pid_t pid;          /* as NVML gives it: the initial pid namespace's */
        unsigned gpu;       /* index into gpumem.uuid */
        uint64_t bytes;     /* or GPUMEM_NO_BYTES */
};

struct gpumem {
        void *lib;
        bool available;
        char reason[256];   /* why not, when !available */
        unsigned n_gpus;
        char uuid[GPUMEM_MAX_GPUS][GPUMEM_UUID_MAX];
        void *device[GPUMEM_MAX_GPUS];
        /* What does not change while the driver is loaded, read at open
         * (ListGpus, gpulist.h): "" where NVML lacks the entry point. */
        char name[GPUMEM_MAX_GPUS][GPUMEM_NAME_MAX];
        char pci_bus_id[GPUMEM_MAX_GPUS][GPUMEM_PCI_MAX];
        char driver_version[GPUMEM_DRIVER_MAX];
        int (*get_processes)(void *device, unsigned *count, void *infos);
        int (*get_memory)(void *device, void *info); /* NULL: the library lacks it */
        int (*shutdown)(void);
};

/* Loads path and asks for the GPUs; 0, or -errno with g->reason set (the
 * daemon goes on without). */
int gpumem_open(struct gpumem *g, const char *path);
void gpumem_close(struct gpumem *g);
/* Every (process, GPU) pair with GPU memory now, sorted by pid; *ret is
 * malloc()ed.  -ENODEV without NVML. */
int gpumem_usage(const struct gpumem *g, struct gpumem_use **ret, size_t *ret_n);

/* What GPU gpu has free and in all now, in bytes (nvmlDeviceGetMemoryInfo).
 * -ENODEV without NVML or without that entry point, -EIO when NVML cannot
 * say. */
int gpumem_free(const struct gpumem *g, unsigned gpu, uint64_t *ret_free, uint64_t *ret_total);

#endif
