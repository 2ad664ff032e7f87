/* protoparam.c: the parameters that single and group calls share
 * (protoparam.h). */
#include "varlink/protoparam.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cudackpt/protocol.h"
#include "json.h"
#include "varlink/uuid.h"

int protoparam_integer(const cJSON *item, double min, double max, double *ret)
{
        if (!json_is_integer(item, min, max))
                return -EINVAL;
        *ret = item->valuedouble;
        return 0;
}

static cJSON *mapping_error(pid_t pid, enum proto_method m, const char *reason, const char *uuid)
{
        cJSON *p = cJSON_CreateObject();

        if (p) {
                if (pid > 0)
                        cJSON_AddNumberToObject(p, "pid", pid);
                cJSON_AddStringToObject(p, "method", proto_method_name(m));
                cJSON_AddStringToObject(p, "reason", reason);
                if (uuid)
                        cJSON_AddStringToObject(p, "uuid", uuid);
        }
        return proto_error_new(CUDACKPT_ERROR_INVALID_GPU_MAPPING, p);
}

int protoparam_mapping(const cJSON *obj, pid_t pid, enum proto_method m, unsigned max_pairs,
                       CUcheckpointGpuPair **ret_pairs, unsigned *ret_n, cJSON **ret_reply)
{
        const cJSON *item;
        unsigned n = 0;

        if (!cJSON_IsObject(obj)) {
                *ret_reply = proto_invalid_parameter("gpu_mapping");
                return -EINVAL;
        }
        cJSON_ArrayForEach(item, obj) {
                if (!cJSON_IsString(item)) {
                        *ret_reply = proto_invalid_parameter("gpu_mapping");
                        return -EINVAL;
                }
                n++;
        }
        if (n == 0)
                return 0;
        if (n > max_pairs) {
                *ret_reply = mapping_error(pid, m, "the mapping has more entries than the daemon accepts", NULL);
                return -EINVAL;
        }
        *ret_pairs = calloc(n, sizeof(**ret_pairs));
        if (!*ret_pairs)
                return -ENOMEM;
        cJSON_ArrayForEach(item, obj) {
                CUcheckpointGpuPair *pair = &(*ret_pairs)[*ret_n];
                if (uuid_parse(item->string, &pair->oldUuid) < 0) {
                        *ret_reply = mapping_error(pid, m, "not a GPU UUID", item->string);
                        return -EINVAL;
                }
                if (uuid_parse(item->valuestring, &pair->newUuid) < 0) {
                        *ret_reply = mapping_error(pid, m, "not a GPU UUID", item->valuestring);
                        return -EINVAL;
                }
                /* Spellings differ, UUIDs must not: a GPU named twice on either
                 * side makes the mapping ambiguous. */
                for (unsigned i = 0; i < *ret_n; i++) {
                        if (uuid_equal(&(*ret_pairs)[i].oldUuid, &pair->oldUuid)) {
                                *ret_reply = mapping_error(pid, m, "GPU named twice among the old GPUs", item->string);
                                return -EINVAL;
                        }
                        if (uuid_equal(&(*ret_pairs)[i].newUuid, &pair->newUuid)) {
                                *ret_reply = mapping_error(pid, m, "GPU named twice among the new GPUs", item->valuestring);
                                return -EINVAL;
                        }
                }
                (*ret_n)++;
        }
        return 0;
}

int protoparam_lease(const cJSON *item, struct proto_lease *lease)
{
        double v;

        if (strcmp(item->string, "lease_ms") == 0) {
                if (cJSON_IsNull(item))
                        return 1;
                if (protoparam_integer(item, 1, 4294967295.0, &v) < 0)
                        return -EINVAL;
                lease->ms = (uint32_t)v;
                lease->wanted = true;
                return 1;
        }
        if (strcmp(item->string, "lease_on_close") == 0) {
                if (cJSON_IsNull(item))
                        return 1;
                if (!cJSON_IsBool(item))
                        return -EINVAL;
                lease->on_close = cJSON_IsTrue(item);
                lease->wanted = lease->wanted || lease->on_close;
                return 1;
        }
        return 0;
}

int protoparam_force(const cJSON *item, bool *ret)
{
        if (cJSON_IsNull(item))
                return 0;
        if (!cJSON_IsBool(item))
                return -EINVAL;
        *ret = cJSON_IsTrue(item);
        return 0;
}
