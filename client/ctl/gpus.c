/* gpus.c: the gpus command (gpus.h). */
#include "gpus.h"

#include "describe.h"
#include "exitcode.h"
#include "failure.h"
#include "json.h"

#include <cudackpt/protocol.h>
#include <cJSON.h>

#include <stdio.h>

#define MIB (1024.0 * 1024.0)

static void gpus_print_mib(const cJSON *g, const char *key) {
        double v;

        if (json_get_number(g, key, &v))
                printf("  %10.0f", v / MIB);
        else
                printf("  %10s", "-");
}

static void gpus_print(const cJSON *params) {
        const cJSON *g;
        double margin = 0;
        const char *version = json_get_string(params, "driver_version");

        (void) json_get_number(params, "restore_gpu_margin_bytes", &margin);
        fputs("driver ", stdout);
        ctl_fputs_safe(version && *version ? version : "(not known)", stdout);
        printf("; restores need %.0f MiB per process and GPU beyond what it held\n", margin / MIB);
        printf("%-5s  %-40s  %-16s  %10s  %10s  %s\n", "INDEX", "UUID", "PCI BUS ID", "FREE MiB", "TOTAL MiB", "MODEL");
        cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(params, "gpus")) {
                double index = -1;
                (void) json_get_number(g, "index", &index);
                printf("%-5.0f  ", index);
                ctl_fputs_safe(json_get_string(g, "uuid") ? json_get_string(g, "uuid") : "?", stdout);
                fputs("  ", stdout);
                ctl_fputs_safe(json_get_string(g, "pci_bus_id") ? json_get_string(g, "pci_bus_id") : "", stdout);
                gpus_print_mib(g, "memory_free_bytes");
                gpus_print_mib(g, "memory_total_bytes");
                fputs("  ", stdout);
                ctl_fputs_safe(json_get_string(g, "name") ? json_get_string(g, "name") : "", stdout);
                fputc('\n', stdout);
        }
}

int ctl_gpus_run(cudackpt_client *client, const char *prefix, bool json) {
        cudackpt_reply reply;
        cJSON *params = NULL;
        bool nvml = false;
        int r, status = CUDACKPT_EXIT_FAILURE;

        cudackpt_reply_init(&reply);
        r = cudackpt_call(client, CUDACKPT_METHOD_LIST_GPUS, NULL, &reply);
        if (r < 0 || reply.error) {
                status = ctl_call_failed(prefix, r, r < 0 ? NULL : &reply, false);
                goto out;
        }
        params = cJSON_Parse(reply.parameters_json);
        if (!json_get_bool(params, "nvml", &nvml)) {
                fprintf(stderr, "%sinvalid reply from cudackptd\n", prefix);
                goto out;
        }
        if (json)
                puts(reply.parameters_json);
        else if (nvml)
                gpus_print(params);
        if (nvml)
                status = CUDACKPT_EXIT_OK;
        else {
                fprintf(stderr, "%sthe daemon has no NVML: ", prefix);
                ctl_fputs_safe(json_get_string(params, "reason") ? json_get_string(params, "reason") : "?", stderr);
                fputc('\n', stderr);
        }
out:
        cJSON_Delete(params);
        cudackpt_reply_clear(&reply);
        return status;
}
