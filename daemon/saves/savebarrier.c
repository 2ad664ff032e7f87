/* savebarrier.c: the barrier a held part waits at (savebarrier.h). */
#include "saves/savebarrier.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "barrier-line.h"
#include "cudackpt/protocol.h"
#include "base/log.h"

#define STRINGIFY(x) #x
#define FD_OPTION(fd) "--barrier-fd=" STRINGIFY(fd)

struct savebarrier {
        struct savebarriers *t;
        struct savebarrier *prev, *next; /* t->waiting while it waits at the barrier */
        uid_t uid;
        pid_t caller_pid;
        char name[SAVESTORE_NAME_MAX + 1];
        const char *verb;
        struct conn *c;                 /* referenced until closed; NULL then */
        struct conn_hook closing;
        int fd;                         /* the daemon's end; -1 once closed */
        uv_poll_t poll;                 /* readable on fd: the ready line */
        uv_timer_t timer;               /* barrier_timeout_ms after the ready line */
        char line[64];                  /* the ready line as read so far */
        size_t len;
        bool waiting;                   /* in t->waiting */
        bool counting;                  /* its lock rules counted on a worker (work) */
        bool went;                      /* its 'g' was sent */
        struct savelocks *locks;        /* a dump's rules: counted at its barrier, or NULL */
        int uidfd;                      /* its images' directory, -1: none */
        char images[SAVESTORE_TMP_MAX];
        uv_work_t work;
        int count_r;                    /* savelocks_hold()'s: 0, -EDQUOT (refused), -errno */
        uint64_t limit;                 /* refused: the bound */
        struct savelocks_part *part;    /* the rules counted, until taken or let go */
        void (*ready_cb)(void *data, cJSON *reply); /* NULL once released */
        void *data;
        unsigned handles;               /* open handles: freed at 0 */
};

static void audit(const struct savebarrier *b, uid_t uid, pid_t pid, const char *what, const char *result,
                  const char *how)
{
        char detail[160];

        snprintf(detail, sizeof(detail), "job %s (%s): %s", b->name, b->verb, how);
        log_audit(&(struct log_audit){ .caller_uid = (unsigned)uid, .caller_pid = (int)pid, .method = what,
                                       .result = result, .detail = detail });
}

static void unlink_waiting(struct savebarrier *b)
{
        if (!b->waiting)
                return;
        if (b->prev)
                b->prev->next = b->next;
        else
                b->t->waiting = b->next;
        if (b->next)
                b->next->prev = b->prev;
        b->prev = b->next = NULL;
        b->waiting = false;
}

/* The daemon's end goes (after 'g' when go): the part goes on, or rolls
 * back; nothing of b acts any more.  Whether the 'g' was sent (the
 * command still there). */
static bool shut(struct savebarrier *b, bool go)
{
        bool sent = false;

        if (b->fd < 0)
                return false;
        uv_poll_stop(&b->poll);
        uv_timer_stop(&b->timer);
        /* One byte into an empty socket's buffer: it never blocks. */
        if (go)
                b->went = sent = send(b->fd, &(char){ BARRIER_LINE_GO }, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1;
        close(b->fd);
        b->fd = -1;
        unlink_waiting(b);
        if (b->c) {
                conn_hook_remove(b->c, &b->closing);
                conn_unref(b->c);
                b->c = NULL;
        }
        return sent;
}

static void timeout_cb(uv_timer_t *timer)
{
        struct savebarrier *b = timer->data;

        log_notice("Job %s of uid %u: its %s waited %llu ms at its barrier, none passed it: rolling back", b->name,
                   (unsigned)b->uid, b->verb, (unsigned long long)b->t->cfg->barrier_timeout_ms);
        audit(b, b->uid, b->caller_pid, "Barrier", "timeout", "none passed it in barrier_timeout_ms");
        (void)shut(b, false);
}

static void closing_cb(struct conn_hook *h, struct conn *c)
{
        struct savebarrier *b = (struct savebarrier *)((char *)h - offsetof(struct savebarrier, closing));

        (void)c;
        audit(b, b->uid, b->caller_pid, "Barrier", "closed", "its call's connection closed");
        (void)shut(b, false);
}

/* The whole ready line came: the job waits at its barrier. */
static void at_barrier(struct savebarrier *b)
{
        cJSON *p = cJSON_CreateObject();

        b->next = b->t->waiting;
        if (b->next)
                b->next->prev = b;
        b->t->waiting = b;
        b->waiting = true;
        uv_timer_start(&b->timer, timeout_cb, b->t->cfg->barrier_timeout_ms, 0);
        if (p)
                cJSON_AddStringToObject(p, "barrier", "ready");
        if (b->ready_cb)
                b->ready_cb(b->data, proto_reply_continues(p));
        else
                cJSON_Delete(p);
}

static void unref(struct savebarrier *b);

static void count_work(uv_work_t *w)
{
        struct savebarrier *b = w->data;

        b->count_r = savelocks_hold(b->locks, b->uid, b->uidfd, b->images, &b->part, &b->limit);
}

/* The dump's lock rules counted: at its barrier, or rolled back. */
static void count_after(uv_work_t *w, int status)
{
        struct savebarrier *b = w->data;

        b->counting = false;
        if (status < 0 && b->count_r == 0)
                b->count_r = status;
        if (b->count_r == -EDQUOT) {
                log_notice("Job %s of uid %u: its dump's lock rules would pass a bound of %llu locked connections, "
                           "rolling it back", b->name, (unsigned)b->uid, (unsigned long long)b->limit);
                audit(b, b->uid, b->caller_pid, "Barrier", "QueueFull", "locked_connections");
        } else if (b->count_r < 0) {
                log_warning("Job %s of uid %u: its dump's lock rules cannot be counted (%s), rolling it back",
                            b->name, (unsigned)b->uid, strerror(-b->count_r));
        }
        if (b->count_r < 0 || b->fd < 0)
                (void)shut(b, false);
        else
                at_barrier(b);
        unref(b); /* the work counted as one of b's handles */
}

/* The ready line came: a dump's rules are counted first. */
static void ready_line(struct savebarrier *b)
{
        if (!b->locks) {
                at_barrier(b);
                return;
        }
        b->counting = true;
        b->work.data = b;
        b->handles++;
        if (uv_queue_work(b->t->loop, &b->work, count_work, count_after) < 0) {
                b->counting = false;
                b->handles--;
                (void)shut(b, false);
        }
}

/* Readable: the ready line's bytes, or the command's end closed. */
static void poll_cb(uv_poll_t *h, int status, int events)
{
        struct savebarrier *b = h->data;
        char *nl;
        ssize_t n;

        (void)events;
        n = status < 0 ? -1 : read(b->fd, b->line + b->len, sizeof(b->line) - 1 - b->len);
        if (n < 0 && status == 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n <= 0 || b->waiting || b->counting) { /* gone, or more than the line: no barrier of ours */
                (void)shut(b, false);
                return;
        }
        b->len += (size_t)n;
        b->line[b->len] = '\0';
        nl = strchr(b->line, '\n');
        if (!nl && b->len < sizeof(b->line) - 1)
                return;
        if (nl)
                *nl = '\0';
        if (!nl || nl + 1 != b->line + b->len || strcmp(b->line, BARRIER_LINE_READY) != 0) {
                log_warning("Job %s of uid %u: its %s's barrier line is not the ready line, rolling it back",
                            b->name, (unsigned)b->uid, b->verb);
                (void)shut(b, false);
                return;
        }
        ready_line(b);
}

int savebarrier_open(struct savebarriers *t, const struct savebarrier_spec *spec, struct savebarrier **ret_b, int *ret_fd)
{
        struct savebarrier *b = calloc(1, sizeof(*b));
        int sv[2], r;

        if (!b)
                return -ENOMEM;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 || fcntl(sv[0], F_SETFL, O_NONBLOCK) < 0) {
                r = -errno;
                free(b);
                return r;
        }
        *b = (struct savebarrier){ .t = t, .uid = spec->uid, .caller_pid = spec->caller_pid, .verb = spec->verb,
                                   .c = spec->c, .fd = sv[0], .ready_cb = spec->ready_cb, .data = spec->data,
                                   .uidfd = -1 };
        snprintf(b->name, sizeof(b->name), "%s", spec->name);
        /* Its own descriptor: the count may outlive the caller's. */
        if (spec->locks && (b->uidfd = fcntl(spec->uidfd, F_DUPFD_CLOEXEC, 3)) < 0) {
                r = -errno;
                close(sv[0]);
                close(sv[1]);
                free(b);
                return r;
        }
        b->locks = spec->locks;
        snprintf(b->images, sizeof(b->images), "%s", spec->images ? spec->images : "");
        r = uv_poll_init(t->loop, &b->poll, b->fd);
        if (r < 0) {
                if (b->uidfd >= 0)
                        close(b->uidfd);
                close(sv[0]);
                close(sv[1]);
                free(b);
                return r;
        }
        uv_timer_init(t->loop, &b->timer);
        b->poll.data = b->timer.data = b;
        b->handles = 2;
        b->closing.closing_cb = closing_cb;
        conn_hook_add(b->c, &b->closing);
        conn_ref(b->c);
        life_hold(t->life); /* until freed */
        (void)uv_poll_start(&b->poll, UV_READABLE | UV_DISCONNECT, poll_cb);
        if (b->c->closing) /* its hooks have run: none comes */
                (void)shut(b, false);
        *ret_b = b;
        *ret_fd = sv[1];
        return 0;
}

/* One of b's handles, or its count's work, is done: freed after the last. */
static void unref(struct savebarrier *b)
{
        if (--b->handles > 0)
                return;
        savelocks_let_go(b->locks, b->part);
        if (b->uidfd >= 0)
                close(b->uidfd);
        life_release(b->t->life);
        free(b);
}

static void handle_closed_cb(uv_handle_t *h)
{
        unref(h->data);
}

bool savebarrier_refused(const struct savebarrier *b, uint64_t *ret_limit)
{
        if (!b || b->count_r != -EDQUOT)
                return false;
        *ret_limit = b->limit;
        return true;
}

struct savelocks_part *savebarrier_take_part(struct savebarrier *b)
{
        struct savelocks_part *p = b && !b->counting ? b->part : NULL;

        if (!p)
                return NULL;
        b->part = NULL;
        if (b->went)
                return p;
        savelocks_let_go(b->locks, p);
        return NULL;
}

void savebarrier_release(struct savebarrier *b)
{
        if (!b)
                return;
        b->ready_cb = NULL;
        (void)shut(b, false);
        uv_close((uv_handle_t *)&b->poll, handle_closed_cb);
        uv_close((uv_handle_t *)&b->timer, handle_closed_cb);
}

void savebarrier_pass(struct savebarriers *t, struct conn *c, const struct proto_call *call, const char *job, bool go)
{
        struct savebarrier *b = t->waiting;
        cJSON *p;

        /* One rule: the caller's uid scopes the names, root's too. */
        while (b && (b->uid != c->caller.uid || strcmp(b->name, job) != 0))
                b = b->next;
        if (b) {
                audit(b, c->caller.uid, c->caller.pid, "PassBarrier", "ok", go ? "go" : "let go by none");
                /* A 'g' not sent: the command is gone, no job waits there. */
                if (shut(b, go) || !go) {
                        conn_reply(c, call, proto_reply_new(NULL));
                        return;
                }
        }
        log_audit(&(struct log_audit){ .caller_uid = (unsigned)c->caller.uid, .caller_pid = (int)c->caller.pid,
                                       .method = "PassBarrier", .result = "NoSuchJob", .detail = job });
        p = cJSON_CreateObject();
        if (p)
                cJSON_AddStringToObject(p, "name", job);
        conn_reply(c, call, proto_error_new(CUDACKPT_ERROR_NO_SUCH_JOB, p));
}

void savebarrier_criu_options(const struct config *cfg, bool barrier, const char **argv)
{
        size_t k = 0;

        if (barrier)
                argv[k++] = FD_OPTION(SAVEBARRIER_FD);
        if (cfg->save_tcp_established) {
                argv[k++] = "--";
                argv[k++] = "--tcp-established";
                argv[k++] = "--network-lock";
                argv[k++] = barrier ? cfg->save_parts_network_lock : cfg->save_network_lock;
        }
        argv[k] = NULL;
}
