/* The simulated driver's own configuration, from the DAEMON's environment
 * (CUDACKPT_SIM_DEVICES, _DEVICE_COUNT, _GPU_MEM_MIB, _DRIVER_VERSION,
 * _INIT_ERROR; sim.c says what each means), read once. */

#include "sim.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sim_driver sim_driver;

static pthread_once_t sim_driver_once_control = PTHREAD_ONCE_INIT;
/* Set once cuInit succeeded: the device queries need it, as in libcuda. */
atomic_bool sim_initialized;

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

void sim_driver_load(void) {
        (void) pthread_once(&sim_driver_once_control, sim_driver_once);
}
