/* json.c: strict readers of cJSON members (json.h). */
#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *json_get_string(const cJSON *o, const char *key) {
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(o, key);

        return cJSON_IsString(item) && item->valuestring ? item->valuestring : NULL;
}

bool json_is_integer(const cJSON *item, double min, double max) {
        double d;

        if (!cJSON_IsNumber(item))
                return false;
        d = item->valuedouble;
        return isfinite(d) && d == floor(d) && d >= min && d <= max;
}

bool json_get_integer(const cJSON *o, const char *key, double min, double max, long long *ret_value) {
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(o, key);

        if (!json_is_integer(item, min, max))
                return false;
        *ret_value = (long long) item->valuedouble;
        return true;
}

bool json_get_number(const cJSON *o, const char *key, double *ret_value) {
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(o, key);

        if (!cJSON_IsNumber(item))
                return false;
        *ret_value = item->valuedouble;
        return true;
}

bool json_get_bool(const cJSON *o, const char *key, bool *ret_value) {
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(o, key);

        if (!cJSON_IsBool(item))
                return false;
        *ret_value = cJSON_IsTrue(item);
        return true;
}

char *json_print_dup(const cJSON *o) {
        char *text = cJSON_PrintUnformatted(o), *copy = text ? strdup(text) : NULL;

        cJSON_free(text);
        return copy;
}
