/* manifestgpu.c: the manifest's device records (manifestgpu.h). */
#include "manifestgpu.h"

#include "gpu-uuid.h"
#include "json.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Bytes as JSON numbers say them exactly: below 2^53. */
#define DEVREC_MAX_BYTES 9007199254740992.0
/* The longest UUID, model, bus id or version text taken from a manifest. */
#define DEVREC_MAX_TEXT 256

const ctl_devrec_gpu *ctl_devrec_find(const ctl_devrec *d, const char *uuid) {
        for (size_t i = 0; d && i < d->n_gpus; i++)
                if (gpu_uuid_same(d->gpus[i].uuid, uuid))
                        return &d->gpus[i];
        return NULL;
}

void ctl_devrec_free(ctl_devrec *d) {
        if (!d)
                return;
        for (size_t i = 0; d->gpus && i < d->n_gpus; i++) {
                free(d->gpus[i].uuid);
                free(d->gpus[i].name);
                free(d->gpus[i].pci_bus_id);
        }
        for (size_t i = 0; d->members && i < d->n_members; i++) {
                for (size_t j = 0; j < d->members[i].n_use; j++)
                        free(d->members[i].use[j].uuid);
                free(d->members[i].use);
        }
        free(d->gpus);
        free(d->members);
        free(d->driver_version);
        free(d);
}

/* A string of the object, "" when absent; NULL when not a string or too long. */
static const char *devrec_text(const cJSON *o, const char *key, bool required) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

        if (!v && !required)
                return "";
        if (!cJSON_IsString(v) || strlen(v->valuestring) >= DEVREC_MAX_TEXT)
                return NULL;
        return v->valuestring;
}

static bool devrec_bytes(const cJSON *o, const char *key, uint64_t *ret) {
        long long v;

        if (!cJSON_GetObjectItemCaseSensitive(o, key)) {
                *ret = 0;
                return true;
        }
        if (!json_get_integer(o, key, 0, DEVREC_MAX_BYTES, &v))
                return false;
        *ret = (uint64_t) v;
        return true;
}

/* One GPU from its object (ListGpus' GpuInfo or the manifest's, which
 * have the same keys); -EINVAL when malformed. */
static int devrec_gpu_from(const cJSON *o, ctl_devrec_gpu *g) {
        const char *uuid = devrec_text(o, "uuid", true), *name = devrec_text(o, "name", false);
        const char *pci = devrec_text(o, "pci_bus_id", false);
        unsigned char bytes[GPU_UUID_BYTES];
        long long index = -1;

        /* A UUID as the driver spells them: it goes into a device map. */
        if (!cJSON_IsObject(o) || !uuid || gpu_uuid_parse(uuid, bytes) < 0 || !name || !pci ||
            !devrec_bytes(o, "memory_total_bytes", &g->total))
                return -EINVAL;
        if (cJSON_GetObjectItemCaseSensitive(o, "index") && !json_get_integer(o, "index", -1, INT_MAX, &index))
                return -EINVAL;
        g->index = (int) index;
        g->uuid = strdup(uuid);
        g->name = strdup(name);
        g->pci_bus_id = strdup(pci);
        return g->uuid && g->name && g->pci_bus_id ? 0 : -ENOMEM;
}

static ctl_devrec *devrec_new(const char *driver_version, size_t n_members) {
        ctl_devrec *d = calloc(1, sizeof(*d));

        if (!d)
                return NULL;
        d->driver_version = strdup(driver_version);
        d->members = calloc(n_members + 1, sizeof(*d->members));
        d->n_members = n_members;
        if (!d->driver_version || !d->members) {
                ctl_devrec_free(d);
                return NULL;
        }
        return d;
}

/* Adds the GPU of uuid (from list, ListGpus' "gpus") to d unless it is
 * there; -EINVAL when list does not have it. */
static int devrec_add_gpu(ctl_devrec *d, const cJSON *list, const char *uuid) {
        const cJSON *o;

        if (ctl_devrec_find(d, uuid))
                return 0;
        cJSON_ArrayForEach(o, list) {
                const char *u = json_get_string(o, "uuid");
                if (!u || !gpu_uuid_same(u, uuid))
                        continue;
                void *p = realloc(d->gpus, (d->n_gpus + 1) * sizeof(*d->gpus));
                if (!p)
                        return -ENOMEM;
                d->gpus = p;
                memset(&d->gpus[d->n_gpus], 0, sizeof(*d->gpus));
                return devrec_gpu_from(o, &d->gpus[d->n_gpus++]);
        }
        return -EINVAL;
}

/* Member m's use from its ListProcesses entry e ("gpus"); the GPUs it
 * names added to d.  A GPU whose memory NVML did not tell makes the member
 * not known. */
static int devrec_member_from(ctl_devrec *d, ctl_devrec_member *m, const cJSON *e, const cJSON *list) {
        const cJSON *gpus = cJSON_GetObjectItemCaseSensitive(e, "gpus"), *g;
        int r;

        if (!cJSON_IsArray(gpus))
                return 0;
        m->use = calloc((size_t) cJSON_GetArraySize(gpus) + 1, sizeof(*m->use));
        if (!m->use)
                return -ENOMEM;
        cJSON_ArrayForEach(g, gpus) {
                const char *uuid = json_get_string(g, "uuid");
                long long bytes;
                if (!uuid || !json_get_integer(g, "memory_bytes", 0, DEVREC_MAX_BYTES, &bytes))
                        return 0;
                if ((r = devrec_add_gpu(d, list, uuid)) < 0)
                        return r == -ENOMEM ? r : 0;
                m->use[m->n_use].uuid = strdup(uuid);
                m->use[m->n_use++].bytes = (uint64_t) bytes;
                if (!m->use[m->n_use - 1].uuid)
                        return -ENOMEM;
        }
        m->known = true;
        return 0;
}

static const cJSON *devrec_process(const cJSON *processes, int pid) {
        const cJSON *e;
        long long p;

        cJSON_ArrayForEach(e, processes)
                if (json_get_integer(e, "pid", 1, INT_MAX, &p) && p == pid)
                        return e;
        return NULL;
}

ctl_devrec *ctl_devrec_collect(const cJSON *gpus_reply, const cJSON *processes, const int *pids, size_t n) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(gpus_reply, "gpus");
        const char *version = json_get_string(gpus_reply, "driver_version");
        ctl_devrec *d;
        bool nvml = false;

        if (!json_get_bool(gpus_reply, "nvml", &nvml) || !nvml || !cJSON_IsArray(list) || !version ||
            !cJSON_IsArray(processes))
                return NULL;
        d = devrec_new(version, n);
        for (size_t i = 0; d && i < n; i++) {
                const cJSON *e = devrec_process(processes, pids[i]);
                if (e && devrec_member_from(d, &d->members[i], e, list) < 0) {
                        ctl_devrec_free(d);
                        d = NULL;
                }
        }
        return d;
}

/* ---- the manifest's keys ---------------------------------------------------------- */

static cJSON *devrec_gpu_json(const ctl_devrec_gpu *g) {
        cJSON *o = cJSON_CreateObject();

        if (!o || !cJSON_AddStringToObject(o, "uuid", g->uuid) || !cJSON_AddStringToObject(o, "name", g->name) ||
            !cJSON_AddStringToObject(o, "pci_bus_id", g->pci_bus_id) ||
            (g->total && !cJSON_AddNumberToObject(o, "memory_total_bytes", (double) g->total)) ||
            !cJSON_AddNumberToObject(o, "index", g->index)) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}

static bool devrec_member_json(const ctl_devrec_member *m, cJSON *o) {
        cJSON *arr;

        if (!m->known)
                return true;
        arr = cJSON_AddArrayToObject(o, "gpu_memory");
        for (size_t i = 0; arr && i < m->n_use; i++) {
                cJSON *u = cJSON_CreateObject();
                if (!u || !cJSON_AddItemToArray(arr, u) || !cJSON_AddStringToObject(u, "uuid", m->use[i].uuid) ||
                    !cJSON_AddNumberToObject(u, "bytes", (double) m->use[i].bytes))
                        return false;
        }
        return arr != NULL;
}

bool ctl_devrec_write(const ctl_devrec *d, cJSON *root) {
        cJSON *dev = cJSON_AddObjectToObject(root, "devices"), *gpus, *members, *m;
        size_t i = 0;

        gpus = dev && cJSON_AddStringToObject(dev, "driver_version", d->driver_version)
                       ? cJSON_AddArrayToObject(dev, "gpus") : NULL;
        if (!gpus)
                return false;
        for (size_t k = 0; k < d->n_gpus; k++) {
                cJSON *g = devrec_gpu_json(&d->gpus[k]);
                if (!g || !cJSON_AddItemToArray(gpus, g))
                        return cJSON_Delete(g), false;
        }
        members = cJSON_GetObjectItemCaseSensitive(root, "members");
        cJSON_ArrayForEach(m, members)
                if (i < d->n_members && !devrec_member_json(&d->members[i++], m))
                        return false;
        return true;
}

/* A member's "gpu_memory", each GPU one of d's. */
static int devrec_member_read(const ctl_devrec *d, const cJSON *o, ctl_devrec_member *m) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, "gpu_memory"), *u;

        if (!arr)
                return 0;
        if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) > CTL_DEVREC_MAX_GPUS)
                return -EINVAL;
        m->use = calloc((size_t) cJSON_GetArraySize(arr) + 1, sizeof(*m->use));
        if (!m->use)
                return -ENOMEM;
        cJSON_ArrayForEach(u, arr) {
                const char *uuid = devrec_text(u, "uuid", true);
                ctl_devrec_use *x = &m->use[m->n_use];
                if (!cJSON_IsObject(u) || !uuid || !ctl_devrec_find(d, uuid) || !devrec_bytes(u, "bytes", &x->bytes))
                        return -EINVAL;
                if (!(x->uuid = strdup(uuid)))
                        return -ENOMEM;
                m->n_use++;
        }
        m->known = true;
        return 0;
}

static int devrec_read_into(ctl_devrec *d, const cJSON *dev, const cJSON *members) {
        const cJSON *gpus = cJSON_GetObjectItemCaseSensitive(dev, "gpus"), *x;
        size_t i = 0;
        int r;

        if (!cJSON_IsArray(gpus) || cJSON_GetArraySize(gpus) > CTL_DEVREC_MAX_GPUS)
                return -EINVAL;
        d->gpus = calloc((size_t) cJSON_GetArraySize(gpus) + 1, sizeof(*d->gpus));
        if (!d->gpus)
                return -ENOMEM;
        cJSON_ArrayForEach(x, gpus) {
                if ((r = devrec_gpu_from(x, &d->gpus[d->n_gpus++])) < 0)
                        return r;
                for (size_t k = 0; k + 1 < d->n_gpus; k++)
                        if (gpu_uuid_same(d->gpus[k].uuid, d->gpus[d->n_gpus - 1].uuid))
                                return -EINVAL;
        }
        cJSON_ArrayForEach(x, members)
                if (i < d->n_members && (r = devrec_member_read(d, x, &d->members[i++])) < 0)
                        return r;
        return 0;
}

int ctl_devrec_read(const cJSON *root, size_t n_members, ctl_devrec **ret) {
        const cJSON *dev = cJSON_GetObjectItemCaseSensitive(root, "devices");
        const char *version = devrec_text(dev, "driver_version", false);
        ctl_devrec *d;
        int r;

        *ret = NULL;
        if (!dev)
                return 0;
        if (!cJSON_IsObject(dev) || !version)
                return -EINVAL;
        d = devrec_new(version, n_members);
        if (!d)
                return -ENOMEM;
        r = devrec_read_into(d, dev, cJSON_GetObjectItemCaseSensitive(root, "members"));
        if (r < 0) {
                ctl_devrec_free(d);
                return r;
        }
        *ret = d;
        return 0;
}
