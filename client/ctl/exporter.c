/* exporter.c: cudackptctl metrics --listen ADDR, a Prometheus exporter.
 *
 * The daemon runs as root and listens on no TCP port.  This exporter runs
 * unprivileged beside it (a sidecar, a systemd service of its own), serves
 * GET /metrics over HTTP with libmicrohttpd, and answers each scrape with
 * the text of one GetMetrics call made then, on a connection of its own,
 * limited in time.  A daemon that cannot be reached or does not answer in
 * time makes the scrape 503 with one line saying why; other paths are 404,
 * other methods 405.  A small, fixed pool of threads serves a bounded
 * number of connections, at most e->per_address from one group of
 * addresses (addrgroup.h: loopback as one, a prefix for others), each
 * dropped when idle, when a request has not arrived whole e->deadline_ms
 * after the connection opened or its previous answer, or has not been
 * answered e->deadline_ms after it arrived.  It runs until SIGTERM or
 * SIGINT.
 *
 * Built without libmicrohttpd (absent when the build was configured), the
 * command says so and fails. */
#include "exporter.h"

#include "addrgroup.h"
#include "args.h"
#include "describe.h"
#include "exitcode.h"
#include "monotime.h"

#include <cudackpt/protocol.h>
#include <cJSON.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef CUDACKPT_HAVE_MICROHTTPD

int ctl_exporter_run(const ctl_exporter *e) {
        fprintf(stderr, "%sthis cudackptctl was built without libmicrohttpd: --listen is not available "
                "(use metrics --output with node_exporter's textfile collector)\n", e->prefix);
        return CUDACKPT_EXIT_FAILURE;
}

#else

#include <arpa/inet.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

/* Bounds: threads serving connections (each makes at most one daemon call
 * at a time), connections open at once, seconds an idle one is kept,
 * milliseconds at most between two sweeps for requests past their
 * deadline. */
#define EXPORTER_THREADS 2u
#define EXPORTER_MAX_CONNECTIONS 32u
#define EXPORTER_IDLE_S 30u
#define EXPORTER_SWEEP_MS 1000

#define EXPORTER_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* An open connection, for the deadline: libmicrohttpd's own timeout is an
 * idle one, restarted by every byte, so a client sending a header line now
 * and then would hold its slot for ever. */
typedef struct exporter_conn {
        struct exporter_conn *prev, *next;
        int fd;
        ctl_addrgroup group;    /* its client's, for --max-per-address (addrgroup.h) */
        int64_t since_ms;       /* opened, last request arrived or last answer sent */
        bool cut;               /* shut down past its deadline */
} exporter_conn;

typedef struct exporter {
        const ctl_exporter *e;
        const char *socket;
        atomic_int failing;     /* the last scrape failed: log only the change */
        pthread_mutex_t lock;   /* conns */
        exporter_conn *conns;
} exporter;

/* An address of --listen: ":PORT", "IPV4:PORT" or "[IPV6]:PORT", numeric,
 * PORT 0..65535 (0: any free port, printed once listening).  *any: ":PORT"
 * (every address).  -EINVAL otherwise. */
static int exporter_parse_listen(const char *arg, struct sockaddr_storage *ss, bool *any) {
        const char *colon = strrchr(arg, ':');
        char host[INET6_ADDRSTRLEN + 2];
        unsigned long long port;
        size_t n;

        memset(ss, 0, sizeof(*ss));
        if (!colon || ctl_parse_uint(colon + 1, 65535, &port) < 0)
                return -EINVAL;
        n = (size_t) (colon - arg);
        *any = n == 0;
        if (n >= sizeof(host))
                return -EINVAL;
        memcpy(host, arg, n);
        host[n] = '\0';
        if (n == 0 || host[0] != '[') {
                struct sockaddr_in *in = (struct sockaddr_in *) ss;

                in->sin_family = AF_INET;
                in->sin_port = htons((uint16_t) port);
                if (n == 0)
                        in->sin_addr.s_addr = htonl(INADDR_ANY);
                else if (inet_pton(AF_INET, host, &in->sin_addr) != 1)
                        return -EINVAL;
                return 0;
        }
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) ss;

        if (n < 3 || host[n - 1] != ']')
                return -EINVAL;
        host[n - 1] = '\0';
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t) port);
        if (inet_pton(AF_INET6, host + 1, &in6->sin6_addr) != 1)
                return -EINVAL;
        return 0;
}

/* Connections of c's group open now, c excepted.  Under x->lock. */
static unsigned exporter_group_count(const exporter *x, const exporter_conn *c) {
        unsigned n = 0;

        for (const exporter_conn *o = x->conns; o; o = o->next)
                n += o != c && ctl_addrgroup_equal(&o->group, &c->group);
        return n;
}

/* A client refused at accept, before libmicrohttpd gives it a slot, when
 * its group has e->per_address connections open already.  Two threads
 * accepting at once may both pass here: exporter_conn_started() counts
 * again, exactly, under the lock. */
static enum MHD_Result exporter_accept_cb(void *cls, const struct sockaddr *addr, socklen_t addrlen) {
        exporter *x = cls;
        exporter_conn probe = { .fd = -1 };
        bool full;

        (void) addrlen;
        ctl_addrgroup_of(addr, x->e->ipv4_prefix, x->e->ipv6_prefix, &probe.group);
        pthread_mutex_lock(&x->lock);
        full = exporter_group_count(x, &probe) >= x->e->per_address;
        pthread_mutex_unlock(&x->lock);
        return full ? MHD_NO : MHD_YES;
}

/* A connection opened: tracked in x->conns, or refused (shut down, which
 * libmicrohttpd then closes) when its group has e->per_address open. */
static void exporter_conn_started(exporter *x, struct MHD_Connection *conn, void **socket_context) {
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *addr = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        exporter_conn *c;
        bool full;

        if (!info)
                return;
        c = calloc(1, sizeof(*c));
        if (!c) {
                /* Untracked, it would have no deadline: refuse it. */
                (void) shutdown(info->connect_fd, SHUT_RDWR);
                return;
        }
        c->fd = info->connect_fd;
        c->since_ms = monotime_ms();
        ctl_addrgroup_of(addr ? addr->client_addr : NULL, x->e->ipv4_prefix, x->e->ipv6_prefix, &c->group);
        pthread_mutex_lock(&x->lock);
        full = exporter_group_count(x, c) >= x->e->per_address;
        if (!full) {
                c->next = x->conns;
                if (c->next)
                        c->next->prev = c;
                x->conns = c;
        }
        pthread_mutex_unlock(&x->lock);
        if (full) {
                (void) shutdown(info->connect_fd, SHUT_RDWR);
                free(c);
                return;
        }
        *socket_context = c;
}

/* Connections opened and closed: kept in x->conns while open.  The closing
 * notification comes before libmicrohttpd closes the socket, and removes
 * the entry under x->lock: the sweep, under the same lock, never shuts
 * down a descriptor that was closed and reused. */
static void exporter_connection_cb(void *cls, struct MHD_Connection *conn, void **socket_context,
                                   enum MHD_ConnectionNotificationCode toe) {
        exporter *x = cls;
        exporter_conn *c = *socket_context;

        if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
                exporter_conn_started(x, conn, socket_context);
                return;
        }
        if (!c)
                return;
        pthread_mutex_lock(&x->lock);
        if (c->prev)
                c->prev->next = c->next;
        else
                x->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        pthread_mutex_unlock(&x->lock);
        free(c);
        *socket_context = NULL;
}

/* The deadline starts again for conn: a request has arrived whole, and
 * has a deadline of its own to be answered; or it was answered, and the
 * next one has a deadline to arrive. */
static void exporter_touch(exporter *x, struct MHD_Connection *conn) {
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        exporter_conn *c = info ? info->socket_context : NULL;

        if (!c)
                return;
        pthread_mutex_lock(&x->lock);
        c->since_ms = monotime_ms();
        pthread_mutex_unlock(&x->lock);
}

static void exporter_completed_cb(void *cls, struct MHD_Connection *conn, void **req_cls,
                                  enum MHD_RequestTerminationCode toe) {
        (void) req_cls;
        (void) toe;
        exporter_touch(cls, conn);
}

/* Shut down every connection whose request has run past the deadline:
 * libmicrohttpd then reads its end and closes it, freeing its slot and its
 * group's share. */
static void exporter_sweep(exporter *x) {
        int64_t now = monotime_ms();

        pthread_mutex_lock(&x->lock);
        for (exporter_conn *c = x->conns; c; c = c->next)
                if (!c->cut && now - c->since_ms >= x->e->deadline_ms) {
                        (void) shutdown(c->fd, SHUT_RDWR);
                        c->cut = true;
                }
        pthread_mutex_unlock(&x->lock);
}

static enum MHD_Result exporter_send(struct MHD_Connection *conn, unsigned status, const char *body,
                                     const char *content_type) {
        struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(body), (void *) body,
                                                                    MHD_RESPMEM_MUST_COPY);
        enum MHD_Result r;

        if (!resp)
                return MHD_NO;
        if (MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type) != MHD_YES ||
            (status == MHD_HTTP_METHOD_NOT_ALLOWED &&
             MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, MHD_HTTP_METHOD_GET) != MHD_YES)) {
                MHD_destroy_response(resp);
                return MHD_NO;
        }
        r = MHD_queue_response(conn, status, resp);
        MHD_destroy_response(resp);
        return r;
}

/* Why the address cannot be listened on, as a bind() of its own finds
 * (the HTTP server does not say): an errno, or 0 when bind() works. */
static int exporter_bind_errno(const struct sockaddr_storage *ss) {
        int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), on = 1, r = 0;
        socklen_t len = ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);

        if (fd < 0)
                return errno;
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
        if (bind(fd, (const struct sockaddr *) ss, len) < 0)
                r = errno;
        close(fd);
        return r;
}

/* One GetMetrics call.  Returns the HTTP status: 200 with *ret_text the
 * metrics, else 503 (no daemon or no answer in time) or 500 (an error
 * reply, an invalid one) with *ret_text why, without a newline.  *ret_text is
 * malloc'd, or NULL when out of memory. */
static unsigned exporter_scrape(const exporter *x, char **ret_text) {
        cudackpt_client *client = NULL;
        cudackpt_reply reply;
        unsigned status = MHD_HTTP_SERVICE_UNAVAILABLE;
        cJSON *p = NULL;
        const cJSON *t;
        int r;

        *ret_text = NULL;
        cudackpt_reply_init(&reply);
        r = cudackpt_client_connect(x->socket, &client);
        if (r < 0) {
                if (asprintf(ret_text, "cannot reach cudackptd at %s: %s", x->socket, strerror(-r)) < 0)
                        *ret_text = NULL;
                return status;
        }
        (void) cudackpt_client_set_timeout(client, x->e->timeout_ms);
        r = cudackpt_call(client, CUDACKPT_METHOD_GET_METRICS, NULL, &reply);
        if (r < 0) {
                status = ctl_call_failure_exit_code(r) == CUDACKPT_EXIT_UNREACHABLE
                                 ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_INTERNAL_SERVER_ERROR;
                if (asprintf(ret_text, "%s", ctl_describe_call_failure(r)) < 0)
                        *ret_text = NULL;
        } else if (reply.error) {
                char *d = ctl_describe_error(&reply);

                status = MHD_HTTP_INTERNAL_SERVER_ERROR;
                if (asprintf(ret_text, "cudackptd answered %s", d ? d : reply.error) < 0)
                        *ret_text = NULL;
                free(d);
        } else {
                p = cJSON_Parse(reply.parameters_json);
                t = cJSON_GetObjectItemCaseSensitive(p, "text");
                if (cJSON_IsString(t) && t->valuestring) {
                        status = MHD_HTTP_OK;
                        *ret_text = strdup(t->valuestring);
                } else {
                        status = MHD_HTTP_INTERNAL_SERVER_ERROR;
                        *ret_text = strdup("invalid reply from cudackptd: no text");
                }
        }
        cJSON_Delete(p);
        cudackpt_reply_clear(&reply);
        cudackpt_client_free(client);
        return status;
}

static enum MHD_Result exporter_request_cb(void *cls, struct MHD_Connection *conn, const char *url,
                                       const char *method, const char *version, const char *upload_data,
                                       size_t *upload_data_size, void **req_cls) {
        exporter *x = cls;
        enum MHD_Result res;
        unsigned status;
        char *text;

        (void) version;
        (void) upload_data;
        (void) upload_data_size;
        (void) req_cls;
        exporter_touch(x, conn);
        if (strcmp(method, MHD_HTTP_METHOD_GET) != 0)
                return exporter_send(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET /metrics is served\n",
                                     "text/plain; charset=utf-8");
        if (strcmp(url, "/metrics") != 0)
                return exporter_send(conn, MHD_HTTP_NOT_FOUND, "not found: the metrics are at /metrics\n",
                                     "text/plain; charset=utf-8");
        status = exporter_scrape(x, &text);
        if (text && status != MHD_HTTP_OK) {
                char *line = NULL;

                ctl_sanitize(text); /* it may hold the socket's path */
                if (asprintf(&line, "%s\n", text) < 0)
                        line = NULL;
                free(text);
                text = line;
        }
        if (!text)
                return MHD_NO; /* out of memory: close the connection */
        /* Said once per change, not on every scrape of a daemon away for long. */
        if (atomic_exchange(&x->failing, status != MHD_HTTP_OK) != (status != MHD_HTTP_OK)) {
                if (status == MHD_HTTP_OK)
                        fprintf(stderr, "%sscrapes answered again\n", x->e->prefix);
                else {
                        fprintf(stderr, "%sscrape failed (HTTP %u): ", x->e->prefix, status);
                        fputs(text, stderr); /* sanitised above */
                }
        }
        res = exporter_send(conn, status, text, status == MHD_HTTP_OK ? EXPORTER_CONTENT_TYPE
                                                                     : "text/plain; charset=utf-8");
        free(text);
        return res;
}

/* The options of both listeners: the bounds and the deadline's hooks. */
#define EXPORTER_OPTIONS(x)                                                                 \
        MHD_OPTION_THREAD_POOL_SIZE, EXPORTER_THREADS,                                       \
        MHD_OPTION_CONNECTION_LIMIT, EXPORTER_MAX_CONNECTIONS,                               \
        MHD_OPTION_CONNECTION_TIMEOUT, EXPORTER_IDLE_S,                                      \
        MHD_OPTION_NOTIFY_CONNECTION, exporter_connection_cb, (x),                           \
        MHD_OPTION_NOTIFY_COMPLETED, exporter_completed_cb, (x)

static struct MHD_Daemon *exporter_start(exporter *x, struct sockaddr_storage *ss, bool any) {
        unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
        struct MHD_Daemon *d = NULL;

        if (any)   /* ":PORT": IPv6 and IPv4, or IPv4 alone on a node without IPv6 */
                d = MHD_start_daemon(flags | MHD_USE_DUAL_STACK, ntohs(((struct sockaddr_in *) ss)->sin_port),
                                     exporter_accept_cb, x, exporter_request_cb, x,
                                     EXPORTER_OPTIONS(x), MHD_OPTION_END);
        if (d)
                return d;
        if (ss->ss_family == AF_INET6)
                flags |= MHD_USE_IPv6;
        /* The port is the address's (sin6_port lies where sin_port does): the
         * server ignores it for MHD_OPTION_SOCK_ADDR, but names it in its
         * log, where 0 would mislead. */
        return MHD_start_daemon(flags, ntohs(((struct sockaddr_in *) ss)->sin_port), exporter_accept_cb, x,
                                exporter_request_cb, x,
                                MHD_OPTION_SOCK_ADDR, (struct sockaddr *) ss,
                                EXPORTER_OPTIONS(x), MHD_OPTION_END);
}

/* Until SIGTERM or SIGINT, sweeping for requests past their deadline at
 * least four times per deadline.  Returns the signal. */
static int exporter_wait(exporter *x, const sigset_t *stop) {
        long long tick_ms = x->e->deadline_ms / 4 < EXPORTER_SWEEP_MS ? x->e->deadline_ms / 4 : EXPORTER_SWEEP_MS;
        struct timespec tick;
        int sig;

        if (tick_ms < 1)
                tick_ms = 1;
        tick = (struct timespec) { .tv_sec = tick_ms / 1000, .tv_nsec = (tick_ms % 1000) * 1000000L };

        for (;;) {
                sig = sigtimedwait(stop, NULL, &tick);
                if (sig == SIGTERM || sig == SIGINT)
                        return sig;
                exporter_sweep(x);
        }
}

int ctl_exporter_run(const ctl_exporter *e) {
        exporter x = { .e = e, .socket = e->socket, .lock = PTHREAD_MUTEX_INITIALIZER };
        struct sockaddr_storage ss;
        const union MHD_DaemonInfo *info;
        struct MHD_Daemon *d;
        sigset_t stop;
        bool any;
        int sig;

        if (exporter_parse_listen(e->listen, &ss, &any) < 0) {
                fprintf(stderr, "%sinvalid --listen '%s': expected :PORT, IPV4:PORT or [IPV6]:PORT\n",
                        e->prefix, e->listen);
                return CUDACKPT_EXIT_USAGE;
        }
        /* A deadline within the scrape's own limit would cut the 503 that
         * says the daemon did not answer in time. */
        if (e->deadline_ms <= e->timeout_ms) {
                fprintf(stderr, "%s--request-deadline (%lld ms) must be longer than --timeout (%d ms)\n",
                        e->prefix, e->deadline_ms, e->timeout_ms);
                return CUDACKPT_EXIT_USAGE;
        }
        if (e->per_address > EXPORTER_MAX_CONNECTIONS) {
                fprintf(stderr, "%s--max-per-address=%u: at most %u connections are served at once\n",
                        e->prefix, e->per_address, EXPORTER_MAX_CONNECTIONS);
                return CUDACKPT_EXIT_USAGE;
        }
        /* Blocked before the server's threads start, so that they inherit
         * the mask and only sigtimedwait() below takes these signals. */
        sigemptyset(&stop);
        sigaddset(&stop, SIGTERM);
        sigaddset(&stop, SIGINT);
        pthread_sigmask(SIG_BLOCK, &stop, NULL);
        signal(SIGPIPE, SIG_IGN);
        d = exporter_start(&x, &ss, any);
        if (!d) {
                int err = exporter_bind_errno(&ss);

                fprintf(stderr, "%scannot listen on %s: %s%s\n", e->prefix, e->listen,
                        err ? strerror(err) : "the HTTP server did not start",
                        err == EADDRINUSE ? " (another program listens on that port: choose another, or PORT 0 "
                                            "for any free one)" : "");
                return CUDACKPT_EXIT_FAILURE;
        }
        info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
        fprintf(stderr, "%sserving GET /metrics on %.*s:%u for cudackptd at ", e->prefix,
                (int) (strrchr(e->listen, ':') - e->listen), e->listen, info ? info->port : 0u);
        ctl_fputs_safe(e->socket, stderr);
        fputc('\n', stderr);
        fflush(stderr);
        sig = exporter_wait(&x, &stop);
        fprintf(stderr, "%s%s: stopping\n", e->prefix, sig == SIGTERM ? "SIGTERM" : "SIGINT");
        MHD_stop_daemon(d);
        pthread_mutex_destroy(&x.lock);
        return CUDACKPT_EXIT_OK;
}

#endif
