/* fuzz_replies.c: the checks of the daemon's replies, each a finding when
 * it fails (fuzz_request.c lists the rules). */
#include <ctype.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "cudackpt/protocol.h"
#include "fuzz_harness.h"

/* --------------------------------------------------------- the replies */

static bool known_error(const char *name)
{
        static const char *const names[] = {
                CUDACKPT_ERROR_NO_SUCH_PROCESS,       CUDACKPT_ERROR_NOT_CUDA_PROCESS,
                CUDACKPT_ERROR_PERMISSION_DENIED,     CUDACKPT_ERROR_INVALID_STATE,
                CUDACKPT_ERROR_TIMEOUT,               CUDACKPT_ERROR_INVALID_GPU_MAPPING,
                CUDACKPT_ERROR_NOT_SUPPORTED,         CUDACKPT_ERROR_PROCESS_GONE,
                CUDACKPT_ERROR_PROCESS_CHANGED,       CUDACKPT_ERROR_DRIVER_UNAVAILABLE,
                CUDACKPT_ERROR_DRIVER_ERROR,          CUDACKPT_ERROR_QUEUE_FULL,
                CUDACKPT_ERROR_SHUTTING_DOWN,         CUDACKPT_ERROR_INVALID_REQUEST,
                CUDACKPT_ERROR_MESSAGE_TOO_LARGE,     CUDACKPT_VARLINK_INTERFACE_NOT_FOUND,
                CUDACKPT_VARLINK_METHOD_NOT_FOUND,    CUDACKPT_VARLINK_INVALID_PARAMETER,
                CUDACKPT_VARLINK_PERMISSION_DENIED,
        };
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                if (strcmp(name, names[i]) == 0)
                        return true;
        return false;
}

static bool valid_state(const char *s)
{
        static const char *const states[] = { CUDACKPT_STATE_RUNNING, CUDACKPT_STATE_LOCKED,
                                              CUDACKPT_STATE_CHECKPOINTED, CUDACKPT_STATE_FAILED };
        for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++)
                if (strcmp(s, states[i]) == 0)
                        return true;
        if (strncmp(s, "unknown-", 8) != 0)
                return false;
        s += 8;
        if (*s == '-')
                s++;
        if (!*s)
                return false;
        for (; *s; s++)
                if (!isdigit((unsigned char)*s))
                        return false;
        return true;
}

static bool valid_method_name(const char *s)
{
        static const char *const names[] = { "GetState", "GetRestoreThreadId", "Lock",    "Checkpoint",
                                             "Restore",  "Unlock",             "Suspend", "Resume" };
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                if (strcmp(s, names[i]) == 0)
                        return true;
        return false;
}

/* Whether pid names this process or one of its threads. */
static bool is_daemon_thread(pid_t pid)
{
        char path[64];

        if (pid == getpid())
                return true;
        snprintf(path, sizeof(path), "/proc/self/task/%d", (int)pid);
        return access(path, F_OK) == 0;
}

static bool is_int_in(const cJSON *j, double min, double max)
{
        return cJSON_IsNumber(j) && isfinite(j->valuedouble) && j->valuedouble == floor(j->valuedouble) &&
               j->valuedouble >= min && j->valuedouble <= max;
}

static void check_params(const cJSON *params, const char *err, const char *text)
{
        /* org.varlink.service errors name full methods ("method") of their own. */
        bool ours = !err || strncmp(err, CUDACKPT_INTERFACE ".", strlen(CUDACKPT_INTERFACE) + 1) == 0;
        const cJSON *it;

        cJSON_ArrayForEach(it, params) {
                const char *k = it->string;

                if (strcmp(k, "pid") == 0 || strcmp(k, "restore_thread_id") == 0) {
                        if (!is_int_in(it, 1, 2147483647.0))
                                fuzz_finding("bad \"%s\" in reply %s", k, text);
                } else if (strcmp(k, "state") == 0) {
                        if (!cJSON_IsString(it) || !valid_state(it->valuestring))
                                fuzz_finding("bad \"state\" in reply %s", text);
                } else if (strcmp(k, "duration_ms") == 0) {
                        if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || it->valuedouble < 0)
                                fuzz_finding("bad \"duration_ms\" in reply %s", text);
                } else if (strcmp(k, "in_flight") == 0 || (ours && strcmp(k, "method") == 0)) {
                        if (!cJSON_IsString(it) || !valid_method_name(it->valuestring))
                                fuzz_finding("bad \"%s\" in reply %s", k, text);
                }
        }
        if (!err) {
                /* "No one may act on the daemon itself", by pid or thread id. */
                it = cJSON_GetObjectItemCaseSensitive(params, "pid");
                if (it && is_daemon_thread((pid_t)it->valuedouble))
                        fuzz_finding("the daemon acted on itself: %s", text);
                return;
        }
        if (strcmp(err, CUDACKPT_ERROR_INVALID_REQUEST) == 0) {
                it = cJSON_GetObjectItemCaseSensitive(params, "reason");
                if (!cJSON_IsString(it) || !*it->valuestring)
                        fuzz_finding("InvalidRequest without a reason: %s", text);
        } else if (strcmp(err, CUDACKPT_ERROR_MESSAGE_TOO_LARGE) == 0) {
                it = cJSON_GetObjectItemCaseSensitive(params, "max_bytes");
                if (!is_int_in(it, FUZZ_MAX_MESSAGE_BYTES, FUZZ_MAX_MESSAGE_BYTES))
                        fuzz_finding("MessageTooLarge without max_bytes %d: %s", FUZZ_MAX_MESSAGE_BYTES, text);
        } else if (strcmp(err, CUDACKPT_VARLINK_INVALID_PARAMETER) == 0) {
                it = cJSON_GetObjectItemCaseSensitive(params, "parameter");
                if (!cJSON_IsString(it))
                        fuzz_finding("InvalidParameter without a parameter name: %s", text);
        }
}

/* Checks one reply (s is NUL-terminated, len bytes before the NUL); returns
 * it parsed.  *closing: the error closes the connection. */
static cJSON *check_reply(const char *s, size_t len, bool *closing)
{
        const char *text = s, *end = NULL, *err_name = NULL; /* s is NUL-terminated */
        const cJSON *params = NULL, *err = NULL, *it;
        cJSON *j;

        *closing = false;
        if (len == 0)
                fuzz_finding("empty reply (a lone NUL)");
        j = cJSON_ParseWithOpts(s, &end, true);
        if (!j)
                fuzz_finding("reply is not one JSON value: %s", text);
        if (!cJSON_IsObject(j))
                fuzz_finding("reply is not a JSON object: %s", text);
        cJSON_ArrayForEach(it, j) {
                if (strcmp(it->string, "parameters") == 0 && !params)
                        params = it;
                else if (strcmp(it->string, "error") == 0 && !err)
                        err = it;
                else
                        fuzz_finding("unexpected or repeated key \"%s\" in reply %s", it->string, text);
        }
        if (!params && !err)
                fuzz_finding("reply with neither \"parameters\" nor \"error\": %s", text);
        if (params && !cJSON_IsObject(params))
                fuzz_finding("\"parameters\" is not an object: %s", text);
        if (err) {
                if (!cJSON_IsString(err) || !known_error(err->valuestring))
                        fuzz_finding("undocumented error in reply %s", text);
                err_name = err->valuestring;
                *closing = strcmp(err_name, CUDACKPT_ERROR_INVALID_REQUEST) == 0 ||
                           strcmp(err_name, CUDACKPT_ERROR_MESSAGE_TOO_LARGE) == 0;
        }
        if (params)
                check_params(params, err_name, text);
        return j;
}

/* Checks all replies of c; returns how many.  With keep, the parsed replies
 * are stored there (up to max_keep, the caller frees them). */
unsigned fuzz_check_replies(const struct fconn *c, cJSON **keep, unsigned max_keep)
{
        unsigned msgs = 0, replies = 0;
        bool closed = false, tail;
        size_t off = 0;

        for (size_t i = 0; i < c->out_len; i++)
                msgs += c->out[i] == '\0';
        tail = c->out_len > 0 && c->out[c->out_len - 1] != '\0';
        while (off < c->in_len) {
                char *s = c->in + off, *nul = memchr(s, '\0', c->in_len - off);
                bool closing;
                cJSON *j;

                if (!nul)
                        fuzz_finding("the connection ended inside a reply: %.*s", (int)(c->in_len - off), s);
                if (closed)
                        fuzz_finding("a reply after an error that closes the connection: %s", s);
                j = check_reply(s, (size_t)(nul - s), &closing);
                closed = closing;
                if (keep && replies < max_keep)
                        keep[replies] = j;
                else
                        cJSON_Delete(j);
                replies++;
                off = (size_t)(nul - c->in) + 1;
        }
        if (replies > msgs + (tail ? 1u : 0u))
                fuzz_finding("%u replies to %u messages%s", replies, msgs, tail ? " and a tail" : "");
        return replies;
}

