/* status.c: cudackptctl status (GetStatus), the daemon's health in a few
 * lines or as its JSON reply, and what doctor makes of the daemon's
 * driver.  The exit status is 18, as for DriverUnavailable, when the
 * daemon has no usable driver: a readiness probe needs nothing else. */
#include "status.h"

#include "describe.h"
#include "exitcode.h"
#include "failure.h"
#include "json.h"

#include <cJSON.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An integer member 0..2^53, or -1 when absent or of another kind. */
static long long status_count(const cJSON *o, const char *key) {
        long long n;

        return json_get_integer(o, key, 0, JSON_MAX_EXACT, &n) ? n : -1;
}

static void status_copy(char *dst, size_t size, const char *src) {
        snprintf(dst, size, "%s", src ? src : "");
        ctl_sanitize(dst);
}

int ctl_status_driver(const cJSON *params, ctl_driver_status *ret) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(params, "driver");
        const cJSON *available = cJSON_GetObjectItemCaseSensitive(d, "available");
        const cJSON *simulated = cJSON_GetObjectItemCaseSensitive(d, "simulated");
        long long version = status_count(d, "version");

        memset(ret, 0, sizeof(*ret));
        if (!cJSON_IsObject(d) || !cJSON_IsBool(available) || !cJSON_IsBool(simulated))
                return -EBADMSG;
        ret->available = cJSON_IsTrue(available);
        ret->simulated = cJSON_IsTrue(simulated);
        ret->version = version > 0 && version < 1000000 ? (int) version : 0;
        ret->gpus = status_count(d, "gpus");
        status_copy(ret->path, sizeof(ret->path), json_get_string(d, "path"));
        status_copy(ret->reason, sizeof(ret->reason), json_get_string(d, "reason"));
        if (!ret->available && !ret->reason[0])
                status_copy(ret->reason, sizeof(ret->reason), "no reason given");
        return 0;
}

void ctl_status_describe_driver(const ctl_driver_status *d, char *buf, size_t size) {
        char version[32] = "CUDA driver";

        if (!d->available) {
                snprintf(buf, size, "no usable CUDA driver (%s): %s", d->path[0] ? d->path : "?", d->reason);
                return;
        }
        if (d->version > 0)
                snprintf(version, sizeof(version), "CUDA %d.%d", d->version / 1000, d->version % 1000 / 10);
        snprintf(buf, size, "%s%s, %lld GPU%s, from %s%s", d->simulated ? "SIMULATED " : "", version,
                 d->gpus < 0 ? 0 : d->gpus, d->gpus == 1 ? "" : "s", d->path[0] ? d->path : "?",
                 d->simulated ? " (no GPU is involved)" : "");
}

/* "tracepoint", "proc (no index: REASON)", ... */
static void status_print_index(const cJSON *params) {
        const cJSON *ix = cJSON_GetObjectItemCaseSensitive(params, "process_index");
        const char *source = json_get_string(ix, "source"), *reason = json_get_string(ix, "reason");

        fputs("process index: ", stdout);
        ctl_fputs_safe(source ? source : "?", stdout);
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ix, "lost")))
                fputs(" (the index filled up and missed a process: process_index_max)", stdout);
        else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ix, "opening")))
                fputs(" (the index is being opened)", stdout);
        else if (reason) {
                fputs(" (no index: ", stdout);
                ctl_fputs_safe(reason, stdout);
                putchar(')');
        }
        putchar('\n');
}

/* Whether the leases will outlive a restart of the daemon; a daemon that
 * does not say prints nothing. */
static void status_print_lease_store(const cJSON *params) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(params, "lease_store");
        const cJSON *durable = cJSON_GetObjectItemCaseSensitive(o, "durable");
        const char *reason = json_get_string(o, "reason");

        if (!cJSON_IsBool(durable))
                return;
        if (cJSON_IsTrue(durable)) {
                puts("lease store: leases outlive a restart of the daemon");
                return;
        }
        fputs("lease store: NONE, leases will not outlive a restart of the daemon (", stdout);
        ctl_fputs_safe(reason ? reason : "no reason given", stdout);
        puts(")");
}

static void status_print_count(const char *label, const cJSON *params, const char *key) {
        long long n = status_count(params, key);

        if (n >= 0)
                printf("%s: %lld\n", label, n);
        else
                printf("%s: ?\n", label);
}

static void status_print(const cJSON *params, const ctl_driver_status *drv) {
        const char *version = json_get_string(params, "version");
        long long busy = status_count(params, "workers_busy");
        char line[1024];

        fputs("daemon: cudackptd ", stdout);
        ctl_fputs_safe(version ? version : "?", stdout);
        putchar('\n');
        ctl_status_describe_driver(drv, line, sizeof(line));
        printf("driver: %s\n", line);
        status_print_index(params);
        if (busy >= 0 && status_count(params, "workers") >= 0)
                printf("workers: %lld busy of %lld\n", busy, status_count(params, "workers"));
        else
                status_print_count("workers", params, "workers");
        status_print_count("queued operations", params, "queued");
        status_print_count("groups in flight", params, "groups");
        status_print_count("leases", params, "leases");
        status_print_lease_store(params);
        status_print_count("watchers", params, "watchers");
        status_print_count("connections", params, "connections");
}

int ctl_status_run(cudackpt_client *client, const char *prefix, bool json) {
        ctl_driver_status drv;
        cudackpt_reply reply;
        cJSON *params = NULL;
        int r, status = CUDACKPT_EXIT_FAILURE;

        cudackpt_reply_init(&reply);
        r = cudackpt_call(client, CUDACKPT_METHOD_GET_STATUS, NULL, &reply);
        if (r < 0)
                return ctl_call_failed(prefix, r, NULL, false);
        if (reply.error) {
                status = ctl_call_failed(prefix, r, &reply, false);
                goto out;
        }
        params = cJSON_Parse(reply.parameters_json);
        if (ctl_status_driver(params, &drv) < 0) {
                fprintf(stderr, "%sinvalid reply from cudackptd: no driver\n", prefix);
                goto out;
        }
        if (json)
                puts(reply.parameters_json);
        else
                status_print(params, &drv);
        status = CUDACKPT_EXIT_OK;
        if (!drv.available) {
                fprintf(stderr, "%sthe daemon has no usable CUDA driver: ", prefix);
                ctl_fputs_safe(drv.reason, stderr);
                fputc('\n', stderr);
                status = CUDACKPT_EXIT_DRIVER_UNAVAILABLE;
        }
out:
        cJSON_Delete(params);
        cudackpt_reply_clear(&reply);
        return status;
}
