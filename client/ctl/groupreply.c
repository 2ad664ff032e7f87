/* groupreply.c: the group forms' readers of replies (groupreply.h). */
#include "groupreply.h"

#include "describe.h"

#include <cudackpt/client.h>

#include <math.h>
#include <string.h>

double ctl_group_ms(const cJSON *o, const char *key) {
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(o, key);

        if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble) || item->valuedouble < 0 ||
            item->valuedouble > 1e15)
                return -1;
        return item->valuedouble;
}

char *ctl_group_member_error(const char *name, const cJSON *params) {
        cudackpt_reply r;
        char *json = cJSON_IsObject(params) ? cJSON_PrintUnformatted(params) : NULL, *text;

        cudackpt_reply_init(&r);
        r.error = (char *) name;
        r.parameters_json = json ? json : (char *) "{}";
        text = ctl_describe_error(&r);
        cJSON_free(json);
        return text;
}

const char *ctl_group_short_name(const char *name) {
        const char *dot = strrchr(name, '.');

        return dot && dot[1] ? dot + 1 : name;
}
