/* exitcode.c: the exit status a daemon reply or error name earns
 * cudackptctl (exitcode.h). */
#include "exitcode.h"

#include <cudackpt/protocol.h>

#include <cJSON.h>

#include <string.h>

int ctl_error_exit_code(const char *error_name) {
        static const struct {
                const char *name;
                int code;
        } table[] = {
                { CUDACKPT_ERROR_NO_SUCH_PROCESS, CUDACKPT_EXIT_NO_SUCH_PROCESS },
                { CUDACKPT_ERROR_NOT_CUDA_PROCESS, CUDACKPT_EXIT_NOT_CUDA_PROCESS },
                { CUDACKPT_ERROR_PERMISSION_DENIED, CUDACKPT_EXIT_PERMISSION_DENIED },
                { CUDACKPT_ERROR_INVALID_STATE, CUDACKPT_EXIT_INVALID_STATE },
                { CUDACKPT_ERROR_TIMEOUT, CUDACKPT_EXIT_TIMEOUT },
                { CUDACKPT_ERROR_INVALID_GPU_MAPPING, CUDACKPT_EXIT_INVALID_GPU_MAPPING },
                { CUDACKPT_ERROR_NOT_SUPPORTED, CUDACKPT_EXIT_NOT_SUPPORTED },
                { CUDACKPT_ERROR_PROCESS_GONE, CUDACKPT_EXIT_PROCESS_GONE },
                { CUDACKPT_ERROR_DRIVER_UNAVAILABLE, CUDACKPT_EXIT_DRIVER_UNAVAILABLE },
                { CUDACKPT_ERROR_DRIVER_ERROR, CUDACKPT_EXIT_DRIVER_ERROR },
                { CUDACKPT_ERROR_PROCESS_CHANGED, CUDACKPT_EXIT_PROCESS_CHANGED },
                { CUDACKPT_ERROR_PROCESS_STOPPED, CUDACKPT_EXIT_PROCESS_STOPPED },
                { CUDACKPT_ERROR_QUEUE_FULL, CUDACKPT_EXIT_QUEUE_FULL },
                { CUDACKPT_ERROR_GROUP_TOO_LARGE, CUDACKPT_EXIT_GROUP_TOO_LARGE },
                { CUDACKPT_ERROR_INSUFFICIENT_GPU_MEMORY, CUDACKPT_EXIT_INSUFFICIENT_GPU_MEMORY },
                { CUDACKPT_ERROR_NO_SUCH_CGROUP, CUDACKPT_EXIT_NO_SUCH_CGROUP },
                { CUDACKPT_ERROR_SHUTTING_DOWN, CUDACKPT_EXIT_SHUTTING_DOWN },
                { CUDACKPT_ERROR_NO_SUCH_JOB, CUDACKPT_EXIT_NO_SUCH_JOB },
                { CUDACKPT_ERROR_NO_SUCH_SAVE, CUDACKPT_EXIT_NO_SUCH_JOB },
                { CUDACKPT_ERROR_JOB_EXISTS, CUDACKPT_EXIT_JOB_EXISTS },
                { CUDACKPT_ERROR_SAVE_EXISTS, CUDACKPT_EXIT_JOB_EXISTS },
                { CUDACKPT_ERROR_SAVE_BUSY, CUDACKPT_EXIT_JOB_EXISTS },
                { CUDACKPT_ERROR_SAVES_DISABLED, CUDACKPT_EXIT_SAVES_DISABLED },
                { CUDACKPT_ERROR_INVALID_REQUEST, CUDACKPT_EXIT_PROTOCOL },
                { CUDACKPT_ERROR_MESSAGE_TOO_LARGE, CUDACKPT_EXIT_PROTOCOL },
                { CUDACKPT_VARLINK_PERMISSION_DENIED, CUDACKPT_EXIT_PERMISSION_DENIED },
        };
        static const char varlink_prefix[] = "org.varlink.service.";

        if (!error_name)
                return CUDACKPT_EXIT_OK;
        for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
                if (strcmp(error_name, table[i].name) == 0)
                        return table[i].code;
        /* MethodNotFound, InvalidParameter, InterfaceNotFound, ExpectedMore, ...:
         * the call itself was wrong. */
        if (strncmp(error_name, varlink_prefix, sizeof(varlink_prefix) - 1) == 0)
                return CUDACKPT_EXIT_PROTOCOL;
        return CUDACKPT_EXIT_FAILURE;
}

int ctl_reply_exit_code(const cudackpt_reply *r) {
        const cJSON *inner;
        cJSON *params;
        int code = CUDACKPT_EXIT_FAILURE;

        if (!r || !r->error)
                return CUDACKPT_EXIT_OK;
        if (strcmp(r->error, CUDACKPT_ERROR_GROUP_FAILED) != 0)
                return ctl_error_exit_code(r->error);
        /* The status of the member's own error; a GroupFailed nested in a
         * GroupFailed is out of protocol and has none. */
        params = r->parameters_json ? cJSON_Parse(r->parameters_json) : NULL;
        inner = cJSON_GetObjectItemCaseSensitive(params, "error");
        if (cJSON_IsString(inner) && inner->valuestring && *inner->valuestring &&
            strcmp(inner->valuestring, CUDACKPT_ERROR_GROUP_FAILED) != 0)
                code = ctl_error_exit_code(inner->valuestring);
        cJSON_Delete(params);
        return code;
}
