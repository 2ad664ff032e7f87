/* methods.c: the method table, the Varlink service's own methods (GetInfo,
 * GetInterfaceDescription), and the step from a message to a row. */
#include "methods.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#include "net/conn.h"
#include "cudackpt/protocol.h"
#include "jobs/gpulist.h"
#include "jobs/group.h"
#include "jobs/lease.h"
#include "jobs/list.h"
#include "base/log.h"
#include "base/metrics.h"
#include "proccall.h"
#include "saves/savecall.h"
#include "status.h"
#include "jobs/watch.h"

#ifndef CUDACKPT_VERSION
#define CUDACKPT_VERSION "0"
#endif

static const char service_idl[] =
        "# The Varlink Service Interface is provided by every varlink service. It\n"
        "# describes the service and the interfaces it implements.\n"
        "interface org.varlink.service\n"
        "\n"
        "# Get a list of all the interfaces a service provides and information\n"
        "# about the implementation.\n"
        "method GetInfo() -> (\n"
        "  vendor: string,\n"
        "  product: string,\n"
        "  version: string,\n"
        "  url: string,\n"
        "  interfaces: []string\n"
        ")\n"
        "\n"
        "# Get the description of an interface that is implemented by this service.\n"
        "method GetInterfaceDescription(interface: string) -> (description: string)\n"
        "\n"
        "# The requested interface was not found.\n"
        "error InterfaceNotFound (interface: string)\n"
        "\n"
        "# The requested method was not found\n"
        "error MethodNotFound (method: string)\n"
        "\n"
        "# The interface defines the requested method, but the service does not\n"
        "# implement it.\n"
        "error MethodNotImplemented (method: string)\n"
        "\n"
        "# One of the passed parameters is invalid.\n"
        "error InvalidParameter (parameter: string)\n"
        "\n"
        "# Client is denied access\n"
        "error PermissionDenied ()\n"
        "\n"
        "# Method is expected to be called with 'more' set to true, but wasn't\n"
        "error ExpectedMore ()\n";

static void get_info_call(void *feature, struct conn *c, struct proto_call *call)
{
        cJSON *p = cJSON_CreateObject(), *ifaces;

        (void)feature;
        if (!p) {
                conn_reply(c, call, NULL);
                return;
        }
        cJSON_AddStringToObject(p, "vendor", "cudackpt");
        cJSON_AddStringToObject(p, "product", "cudackptd");
        cJSON_AddStringToObject(p, "version", CUDACKPT_VERSION);
        cJSON_AddStringToObject(p, "url", "https://github.com/cudackpt/cudackptd");
        ifaces = cJSON_AddArrayToObject(p, "interfaces");
        if (ifaces) {
                cJSON_AddItemToArray(ifaces, cJSON_CreateString("org.varlink.service"));
                cJSON_AddItemToArray(ifaces, cJSON_CreateString(CUDACKPT_INTERFACE));
        }
        conn_reply(c, call, proto_reply_new(p));
}

static cJSON *interface_description(const struct proto_call *call)
{
        const cJSON *iface = NULL, *item;
        cJSON *p;

        if (call->parameters)
                cJSON_ArrayForEach(item, call->parameters) {
                        if (strcmp(item->string, "interface") != 0 || iface || !cJSON_IsString(item))
                                return proto_invalid_parameter(item->string);
                        iface = item;
                }
        if (!iface)
                return proto_invalid_parameter("interface");
        p = cJSON_CreateObject();
        if (!p)
                return NULL;
        if (strcmp(iface->valuestring, CUDACKPT_INTERFACE) == 0)
                cJSON_AddStringToObject(p, "description", proto_idl_text);
        else if (strcmp(iface->valuestring, "org.varlink.service") == 0)
                cJSON_AddStringToObject(p, "description", service_idl);
        else {
                cJSON_AddStringToObject(p, "interface", iface->valuestring);
                return proto_error_new(CUDACKPT_VARLINK_INTERFACE_NOT_FOUND, p);
        }
        return proto_reply_new(p);
}

static void get_interface_description_call(void *feature, struct conn *c, struct proto_call *call)
{
        (void)feature;
        conn_reply(c, call, interface_description(call));
}

/* ---- the rows' handlers: each hands the call to its feature --------------- */

static void proccall_row(void *feature, struct conn *c, struct proto_call *call)
{
        proccall_call(feature, c, call);
}

static void group_row(void *feature, struct conn *c, struct proto_call *call)
{
        group_call(feature, c, call);
}

static void list_row(void *feature, struct conn *c, struct proto_call *call)
{
        list_call(feature, c, call);
}

static void gpulist_row(void *feature, struct conn *c, struct proto_call *call)
{
        gpulist_call(feature, c, call);
}

static void lease_row(void *feature, struct conn *c, struct proto_call *call)
{
        lease_call(feature, c, call);
}

static void watch_row(void *feature, struct conn *c, struct proto_call *call)
{
        watch_call(feature, c, call);
}

static void saves_row(void *feature, struct conn *c, struct proto_call *call)
{
        savecall_call(feature, c, call);
}

static void metrics_row(void *feature, struct conn *c, struct proto_call *call)
{
        conn_reply(c, call, status_metrics_reply(feature));
}

static void status_row(void *feature, struct conn *c, struct proto_call *call)
{
        conn_reply(c, call, status_reply(feature));
}

/* ---- the table -------------------------------------------------------------- */

static void add(struct methods *m, enum proto_method first, enum proto_method last, methods_handler_cb fn, void *feature,
                bool no_parameters)
{
        for (enum proto_method k = first; k <= last; k++)
                m->rows[k] = (struct methods_row){ .fn = fn, .feature = feature, .no_parameters = no_parameters };
}

void methods_init(struct methods *m, const struct methods_features *f)
{
        *m = (struct methods){ .metrics = f->metrics };
        add(m, PROTO_GET_STATE, PROTO_RESUME, proccall_row, f->proccall, false);
        add(m, PROTO_LOCK_GROUP, PROTO_RESUME_GROUP, group_row, f->groups, false);
        add(m, PROTO_LIST_PROCESSES, PROTO_LIST_PROCESSES, list_row, f->lists, false);
        add(m, PROTO_RELEASE_LEASE, PROTO_CLAIM_LEASE, lease_row, f->leases, false);
        add(m, PROTO_WATCH, PROTO_WATCH, watch_row, f->watch, false);
        add(m, PROTO_GET_METRICS, PROTO_GET_METRICS, metrics_row, f->status, true);
        add(m, PROTO_GET_STATUS, PROTO_GET_STATUS, status_row, f->status, true);
        add(m, PROTO_LIST_GPUS, PROTO_LIST_GPUS, gpulist_row, f->lists, true);
        add(m, PROTO_START_JOB, PROTO_PASS_BARRIER, saves_row, f->saves, false);
        add(m, PROTO_GET_INFO, PROTO_GET_INFO, get_info_call, NULL, true);
        add(m, PROTO_GET_INTERFACE_DESCRIPTION, PROTO_GET_INTERFACE_DESCRIPTION, get_interface_description_call,
            NULL, false);
        for (size_t k = 0; k < PROTO_METHODS; k++)
                assert(m->rows[k].fn);
}

void methods_message_cb(struct conn *c, const char *msg, size_t len)
{
        const struct methods *m = c->owner->userdata;
        const struct methods_row *row;
        struct proto_call call;
        cJSON *err = NULL;
        int r;

        r = proto_parse_call(msg, len, &call, &err);
        if (r == -EPROTO) {
                metrics_count(m->metrics, METRICS_CUT_INVALID_REQUEST);
                log_debug("Disconnecting uid %u pid %d: not a Varlink call", (unsigned)c->caller.uid,
                          (int)c->caller.pid);
                conn_send(c, err);
                conn_close_after_write(c);
                return;
        }
        if (r < 0) {
                conn_send(c, err);
                return;
        }
        row = &m->rows[call.method];
        if (row->no_parameters && call.parameters && call.parameters->child)
                conn_reply(c, &call, proto_invalid_parameter(call.parameters->child->string));
        else
                row->fn(row->feature, c, &call);
        proto_call_free(&call);
}
