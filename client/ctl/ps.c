/* ps.c: cudackptctl ps, the daemon's ListProcesses as a table (PID, USER,
 * STATE, CGROUP, GPU MEM with NVML, COMMAND) or as JSON.  Everything from
 * the daemon is treated as hostile: only typed fields of the right type
 * are used, and every string is sanitised before it is shown. */
#include "ps.h"

#include "describe.h"
#include "exitcode.h"
#include "failure.h"
#include "json.h"

#include <cJSON.h>

#include <errno.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What ps shows of one process. */
typedef struct ps_row {
        long long pid;
        char *user;     /* name, or the uid in digits */
        char *state;    /* "locked", "stopped(signal)", "locked [Suspend]" */
        const char *cgroup;
        const char *command;
        char *gpu_mem;  /* "1.5 GiB", "3.0 GiB (2 GPUs)", "-"; NULL: no "gpus" */
} ps_row;

/* The GPU memory column of one process: its "gpus" summed (NVML's view: a
 * checkpointed process holds none). */
static char *ps_gpu_mem(const cJSON *o) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, "gpus"), *g;
        double bytes = 0;
        int n = 0, k;
        char *s = NULL;

        if (!cJSON_IsArray(arr))
                return NULL;
        cJSON_ArrayForEach(g, arr) {
                const cJSON *b = cJSON_GetObjectItemCaseSensitive(g, "memory_bytes");
                n++;
                if (cJSON_IsNumber(b) && b->valuedouble > 0)
                        bytes += b->valuedouble;
        }
        if (n == 0)
                return strdup("-");
        if (bytes >= 1024.0 * 1024 * 1024)
                k = asprintf(&s, "%.1f GiB", bytes / (1024.0 * 1024 * 1024));
        else
                k = asprintf(&s, "%.0f MiB", bytes / (1024.0 * 1024));
        if (k >= 0 && n > 1) {
                char *t = NULL;
                k = asprintf(&t, "%s (%d GPUs)", s, n);
                free(s);
                s = t;
        }
        return k < 0 ? NULL : s;
}

static char *ps_user(const cJSON *o) {
        const struct passwd *pw;
        long long uid;
        char *s = NULL;

        if (!json_get_integer(o, "uid", 0, 4294967295.0, &uid))
                return strdup("?");
        pw = getpwuid((uid_t) uid);
        if (pw && pw->pw_name && *pw->pw_name)
                return strdup(pw->pw_name);
        return asprintf(&s, "%lld", uid) < 0 ? NULL : s;
}

static char *ps_state(const cJSON *o) {
        const char *state = json_get_string(o, "state"), *stop = json_get_string(o, "stop");
        const char *in_flight = json_get_string(o, "in_flight");
        char *s = NULL, *base = NULL;
        int k;

        if (stop)
                k = asprintf(&base, "stopped(%s)", stop);
        else
                k = asprintf(&base, "%s", state ? state : "unknown");
        if (k < 0)
                return NULL;
        if (!in_flight)
                return base;
        k = asprintf(&s, "%s [%s]", base, in_flight);
        free(base);
        return k < 0 ? NULL : s;
}

/* The columns' widths; gpus: whether the GPU MEM column is shown. */
typedef struct ps_widths {
        size_t pid, user, state, cgroup, gpu;
        bool gpus;
} ps_widths;

/* One process of ListProcesses into *row (user and state allocated: both
 * NULL when out of memory), widening *w; false when it has no pid. */
static bool ps_read_row(const cJSON *o, ps_row *row, ps_widths *w) {
        char buf[32];

        if (!json_get_integer(o, "pid", 0, 2147483647.0, &row->pid))
                return false;
        row->user = ps_user(o);
        row->state = ps_state(o);
        if (!row->user || !row->state)
                return true;
        row->cgroup = json_get_string(o, "cgroup");
        row->command = json_get_string(o, "command");
        if (!row->cgroup || !*row->cgroup)
                row->cgroup = "-";
        if (!row->command)
                row->command = "?";
        row->gpu_mem = ps_gpu_mem(o);
        if (row->gpu_mem) {
                w->gpus = true;
                if (ctl_text_width(row->gpu_mem) > w->gpu)
                        w->gpu = ctl_text_width(row->gpu_mem);
        }
        snprintf(buf, sizeof(buf), "%lld", row->pid);
        if (strlen(buf) > w->pid)
                w->pid = strlen(buf);
        if (ctl_text_width(row->user) > w->user)
                w->user = ctl_text_width(row->user);
        if (ctl_text_width(row->state) > w->state)
                w->state = ctl_text_width(row->state);
        if (ctl_text_width(row->cgroup) > w->cgroup)
                w->cgroup = ctl_text_width(row->cgroup);
        return true;
}

static void ps_print_rows(const ps_row *rows, size_t n, const ps_widths *w) {
        printf("%*s  ", (int) w->pid, "PID");
        ctl_put_cell(stdout, "USER", w->user);
        fputs("  ", stdout);
        ctl_put_cell(stdout, "STATE", w->state);
        fputs("  ", stdout);
        ctl_put_cell(stdout, "CGROUP", w->cgroup);
        if (w->gpus) {
                fputs("  ", stdout);
                ctl_put_cell(stdout, "GPU MEM", w->gpu);
        }
        fputs("  COMMAND\n", stdout);
        for (size_t i = 0; i < n; i++) {
                printf("%*lld  ", (int) w->pid, rows[i].pid);
                ctl_put_cell(stdout, rows[i].user, w->user);
                fputs("  ", stdout);
                ctl_put_cell(stdout, rows[i].state, w->state);
                fputs("  ", stdout);
                ctl_put_cell(stdout, rows[i].cgroup, w->cgroup);
                fputs("  ", stdout);
                if (w->gpus) {
                        ctl_put_cell(stdout, rows[i].gpu_mem ? rows[i].gpu_mem : "?", w->gpu);
                        fputs("  ", stdout);
                }
                ctl_fputs_safe(rows[i].command, stdout);
                putchar('\n');
        }
}

static int ps_print_table(const ctl_ps *p, const cJSON *processes) {
        ps_widths w = { .pid = 3, .user = 4, .state = 5, .cgroup = 6, .gpu = 7 };
        int status = CUDACKPT_EXIT_OK;
        const cJSON *o;
        ps_row *rows;
        size_t n = 0;

        rows = calloc((size_t) cJSON_GetArraySize(processes) + 1, sizeof(*rows));
        if (!rows)
                goto oom;
        cJSON_ArrayForEach(o, processes) {
                if (!ps_read_row(o, &rows[n], &w))
                        continue;
                n++;
                if (!rows[n - 1].user || !rows[n - 1].state)
                        goto oom;
        }
        if (n == 0)
                puts(p->selector && p->selector->kind != CTL_SELECT_NONE ? "no CUDA process matched"
                                                                         : "no CUDA process found");
        else
                ps_print_rows(rows, n, &w);
        goto out;
oom:
        fprintf(stderr, "%sout of memory\n", p->prefix);
        status = CUDACKPT_EXIT_FAILURE;
out:
        for (size_t i = 0; rows && i < n; i++) {
                free(rows[i].user);
                free(rows[i].state);
                free(rows[i].gpu_mem);
        }
        free(rows);
        return status;
}

/* ListProcesses' parameters: {"selector": ...}; into *ret (NULL: none).
 * -ENOMEM. */
static int ps_params(const ctl_ps *p, char **ret) {
        cJSON *params, *sel;

        *ret = NULL;
        if (!p->selector || p->selector->kind == CTL_SELECT_NONE)
                return 0;
        sel = cJSON_Duplicate(p->selector->json, 1);
        params = cJSON_CreateObject();
        if (!params || !sel || !cJSON_AddItemToObject(params, "selector", sel)) {
                cJSON_Delete(sel);
                cJSON_Delete(params);
                return -ENOMEM;
        }
        *ret = json_print_dup(params);
        cJSON_Delete(params);
        return *ret ? 0 : -ENOMEM;
}

int ctl_ps_run(cudackpt_client *client, const ctl_ps *p) {
        cJSON *params = NULL, *processes;
        cudackpt_reply reply;
        char *text = NULL, *copy = NULL;
        int r, status;

        if (ps_params(p, &copy) < 0) {
                fprintf(stderr, "%sout of memory\n", p->prefix);
                return CUDACKPT_EXIT_FAILURE;
        }
        cudackpt_reply_init(&reply);
        r = cudackpt_call(client, CUDACKPT_METHOD_LIST_PROCESSES, copy, &reply);
        free(copy);
        if (r < 0)
                return ctl_call_failed(p->prefix, r, NULL, false);
        if (reply.error) {
                /* Of several pids, the one the daemon refused (NoSuchProcess). */
                if (p->selector && p->selector->kind == CTL_SELECT_PIDS && reply.pid > 0 &&
                    asprintf(&text, "%spid %d: ", p->prefix, reply.pid) < 0)
                        text = NULL;
                status = ctl_call_failed(text ? text : p->prefix, 0, &reply, p->json);
                free(text);
                cudackpt_reply_clear(&reply);
                return status;
        }

        params = cJSON_Parse(reply.parameters_json);
        cudackpt_reply_clear(&reply);
        processes = cJSON_GetObjectItemCaseSensitive(params, "processes");
        if (!cJSON_IsArray(processes)) {
                cJSON_Delete(params);
                fprintf(stderr, "%sinvalid reply from cudackptd: no processes\n", p->prefix);
                return CUDACKPT_EXIT_FAILURE;
        }
        if (p->json) {
                /* The daemon's objects as they are, as one JSON list. */
                text = cJSON_PrintUnformatted(processes);
                if (text)
                        puts(text);
                cJSON_free(text);
                status = text ? CUDACKPT_EXIT_OK : CUDACKPT_EXIT_FAILURE;
        } else
                status = ps_print_table(p, processes);
        cJSON_Delete(params);
        return status;
}
