/* describe.c: daemon errors and transport failures in human words.
 *
 * The daemon's errors carry structured parameters (state, step,
 * rolled_back, cuda_error, ...); this turns each into one short sentence
 * for a terminal or a log line, e.g. "InvalidState: process is locked".
 * Every string that came from the daemon is sanitised before it is shown. */
#include "describe.h"

#include "exitcode.h"
#include "json.h"

#include <cJSON.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ctl_sanitize(char *s) {
        unsigned char *p = (unsigned char *) s;

        for (; p && *p; p++) {
                if (*p < 0x20 || *p == 0x7f)
                        *p = '?';
                else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
                        /* U+0080..U+009F: C1 controls, CSI among them. */
                        p[0] = '?';
                        p[1] = '?';
                        p++;
                }
        }
}

void ctl_fputs_safe(const char *s, FILE *f) {
        char *copy = strdup(s);

        if (!copy) {
                /* Out of memory: drop the text rather than print it raw. */
                fputs("?", f);
                return;
        }
        ctl_sanitize(copy);
        fputs(copy, f);
        free(copy);
}

/* ---- Parameters ---------------------------------------------------------- */

/* An integral number within +-2^53 (exact in a double). */
static bool describe_int(const cJSON *params, const char *key, long long *ret) {
        return json_get_integer(params, key, -JSON_MAX_EXACT, JSON_MAX_EXACT, ret);
}

/* The integer key of params between before and after, or otherwise when
 * params has none. */
static void describe_int_or(FILE *f, const cJSON *params, const char *key, const char *before, const char *after,
                            const char *otherwise) {
        long long n;

        if (describe_int(params, key, &n))
                fprintf(f, "%s%lld%s", before, n, after);
        else
                fputs(otherwise, f);
}

/* Optional details shared by the operation errors, e.g.
 * " at the checkpoint step; process is locked; rolled back". */
static void describe_tail(FILE *f, const cJSON *params, int with_state) {
        const char *step = json_get_string(params, "step"), *state = json_get_string(params, "state");
        bool rolled_back;

        if (step)
                fprintf(f, " at the %s step", step);
        if (with_state && state)
                fprintf(f, "; process is %s", state);
        if (json_get_bool(params, "rolled_back", &rolled_back))
                fputs(rolled_back ? "; rolled back" : "; not rolled back", f);
}

/* ---- Errors ---------------------------------------------------------------- */

static int describe_known(FILE *f, const char *name, const cJSON *params, int nested);

/* "Name: sentence" of one error (a member's, inside GroupFailed). */
static void describe_inner(FILE *f, const char *name, const cJSON *params) {
        const char *dot = strrchr(name, '.');

        fputs(dot && dot[1] ? dot + 1 : name, f);
        fputs(": ", f);
        if (!describe_known(f, name, params, 1))
                fputs("(no description)", f);
}

/* GroupFailed: where it failed, the member's own error, what became of
 * the others. */
static void describe_group_failed(FILE *f, const cJSON *params) {
        const char *phase = json_get_string(params, "phase"), *inner = json_get_string(params, "error");
        const cJSON *inner_params = cJSON_GetObjectItemCaseSensitive(params, "error_parameters");
        bool rolled_back;
        long long n;

        fputs("the group failed", f);
        if (phase)
                fprintf(f, " in the %s phase", phase);
        if (describe_int(params, "pid", &n))
                fprintf(f, " at pid %lld", n);
        if (inner) {
                fputs(": ", f);
                describe_inner(f, inner, cJSON_IsObject(inner_params) ? inner_params : NULL);
        }
        if (phase && (strcmp(phase, CUDACKPT_PHASE_SELECT) == 0 || strcmp(phase, CUDACKPT_PHASE_STATE) == 0))
                fputs("; nothing was changed", f);
        else if (json_get_bool(params, "rolled_back", &rolled_back))
                fputs(rolled_back ? "; every member was brought back to running" : "; not rolled back", f);
}

/* ---- One sentence per error ------------------------------------------------ */

/* Errors with a fixed sentence. */
static const struct {
        const char *name;
        const char *sentence;
} describe_fixed[] = {
        { CUDACKPT_ERROR_NO_SUCH_PROCESS, "no such process" },
        { CUDACKPT_ERROR_NOT_CUDA_PROCESS, "the process has not initialised CUDA" },
        { CUDACKPT_ERROR_SHUTTING_DOWN, "the daemon is shutting down" },
        { CUDACKPT_VARLINK_PERMISSION_DENIED, "permission denied" },
};

/* Errors whose sentence is lead, then sep and their string parameter key,
 * or absent without it (NULL: a later entry of the name tells). */
static const struct {
        const char *name;
        const char *key;
        const char *lead;
        const char *sep;
        const char *absent;
} describe_with_string[] = {
        { CUDACKPT_ERROR_PROCESS_GONE, "method", "the process exited during", " ", " the operation" },
        { CUDACKPT_ERROR_DRIVER_UNAVAILABLE, "reason", "no usable CUDA driver", ": ", "" },
        { CUDACKPT_ERROR_INVALID_REQUEST, "reason", "the daemon rejected the request", ": ", "" },
        { CUDACKPT_VARLINK_METHOD_NOT_FOUND, "method", "the daemon has no method", " ", " of that name" },
        { CUDACKPT_VARLINK_INTERFACE_NOT_FOUND, "interface", "the daemon has no interface", " ", " of that name" },
        { CUDACKPT_VARLINK_INVALID_PARAMETER, "parameter", "invalid parameter", " ", " in the request" },
        { CUDACKPT_ERROR_NO_SUCH_CGROUP, "cgroup", "no such cgroup", " ", "" },
        { CUDACKPT_ERROR_NO_SUCH_JOB, "name", "you have no job", " ", " of that name" },
        { CUDACKPT_ERROR_JOB_EXISTS, "name", "you already have a job", " ", " of that name" },
        { CUDACKPT_ERROR_NO_SUCH_SAVE, "save", "you have no save", " ", " of that name" },
        { CUDACKPT_ERROR_SAVE_EXISTS, "save", "you already have the save", " ", " (--replace replaces it)" },
        { CUDACKPT_ERROR_SAVE_BUSY, "name", "a part held at a barrier is its job's only dump, and one runs: job",
          " ", NULL },
        { CUDACKPT_ERROR_SAVE_BUSY, "save", "the save", " ",
          " is in use: a dump or a restore of it runs, or a job restored from it runs on another node" },
        { CUDACKPT_ERROR_COMMAND_FAILED, "message", "the daemon's command failed", ": ", "" },
        { CUDACKPT_ERROR_SAVES_DISABLED, "reason", "the daemon", " ",
          " keeps no saves (no saves_dir in its configuration)" },
};

static void describe_permission_denied(FILE *f, const cJSON *params) {
        describe_int_or(f, params, "caller_uid", "uid ", " may not act on this process", "permission denied");
}

static void describe_invalid_state(FILE *f, const cJSON *params) {
        const char *required = json_get_string(params, "required_state"), *s = json_get_string(params, "state");

        if (s)
                fprintf(f, "process is %s", s);
        else if (required)
                fprintf(f, "process is not %s", required);
        else
                fputs("process is in the wrong state", f);
        describe_tail(f, params, 0);
}

static void describe_process_stopped(FILE *f, const cJSON *params) {
        const char *s = json_get_string(params, "stop");

        fprintf(f, "every thread of the process is stopped%s; the driver cannot act on it "
                   "until it runs again",
                s && strcmp(s, "traced") == 0 ? " by a tracer" : s ? " by a signal" : "");
        describe_tail(f, params, 1);
}

static void describe_timeout(FILE *f, const cJSON *params) {
        describe_int_or(f, params, "timeout_ms", "lock did not complete within ", " ms",
                        "lock did not complete in time");
        describe_tail(f, params, 1);
}

static void describe_invalid_gpu_mapping(FILE *f, const cJSON *params) {
        const char *s = json_get_string(params, "reason");

        fprintf(f, "invalid GPU mapping: %s", s ? s : "refused");
        s = json_get_string(params, "uuid");
        if (s)
                fprintf(f, " (%s)", s);
        describe_tail(f, params, 1);
}

static void describe_insufficient_gpu_memory(FILE *f, const cJSON *params) {
        const char *gpu = json_get_string(params, "gpu");
        long long need, free_bytes;

        fputs("the restore would not fit in the GPU's free memory", f);
        if (gpu && describe_int(params, "needed_bytes", &need) && describe_int(params, "free_bytes", &free_bytes))
                fprintf(f, " (%s: needs %.0f MiB, %.0f MiB free)", gpu, (double) need / 1048576.0,
                        (double) free_bytes / 1048576.0);
        describe_tail(f, params, 1);
        fputs("; the driver was not called: free GPU memory, or map it to another GPU, or --force", f);
}

static void describe_not_supported(FILE *f, const cJSON *params) {
        fputs("the driver cannot checkpoint this process", f);
        describe_tail(f, params, 1);
}

static void describe_process_changed(FILE *f, const cJSON *params) {
        long long n, m;

        fputs("the pid now belongs to another process", f);
        if (describe_int(params, "actual_start_time", &n) && describe_int(params, "start_time", &m))
                fprintf(f, " (start time %lld, expected %lld)", n, m);
}

static void describe_driver_error(FILE *f, const cJSON *params) {
        const char *s = json_get_string(params, "cuda_error");
        long long n;

        fprintf(f, "the driver failed with %s", s ? s : "an error");
        if (describe_int(params, "cuda_error_code", &n))
                fprintf(f, " (%lld)", n);
        describe_tail(f, params, 1);
}

static void describe_queue_full(FILE *f, const cJSON *params) {
        long long n;

        /* Without a pid: the limit of groups in flight. */
        fputs(describe_int(params, "pid", &n) ? "too many operations are queued"
                                              : "too many group operations are in flight", f);
        if (describe_int(params, "limit", &n))
                fprintf(f, " (limit %lld)", n);
}

static void describe_group_too_large(FILE *f, const cJSON *params) {
        long long n, m;

        if (describe_int(params, "members", &n))
                fprintf(f, "the selection holds %lld processes", n);
        else
                fputs("the selection holds too many processes", f);
        if (describe_int(params, "limit", &m))
                fprintf(f, ", more than the limit of %lld", m);
}

static void describe_no_such_lease(FILE *f, const cJSON *params) {
        long long n;

        fputs("no such lease", f);
        if (describe_int(params, "lease", &n))
                fprintf(f, " (%lld): it has ended, or it is not yours", n);
}

static void describe_message_too_large(FILE *f, const cJSON *params) {
        long long n;

        fputs("the request is too large", f);
        if (describe_int(params, "max_bytes", &n))
                fprintf(f, " (limit %lld bytes)", n);
}

/* Errors whose sentence says what their parameters hold. */
static const struct {
        const char *name;
        void (*describe)(FILE *f, const cJSON *params);
} describe_with_params[] = {
        { CUDACKPT_ERROR_PERMISSION_DENIED, describe_permission_denied },
        { CUDACKPT_ERROR_INVALID_STATE, describe_invalid_state },
        { CUDACKPT_ERROR_PROCESS_STOPPED, describe_process_stopped },
        { CUDACKPT_ERROR_TIMEOUT, describe_timeout },
        { CUDACKPT_ERROR_INVALID_GPU_MAPPING, describe_invalid_gpu_mapping },
        { CUDACKPT_ERROR_NOT_SUPPORTED, describe_not_supported },
        { CUDACKPT_ERROR_PROCESS_CHANGED, describe_process_changed },
        { CUDACKPT_ERROR_DRIVER_ERROR, describe_driver_error },
        { CUDACKPT_ERROR_QUEUE_FULL, describe_queue_full },
        { CUDACKPT_ERROR_GROUP_TOO_LARGE, describe_group_too_large },
        { CUDACKPT_ERROR_NO_SUCH_LEASE, describe_no_such_lease },
        { CUDACKPT_ERROR_INSUFFICIENT_GPU_MEMORY, describe_insufficient_gpu_memory },
        { CUDACKPT_ERROR_MESSAGE_TOO_LARGE, describe_message_too_large },
};

/* The sentence for one error of io.cudackpt.Process or org.varlink.service;
 * returns 0 when the name is not one of them.  nested: inside a
 * GroupFailed, which does not nest. */
static int describe_known(FILE *f, const char *name, const cJSON *params, int nested) {
        for (size_t i = 0; i < sizeof(describe_fixed) / sizeof(describe_fixed[0]); i++)
                if (strcmp(name, describe_fixed[i].name) == 0) {
                        fputs(describe_fixed[i].sentence, f);
                        return 1;
                }
        for (size_t i = 0; i < sizeof(describe_with_string) / sizeof(describe_with_string[0]); i++)
                if (strcmp(name, describe_with_string[i].name) == 0) {
                        const char *s = json_get_string(params, describe_with_string[i].key);

                        if (!s && !describe_with_string[i].absent) /* the next entry of the name tells */
                                continue;
                        fputs(describe_with_string[i].lead, f);
                        fputs(s ? describe_with_string[i].sep : describe_with_string[i].absent, f);
                        if (s)
                                fputs(s, f);
                        return 1;
                }
        for (size_t i = 0; i < sizeof(describe_with_params) / sizeof(describe_with_params[0]); i++)
                if (strcmp(name, describe_with_params[i].name) == 0) {
                        describe_with_params[i].describe(f, params);
                        return 1;
                }
        if (strcmp(name, CUDACKPT_ERROR_GROUP_FAILED) == 0 && !nested) {
                describe_group_failed(f, params);
                return 1;
        }
        return 0;
}

char *ctl_describe_error(const cudackpt_reply *r) {
        const char *name = r->error ? r->error : "?", *dot = strrchr(name, '.');
        cJSON *params = r->parameters_json ? cJSON_Parse(r->parameters_json) : NULL;
        char *sentence = NULL, *text = NULL;
        size_t size = 0;
        int known, k;
        FILE *f;

        f = open_memstream(&sentence, &size);
        if (!f) {
                cJSON_Delete(params);
                return NULL;
        }
        known = describe_known(f, name, params, 0);
        cJSON_Delete(params);
        if (fclose(f) != 0) {
                free(sentence);
                return NULL;
        }
        /* Our own errors by their short name; anything else whole, with its
         * raw parameters, since we have no words for it. */
        if (known)
                k = asprintf(&text, "%s: %s", dot && dot[1] ? dot + 1 : name, sentence);
        else
                k = asprintf(&text, "%s: %s", name, r->parameters_json ? r->parameters_json : "{}");
        free(sentence);
        if (k < 0)
                return NULL;
        ctl_sanitize(text);
        return text;
}

const char *ctl_describe_call_failure(int r) {
        static char buf[256];

        switch (r) {
        case -EPROTO:
                return "invalid reply from cudackptd";
        case -EMSGSIZE:
                return "reply from cudackptd too large";
        case -ETIMEDOUT:
                return "no reply from cudackptd in time";
        case -ECONNRESET:
                return "cudackptd closed the connection";
        default:
                snprintf(buf, sizeof(buf), "call to cudackptd failed: %s", strerror(-r));
                return buf;
        }
}

int ctl_call_failure_exit_code(int r) {
        switch (r) {
        case -EPROTO:
        case -EMSGSIZE:
        case -ENOMEM:
        case -EINVAL:
                return CUDACKPT_EXIT_FAILURE;
        default:
                return CUDACKPT_EXIT_UNREACHABLE;
        }
}

char *ctl_error_json(const cudackpt_reply *r) {
        cJSON *o = cJSON_CreateObject(), *params = NULL;
        char *copy = NULL;

        if (!o || !cJSON_AddStringToObject(o, "error", r->error ? r->error : ""))
                goto out;
        params = r->parameters_json ? cJSON_Parse(r->parameters_json) : NULL;
        if (!params)
                params = cJSON_CreateObject();
        if (!params || !cJSON_AddItemToObject(o, "parameters", params)) {
                cJSON_Delete(params);
                goto out;
        }
        copy = json_print_dup(o);
out:
        cJSON_Delete(o);
        return copy;
}

/* Columns a sanitised s takes: one per UTF-8 code point. */
size_t ctl_text_width(const char *s) {
        size_t n = 0;

        for (; s && *s; s++)
                n += ((unsigned char) *s & 0xc0) != 0x80;
        return n;
}

/* s sanitised, then padded with spaces to width columns. */
void ctl_put_cell(FILE *f, const char *s, size_t width) {
        ctl_fputs_safe(s, f);
        for (size_t w = ctl_text_width(s); w < width; w++)
                putc(' ', f);
}

