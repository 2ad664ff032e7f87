/* savecmd.h: one root cudackptctl command the daemon runs for a caller's
 * job or save (cudackptctl run, dump, restore), spawned on the loop
 * thread with uv_spawn and never waited for: its exit, its ready line and
 * its standard error come back as callbacks.
 *
 * Descriptors: 0 and 1 /dev/null; 2 a pipe whose last line is kept
 * (bounded) for CommandFailed, and whose lines go to the daemon's log at
 * level info under the spec's tag (non-printable bytes as '?', at most
 * SAVECMD_LOG_LINES a command: criu's log tail of a failed dump says why); 3 the caller's pidfd and 4 a memfd of the
 * job's environment, when given; 5 a pipe for the ready line, when asked
 * for: one JSON line, read up to SAVECMD_LINE_MAX bytes; 6 the command's
 * end of a barrier (savebarrier.h), when given.  The command runs
 * in a session of its own, so that only the daemon signals it.
 *
 * ready_cb comes at most once, before exit_cb; exit_cb comes once, after
 * what the command wrote before its exit has been read; close_cb once
 * every handle is closed (the owner may free it then).  Loop thread only. */
#ifndef CUDACKPT_SAVECMD_H
#define CUDACKPT_SAVECMD_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#define SAVECMD_LINE_MAX 512
#define SAVECMD_LOG_LINES 64

struct savecmd;

struct savecmd_spec {
        const char *const *argv;        /* argv[0]: the program's path */
        char *const *env;               /* its environment */
        int pidfd;                      /* its fd 3, or -1 */
        int envfd;                      /* its fd 4, or -1 */
        bool ready;                     /* a pipe as its fd 5 for the ready line */
        int barrierfd;                  /* its fd 6, or -1 */
        const char *tag;                /* its log lines' prefix ("job NAME of uid U"), or NULL */
};

struct savecmd {
        uv_process_t proc;
        uv_pipe_t err;                  /* its stderr */
        uv_pipe_t ready;                /* its fd 5 */
        unsigned handles;               /* open handles: close_cb at 0 */
        bool has_ready;                 /* ready is open */
        bool ready_seen;                /* ready_cb ran (or the line was given up) */
        bool exited;                    /* exit_cb ran */
        int status;                     /* its exit status, 128+N for signal N */
        char line[SAVECMD_LINE_MAX];    /* the ready line as read so far */
        size_t line_len;
        char cur[SAVECMD_LINE_MAX];     /* stderr's line being read */
        size_t cur_len;
        char last[SAVECMD_LINE_MAX];    /* stderr's last whole line */
        char tag[192];                  /* the spec's tag */
        unsigned logged;                /* stderr's lines logged */
        void (*ready_cb)(struct savecmd *cmd, const char *line);
        void (*exit_cb)(struct savecmd *cmd, int status);
        void (*close_cb)(struct savecmd *cmd);
        void *data;                     /* the owner's */
};

/* Spawns the command (cmd zeroed, its callbacks and data set by the
 * caller): 0, or -errno (then neither ready_cb nor exit_cb comes, but
 * close_cb does: cmd is freed there in either case). */
int savecmd_spawn(uv_loop_t *loop, struct savecmd *cmd, const struct savecmd_spec *spec);
/* Sends sig to the command unless it has exited. */
void savecmd_kill(struct savecmd *cmd, int sig);
/* The last line the command wrote to stderr ("" when none). */
const char *savecmd_message(const struct savecmd *cmd);

#endif
