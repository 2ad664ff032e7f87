/* methods.c: libcudackpt's typed methods of io.cudackpt.Process, each a
 * call with its parameters built as JSON (checked first: a pid > 0, a
 * lock timeout within the driver's range, a GPU mapping of pairs). */
#include "libclient.h"

#include <cudackpt/protocol.h>

#include <errno.h>
#include <stddef.h>
#include <string.h>

/* The driver takes the lock timeout as a 32-bit count of milliseconds. */
#define CLIENT_TIMEOUT_MS_MAX 4294967295LL

/* ---- Typed methods ----------------------------------------------------------- */

/* A new parameters object {"pid": pid}; NULL with *ret_error set on failure. */
static cJSON *client_params_pid(int pid, int *ret_error) {
        cJSON *params;

        if (pid <= 0) {
                *ret_error = -EINVAL;
                return NULL;
        }
        params = cJSON_CreateObject();
        if (!params || !cJSON_AddNumberToObject(params, "pid", pid)) {
                cJSON_Delete(params);
                *ret_error = -ENOMEM;
                return NULL;
        }
        return params;
}

static int client_call_pid(cudackpt_client *c, const char *method, int pid, cudackpt_reply *ret_reply) {
        int r = 0;
        cJSON *params = client_params_pid(pid, &r);

        if (!params)
                return r;
        return client_call_params(c, method, params, ret_reply);
}

static int client_call_timeout(cudackpt_client *c, const char *method, int pid, long long timeout_ms,
                               cudackpt_reply *ret_reply) {
        int r = 0;
        cJSON *params;

        if (timeout_ms > CLIENT_TIMEOUT_MS_MAX)
                return -EINVAL;
        params = client_params_pid(pid, &r);
        if (!params)
                return r;
        /* Integers up to 2^32 are exact in a double, and cJSON prints them without exponent. */
        if (timeout_ms >= 0 && !cJSON_AddNumberToObject(params, "timeout_ms", (double) timeout_ms)) {
                cJSON_Delete(params);
                return -ENOMEM;
        }
        return client_call_params(c, method, params, ret_reply);
}

static int client_call_mapping(cudackpt_client *c, const char *method, int pid,
                               const char *const *gpu_mapping, unsigned flags, cudackpt_reply *ret_reply) {
        cJSON *params, *map;
        int r = 0;

        if (flags & ~CUDACKPT_FORCE)
                return -EINVAL;
        params = client_params_pid(pid, &r);
        if (!params)
                return r;
        if ((flags & CUDACKPT_FORCE) && !cJSON_AddTrueToObject(params, "force")) {
                r = -ENOMEM;
                goto fail;
        }
        if (gpu_mapping && gpu_mapping[0]) {
                map = cJSON_AddObjectToObject(params, "gpu_mapping");
                if (!map) {
                        r = -ENOMEM;
                        goto fail;
                }
                for (size_t i = 0; gpu_mapping[i]; i += 2) {
                        if (!gpu_mapping[i + 1] ||
                            cJSON_GetObjectItemCaseSensitive(map, gpu_mapping[i])) {
                                /* An odd count, or a duplicate key the daemon would reject. */
                                r = -EINVAL;
                                goto fail;
                        }
                        if (!cJSON_AddStringToObject(map, gpu_mapping[i], gpu_mapping[i + 1])) {
                                r = -ENOMEM;
                                goto fail;
                        }
                }
        }
        return client_call_params(c, method, params, ret_reply);

fail:
        cJSON_Delete(params);
        return r;
}

CUDACKPT_EXPORT int cudackpt_get_state(cudackpt_client *c, int pid, cudackpt_reply *ret_reply) {
        return client_call_pid(c, CUDACKPT_METHOD_GET_STATE, pid, ret_reply);
}

CUDACKPT_EXPORT int cudackpt_get_restore_thread_id(cudackpt_client *c, int pid, cudackpt_reply *ret_reply) {
        return client_call_pid(c, CUDACKPT_METHOD_GET_RESTORE_THREAD_ID, pid, ret_reply);
}

CUDACKPT_EXPORT int cudackpt_lock(cudackpt_client *c, int pid, long long timeout_ms, cudackpt_reply *ret_reply) {
        return client_call_timeout(c, CUDACKPT_METHOD_LOCK, pid, timeout_ms, ret_reply);
}

CUDACKPT_EXPORT int cudackpt_checkpoint(cudackpt_client *c, int pid, cudackpt_reply *ret_reply) {
        return client_call_pid(c, CUDACKPT_METHOD_CHECKPOINT, pid, ret_reply);
}

CUDACKPT_EXPORT int cudackpt_restore(cudackpt_client *c, int pid, const char *const *gpu_mapping,
                                     cudackpt_reply *ret_reply) {
        return client_call_mapping(c, CUDACKPT_METHOD_RESTORE, pid, gpu_mapping, 0, ret_reply);
}

CUDACKPT_EXPORT int cudackpt_restore_flags(cudackpt_client *c, int pid, const char *const *gpu_mapping,
                                           unsigned flags, cudackpt_reply *ret_reply) {
        return client_call_mapping(c, CUDACKPT_METHOD_RESTORE, pid, gpu_mapping, flags, ret_reply);
}

CUDACKPT_EXPORT int cudackpt_unlock(cudackpt_client *c, int pid, cudackpt_reply *ret_reply) {
        return client_call_pid(c, CUDACKPT_METHOD_UNLOCK, pid, ret_reply);
}

CUDACKPT_EXPORT int cudackpt_suspend(cudackpt_client *c, int pid, long long timeout_ms, cudackpt_reply *ret_reply) {
        return client_call_timeout(c, CUDACKPT_METHOD_SUSPEND, pid, timeout_ms, ret_reply);
}

CUDACKPT_EXPORT int cudackpt_resume(cudackpt_client *c, int pid, const char *const *gpu_mapping,
                                    cudackpt_reply *ret_reply) {
        return client_call_mapping(c, CUDACKPT_METHOD_RESUME, pid, gpu_mapping, 0, ret_reply);
}

CUDACKPT_EXPORT int cudackpt_resume_flags(cudackpt_client *c, int pid, const char *const *gpu_mapping,
                                          unsigned flags, cudackpt_reply *ret_reply) {
        return client_call_mapping(c, CUDACKPT_METHOD_RESUME, pid, gpu_mapping, flags, ret_reply);
}
