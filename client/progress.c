/* progress.c: the progress line of suspend and checkpoint of one PID (a
 * restore has none to show: the driver releases the memory at its end).
 *
 * While the operation's call waits on its own connection, a thread holds a
 * second one with Watch on that pid and writes each progress event to
 * stderr: rewriting one line on a terminal, a line each otherwise.  The
 * thread is stopped through a pipe once the call has returned.  Failing to
 * watch (an older daemon, a refused connection) only means no progress. */
#include "ctl.h"

#include <cudackpt/protocol.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define CTL_PROGRESS_MAX_MESSAGE 65536

struct ctl_progress {
        pthread_t thread;
        char *buf;              /* CTL_PROGRESS_MAX_MESSAGE bytes */
        size_t len;             /* bytes in buf not yet handled */
        int fd;                 /* the watching connection */
        int stop[2];            /* a pipe: readable once the call is over */
        int pid;
        bool tty;
        bool shown;             /* a line is on the terminal */
};

static double gib(double bytes)
{
        return bytes / (1024.0 * 1024.0 * 1024.0);
}

static void show(struct ctl_progress *p, const cJSON *e)
{
        const cJSON *step = cJSON_GetObjectItemCaseSensitive(e, "step");
        const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(e, "bytes");
        const cJSON *total = cJSON_GetObjectItemCaseSensitive(e, "total_bytes");
        char line[160];
        int n;

        if (!cJSON_IsString(step) || !cJSON_IsNumber(bytes) || strcmp(step->valuestring, "checkpoint") != 0)
                return;
        n = snprintf(line, sizeof(line), "%s of %d: %.2f GiB", step->valuestring, p->pid, gib(bytes->valuedouble));
        if (cJSON_IsNumber(total) && total->valuedouble > 0 && n > 0 && (size_t)n < sizeof(line))
                snprintf(line + n, sizeof(line) - (size_t)n, " of %.2f GiB (%.0f%%)", gib(total->valuedouble),
                         100.0 * (bytes->valuedouble < total->valuedouble ? bytes->valuedouble : total->valuedouble) /
                                 total->valuedouble);
        if (p->tty) {
                fprintf(stderr, "\r%s\033[K", line);
                p->shown = true;
        } else {
                fprintf(stderr, "%s\n", line);
        }
        fflush(stderr);
}

static void *run(void *arg)
{
        struct ctl_progress *p = arg;
        char *buf = p->buf;
        size_t len = p->len;

        for (;;) {
                struct pollfd fds[2] = { { .fd = p->fd, .events = POLLIN }, { .fd = p->stop[0], .events = POLLIN } };
                ssize_t k;
                char *nul;

                if (poll(fds, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (fds[1].revents)
                        break;
                k = read(p->fd, buf + len, CTL_PROGRESS_MAX_MESSAGE - len);
                if (k <= 0)
                        break;
                len += (size_t)k;
                while ((nul = memchr(buf, '\0', len))) {
                        cJSON *m = cJSON_Parse(buf);
                        const cJSON *params = cJSON_GetObjectItemCaseSensitive(m, "parameters");
                        const cJSON *e = cJSON_GetObjectItemCaseSensitive(params, "event");
                        const cJSON *type = cJSON_GetObjectItemCaseSensitive(e, "type");
                        if (cJSON_IsString(type) && strcmp(type->valuestring, "progress") == 0)
                                show(p, e);
                        cJSON_Delete(m);
                        len -= (size_t)(nul + 1 - buf);
                        memmove(buf, nul + 1, len);
                }
                if (len == CTL_PROGRESS_MAX_MESSAGE)
                        break; /* not a message this client wants */
        }
        return NULL;
}

/* Waits (2 s at most) for the Watch's first reply, so that the operation
 * asked for next is watched from its start: 0, or -errno. */
static int await_watching(struct ctl_progress *p)
{
        char *nul;

        while (!(nul = memchr(p->buf, '\0', p->len))) {
                struct pollfd fd = { .fd = p->fd, .events = POLLIN };
                ssize_t k;
                if (p->len == CTL_PROGRESS_MAX_MESSAGE || poll(&fd, 1, 2000) != 1)
                        return -ETIMEDOUT;
                k = read(p->fd, p->buf + p->len, CTL_PROGRESS_MAX_MESSAGE - p->len);
                if (k <= 0)
                        return k == 0 ? -ECONNRESET : -errno;
                p->len += (size_t)k;
        }
        /* An error (an older daemon) ends it here. */
        if (!strstr(p->buf, "\"continues\":true"))
                return -EPROTO;
        p->len -= (size_t)(nul + 1 - p->buf);
        memmove(p->buf, nul + 1, p->len);
        return 0;
}

int ctl_progress_start(const char *socket_path, int pid, bool tty, ctl_progress **ret)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct ctl_progress *p;
        char req[160];
        int n;

        *ret = NULL;
        if (strlen(socket_path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, socket_path, strlen(socket_path) + 1);
        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->pid = pid;
        p->tty = tty;
        p->stop[0] = p->stop[1] = -1;
        p->buf = malloc(CTL_PROGRESS_MAX_MESSAGE);
        p->fd = p->buf ? socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0) : -1;
        n = snprintf(req, sizeof(req),
                     "{\"method\":\"" CUDACKPT_METHOD_WATCH "\",\"parameters\":{\"selector\":{\"pids\":[{\"pid\":%d}]}},"
                     "\"more\":true}",
                     pid);
        if (p->fd < 0 || connect(p->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
            send(p->fd, req, (size_t)n + 1, MSG_NOSIGNAL) != n + 1 || (errno = -await_watching(p)) != 0 ||
            pipe2(p->stop, O_CLOEXEC) < 0 || pthread_create(&p->thread, NULL, run, p) != 0) {
                int r = -errno;
                if (p->fd >= 0)
                        close(p->fd);
                if (p->stop[0] >= 0) {
                        close(p->stop[0]);
                        close(p->stop[1]);
                }
                free(p->buf);
                free(p);
                return r ? r : -EIO;
        }
        *ret = p;
        return 0;
}

void ctl_progress_stop(ctl_progress *p)
{
        if (!p)
                return;
        (void)!write(p->stop[1], "x", 1);
        pthread_join(p->thread, NULL);
        if (p->shown) {
                fputs("\r\033[K", stderr);
                fflush(stderr);
        }
        close(p->fd);
        close(p->stop[0]);
        close(p->stop[1]);
        free(p->buf);
        free(p);
}
