/* sim_nvml_info.c: what the simulator's NVML says of each GPU beyond its
 * UUID and memory (sim.c), for ListGpus and the device plan of restore
 * --images: its model, its PCI bus id, and the driver's version.
 *
 * The DAEMON's environment, read at each call: CUDACKPT_SIM_GPU_NAMES=
 * name,... (the model of GPU 0, 1, ...; the last one named goes for the
 * GPUs after it; default "NVIDIA H200"), CUDACKPT_SIM_PCI_BUS_IDS=id,...
 * (default 00000000:XX:00.0, XX = 0x18 + the ordinal, in hex),
 * CUDACKPT_SIM_NVML_DRIVER_VERSION=text (nvmlSystemGetDriverVersion's
 * answer, default "580.95.05").  Test-only, as sim.c. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_EXPORT __attribute__((visibility("default")))
#define SIM_NVML_SUCCESS 0
#define SIM_NVML_ERROR_INVALID_ARGUMENT 2
#define SIM_NVML_ERROR_INSUFFICIENT_SIZE 7
#define SIM_INFO_MAX 96

/* sim.c's, exported: the number of GPUs. */
int nvmlDeviceGetCount_v2(unsigned int *count);

/* nvmlPciInfo_t of nvmlDeviceGetPciInfo_v3. */
struct sim_nvml_pci {
        char bus_id_legacy[16];
        unsigned int domain;
        unsigned int bus;
        unsigned int device;
        unsigned int pci_device_id;
        unsigned int pci_subsystem_id;
        char bus_id[32];
};

/* A device handle is its ordinal + 1 (sim.c); -1 when it names none. */
static int sim_info_ordinal(const void *device) {
        uintptr_t v = (uintptr_t) device;
        unsigned int n = 0;

        if (nvmlDeviceGetCount_v2(&n) != SIM_NVML_SUCCESS)
                return -1;
        return v >= 1 && v <= n ? (int) (v - 1) : -1;
}

/* Item d of the comma-separated list in variable var (the last item for
 * the ordinals after it) into buf; false when var is unset or empty. */
static int sim_info_item(const char *var, int d, char *buf, size_t size) {
        const char *v = secure_getenv(var), *start, *comma;

        if (!v || !*v)
                return 0;
        start = v;
        for (int i = 0; i < d && (comma = strchr(start, ',')); i++)
                start = comma + 1;
        comma = strchr(start, ',');
        snprintf(buf, size, "%.*s", (int) (comma ? (size_t) (comma - start) : strlen(start)), start);
        return 1;
}

static int sim_info_copy(const char *text, char *out, unsigned int length) {
        if (!out)
                return SIM_NVML_ERROR_INVALID_ARGUMENT;
        if (strlen(text) + 1 > length)
                return SIM_NVML_ERROR_INSUFFICIENT_SIZE;
        memcpy(out, text, strlen(text) + 1);
        return SIM_NVML_SUCCESS;
}

SIM_EXPORT int nvmlDeviceGetName(void *device, char *name, unsigned int length);
SIM_EXPORT int nvmlDeviceGetName(void *device, char *name, unsigned int length) {
        char buf[SIM_INFO_MAX];
        int d = sim_info_ordinal(device);

        if (d < 0)
                return SIM_NVML_ERROR_INVALID_ARGUMENT;
        if (!sim_info_item("CUDACKPT_SIM_GPU_NAMES", d, buf, sizeof(buf)))
                snprintf(buf, sizeof(buf), "NVIDIA H200");
        return sim_info_copy(buf, name, length);
}

SIM_EXPORT int nvmlDeviceGetPciInfo_v3(void *device, struct sim_nvml_pci *pci);
SIM_EXPORT int nvmlDeviceGetPciInfo_v3(void *device, struct sim_nvml_pci *pci) {
        int d = sim_info_ordinal(device);

        if (d < 0 || !pci)
                return SIM_NVML_ERROR_INVALID_ARGUMENT;
        memset(pci, 0, sizeof(*pci));
        if (!sim_info_item("CUDACKPT_SIM_PCI_BUS_IDS", d, pci->bus_id, sizeof(pci->bus_id)))
                snprintf(pci->bus_id, sizeof(pci->bus_id), "00000000:%02X:00.0", 0x18u + (unsigned) d);
        pci->bus = 0x18u + (unsigned) d;
        snprintf(pci->bus_id_legacy, sizeof(pci->bus_id_legacy), "0000:%02X:00.0", pci->bus & 0xffu);
        return SIM_NVML_SUCCESS;
}

SIM_EXPORT int nvmlSystemGetDriverVersion(char *version, unsigned int length);
SIM_EXPORT int nvmlSystemGetDriverVersion(char *version, unsigned int length) {
        const char *v = secure_getenv("CUDACKPT_SIM_NVML_DRIVER_VERSION");

        return sim_info_copy(v && *v ? v : "580.95.05", version, length);
}
