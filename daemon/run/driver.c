/* driver.c: loading libcuda.so.1 (or a stand-in) and calling it.
 *
 * Nothing here knows about connections or processes; it turns the driver's
 * C API into calls with plain arguments and keeps the reason the driver is
 * unusable, if it is. */
#include "run/driver.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#define RESOLVE(d, field, name)                                                                 \
        do {                                                                                    \
                *(void **)(&(d)->field) = dlsym((d)->handle, name);                             \
                if (!(d)->field) {                                                              \
                        snprintf((d)->reason, sizeof((d)->reason),                              \
                                 "%s lacks %s: the driver is older than the checkpoint API "    \
                                 "(CUDA 12.8, driver 570) or not a CUDA driver", path, name);   \
                        goto fail;                                                              \
                }                                                                               \
        } while (0)

int driver_open(struct driver *d, const char *path)
{
        int (*is_sim)(void);

        memset(d, 0, sizeof(*d));
        d->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!d->handle) {
                const char *e = dlerror();
                snprintf(d->reason, sizeof(d->reason), "cannot load %s: %s", path,
                         e ? e : "unknown error");
                return -ENOENT;
        }
        RESOLVE(d, cu_init, "cuInit");
        RESOLVE(d, cu_driver_get_version, "cuDriverGetVersion");
        RESOLVE(d, cu_get_error_name, "cuGetErrorName");
        RESOLVE(d, cu_device_get_count, "cuDeviceGetCount");
        RESOLVE(d, cu_device_get, "cuDeviceGet");
        *(void **)(&d->cu_device_get_uuid) = dlsym(d->handle, "cuDeviceGetUuid_v2");
        if (!d->cu_device_get_uuid)
                RESOLVE(d, cu_device_get_uuid, "cuDeviceGetUuid");
#define RESOLVE_CHECKPOINT(field, name) RESOLVE(d, field, name);
        CUDA_CHECKPOINT_SYMBOLS(RESOLVE_CHECKPOINT)
#undef RESOLVE_CHECKPOINT
        *(void **)(&is_sim) = dlsym(d->handle, "cudackptSimIsSimulator");
        d->simulated = is_sim && is_sim() == 1;
        return 0;
fail:
        dlclose(d->handle);
        d->handle = NULL;
        return -ENOSYS;
}

int driver_start(struct driver *d)
{
        char name[64];
        CUresult r;
        int n = 0;

        if (!d->handle)
                return -ENOENT;
        r = d->cu_driver_get_version(&d->version);
        if (r != CUDA_SUCCESS) {
                snprintf(d->reason, sizeof(d->reason), "cuDriverGetVersion failed: %s",
                         driver_error_name(d, r, name, sizeof(name)));
                return -EIO;
        }
        if (d->version < DRIVER_MIN_VERSION) {
                snprintf(d->reason, sizeof(d->reason),
                         "driver supports CUDA %d.%d, the checkpoint API needs %d.%d or newer",
                         d->version / 1000, d->version % 1000 / 10, DRIVER_MIN_VERSION / 1000,
                         DRIVER_MIN_VERSION % 1000 / 10);
                return -ENOTSUP;
        }
        /* Restore needs an initialised driver in the calling process. */
        r = d->cu_init(0);
        if (r != CUDA_SUCCESS) {
                snprintf(d->reason, sizeof(d->reason), "cuInit failed: %s",
                         driver_error_name(d, r, name, sizeof(name)));
                return -EIO;
        }
        r = d->cu_device_get_count(&n);
        if (r != CUDA_SUCCESS)
                n = 0;
        for (int i = 0; i < n && d->n_devices < DRIVER_MAX_DEVICES; i++) {
                CUdevice dev;
                if (d->cu_device_get(&dev, i) != CUDA_SUCCESS ||
                    d->cu_device_get_uuid(&d->devices[d->n_devices], dev) != CUDA_SUCCESS)
                        continue;
                d->n_devices++;
        }
        d->available = true;
        d->reason[0] = '\0';
        return 0;
}

void driver_close(struct driver *d)
{
        /* libcuda is not dlclose()d: its threads may still run. */
        d->available = false;
}

const char *driver_error_name(const struct driver *d, CUresult r, char *buf, size_t len)
{
        const char *s = NULL;

        if (d->cu_get_error_name && d->cu_get_error_name(r, &s) == CUDA_SUCCESS && s) {
                snprintf(buf, len, "%s", s);
                return buf;
        }
        snprintf(buf, len, "CUDA_ERROR_%d", (int)r);
        return buf;
}

bool driver_has_device(const struct driver *d, const CUuuid *u)
{
        for (unsigned i = 0; i < d->n_devices; i++)
                if (memcmp(d->devices[i].bytes, u->bytes, sizeof(u->bytes)) == 0)
                        return true;
        return false;
}

const CUuuid *driver_unknown_new_gpu(const struct driver *d, const CUcheckpointGpuPair *pairs, unsigned n)
{
        for (unsigned i = 0; i < n; i++)
                if (!driver_has_device(d, &pairs[i].newUuid))
                        return &pairs[i].newUuid;
        return NULL;
}

CUresult driver_get_state(const struct driver *d, int pid, int *ret_state)
{
        CUprocessState s = CU_PROCESS_STATE_RUNNING;
        CUresult r = d->cu_get_state(pid, &s);

        if (r == CUDA_SUCCESS)
                *ret_state = (int)s;
        return r;
}

CUresult driver_get_restore_tid(const struct driver *d, int pid, int *ret_tid)
{
        int tid = 0;
        CUresult r = d->cu_get_restore_tid(pid, &tid);

        if (r == CUDA_SUCCESS)
                *ret_tid = tid;
        return r;
}

CUresult driver_lock(const struct driver *d, int pid, unsigned timeout_ms)
{
        CUcheckpointLockArgs args;

        memset(&args, 0, sizeof(args));
        args.timeoutMs = timeout_ms;
        return d->cu_lock(pid, &args);
}

CUresult driver_checkpoint(const struct driver *d, int pid)
{
        CUcheckpointCheckpointArgs args;

        memset(&args, 0, sizeof(args));
        return d->cu_checkpoint(pid, &args);
}

CUresult driver_restore(const struct driver *d, int pid, CUcheckpointGpuPair *pairs, unsigned n)
{
        CUcheckpointRestoreArgs args;

        memset(&args, 0, sizeof(args));
        if (n > 0) {
                args.gpuPairs = pairs;
                args.gpuPairsCount = n;
        }
        return d->cu_restore(pid, &args);
}

CUresult driver_unlock(const struct driver *d, int pid)
{
        CUcheckpointUnlockArgs args;

        memset(&args, 0, sizeof(args));
        return d->cu_unlock(pid, &args);
}
