/* json.c: strict readers of cJSON members, and leak-free printing and
 * building (json.h). */
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

char *json_print_line(const cJSON *o) {
        char *text = cJSON_PrintUnformatted(o), *line = NULL;
        size_t n = text ? strlen(text) : 0;

        if (text && (line = malloc(n + 2))) {
                memcpy(line, text, n);
                line[n] = '\n';
                line[n + 1] = '\0';
        }
        cJSON_free(text);
        return line;
}

bool json_add_to_array(cJSON *arr, cJSON *item) {
        if (item && cJSON_AddItemToArray(arr, item))
                return true;
        cJSON_Delete(item);
        return false;
}
