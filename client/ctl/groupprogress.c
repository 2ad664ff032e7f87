/* groupprogress.c: a group's progress shown while it runs
 * (groupprogress.h).  Everything from the daemon is hostile: only typed
 * fields are used, every string sanitised. */
#include "groupprogress.h"

#include "describe.h"
#include "groupreply.h"
#include "json.h"

#include <cJSON.h>

#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

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
static char *group_progress_text(ctl_group_progress *p, const char *phase, const cJSON *member, long long done,
                                 long long total, bool *ret_failed) {
        const char *state = json_get_string(member, "state"), *error = json_get_string(member, "error");
        const char *rollback = json_get_string(member, "rollback_error");
        double ms = ctl_group_ms(member, "duration_ms");
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
                desc = ctl_group_member_error(error, cJSON_GetObjectItemCaseSensitive(member,
                                                                                          "error_parameters"));
                fprintf(f, " failed: %s", desc ? desc : ctl_group_short_name(error));
                free(desc);
                *ret_failed = true;
        } else if (rollback && !(have_pid && group_seen_check(&p->rollback_failed, pid))) {
                fprintf(f, " rollback failed: %s", ctl_group_short_name(rollback));
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
static void group_progress_end_line(ctl_group_progress *p) {
        if (!p->line_open)
                return;
        fputc('\n', p->f);
        p->line_open = false;
        p->phase[0] = '\0';
}

/* cudackpt_progress_fn: one progress reply of the daemon. */
int ctl_group_progress_cb(void *ctx, const char *parameters_json) {
        ctl_group_progress *p = ctx;
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

void ctl_group_progress_init(ctl_group_progress *p, bool tty) {
        struct winsize ws;

        *p = (ctl_group_progress) { .f = stderr, .tty = tty, .cols = 80 };
        if (tty && ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
                p->cols = ws.ws_col;
}

void ctl_group_progress_done(ctl_group_progress *p) {
        group_progress_end_line(p);
        group_seen_free(&p->failed);
        group_seen_free(&p->rollback_failed);
}

