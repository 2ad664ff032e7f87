/* reply.c: libcudackpt's replies: a reply message decoded into a
 * cudackpt_reply (typed fields range-checked: everything the daemon sends
 * is treated as hostile), and the exit status of an error. */
#include "libclient.h"
#include "json.h"

#include <cudackpt/protocol.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- Replies --------------------------------------------------------------- */

CUDACKPT_EXPORT void cudackpt_reply_init(cudackpt_reply *r) {
        if (!r)
                return;
        *r = (cudackpt_reply) {
                .pid = -1,
                .duration_ms = -1,
                .restore_thread_id = -1,
        };
}

CUDACKPT_EXPORT void cudackpt_reply_clear(cudackpt_reply *r) {
        if (!r)
                return;
        free(r->error);
        free(r->parameters_json);
        free(r->state);
        free(r->in_flight);
        cudackpt_reply_init(r);
}

/* A member that is an integer within [0, INT_MAX]; -1 otherwise. */
static int client_json_int(const cJSON *params, const char *key) {
        long long v;

        return json_get_integer(params, key, 0, INT_MAX, &v) ? (int) v : -1;
}

/* Duplicate a JSON string member; *ret stays NULL when it is absent or not
 * a string. */
static int client_json_strdup(const cJSON *params, const char *key, char **ret) {
        const char *s = json_get_string(params, key);

        if (!s)
                return 0;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

/* The reply's parameters (NULL: none, {}) as text, and their typed
 * fields: pid, restore_thread_id, duration_ms, state, in_flight.  0 or
 * -ENOMEM. */
static int client_reply_params(const cJSON *params, cudackpt_reply *reply) {
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(params, "duration_ms");
        int r;

        /* Plain malloc() memory like the reply's other strings, whatever
         * allocator hooks the application gave cJSON. */
        reply->parameters_json = params ? json_print_dup(params) : strdup("{}");
        if (!reply->parameters_json)
                return -ENOMEM;
        if (!params)
                return 0;
        reply->pid = client_json_int(params, "pid");
        reply->restore_thread_id = client_json_int(params, "restore_thread_id");
        if (cJSON_IsNumber(item) && isfinite(item->valuedouble) && item->valuedouble >= 0)
                reply->duration_ms = item->valuedouble;
        r = client_json_strdup(params, "state", &reply->state);
        if (r < 0)
                return r;
        return client_json_strdup(params, "in_flight", &reply->in_flight);
}

/* Decode one reply message (len bytes, NUL excluded) into *ret_reply.
 * ret_continues NULL: a call without "more", for which a reply with
 * "continues": true is out of protocol.  Otherwise *ret_continues says
 * whether more replies follow this one. */
int client_reply_decode(const char *msg, size_t len, cudackpt_reply *ret_reply, int *ret_continues) {
        cudackpt_reply reply;
        const cJSON *error, *params, *continues;
        cJSON *root;
        int r = -EPROTO;

        cudackpt_reply_init(&reply);

        /* len + 1 includes the NUL: require_null_terminated then rejects
         * anything but whitespace after the object. */
        root = cJSON_ParseWithLengthOpts(msg, len + 1, NULL, 1);
        if (!cJSON_IsObject(root))
                goto out;

        /* Only a call with "more" may be answered with "continues": true,
         * and never by an error: an error ends the call. */
        continues = cJSON_GetObjectItemCaseSensitive(root, "continues");
        if (continues && !cJSON_IsBool(continues))
                goto out;
        if (cJSON_IsTrue(continues) && !ret_continues)
                goto out;

        error = cJSON_GetObjectItemCaseSensitive(root, "error");
        if (error && cJSON_IsTrue(continues))
                goto out;
        if (error) {
                if (!cJSON_IsString(error) || !error->valuestring || !*error->valuestring)
                        goto out;
                reply.error = strdup(error->valuestring);
                if (!reply.error) {
                        r = -ENOMEM;
                        goto out;
                }
        }

        params = cJSON_GetObjectItemCaseSensitive(root, "parameters");
        if (params && !cJSON_IsObject(params))
                goto out;
        r = client_reply_params(params, &reply);
        if (r < 0)
                goto out;

        *ret_reply = reply;
        cudackpt_reply_init(&reply);
        if (ret_continues)
                *ret_continues = cJSON_IsTrue(continues);
        r = 0;
out:
        cudackpt_reply_clear(&reply);
        cJSON_Delete(root);
        return r;
}
