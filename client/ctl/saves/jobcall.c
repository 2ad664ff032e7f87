/* jobcall.c: the job and save methods' requests and replies (jobcall.h). */
#include <cudackpt/protocol.h>

#include "jobcall.h"

#include "json.h"

#include <cJSON.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

bool ctl_job_name_valid(const char *s) {
        size_t n = s ? strlen(s) : 0;

        if (n == 0 || n > CTL_JOB_NAME_MAX || s[0] == '.' || s[0] == '-')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
                      s[i] == '_' || s[i] == '.' || s[i] == '-'))
                        return false;
        return true;
}

/* A short string member into buf: absent is "" (0), too long or another
 * kind -EBADMSG. */
static int event_string(const cJSON *o, const char *key, char *buf, size_t size) {
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(o, key);

        buf[0] = '\0';
        if (!item)
                return 0;
        if (!cJSON_IsString(item) || !item->valuestring || strlen(item->valuestring) >= size)
                return -EBADMSG;
        memcpy(buf, item->valuestring, strlen(item->valuestring) + 1);
        return 0;
}

int ctl_job_event_parse(const char *parameters_json, ctl_job_event *ev) {
        cJSON *p = cJSON_Parse(parameters_json);
        const cJSON *job = cJSON_GetObjectItemCaseSensitive(p, "job");
        long long v;
        int r = -EBADMSG;

        *ev = (ctl_job_event){ .pid = -1, .start_time = -1, .exit_status = -1 };
        if (!cJSON_IsObject(job) || event_string(job, "event", ev->event, sizeof(ev->event)) < 0 ||
            event_string(job, "name", ev->name, sizeof(ev->name)) < 0 ||
            event_string(job, "save", ev->save, sizeof(ev->save)) < 0 || !ev->event[0] || !ev->name[0])
                goto out;
        if (json_get_integer(job, "pid", 1, INT_MAX, &v))
                ev->pid = (int) v;
        if (json_get_integer(job, "start_time", 0, JSON_MAX_EXACT, &v))
                ev->start_time = v;
        if (json_get_integer(job, "exit_status", 0, 255, &v))
                ev->exit_status = (int) v;
        r = 0;
out:
        cJSON_Delete(p);
        return r;
}

static cJSON *string_array(char *const *v) {
        cJSON *a = cJSON_CreateArray();

        for (size_t i = 0; a && v && v[i]; i++)
                if (!json_add_to_array(a, cJSON_CreateString(v[i]))) {
                        cJSON_Delete(a);
                        return NULL;
                }
        return a;
}

char *ctl_job_start_params(const char *name, char *const *argv, char *const *envp, const char *directory,
                           const char *output) {
        cJSON *p = cJSON_CreateObject(), *a = string_array(argv), *e = string_array(envp);
        char *text = NULL;

        if (!p || !a || !e) {
                cJSON_Delete(a);
                cJSON_Delete(e);
                goto out;
        }
        cJSON_AddItemToObject(p, "argv", a);
        cJSON_AddItemToObject(p, "environment", e);
        if (!cJSON_AddStringToObject(p, "name", name) || !cJSON_AddStringToObject(p, "directory", directory) ||
            (output && !cJSON_AddStringToObject(p, "output", output)))
                goto out;
        text = json_print_dup(p);
out:
        cJSON_Delete(p);
        return text;
}

char *ctl_job_save_param(const char *save) {
        cJSON *p = cJSON_CreateObject();
        char *text = NULL;

        if (p && cJSON_AddStringToObject(p, "save", save))
                text = json_print_dup(p);
        cJSON_Delete(p);
        return text;
}

char *ctl_job_save_params(const char *name, const char *save, bool leave_running, bool replace) {
        cJSON *p = cJSON_CreateObject();
        char *text = NULL;

        if (p && cJSON_AddStringToObject(p, "name", name) && cJSON_AddStringToObject(p, "save", save) &&
            (!leave_running || cJSON_AddBoolToObject(p, "leave_running", 1)) &&
            (!replace || cJSON_AddBoolToObject(p, "replace", 1)))
                text = json_print_dup(p);
        cJSON_Delete(p);
        return text;
}
