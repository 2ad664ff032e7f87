/* selector.c: the selector options of cudackptctl (--pids, --cgroup,
 * --tree) checked and turned into the protocol's Selector object, for the
 * group forms, ps and watch (ctl.h). */
#include "selector.h"

#include "args.h"
#include "cgroup-path.h"

#include <cJSON.h>

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Start times are exact integers in a double up to 2^53, as the daemon takes them. */
#define SELECTOR_START_TIME_MAX 9007199254740992ULL

/* One "PID" or "PID:START_TIME" of a --pids list, appended to arr. */
static int selector_add_ref(cJSON *arr, char *item) {
        unsigned long long start = 0;
        char *colon = strchr(item, ':');
        const cJSON *ref;
        cJSON *o;
        int pid, r;

        if (colon)
                *colon = '\0';
        r = ctl_parse_pid(item, &pid);
        if (r < 0)
                return -EINVAL;
        if (colon && ctl_parse_uint(colon + 1, SELECTOR_START_TIME_MAX, &start) < 0)
                return -EINVAL;
        cJSON_ArrayForEach(ref, arr) {
                const cJSON *p = cJSON_GetObjectItemCaseSensitive(ref, "pid");

                if (cJSON_IsNumber(p) && p->valuedouble == pid)
                        return -EEXIST;
        }
        o = cJSON_CreateObject();
        if (!o || !cJSON_AddNumberToObject(o, "pid", pid) ||
            (colon && !cJSON_AddNumberToObject(o, "start_time", (double) start)) ||
            !cJSON_AddItemToArray(arr, o)) {
                cJSON_Delete(o);
                return -ENOMEM;
        }
        return 0;
}

/* {"pids": [{"pid": N[, "start_time": T]}, ...]} from "N[:T][,N[:T]...]". */
static int selector_parse_pids(const char *arg, cJSON *sel) {
        char *copy, *item, *next;
        cJSON *arr;
        int r = 0;

        if (!*arg)
                return -EINVAL;
        arr = cJSON_AddArrayToObject(sel, "pids");
        copy = strdup(arg);
        if (!arr || !copy) {
                free(copy);
                return -ENOMEM;
        }
        /* strtok_r would merge ",," into one separator; an empty item must be an error. */
        for (item = copy; item && r >= 0; item = next) {
                char *comma = strchr(item, ',');

                next = comma ? comma + 1 : NULL;
                if (comma)
                        *comma = '\0';
                r = selector_add_ref(arr, item);
        }
        free(copy);
        return r;
}

const char *ctl_selector_option(ctl_selector_kind kind) {
        switch (kind) {
        case CTL_SELECT_PIDS:
                return "--pids";
        case CTL_SELECT_CGROUP:
                return "--cgroup";
        case CTL_SELECT_TREE:
                return "--tree";
        case CTL_SELECT_NONE:
                break;
        }
        return "";
}

int ctl_selector_parse(ctl_selector *sel, ctl_selector_kind kind, const char *arg) {
        cJSON *o;
        int pid, r = 0;

        if (!arg || kind == CTL_SELECT_NONE)
                return -EINVAL;
        o = cJSON_CreateObject();
        if (!o)
                return -ENOMEM;
        switch (kind) {
        case CTL_SELECT_PIDS:
                r = selector_parse_pids(arg, o);
                break;
        case CTL_SELECT_CGROUP:
                r = cgroup_path_check(arg, NULL);
                if (r >= 0 && !cJSON_AddStringToObject(o, "cgroup", arg))
                        r = -ENOMEM;
                break;
        case CTL_SELECT_TREE:
                r = ctl_parse_pid(arg, &pid) < 0 ? -EINVAL : 0;
                if (r >= 0 && !cJSON_AddNumberToObject(o, "tree", pid))
                        r = -ENOMEM;
                break;
        case CTL_SELECT_NONE:
                break;
        }
        if (r < 0) {
                cJSON_Delete(o);
                return r;
        }
        ctl_selector_free(sel);
        sel->kind = kind;
        sel->arg = arg;
        sel->json = o;
        return 0;
}

void ctl_selector_free(ctl_selector *sel) {
        if (!sel)
                return;
        cJSON_Delete(sel->json);
        *sel = (ctl_selector) { .kind = CTL_SELECT_NONE };
}
