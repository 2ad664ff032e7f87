/* link.c: the commands that reach the nodes, their sockets and their lines
 * (link.h).  Each command's stdin and stdout are one end of a socketpair
 * (written with MSG_NOSIGNAL: a command gone is an error, not a SIGPIPE);
 * its stderr is ours, so that what srun says reaches the user.  Lines are
 * cut at NODES_LINK_MAX_LINE and parsed here: above, only objects that
 * name their node. */
#include "link.h"

#include "host.h"
#include "monotime.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct nodes_cmd {
        pid_t pid;
        int fd;              /* our end; -1 once closed */
        bool eof;            /* it said all it will */
        bool write_closed;   /* it reads no more */
        bool reaped;
        bool ended_said;     /* nodes_link_recv() said its end */
        int status;
        size_t len;
        char buf[NODES_LINK_MAX_LINE];
} nodes_cmd;

struct nodes_link {
        nodes_cmd *v;
        size_t n;
        int broken;          /* the -errno that ended the link, or 0 */
};

static const int link_default_signals[] = { SIGPIPE, SIGINT, SIGTERM };

static int link_spawn(nodes_cmd *c, char *const *argv, char *const *env) {
        int sv[2], r;

        if (!argv || !argv[0])
                return -EINVAL;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        /* In a process group of its own: a ^C is the coordinator's to act on
         * (it rolls the nodes back), not srun's. */
        r = ctl_host_spawn(&(ctl_spawn) { .path = argv[0], .argv = argv, .env = env, .search = true,
                                          .own_group = true,
                                          .keep_fd = -1, .stdio_fd = sv[1],
                                          .default_signals = link_default_signals,
                                          .n_default_signals = sizeof(link_default_signals) / sizeof(int) },
                           &c->pid, NULL);
        close(sv[1]);
        if (r < 0) {
                close(sv[0]);
                return r;
        }
        c->fd = sv[0];
        return 0;
}

int nodes_link_start(char *const *const *commands, size_t n, char *const *env, nodes_link **ret_link) {
        nodes_link *l;
        int r = 0;

        if (n == 0 || n > NODES_LINK_MAX_COMMANDS)
                return -EINVAL;
        l = calloc(1, sizeof(*l));
        if (!l || !(l->v = calloc(n, sizeof(*l->v)))) {
                free(l);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n && r == 0; i++) {
                l->v[i].fd = -1;
                r = link_spawn(&l->v[i], commands[i], env);
                if (r == 0)
                        l->n++;
        }
        if (r < 0) {
                nodes_link_close(l, 0);
                return r;
        }
        *ret_link = l;
        return 0;
}

/* All of buf to c, by the deadline. */
static int link_write(nodes_cmd *c, const char *buf, size_t len, long long deadline) {
        while (len > 0) {
                ssize_t k = send(c->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (k > 0) {
                        buf += k;
                        len -= (size_t)k;
                        continue;
                }
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0 && errno != EAGAIN)
                        return -errno;
                long long left = deadline - monotime_ms();
                if (left <= 0)
                        return -ETIMEDOUT;
                struct pollfd p = { .fd = c->fd, .events = POLLOUT };
                if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
                        return -errno;
        }
        return 0;
}

int nodes_link_send(nodes_link *l, const char *line, int timeout_ms) {
        long long deadline = monotime_ms() + timeout_ms;
        size_t len = strlen(line), sent = 0;
        char *buf;

        if (l->broken)
                return l->broken;
        if (memchr(line, '\n', len) || len + 1 > NODES_LINK_MAX_LINE)
                return -EINVAL;
        if (!(buf = malloc(len + 1)))
                return -ENOMEM;
        memcpy(buf, line, len);
        buf[len] = '\n';
        for (size_t i = 0; i < l->n; i++) {
                nodes_cmd *c = &l->v[i];
                if (c->write_closed || c->fd < 0)
                        continue;
                int r = link_write(c, buf, len + 1, deadline);
                if (r == -EPIPE || r == -ECONNRESET) {
                        c->write_closed = true;
                        continue;
                }
                if (r < 0) {
                        free(buf);
                        return r;
                }
                sent++;
        }
        free(buf);
        return sent ? 0 : -EPIPE;
}

/* A complete line in c's buffer, parsed into *ret_msg: 1; none yet: 0. */
static int link_take_line(nodes_link *l, size_t i, nodes_msg *ret_msg) {
        nodes_cmd *c = &l->v[i];
        char *nl = memchr(c->buf, '\n', c->len);
        const cJSON *node;
        cJSON *json;

        if (!nl)
                return c->len == sizeof(c->buf) ? (l->broken = -EMSGSIZE) : 0;
        json = cJSON_ParseWithLength(c->buf, (size_t)(nl - c->buf));
        c->len -= (size_t)(nl + 1 - c->buf);
        memmove(c->buf, nl + 1, c->len);
        node = cJSON_GetObjectItemCaseSensitive(json, "node");
        if (!cJSON_IsObject(json) || !cJSON_IsString(node) || !node->valuestring[0]) {
                cJSON_Delete(json);
                return l->broken = -EPROTO;
        }
        *ret_msg = (nodes_msg) { .json = json, .node = node->valuestring, .command = i };
        return 1;
}

/* What c's socket holds, into its buffer; its end noted. */
static int link_read(nodes_cmd *c) {
        ssize_t k = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, MSG_DONTWAIT);

        if (k > 0)
                c->len += (size_t)k;
        else if (k == 0 || (errno != EAGAIN && errno != EINTR))
                c->eof = true;
        return 0;
}

/* The end of an ended command, once it has been reaped: 1 with *ret_msg. */
static int link_take_end(nodes_link *l, size_t i, nodes_msg *ret_msg) {
        nodes_cmd *c = &l->v[i];

        if (!c->eof || c->ended_said)
                return 0;
        if (c->len > 0)
                return l->broken = -EPROTO; /* a last line without its newline */
        if (!c->reaped && waitpid(c->pid, &c->status, WNOHANG) == c->pid)
                c->reaped = true;
        if (!c->reaped)
                return 0;
        c->ended_said = true;
        *ret_msg = (nodes_msg) { .ended = true, .command = i, .status = c->status };
        return 1;
}

/* A line or an end ready now: 1 with *ret_msg, 0 none, -errno. */
static int link_ready(nodes_link *l, nodes_msg *ret_msg, bool *ret_all_ended, bool *ret_reaping) {
        *ret_all_ended = true;
        *ret_reaping = false;
        for (size_t i = 0; i < l->n; i++) {
                int r = link_take_line(l, i, ret_msg);
                if (r == 0)
                        r = link_take_end(l, i, ret_msg);
                if (r != 0)
                        return r;
                *ret_all_ended &= l->v[i].ended_said;
                *ret_reaping |= l->v[i].eof && !l->v[i].ended_said;
        }
        return 0;
}

int nodes_link_recv(nodes_link *l, int timeout_ms, nodes_msg *ret_msg) {
        long long deadline = monotime_ms() + timeout_ms;
        struct pollfd *p = calloc(l->n, sizeof(*p));
        int r = 0;

        if (!p)
                return -ENOMEM;
        while (!l->broken) {
                bool all_ended, reaping;
                if ((r = link_ready(l, ret_msg, &all_ended, &reaping)) != 0 || all_ended) {
                        r = r > 0 ? 0 : (r < 0 ? r : -ENODATA);
                        break;
                }
                long long left = deadline - monotime_ms();
                if (left <= 0) {
                        r = -ETIMEDOUT;
                        break;
                }
                for (size_t i = 0; i < l->n; i++)
                        p[i] = (struct pollfd) { .fd = l->v[i].eof ? -1 : l->v[i].fd, .events = POLLIN };
                /* A command whose output ended is reaped by polling its pid. */
                if (poll(p, l->n, reaping && left > 10 ? 10 : (int)left) < 0 && errno != EINTR) {
                        r = -errno;
                        break;
                }
                for (size_t i = 0; i < l->n; i++)
                        if (p[i].revents)
                                link_read(&l->v[i]);
        }
        free(p);
        return l->broken ? l->broken : r;
}

/* Waits for every command until deadline (reading and dropping what they
 * still say, so that none blocks writing); true when all were reaped. */
static bool link_wait_all(nodes_link *l, long long deadline) {
        for (;;) {
                bool all = true;
                for (size_t i = 0; i < l->n; i++) {
                        nodes_cmd *c = &l->v[i];
                        if (!c->eof) {
                                c->len = 0;
                                link_read(c);
                        }
                        if (!c->reaped && waitpid(c->pid, &c->status, WNOHANG) == c->pid)
                                c->reaped = true;
                        all &= c->reaped;
                }
                if (all || monotime_ms() >= deadline)
                        return all;
                usleep(5000);
        }
}

static void link_signal(nodes_link *l, int sig) {
        for (size_t i = 0; i < l->n; i++)
                if (!l->v[i].reaped)
                        kill(l->v[i].pid, sig);
}

int nodes_link_close(nodes_link *l, int timeout_ms) {
        int r = 0;

        if (!l)
                return 0;
        for (size_t i = 0; i < l->n; i++)
                if (l->v[i].fd >= 0)
                        shutdown(l->v[i].fd, SHUT_WR);
        if (!link_wait_all(l, monotime_ms() + timeout_ms)) {
                r = -ETIMEDOUT;
                link_signal(l, SIGTERM);
                if (!link_wait_all(l, monotime_ms() + timeout_ms)) {
                        link_signal(l, SIGKILL);
                        link_wait_all(l, monotime_ms() + 60000);
                }
        }
        for (size_t i = 0; i < l->n; i++) {
                if (r == 0 && l->v[i].status != 0)
                        r = l->v[i].status;
                if (l->v[i].fd >= 0)
                        close(l->v[i].fd);
        }
        free(l->v);
        free(l);
        return r;
}
