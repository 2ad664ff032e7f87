/* savecmd.c: one root cudackptctl command, spawned and followed on the
 * loop thread (savecmd.h). */
#include "saves/savecmd.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"

static char read_buf[4096]; /* loop thread only: each read is used up at once */

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
        (void)h;
        (void)suggested;
        *buf = uv_buf_init(read_buf, sizeof(read_buf));
}

static void handle_closed_cb(uv_handle_t *h)
{
        struct savecmd *cmd = h->data;

        if (--cmd->handles == 0 && cmd->close_cb)
                cmd->close_cb(cmd);
}

static void close_one(struct savecmd *cmd, uv_handle_t *h)
{
        if (!uv_is_closing(h))
                uv_close(h, handle_closed_cb);
        (void)cmd;
}

/* A whole stderr line read: kept as the last one, and logged while the
 * command's share of the log lasts. */
static void err_line(struct savecmd *cmd)
{
        if (cmd->cur_len == 0)
                return;
        memcpy(cmd->last, cmd->cur, cmd->cur_len);
        cmd->last[cmd->cur_len] = '\0';
        cmd->cur_len = 0;
        if (cmd->logged < SAVECMD_LOG_LINES)
                log_info("%s: %s", cmd->tag, cmd->last);
        else if (cmd->logged == SAVECMD_LOG_LINES)
                log_info("%s: (more lines, not logged)", cmd->tag);
        cmd->logged++;
}

/* stderr's bytes: lines bounded, control bytes as '?' (they reach the log). */
static void err_bytes(struct savecmd *cmd, const char *p, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)p[i];

                if (c == '\n')
                        err_line(cmd);
                else if (cmd->cur_len < sizeof(cmd->cur) - 1)
                        cmd->cur[cmd->cur_len++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
        }
}

/* The ready line's bytes: ready_cb once a whole line came; a line too
 * long is given to it empty (no ready line of ours is that long). */
static void ready_bytes(struct savecmd *cmd, const char *p, size_t n)
{
        for (size_t i = 0; i < n && !cmd->ready_seen; i++) {
                if (p[i] == '\n' || cmd->line_len == sizeof(cmd->line) - 1) {
                        bool whole = p[i] == '\n';
                        cmd->line[whole ? cmd->line_len : 0] = '\0';
                        cmd->ready_seen = true;
                        if (cmd->ready_cb)
                                cmd->ready_cb(cmd, cmd->line);
                        return;
                }
                cmd->line[cmd->line_len++] = p[i];
        }
}

/* stderr's and the ready pipe's bytes, each to its reader. */
static void pipe_bytes(struct savecmd *cmd, bool ready, const char *p, size_t n)
{
        if (ready)
                ready_bytes(cmd, p, n);
        else
                err_bytes(cmd, p, n);
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
        struct savecmd *cmd = s->data;

        if (n > 0)
                pipe_bytes(cmd, s == (uv_stream_t *)&cmd->ready, buf->base, (size_t)n);
        else if (n < 0)
                uv_read_stop(s);
}

/* What the exited command left unread in the pipe of h (non-blocking). */
static void drain(struct savecmd *cmd, uv_pipe_t *h, bool ready)
{
        uv_os_fd_t fd;
        ssize_t n;

        if (uv_fileno((uv_handle_t *)h, &fd) < 0)
                return;
        while ((n = read(fd, read_buf, sizeof(read_buf))) > 0)
                pipe_bytes(cmd, ready, read_buf, (size_t)n);
}

static void exit_cb(uv_process_t *p, int64_t exit_status, int term_signal)
{
        struct savecmd *cmd = p->data;

        cmd->status = term_signal ? 128 + term_signal : (int)exit_status;
        /* Everything it wrote is in the pipes by now: read it before
         * saying it ended, so that the ready line comes first and the
         * message is its last. */
        drain(cmd, &cmd->err, false);
        err_line(cmd);
        if (cmd->has_ready)
                drain(cmd, &cmd->ready, true);
        cmd->exited = true;
        close_one(cmd, (uv_handle_t *)&cmd->err);
        if (cmd->has_ready)
                close_one(cmd, (uv_handle_t *)&cmd->ready);
        close_one(cmd, (uv_handle_t *)p);
        if (cmd->exit_cb)
                cmd->exit_cb(cmd, cmd->status);
}

static void stdio_of(struct savecmd *cmd, const struct savecmd_spec *spec, uv_stdio_container_t *io, int *ret_n)
{
        io[0].flags = io[1].flags = UV_IGNORE;
        io[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
        io[2].data.stream = (uv_stream_t *)&cmd->err;
        io[3].flags = spec->pidfd >= 0 ? UV_INHERIT_FD : UV_IGNORE;
        io[3].data.fd = spec->pidfd;
        io[4].flags = spec->envfd >= 0 ? UV_INHERIT_FD : UV_IGNORE;
        io[4].data.fd = spec->envfd;
        io[5].flags = spec->ready ? UV_CREATE_PIPE | UV_WRITABLE_PIPE : UV_IGNORE;
        io[5].data.stream = (uv_stream_t *)&cmd->ready;
        io[6].flags = spec->barrierfd >= 0 ? UV_INHERIT_FD : UV_IGNORE;
        io[6].data.fd = spec->barrierfd;
        *ret_n = spec->barrierfd >= 0 ? 7 : spec->ready ? 6 : spec->envfd >= 0 || spec->pidfd >= 0 ? 5 : 3;
}

int savecmd_spawn(uv_loop_t *loop, struct savecmd *cmd, const struct savecmd_spec *spec)
{
        uv_stdio_container_t io[7];
        uv_process_options_t o = { 0 };
        int r, n;

        cmd->proc.data = cmd->err.data = cmd->ready.data = cmd;
        snprintf(cmd->tag, sizeof(cmd->tag), "%s", spec->tag ? spec->tag : spec->argv[0]);
        uv_pipe_init(loop, &cmd->err, 0);
        cmd->handles = 1;
        if (spec->ready) {
                uv_pipe_init(loop, &cmd->ready, 0);
                cmd->has_ready = true;
                cmd->handles++;
        }
        stdio_of(cmd, spec, io, &n);
        o.file = spec->argv[0];
        o.args = (char **)spec->argv;
        o.env = (char **)spec->env;
        o.stdio = io;
        o.stdio_count = n;
        o.exit_cb = exit_cb;
        o.flags = UV_PROCESS_DETACHED; /* a session of its own: no terminal's signal reaches it */
        r = uv_spawn(loop, &cmd->proc, &o);
        cmd->handles++; /* the process handle is initialised, spawned or not */
        if (r < 0) {
                cmd->exited = true;
                close_one(cmd, (uv_handle_t *)&cmd->err);
                if (cmd->has_ready)
                        close_one(cmd, (uv_handle_t *)&cmd->ready);
                close_one(cmd, (uv_handle_t *)&cmd->proc);
                return r;
        }
        (void)uv_read_start((uv_stream_t *)&cmd->err, alloc_cb, read_cb);
        if (cmd->has_ready)
                (void)uv_read_start((uv_stream_t *)&cmd->ready, alloc_cb, read_cb);
        return 0;
}

void savecmd_kill(struct savecmd *cmd, int sig)
{
        if (!cmd->exited)
                (void)uv_process_kill(&cmd->proc, sig);
}

const char *savecmd_message(const struct savecmd *cmd)
{
        return cmd->last;
}
