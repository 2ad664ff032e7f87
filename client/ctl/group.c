/* group.c: cudackptctl's group forms.
 *
 * A selector (--pids, --cgroup, --tree; selector.c) names a set of
 * processes; the group forms of lock, checkpoint, restore, unlock, suspend
 * and resume send it to the daemon's Group methods.  While a
 * group runs, the daemon's progress replies ("more") are shown on stderr:
 * on a terminal one line per phase, rewritten in place; otherwise one
 * plain line per event.  The result is a table of the members (stdout on
 * success, stderr with the error on GroupFailed).
 *
 * Everything from the daemon is treated as hostile: only typed fields of
 * the right type are used, and every string is sanitised before it is
 * shown. */
#include "group.h"

#include "describe.h"
#include "exitcode.h"
#include "failure.h"
#include "lease.h"
#include "json.h"

#include <cJSON.h>

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* ---- Reading replies --------------------------------------------------------- */

static double group_ms(const cJSON *o, const char *key) {
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(o, key);

        if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble) || item->valuedouble < 0 ||
            item->valuedouble > 1e15)
                return -1;
        return item->valuedouble;
}

/* "Name: sentence" of a member's error (name, parameters object or
 * NULL), as ctl_describe_error() words it; the caller frees it. */
static char *group_describe_member_error(const char *name, const cJSON *params) {
        cudackpt_reply r;
        char *json = cJSON_IsObject(params) ? cJSON_PrintUnformatted(params) : NULL, *text;

        cudackpt_reply_init(&r);
        r.error = (char *) name;
        r.parameters_json = json ? json : (char *) "{}";
        text = ctl_describe_error(&r);
        cJSON_free(json);
        return text;
}

/* The short name of an error: what follows its interface. */
static const char *group_short_name(const char *name) {
        const char *dot = strrchr(name, '.');

        return dot && dot[1] ? dot + 1 : name;
}

/* ---- Progress ---------------------------------------------------------------- */

/* A member's error stays in every later report of it (the rollback
 * phases' too), so each is shown once, when it first appears: these are
 * the members already shown failed (error) or failed to roll back
 * (rollback_error). */
typedef struct group_seen {
        long long *pids;
        size_t n, size;
} group_seen;

typedef struct group_progress {
        FILE *f;
        bool tty;               /* rewrite one line per phase in place */
        bool line_open;         /* a line is on the terminal without its newline */
        char phase[32];         /* the phase of that line */
        size_t cols;            /* the terminal's width */
        group_seen failed, rollback_failed;
} group_progress;

/* Whether pid is in s; adds it when not (as long as memory lasts). */
static bool group_seen_check(group_seen *s, long long pid) {
        long long *p;

        for (size_t i = 0; i < s->n; i++)
                if (s->pids[i] == pid)
                        return true;
        if (s->n == s->size) {
                size_t size = s->size ? s->size * 2 : 16;

                p = realloc(s->pids, size * sizeof(*p));
                if (!p)
                        return false;
                s->pids = p;
                s->size = size;
        }
        s->pids[s->n++] = pid;
        return false;
}

static void group_seen_free(group_seen *s) {
        free(s->pids);
        *s = (group_seen) { 0 };
}

/* One event as text: "lock 3/8: 4242 locked (12.3 ms)",
 * "checkpoint 1/8: 4243 failed: NotSupported: ..." the first time the
 * member's error shows, "unlock 2/8: 4243 rollback failed: ..." the first
 * time its rollback error does.  NULL when out of memory. */
static char *group_progress_text(group_progress *p, const char *phase, const cJSON *member, long long done,
                                 long long total, bool *ret_failed) {
        const char *state = json_get_string(member, "state"), *error = json_get_string(member, "error");
        const char *rollback = json_get_string(member, "rollback_error");
        double ms = group_ms(member, "duration_ms");
        char *text = NULL, *desc = NULL;
        size_t size = 0;
        long long pid = 0;
        bool have_pid;
        FILE *f;

        f = open_memstream(&text, &size);
        if (!f)
                return NULL;
        fputs(phase, f);
        if (total > 0)
                fprintf(f, " %lld/%lld", done, total);
        fputs(":", f);
        have_pid = json_get_integer(member, "pid", 0, 2147483647.0, &pid);
        if (have_pid)
                fprintf(f, " %lld", pid);
        /* Without a pid every error is news. */
        if (error && !(have_pid && group_seen_check(&p->failed, pid))) {
                desc = group_describe_member_error(error, cJSON_GetObjectItemCaseSensitive(member,
                                                                                          "error_parameters"));
                fprintf(f, " failed: %s", desc ? desc : group_short_name(error));
                free(desc);
                *ret_failed = true;
        } else if (rollback && !(have_pid && group_seen_check(&p->rollback_failed, pid))) {
                fprintf(f, " rollback failed: %s", group_short_name(rollback));
                *ret_failed = true;
        } else
                fprintf(f, " %s", state ? state : "done");
        if (ms >= 0)
                fprintf(f, " (%.1f ms)", ms);
        if (fclose(f) != 0) {
                free(text);
                return NULL;
        }
        ctl_sanitize(text);
        return text;
}

/* Ends the line being rewritten, keeping it on the screen. */
static void group_progress_end_line(group_progress *p) {
        if (!p->line_open)
                return;
        fputc('\n', p->f);
        p->line_open = false;
        p->phase[0] = '\0';
}

/* cudackpt_progress_fn: one progress reply of the daemon. */
static int group_progress_cb(void *ctx, const char *parameters_json) {
        group_progress *p = ctx;
        cJSON *params = cJSON_Parse(parameters_json);
        const cJSON *progress = cJSON_GetObjectItemCaseSensitive(params, "progress");
        const cJSON *member = cJSON_GetObjectItemCaseSensitive(progress, "member");
        const char *phase = json_get_string(progress, "phase");
        long long done = 0, total = 0;
        bool failed = false;
        char *text;

        /* Not a progress report we understand: nothing to show, not fatal. */
        if (!phase || !cJSON_IsObject(member) || strlen(phase) >= sizeof(p->phase))
                goto out;
        if (!json_get_integer(progress, "done", 0, 1e9, &done) || !json_get_integer(progress, "total", 0, 1e9, &total))
                done = total = 0;
        text = group_progress_text(p, phase, member, done, total, &failed);
        if (!text)
                goto out;
        if (!p->tty) {
                fprintf(p->f, "%s\n", text);
        } else {
                /* A new phase keeps the last line of the one before. */
                if (p->line_open && strcmp(p->phase, phase) != 0)
                        group_progress_end_line(p);
                if (failed) {
                        /* A failure stays on the screen, above the line being rewritten. */
                        fprintf(p->f, "\r\033[K%s\n", text);
                        p->line_open = false;
                } else {
                        /* Cut to the terminal's width: a wrapped line cannot be rewritten. */
                        size_t len = strlen(text), max = p->cols > 1 ? p->cols - 1 : 79;

                        if (len > max) {
                                /* Not inside a UTF-8 sequence. */
                                while (max > 0 && ((unsigned char) text[max] & 0xc0) == 0x80)
                                        max--;
                                text[max] = '\0';
                        }
                        fprintf(p->f, "\r\033[K%s", text);
                        p->line_open = true;
                        snprintf(p->phase, sizeof(p->phase), "%s", phase);
                        if (total > 0 && done >= total)
                                group_progress_end_line(p);
                }
        }
        fflush(p->f);
        free(text);
out:
        cJSON_Delete(params);
        return 0;
}

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

/* Member m's pid, state (NULL when it has none) and duration in ms; false
 * when it names no pid. */
static bool group_member_row(const cJSON *m, long long *ret_pid, const char **ret_state, double *ret_ms) {
        *ret_state = json_get_string(m, "state");
        *ret_ms = group_ms(m, "duration_ms");
        return json_get_integer(m, "pid", 0, 2147483647.0, ret_pid);
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
                const char *state;
                double ms;
                long long pid;

                if (!group_member_row(m, &pid, &state, &ms))
                        continue;
                n++;
                snprintf(buf, sizeof(buf), "%lld", pid);
                if (strlen(buf) > w->pid)
                        w->pid = strlen(buf);
                if (!state)
                        state = "unknown";
                if (ctl_text_width(state) > w->state)
                        w->state = ctl_text_width(state);
                if (ms >= 0 && (size_t) snprintf(buf, sizeof(buf), "%.1f ms", ms) > w->time)
                        w->time = strlen(buf);
                if (!common)
                        common = state;
                else if (strcmp(common, state) != 0)
                        mixed = true;
        }
        *ret_state = mixed || !common || strcmp(common, "unknown") == 0 ? NULL : common;
        return n;
}

/* The ERROR cell of member m: its error and its rollback's, or "-". */
static void group_print_member_error(FILE *f, const cJSON *m) {
        const char *error = json_get_string(m, "error"), *rollback = json_get_string(m, "rollback_error");

        if (error) {
                char *desc = group_describe_member_error(error,
                                                         cJSON_GetObjectItemCaseSensitive(m, "error_parameters"));

                if (desc)
                        fputs(desc, f);
                else
                        ctl_fputs_safe(group_short_name(error), f);
                free(desc);
        }
        if (rollback) {
                fputs(error ? "; rollback failed: " : "rollback failed: ", f);
                ctl_fputs_safe(group_short_name(rollback), f);
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
                const char *state;
                double ms;
                long long pid;

                if (!group_member_row(m, &pid, &state, &ms))
                        continue;
                fprintf(f, "%*lld  ", (int) w.pid, pid);
                ctl_put_cell(f, state ? state : "unknown", w.state);
                fputs("  ", f);
                if (ms >= 0)
                        snprintf(buf, sizeof(buf), "%.1f ms", ms);
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
        ms = group_ms(params, "duration_ms");
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
        group_progress progress = { .f = stderr };
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
                struct winsize ws;

                progress.tty = g->progress_tty;
                progress.cols = 80;
                if (progress.tty && ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
                        progress.cols = ws.ws_col;
                r = cudackpt_call_more(client, g->method, params, group_progress_cb, &progress, &reply);
                group_progress_end_line(&progress);
                group_seen_free(&progress.failed);
                group_seen_free(&progress.rollback_failed);
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

