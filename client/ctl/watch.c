/* watch.c: cudackptctl watch (the Watch stream, one line or JSON object
 * per event) and metrics (GetMetrics's text, on stdout or into a file). */
#include "watch.h"

#include "describe.h"
#include "exitcode.h"
#include "failure.h"
#include "json.h"

#include <cudackpt/protocol.h>
#include <cJSON.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void put_safe(const char *s)
{
        if (s)
                ctl_fputs_safe(s, stdout);
}

/* "12:00:01.123 4242 finished Suspend: ok, checkpointed (812.3 ms)" */
static void print_event(const cJSON *e)
{
        const char *type = json_get_string(e, "type"), *s;
        double t, v;

        if (!type)
                return;
        if (json_get_number(e, "time", &t)) {
                time_t sec = (time_t)t;
                struct tm tm;
                char buf[32];
                if (localtime_r(&sec, &tm) && strftime(buf, sizeof(buf), "%H:%M:%S", &tm) > 0)
                        printf("%s.%03d ", buf, (int)((t - (double)sec) * 1000.0));
        }
        if (json_get_number(e, "pid", &v))
                printf("%d ", (int)v);
        put_safe(type);
        if ((s = json_get_string(e, "method"))) {
                putchar(' ');
                put_safe(s);
        }
        if ((s = json_get_string(e, "group"))) {
                fputs(" (", stdout);
                put_safe(s);
                putchar(')');
        }
        if (strcmp(type, "started") == 0 && json_get_number(e, "caller_uid", &v))
                printf(" by uid %.0f", v);
        if ((s = json_get_string(e, "result"))) {
                fputs(": ", stdout);
                put_safe(s);
        }
        if ((s = json_get_string(e, "state"))) {
                fputs(strcmp(type, "finished") == 0 ? ", " : " ", stdout);
                put_safe(s);
        }
        if (json_get_number(e, "duration_ms", &v))
                printf(" (%.1f ms)", v);
        if (json_get_number(e, "lease", &v))
                printf(" lease %.0f", v);
        if ((s = json_get_string(e, "reason"))) {
                putchar(' ');
                put_safe(s);
        }
        if ((s = json_get_string(e, "undo"))) {
                fputs(", undo ", stdout);
                put_safe(s);
        }
        if ((s = json_get_string(e, "command"))) {
                putchar(' ');
                put_safe(s);
                if (json_get_number(e, "uid", &v))
                        printf(" uid %.0f", v);
        }
        putchar('\n');
}

static int watch_event_cb(void *ctx, const char *parameters_json)
{
        const ctl_watch *w = ctx;
        cJSON *p = cJSON_Parse(parameters_json);
        const cJSON *e = cJSON_IsObject(p) ? cJSON_GetObjectItemCaseSensitive(p, "event") : NULL;

        if (cJSON_IsObject(e)) {
                const char *type = json_get_string(e, "type");
                if (w->json) {
                        char *text = cJSON_PrintUnformatted(e);
                        if (text)
                                puts(text);
                        cJSON_free(text);
                } else if (!type || strcmp(type, "watching") != 0) {
                        print_event(e);
                }
        }
        cJSON_Delete(p);
        /* A reader of a pipe sees each event as it happens. */
        if (fflush(stdout) != 0)
                return -EPIPE;
        return 0;
}

int ctl_watch_run(cudackpt_client *client, const ctl_watch *w)
{
        cJSON *params = cJSON_CreateObject();
        char *text = NULL;
        cudackpt_reply reply;
        int r, status;

        cudackpt_reply_init(&reply);
        if (params && w->selector && w->selector->kind != CTL_SELECT_NONE)
                cJSON_AddItemToObject(params, "selector", cJSON_Duplicate(w->selector->json, 1));
        text = params ? cJSON_PrintUnformatted(params) : NULL;
        cJSON_Delete(params);
        if (!text) {
                fprintf(stderr, "%sout of memory\n", w->prefix);
                return CUDACKPT_EXIT_FAILURE;
        }
        r = cudackpt_call_more(client, CUDACKPT_METHOD_WATCH, text, watch_event_cb, (void *)w, &reply);
        cJSON_free(text);
        if (r == -EPIPE) {
                status = CUDACKPT_EXIT_OK; /* the reader went away */
        } else if (r < 0 || reply.error) {
                status = ctl_call_failed(w->prefix, r, &reply, false);
        } else {
                status = CUDACKPT_EXIT_OK;
        }
        cudackpt_reply_clear(&reply);
        return status;
}

int ctl_metrics_run(cudackpt_client *client, const char *prefix, const char *output)
{
        cudackpt_reply reply;
        cJSON *p = NULL;
        const char *text;
        int r, status = CUDACKPT_EXIT_FAILURE;

        cudackpt_reply_init(&reply);
        r = cudackpt_call(client, CUDACKPT_METHOD_GET_METRICS, NULL, &reply);
        if (r < 0)
                return ctl_call_failed(prefix, r, NULL, false);
        if (reply.error) {
                status = ctl_call_failed(prefix, r, &reply, false);
                goto out;
        }
        p = cJSON_Parse(reply.parameters_json);
        text = p ? json_get_string(p, "text") : NULL;
        if (!text) {
                fprintf(stderr, "%sinvalid reply from cudackptd: no text\n", prefix);
                goto out;
        }
        if (!output) {
                fputs(text, stdout);
                status = CUDACKPT_EXIT_OK;
                goto out;
        }
        {
                /* Written beside, then renamed: a collector never reads half a file. */
                char *tmp = NULL;
                FILE *f;
                if (asprintf(&tmp, "%s.tmp.%d", output, (int)getpid()) < 0) {
                        fprintf(stderr, "%sout of memory\n", prefix);
                        goto out;
                }
                f = fopen(tmp, "we");
                bool ok = f != NULL;
                if (f) {
                        ok = fputs(text, f) >= 0;
                        ok = fclose(f) == 0 && ok;
                }
                ok = ok && rename(tmp, output) == 0;
                if (!ok) {
                        fprintf(stderr, "%scannot write %s: %s\n", prefix, output, strerror(errno));
                        unlink(tmp);
                } else {
                        status = CUDACKPT_EXIT_OK;
                }
                free(tmp);
        }
out:
        cJSON_Delete(p);
        cudackpt_reply_clear(&reply);
        return status;
}
