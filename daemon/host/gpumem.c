/* gpumem.c: GPU memory per process from NVML (gpumem.h). */
#include "host/gpumem.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The parts of nvml.h used here (its ABI, stable across versions). */
#define NVML_SUCCESS 0
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_VALUE_NOT_AVAILABLE_ULL (~0ULL)

/* The inode of the initial pid namespace (PROC_PID_INIT_INO), fixed in the
 * kernel: NVML names processes by their pids there. */
#define INITIAL_PID_NS_INO 0xEFFFFFFCu

/* nvmlMemory_t, as nvmlDeviceGetMemoryInfo fills it. */
struct nvml_memory {
        unsigned long long total;
        unsigned long long free;
        unsigned long long used;
};

/* nvmlProcessInfo_t as nvmlDeviceGetComputeRunningProcesses_v3 fills it. */
struct nvml_process_info {
        unsigned int pid;
        unsigned long long used_gpu_memory;
        unsigned int gpu_instance_id;
        unsigned int compute_instance_id;
};

/* nvmlPciInfo_t, as nvmlDeviceGetPciInfo_v3 fills it. */
struct nvml_pci_info {
        char bus_id_legacy[16];
        unsigned int domain;
        unsigned int bus;
        unsigned int device;
        unsigned int pci_device_id;
        unsigned int pci_subsystem_id;
        char bus_id[GPUMEM_PCI_MAX];
};

static void *sym(struct gpumem *g, const char *name)
{
        void *p = dlsym(g->lib, name);

        if (!p && g->reason[0] == '\0')
                snprintf(g->reason, sizeof(g->reason), "%s lacks %s", "the NVML library", name);
        return p;
}

/* The GPUs NVML counts (GPUMEM_MAX_GPUS at most): their handles and
 * UUIDs.  0, or -ENODEV with g->reason set. */
static int list_gpus(struct gpumem *g, int (*count)(unsigned *), int (*handle)(unsigned, void **),
                     int (*uuid)(void *, char *, unsigned))
{
        unsigned n = 0;
        int r;

        if ((r = count(&n)) != NVML_SUCCESS) {
                snprintf(g->reason, sizeof(g->reason), "nvmlDeviceGetCount failed (NVML error %d)", r);
                return -ENODEV;
        }
        if (n > GPUMEM_MAX_GPUS)
                n = GPUMEM_MAX_GPUS;
        for (unsigned i = 0; i < n; i++) {
                if ((r = handle(i, &g->device[i])) != NVML_SUCCESS ||
                    (r = uuid(g->device[i], g->uuid[i], GPUMEM_UUID_MAX)) != NVML_SUCCESS) {
                        snprintf(g->reason, sizeof(g->reason), "GPU %u: NVML error %d", i, r);
                        return -ENODEV;
                }
                g->uuid[i][GPUMEM_UUID_MAX - 1] = '\0';
        }
        g->n_gpus = n;
        return 0;
}

/* The model, PCI bus id and driver version, where NVML has them: only
 * ListGpus shows them, so a library without them costs nothing else. */
static void read_names(struct gpumem *g)
{
        int (*name)(void *, char *, unsigned) = (int (*)(void *, char *, unsigned))dlsym(g->lib, "nvmlDeviceGetName");
        int (*pci)(void *, struct nvml_pci_info *) =
                (int (*)(void *, struct nvml_pci_info *))dlsym(g->lib, "nvmlDeviceGetPciInfo_v3");
        int (*version)(char *, unsigned) = (int (*)(char *, unsigned))dlsym(g->lib, "nvmlSystemGetDriverVersion");

        if (!version || version(g->driver_version, GPUMEM_DRIVER_MAX) != NVML_SUCCESS)
                g->driver_version[0] = '\0';
        g->driver_version[GPUMEM_DRIVER_MAX - 1] = '\0';
        for (unsigned i = 0; i < g->n_gpus; i++) {
                struct nvml_pci_info info;
                if (!name || name(g->device[i], g->name[i], GPUMEM_NAME_MAX) != NVML_SUCCESS)
                        g->name[i][0] = '\0';
                g->name[i][GPUMEM_NAME_MAX - 1] = '\0';
                memset(&info, 0, sizeof(info));
                if (pci && pci(g->device[i], &info) == NVML_SUCCESS)
                        snprintf(g->pci_bus_id[i], GPUMEM_PCI_MAX, "%.*s", GPUMEM_PCI_MAX - 1, info.bus_id);
                else
                        g->pci_bus_id[i][0] = '\0';
        }
}

int gpumem_open(struct gpumem *g, const char *path)
{
        int (*init)(void);
        int (*count)(unsigned *);
        int (*handle)(unsigned, void **);
        int (*uuid)(void *, char *, unsigned);
        int r;

        memset(g, 0, sizeof(*g));
        if (!path || !path[0]) {
                snprintf(g->reason, sizeof(g->reason), "\"nvml\" is empty");
                return -ENOENT;
        }
        struct stat st;
        if (stat("/proc/self/ns/pid", &st) == 0 && st.st_ino != INITIAL_PID_NS_INO) {
                snprintf(g->reason, sizeof(g->reason),
                         "the daemon is not in the initial pid namespace, whose pids NVML gives");
                return -EREMOTE;
        }
        g->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!g->lib) {
                const char *e = dlerror();
                snprintf(g->reason, sizeof(g->reason), "%s", e ? e : "dlopen failed");
                return -ENOENT;
        }
        init = (int (*)(void))sym(g, "nvmlInit_v2");
        count = (int (*)(unsigned *))sym(g, "nvmlDeviceGetCount_v2");
        handle = (int (*)(unsigned, void **))sym(g, "nvmlDeviceGetHandleByIndex_v2");
        uuid = (int (*)(void *, char *, unsigned))sym(g, "nvmlDeviceGetUUID");
        g->get_processes = (int (*)(void *, unsigned *, void *))sym(g, "nvmlDeviceGetComputeRunningProcesses_v3");
        g->shutdown = (int (*)(void))sym(g, "nvmlShutdown");
        /* Optional: without it only the restores' fit goes unchecked. */
        g->get_memory = (int (*)(void *, void *))dlsym(g->lib, "nvmlDeviceGetMemoryInfo");
        if (!init || !count || !handle || !uuid || !g->get_processes || !g->shutdown)
                goto fail;
        if ((r = init()) != NVML_SUCCESS) {
                snprintf(g->reason, sizeof(g->reason), "nvmlInit failed (NVML error %d)", r);
                g->shutdown = NULL;
                goto fail;
        }
        if (list_gpus(g, count, handle, uuid) < 0)
                goto fail;
        read_names(g);
        g->available = true;
        return 0;
fail:
        gpumem_close(g);
        return -ENODEV;
}

void gpumem_close(struct gpumem *g)
{
        if (g->shutdown)
                (void)g->shutdown();
        if (g->lib)
                dlclose(g->lib);
        g->lib = NULL;
        g->shutdown = NULL;
        g->get_processes = NULL;
        g->get_memory = NULL;
        g->available = false;
}

static int cmp_use(const void *a, const void *b)
{
        const struct gpumem_use *x = a, *y = b;

        if (x->pid != y->pid)
                return (x->pid > y->pid) - (x->pid < y->pid);
        return (x->gpu > y->gpu) - (x->gpu < y->gpu);
}

/* The processes on GPU d (*ret, to free(), and *ret_count): NVML's
 * result (NVML_SUCCESS, or its error with *ret NULL), or -ENOMEM. */
static int processes_on(const struct gpumem *g, unsigned d, struct nvml_process_info **ret, unsigned *ret_count)
{
        struct nvml_process_info *info = NULL;
        unsigned cap = 64, count = 0;
        int r = NVML_SUCCESS;

        /* The list may grow between the two calls: ask again. */
        for (int tries = 0; tries < 4; tries++) {
                void *p = realloc(info, cap * sizeof(*info));
                if (!p) {
                        free(info);
                        return -ENOMEM;
                }
                info = p;
                count = cap;
                r = g->get_processes(g->device[d], &count, info);
                if (r != NVML_ERROR_INSUFFICIENT_SIZE)
                        break;
                cap = count + 16;
        }
        if (r != NVML_SUCCESS) {
                free(info);
                return r;
        }
        *ret = info;
        *ret_count = count;
        return NVML_SUCCESS;
}

int gpumem_usage(const struct gpumem *g, struct gpumem_use **ret, size_t *ret_n)
{
        struct gpumem_use *all = NULL;
        size_t n = 0;
        unsigned answered = 0;

        *ret = NULL;
        *ret_n = 0;
        if (!g->available)
                return -ENODEV;
        for (unsigned d = 0; d < g->n_gpus; d++) {
                struct nvml_process_info *info = NULL;
                unsigned count = 0;
                int r = processes_on(g, d, &info, &count);
                if (r == -ENOMEM) {
                        free(all);
                        return -ENOMEM;
                }
                if (r != NVML_SUCCESS)
                        continue; /* this GPU says nothing (lost, reset): the others still count */
                answered++;
                void *p = realloc(all, (n + count + 1) * sizeof(*all));
                if (!p) {
                        free(info);
                        free(all);
                        return -ENOMEM;
                }
                all = p;
                for (unsigned i = 0; i < count; i++)
                        all[n++] = (struct gpumem_use){
                                .pid = (pid_t)info[i].pid,
                                .gpu = d,
                                .bytes = info[i].used_gpu_memory == NVML_VALUE_NOT_AVAILABLE_ULL
                                                 ? GPUMEM_NO_BYTES
                                                 : (uint64_t)info[i].used_gpu_memory,
                        };
                free(info);
        }
        if (answered == 0 && g->n_gpus > 0) {
                free(all);
                return -EIO; /* no GPU answered: nothing is known, not "none" */
        }
        if (n > 1)
                qsort(all, n, sizeof(*all), cmp_use);
        *ret = all;
        *ret_n = n;
        return 0;
}

int gpumem_free(const struct gpumem *g, unsigned gpu, uint64_t *ret_free, uint64_t *ret_total)
{
        struct nvml_memory m = { 0 };

        if (!g->available || !g->get_memory || gpu >= g->n_gpus)
                return -ENODEV;
        if (g->get_memory(g->device[gpu], &m) != NVML_SUCCESS)
                return -EIO;
        *ret_free = m.free;
        *ret_total = m.total;
        return 0;
}
