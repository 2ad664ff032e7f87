/* groupprogress.h: a group's progress on stderr while it runs, from the
 * daemon's "more" replies: on a terminal one line per phase, rewritten in
 * place; otherwise one plain line per event. */
#ifndef CUDACKPT_CTL_GROUPPROGRESS_H
#define CUDACKPT_CTL_GROUPPROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* A member's error stays in every later report of it (the rollback
 * phases' too), so each is shown once, when it first appears: these are
 * the members already shown failed (error) or failed to roll back
 * (rollback_error). */
typedef struct group_seen {
        long long *pids;
        size_t n, size;
} group_seen;

typedef struct ctl_group_progress {
        FILE *f;
        bool tty;               /* rewrite one line per phase in place */
        bool line_open;         /* a line is on the terminal without its newline */
        char phase[32];         /* the phase of that line */
        size_t cols;            /* the terminal's width */
        group_seen failed, rollback_failed;
} ctl_group_progress;

/* Ready to show progress on stderr; tty: rewriting a line per phase. */
void ctl_group_progress_init(ctl_group_progress *p, bool tty);
/* cudackpt_progress_fn (ctx a ctl_group_progress): one progress reply. */
int ctl_group_progress_cb(void *ctx, const char *parameters_json);
/* Ends the line being rewritten and frees what p holds. */
void ctl_group_progress_done(ctl_group_progress *p);

#endif
