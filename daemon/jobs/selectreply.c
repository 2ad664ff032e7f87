/* selectreply.c: the replies to a selection that failed (select.h). */
#include "jobs/select.h"

#include <errno.h>
#include <string.h>

#include "base/log.h"
#include "cudackpt/protocol.h"

cJSON *select_too_large(unsigned limit, size_t n)
{
        cJSON *p = cJSON_CreateObject();

        if (p) {
                cJSON_AddNumberToObject(p, "limit", limit);
                cJSON_AddNumberToObject(p, "members", (double)n);
        }
        return proto_error_new(CUDACKPT_ERROR_GROUP_TOO_LARGE, p);
}

cJSON *select_no_such_cgroup(const char *sel)
{
        cJSON *p = cJSON_CreateObject();

        if (p)
                cJSON_AddStringToObject(p, "cgroup", sel);
        return proto_error_new(CUDACKPT_ERROR_NO_SUCH_CGROUP, p);
}

cJSON *select_cgroup_ns_unknown(void)
{
        cJSON *p = cJSON_CreateObject();

        if (p)
                cJSON_AddStringToObject(p, "reason", "the caller's cgroup namespace is not the daemon's, "
                                                     "and no cgroup2 mount of the caller shows its root");
        return proto_error_new(CUDACKPT_ERROR_PERMISSION_DENIED, p);
}

cJSON *select_error_reply(const struct select_job *j, unsigned max_members, const char **ret_result,
                          const char **ret_audit_detail)
{
        *ret_audit_detail = NULL;
        if (j->error == -E2BIG) {
                *ret_result = "GroupTooLarge";
                return select_too_large(max_members, SELECT_TREE_MAX);
        }
        if (j->error == -ENOENT) {
                *ret_result = "NoSuchCgroup";
                return select_no_such_cgroup(j->req->cgroup);
        }
        if (j->error != -EREMOTE) {
                log_error("%s: cannot read the selection: %s", proto_method_name(j->method), strerror(-j->error));
                *ret_result = NULL;
                return NULL;
        }
        *ret_result = "PermissionDenied";
        *ret_audit_detail = "cgroup namespace unknown";
        return select_cgroup_ns_unknown();
}
