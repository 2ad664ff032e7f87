/* group.c: cudackptctl's group forms.
 *
 * A selector (--pids, --cgroup, --tree; selector.c) names a set of
 * processes; the group forms of lock, checkpoint, restore, unlock, suspend
 * and resume send it to the daemon's Group methods.  While a
 * group runs, its progress is shown on stderr (groupprogress.c).  The
 * result is a table of the members (stdout on
 * success, stderr with the error on GroupFailed).
 *
 * Everything from the daemon is treated as hostile: only typed fields of
 * the right type are used, and every string is sanitised before it is
 * shown. */
#include "group.h"

#include "describe.h"
#include "exitcode.h"
#include "failure.h"
#include "groupprogress.h"
#include "groupreply.h"
#include "lease.h"
#include "json.h"

#include <cJSON.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Results ----------------------------------------------------------------- */

/* The skipped processes, one line per reason in order of appearance:
 * "skipped, not CUDA processes: 12, 13".  Nothing when there are none. */
static void group_print_skipped(FILE *f, const cJSON *params) {
        const cJSON *skipped = cJSON_GetObjectItemCaseSensitive(params, "skipped"), *s, *t;

        if (!cJSON_IsArray(skipped))
                return;
        cJSON_ArrayForEach(s, skipped) {
                const char *reason = json_get_string(s, "reason");
                bool seen = false, first = true;

                for (t = skipped->child; t && t != s; t = t->next) {
                        const char *other = json_get_string(t, "reason");
                        long long pid;

                        if (json_get_integer(t, "pid", 0, 2147483647.0, &pid) &&
                            ((!reason && !other) || (reason && other && strcmp(reason, other) == 0))) {
                                seen = true;
                                break;
                        }
                }
                if (seen)
                        continue;
                /* The first entry of this reason: the line of all of them. */
                for (t = s; t; t = t->next) {
                        const char *other = json_get_string(t, "reason");
                        long long pid;

                        if (!json_get_integer(t, "pid", 0, 2147483647.0, &pid) ||
                            !((!reason && !other) || (reason && other && strcmp(reason, other) == 0)))
                                continue;
                        if (first) {
                                if (reason && strcmp(reason, CUDACKPT_SKIP_NOT_CUDA) == 0)
                                        fputs("skipped, not CUDA processes: ", f);
                                else {
                                        fputs("skipped (", f);
                                        ctl_fputs_safe(reason ? reason : "no reason given", f);
                                        fputs("): ", f);
                                }
                        }
                        fprintf(f, "%s%lld", first ? "" : ", ", pid);
                        first = false;
                }
                if (!first)
                        fputc('\n', f);
        }
}

/* The widths of the members table's columns. */
typedef struct group_widths {
        size_t pid, state, time;
} group_widths;

/* A row of the members table. */
typedef struct group_row {
        long long pid;
        const char *state; /* NULL when it has none */
        double ms;         /* negative when it has none */
} group_row;

/* Member m's row; false when it names no pid. */
static bool group_member_row(const cJSON *m, group_row *r) {
        r->state = json_get_string(m, "state");
        r->ms = ctl_group_ms(m, "duration_ms");
        return json_get_integer(m, "pid", 0, 2147483647.0, &r->pid);
}

/* The columns' widths for members; returns the number of members, and
 * *ret_state the state they all share (NULL when they differ or none has
 * one). */
static size_t group_measure_members(const cJSON *members, group_widths *w, const char **ret_state) {
        const char *common = NULL;
        bool mixed = false;
        const cJSON *m;
        char buf[64];
        size_t n = 0;

        *w = (group_widths) { .pid = 3, .state = 5, .time = 4 };
        cJSON_ArrayForEach(m, members) {
                group_row r;

                if (!group_member_row(m, &r))
                        continue;
                n++;
                snprintf(buf, sizeof(buf), "%lld", r.pid);
                if (strlen(buf) > w->pid)
                        w->pid = strlen(buf);
                if (!r.state)
                        r.state = "unknown";
                if (ctl_text_width(r.state) > w->state)
                        w->state = ctl_text_width(r.state);
                if (r.ms >= 0 && (size_t) snprintf(buf, sizeof(buf), "%.1f ms", r.ms) > w->time)
                        w->time = strlen(buf);
                if (!common)
                        common = r.state;
                else if (strcmp(common, r.state) != 0)
                        mixed = true;
        }
        *ret_state = mixed || !common || strcmp(common, "unknown") == 0 ? NULL : common;
        return n;
}

/* The ERROR cell of member m: its error and its rollback's, or "-". */
static void group_print_member_error(FILE *f, const cJSON *m) {
        const char *error = json_get_string(m, "error"), *rollback = json_get_string(m, "rollback_error");

        if (error) {
                char *desc = ctl_group_member_error(error,
                                                         cJSON_GetObjectItemCaseSensitive(m, "error_parameters"));

                if (desc)
                        fputs(desc, f);
                else
                        ctl_fputs_safe(ctl_group_short_name(error), f);
                free(desc);
        }
        if (rollback) {
                fputs(error ? "; rollback failed: " : "rollback failed: ", f);
                ctl_fputs_safe(ctl_group_short_name(rollback), f);
        }
        if (!error && !rollback)
                fputs("-", f);
}

/* The members table: PID STATE TIME, and with errors ERROR.  Returns the
 * number of members; *ret_state is the state they all share (NULL when
 * they differ or none has one). */
static size_t group_print_members(FILE *f, const cJSON *members, bool with_errors, const char **ret_state) {
        size_t n = 0;
        group_widths w;
        const cJSON *m;
        char buf[64];

        n = group_measure_members(members, &w, ret_state);
        if (n == 0)
                return 0;

        fprintf(f, "%*s  ", (int) w.pid, "PID");
        ctl_put_cell(f, "STATE", w.state);
        fputs("  ", f);
        if (with_errors) {
                ctl_put_cell(f, "TIME", w.time);
                fputs("  ERROR\n", f);
        } else
                fputs("TIME\n", f);
        cJSON_ArrayForEach(m, members) {
                group_row r;

                if (!group_member_row(m, &r))
                        continue;
                fprintf(f, "%*lld  ", (int) w.pid, r.pid);
                ctl_put_cell(f, r.state ? r.state : "unknown", w.state);
                fputs("  ", f);
                if (r.ms >= 0)
                        snprintf(buf, sizeof(buf), "%.1f ms", r.ms);
                else
                        snprintf(buf, sizeof(buf), "-");
                if (!with_errors) {
                        fprintf(f, "%s\n", buf);
                        continue;
                }
                ctl_put_cell(f, buf, w.time);
                fputs("  ", f);
                group_print_member_error(f, m);
                fputc('\n', f);
        }
        return n;
}

/* A successful group reply, on stdout. */
static int group_print_success(const ctl_group *g, const cudackpt_reply *reply) {
        cJSON *params = cJSON_Parse(reply->parameters_json);
        const cJSON *members = cJSON_GetObjectItemCaseSensitive(params, "members");
        const char *state = NULL;
        double ms;
        size_t n;

        if (!cJSON_IsObject(params) || (members && !cJSON_IsArray(members))) {
                cJSON_Delete(params);
                fprintf(stderr, "%sinvalid reply from cudackptd: no members\n", g->prefix);
                return CUDACKPT_EXIT_FAILURE;
        }
        n = group_print_members(stdout, members, false, &state);
        group_print_skipped(stdout, params);
        ms = ctl_group_ms(params, "duration_ms");
        if (n == 0)
                fputs("no CUDA process matched", stdout);
        else {
                printf("%zu process%s", n, n == 1 ? "" : "es");
                if (state) {
                        putchar(' ');
                        ctl_fputs_safe(state, stdout);
                }
        }
        if (ms >= 0)
                printf(" (%.1f ms)", ms);
        {
                const cJSON *lease = cJSON_GetObjectItemCaseSensitive(params, "lease");
                const cJSON *id = cJSON_IsObject(lease) ? cJSON_GetObjectItemCaseSensitive(lease, "id") : NULL;
                if (cJSON_IsNumber(id))
                        printf(", lease %.0f", id->valuedouble);
        }
        putchar('\n');
        cJSON_Delete(params);
        return CUDACKPT_EXIT_OK;
}

/* An error reply: one line on stderr; for GroupFailed, without --json,
 * every member's state and error below it. */
static void group_print_error(const ctl_group *g, const cudackpt_reply *reply) {
        char *text = ctl_describe_error(reply);

        fprintf(stderr, "%s%s\n", g->prefix, text ? text : "error");
        free(text);
        if (g->json) {
                text = ctl_error_json(reply);
                if (text)
                        puts(text);
                free(text);
                return;
        }
        if (strcmp(reply->error, CUDACKPT_ERROR_GROUP_FAILED) == 0) {
                cJSON *params = cJSON_Parse(reply->parameters_json);
                const cJSON *members = cJSON_GetObjectItemCaseSensitive(params, "members");
                const char *state;

                if (cJSON_IsArray(members))
                        (void) group_print_members(stderr, members, true, &state);
                group_print_skipped(stderr, params);
                cJSON_Delete(params);
        }
}

/* The parameters of a Group call: selector, timeout_ms, gpu_mapping, force. */
static char *group_params(const ctl_group *g) {
        cJSON *params = cJSON_CreateObject(), *sel = cJSON_Duplicate(g->selector->json, 1), *map;
        char *copy = NULL;

        if (!params || !sel || !cJSON_AddItemToObject(params, "selector", sel)) {
                cJSON_Delete(sel);
                goto out;
        }
        if (g->lock_timeout >= 0 && !cJSON_AddNumberToObject(params, "timeout_ms", (double) g->lock_timeout))
                goto out;
        if (g->lease_ms > 0 && !cJSON_AddNumberToObject(params, "lease_ms", (double) g->lease_ms))
                goto out;
        if (g->lease_on_close && !cJSON_AddTrueToObject(params, "lease_on_close"))
                goto out;
        if (g->force && !cJSON_AddTrueToObject(params, "force"))
                goto out;
        if (g->map && g->map[0]) {
                map = cJSON_AddObjectToObject(params, "gpu_mapping");
                if (!map)
                        goto out;
                /* ctl_map_add() refused an old UUID named twice. */
                for (size_t i = 0; g->map[i] && g->map[i + 1]; i += 2)
                        if (!cJSON_AddStringToObject(map, g->map[i], g->map[i + 1]))
                                goto out;
        }
        copy = json_print_dup(params);
out:
        cJSON_Delete(params);
        return copy;
}

/* {"pids": [{"pid": P, "start_time": S}, ...]} of a reply's members;
 * NULL when it has none. */
static cJSON *group_members_selector(const cudackpt_reply *reply) {
        cJSON *params = cJSON_Parse(reply->parameters_json), *sel = NULL, *pids, *ref;
        const cJSON *members = cJSON_GetObjectItemCaseSensitive(params, "members"), *m;
        long long pid, start;

        if (!cJSON_IsArray(members) || cJSON_GetArraySize(members) == 0)
                goto out;
        sel = cJSON_CreateObject();
        pids = sel ? cJSON_AddArrayToObject(sel, "pids") : NULL;
        if (!pids)
                goto fail;
        cJSON_ArrayForEach(m, members) {
                if (!json_get_integer(m, "pid", 0, 2147483647.0, &pid) ||
                    !json_get_integer(m, "start_time", 0, JSON_MAX_EXACT, &start))
                        goto fail;
                ref = cJSON_CreateObject();
                if (!ref || !cJSON_AddItemToArray(pids, ref) || !cJSON_AddNumberToObject(ref, "pid", (double) pid) ||
                    !cJSON_AddNumberToObject(ref, "start_time", (double) start))
                        goto fail;
        }
        goto out;
fail:
        cJSON_Delete(sel);
        sel = NULL;
out:
        cJSON_Delete(params);
        return sel;
}

int ctl_group_run(cudackpt_client *client, const ctl_group *g) {
        ctl_group_progress progress;
        cudackpt_reply reply;
        char *params;
        int r, status;

        params = group_params(g);
        if (!params) {
                fprintf(stderr, "%sout of memory\n", g->prefix);
                return CUDACKPT_EXIT_FAILURE;
        }
        cudackpt_reply_init(&reply);
        if (g->progress) {
                ctl_group_progress_init(&progress, g->progress_tty);
                r = cudackpt_call_more(client, g->method, params, ctl_group_progress_cb, &progress, &reply);
                ctl_group_progress_done(&progress);
        } else
                r = cudackpt_call(client, g->method, params, &reply);
        free(params);

        if (r < 0)
                return ctl_call_failed(g->prefix, r, NULL, false);
        if (reply.error) {
                group_print_error(g, &reply);
                status = ctl_reply_exit_code(&reply);
        } else if (g->quiet) {
                status = CUDACKPT_EXIT_OK;
        } else if (g->json) {
                puts(reply.parameters_json);
                status = CUDACKPT_EXIT_OK;
        } else
                status = group_print_success(g, &reply);
        if (status == CUDACKPT_EXIT_OK && g->ret_members)
                *g->ret_members = group_members_selector(&reply);
        if (status == CUDACKPT_EXIT_OK && g->ret_lease)
                ctl_held_of(reply.parameters_json, g->ret_lease);
        cudackpt_reply_clear(&reply);
        return status;
}

