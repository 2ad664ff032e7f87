/* fitstore.c: the GPU records on disk (fitstore.h). */
#include "run/fitstore.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "json.h"

/* {"pid": P, "start_time": T, "uid": U, "gpus": [{"uuid": U, "bytes": B}, ...]} */
static cJSON *encode_record(const struct fit_record *r)
{
        cJSON *o = cJSON_CreateObject(), *gpus;

        if (!o || !cJSON_AddNumberToObject(o, "pid", r->pid) ||
            !cJSON_AddNumberToObject(o, "start_time", (double)r->start_time) ||
            !cJSON_AddNumberToObject(o, "uid", r->uid) ||
            !(gpus = cJSON_AddArrayToObject(o, "gpus")))
                goto fail;
        for (unsigned i = 0; i < r->n; i++) {
                cJSON *g = cJSON_CreateObject();
                if (!g || !cJSON_AddItemToArray(gpus, g) || !cJSON_AddStringToObject(g, "uuid", r->use[i].uuid) ||
                    !cJSON_AddNumberToObject(g, "bytes", (double)r->use[i].bytes))
                        goto fail;
        }
        return o;
fail:
        cJSON_Delete(o);
        return NULL;
}

char *fitstore_encode(const struct fit_record *recs, size_t n, const char *boot_id)
{
        cJSON *root = cJSON_CreateObject(), *arr;
        char *text = NULL;

        if (!root || !cJSON_AddNumberToObject(root, "version", FITSTORE_VERSION) ||
            !cJSON_AddStringToObject(root, "boot_id", boot_id) || !(arr = cJSON_AddArrayToObject(root, "processes")))
                goto out;
        for (size_t i = 0; i < n; i++)
                if (!json_add_to_array(arr, encode_record(&recs[i])))
                        goto out;
        text = cJSON_PrintUnformatted(root);
out:
        cJSON_Delete(root);
        return text;
}

/* A whole number in [min, max] under key of o. */
static bool number(const cJSON *o, const char *key, double min, double max, double *ret)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

        if (!cJSON_IsNumber(v) || v->valuedouble < min || v->valuedouble > max ||
            v->valuedouble != (double)(uint64_t)v->valuedouble)
                return false;
        *ret = v->valuedouble;
        return true;
}

/* Whether o is an object of exactly the n keys. */
static bool keys(const cJSON *o, const char *const *names, size_t n)
{
        size_t seen = 0;
        const cJSON *it;

        if (!cJSON_IsObject(o))
                return false;
        cJSON_ArrayForEach(it, o) {
                bool known = false;
                for (size_t i = 0; i < n && !known; i++)
                        known = strcmp(it->string, names[i]) == 0 &&
                                cJSON_GetObjectItemCaseSensitive(o, names[i]) == it; /* no key twice */
                if (!known)
                        return false;
                seen++;
        }
        return seen == n;
}

static int decode_record(const cJSON *o, struct fit_record *r)
{
        static const char *const rk[] = { "pid", "start_time", "uid", "gpus" }, *const gk[] = { "uuid", "bytes" };
        const cJSON *gpus = cJSON_GetObjectItemCaseSensitive(o, "gpus"), *g;
        double v;

        memset(r, 0, sizeof(*r));
        if (!keys(o, rk, 4) || !cJSON_IsArray(gpus) || cJSON_GetArraySize(gpus) > FIT_MAX_GPUS_PER_PROC)
                return -EINVAL;
        if (!number(o, "pid", 1, 4194304, &v))
                return -EINVAL;
        r->pid = (pid_t)v;
        if (!number(o, "start_time", 0, 9007199254740992.0, &v))
                return -EINVAL;
        r->start_time = (uint64_t)v;
        if (!number(o, "uid", 0, 4294967294.0, &v))
                return -EINVAL;
        r->uid = (uid_t)v;
        cJSON_ArrayForEach(g, gpus) {
                const cJSON *u = cJSON_GetObjectItemCaseSensitive(g, "uuid");
                if (!keys(g, gk, 2) || !cJSON_IsString(u) || strlen(u->valuestring) >= GPUMEM_UUID_MAX ||
                    !number(g, "bytes", 0, 9007199254740992.0, &v))
                        return -EINVAL;
                snprintf(r->use[r->n].uuid, GPUMEM_UUID_MAX, "%s", u->valuestring);
                r->use[r->n++].bytes = (uint64_t)v;
        }
        return 0;
}

static int decode_all(const cJSON *arr, size_t max, struct fit_record **ret, size_t *ret_n, char *why,
                      size_t whylen)
{
        size_t n = (size_t)cJSON_GetArraySize(arr), k = 0;
        struct fit_record *recs;
        const cJSON *o;

        if (n > max) {
                snprintf(why, whylen, "%zu records, more than max_gpu_records (%zu)", n, max);
                return -EINVAL;
        }
        recs = n ? calloc(n, sizeof(*recs)) : NULL;
        if (n && !recs) {
                snprintf(why, whylen, "out of memory");
                return -ENOMEM;
        }
        cJSON_ArrayForEach(o, arr) {
                if (decode_record(o, &recs[k]) < 0) {
                        snprintf(why, whylen, "record %zu is not valid", k);
                        goto fail;
                }
                for (size_t i = 0; i < k; i++)
                        if (recs[i].pid == recs[k].pid) {
                                snprintf(why, whylen, "pid %d twice", (int)recs[k].pid);
                                goto fail;
                        }
                k++;
        }
        *ret = recs;
        *ret_n = k;
        return 0;
fail:
        free(recs);
        return -EINVAL;
}

int fitstore_decode(const char *text, size_t max, const char *boot_id, struct fit_record **ret, size_t *ret_n,
                    char *why, size_t whylen)
{
        static const char *const top[] = { "version", "boot_id", "processes" };
        cJSON *root = cJSON_Parse(text);
        const cJSON *boot = cJSON_GetObjectItemCaseSensitive(root, "boot_id");
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "processes");
        double version;
        int r = -EINVAL;

        *ret = NULL;
        *ret_n = 0;
        if (!keys(root, top, 3) || !number(root, "version", 0, 1e9, &version) || !cJSON_IsString(boot) ||
            !cJSON_IsArray(arr))
                snprintf(why, whylen, "not a store of GPU records");
        else if (version != FITSTORE_VERSION)
                snprintf(why, whylen, "version %.0f, not %d", version, FITSTORE_VERSION);
        else if (strcmp(boot->valuestring, boot_id) != 0)
                r = 0; /* another boot's: its start times mean nothing now */
        else
                r = decode_all(arr, max, ret, ret_n, why, whylen);
        cJSON_Delete(root);
        return r;
}
