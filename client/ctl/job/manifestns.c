/* manifestns.c: the pid namespace keys of manifest.json (manifestns.h). */
#include "manifestns.h"

#include "json.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>

bool ctl_manifest_ns_write_tree(cJSON *o, bool pid_ns, const int *ns_pids, size_t n) {
        cJSON *a;

        if (!pid_ns)
                return true;
        a = cJSON_CreateIntArray(ns_pids, (int) n);
        if (!a || !cJSON_AddItemToObject(o, "ns_pids", a)) {
                cJSON_Delete(a);
                return false;
        }
        return cJSON_AddBoolToObject(o, "pid_namespace", true) != NULL;
}

bool ctl_manifest_ns_write_mnt(cJSON *o, bool mnt_ns) {
        return !mnt_ns || cJSON_AddBoolToObject(o, "mount_namespace", true) != NULL;
}

int ctl_manifest_ns_read_mnt(const cJSON *o, bool pid_ns, bool *ret_mnt_ns) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "mount_namespace");

        *ret_mnt_ns = false;
        if (!v)
                return 0;
        if (!cJSON_IsBool(v) || !pid_ns)
                return -EINVAL;
        *ret_mnt_ns = cJSON_IsTrue(v);
        return 0;
}

bool ctl_manifest_ns_write_member(cJSON *o, int ns_pid) {
        return ns_pid <= 0 || cJSON_AddNumberToObject(o, "ns_pid", ns_pid);
}

static int ns_cmp_int(const void *a, const void *b) {
        int x = *(const int *) a, y = *(const int *) b;

        return (x > y) - (x < y);
}

/* No number twice among v (n of them): 0, -EBADMSG or -ENOMEM. */
static int ns_unique(const int *v, size_t n) {
        int *c = malloc((n + 1) * sizeof(int));
        int r = c ? 0 : -ENOMEM;

        for (size_t i = 0; c && i < n; i++)
                c[i] = v[i];
        if (c)
                qsort(c, n, sizeof(int), ns_cmp_int);
        for (size_t i = 1; r == 0 && i < n; i++)
                if (c[i] == c[i - 1])
                        r = -EBADMSG;
        free(c);
        return r;
}

/* The ns_pids array p into v (n, already allocated). */
static int ns_read_pids(const cJSON *p, int root, const int *pids, int *v, size_t n) {
        const cJSON *x;
        size_t k = 0;

        if ((size_t) cJSON_GetArraySize(p) != n)
                return -EBADMSG;
        cJSON_ArrayForEach(x, p) {
                if (!json_is_integer(x, 1, INT_MAX))
                        return -EINVAL;
                v[k] = (int) x->valuedouble;
                /* The root is the namespace's init, pid 1 there. */
                if ((pids[k] == root) != (v[k] == 1))
                        return -EBADMSG;
                k++;
        }
        return ns_unique(v, n);
}

int ctl_manifest_ns_read_tree(const cJSON *o, int root, const int *pids, size_t n, bool *ret_pid_ns,
                              int **ret_ns_pids) {
        const cJSON *flag = cJSON_GetObjectItemCaseSensitive(o, "pid_namespace");
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "ns_pids");
        int *v, r;

        *ret_pid_ns = false;
        *ret_ns_pids = NULL;
        if (!flag && !p)
                return 0;
        if (!cJSON_IsTrue(flag) || !cJSON_IsArray(p))
                return -EINVAL;
        v = calloc(n + 1, sizeof(int));
        if (!v)
                return -ENOMEM;
        r = ns_read_pids(p, root, pids, v, n);
        if (r < 0) {
                free(v);
                return r;
        }
        *ret_pid_ns = true;
        *ret_ns_pids = v;
        return 0;
}

int ctl_manifest_ns_read_member(const cJSON *o, int *ret_ns_pid) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "ns_pid");

        *ret_ns_pid = 0;
        if (!v)
                return 0;
        if (!json_is_integer(v, 1, INT_MAX))
                return -EINVAL;
        *ret_ns_pid = (int) v->valuedouble;
        return 0;
}

int ctl_manifest_ns_expected(int pid, const int *pids, const int *ns_pids, size_t n) {
        for (size_t i = 0; ns_pids && i < n; i++)
                if (pids[i] == pid)
                        return ns_pids[i];
        return 0;
}
