/* exporter.c: cudackptctl metrics --listen ADDR, a Prometheus exporter.
 *
 * The daemon runs as root and listens on no TCP port.  This exporter runs
 * unprivileged beside it (a sidecar, a systemd service of its own), serves
 * GET /metrics over HTTP with libmicrohttpd, and answers each scrape with
 * the text of one GetMetrics call made then, on a connection of its own,
 * limited in time.  A daemon that cannot be reached or does not answer in
 * time makes the scrape 503 with one line saying why; other paths are 404,
 * other methods 405.  A small, fixed pool of threads serves a bounded
 * number of connections, each dropped when idle.  It runs until SIGTERM or
 * SIGINT.
 *
 * Built without libmicrohttpd (absent when the build was configured), the
 * command says so and fails. */
#include "ctl.h"

#include <cudackpt/protocol.h>

#include <errno.h>
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
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>

/* Bounds: threads serving connections (each makes at most one daemon call
 * at a time), connections open at once, seconds an idle one is kept. */
#define EXPORTER_THREADS 2u
#define EXPORTER_MAX_CONNECTIONS 32u
#define EXPORTER_IDLE_S 30u

#define EXPORTER_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

typedef struct exporter {
        const ctl_exporter *e;
        const char *socket;
        atomic_int failing;     /* the last scrape failed: log only the change */
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

static struct MHD_Daemon *exporter_start(exporter *x, struct sockaddr_storage *ss, bool any) {
        unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
        struct MHD_Daemon *d = NULL;

        if (any)   /* ":PORT": IPv6 and IPv4, or IPv4 alone on a node without IPv6 */
                d = MHD_start_daemon(flags | MHD_USE_DUAL_STACK, ntohs(((struct sockaddr_in *) ss)->sin_port),
                                     NULL, NULL, exporter_request_cb, x,
                                     MHD_OPTION_THREAD_POOL_SIZE, EXPORTER_THREADS,
                                     MHD_OPTION_CONNECTION_LIMIT, EXPORTER_MAX_CONNECTIONS,
                                     MHD_OPTION_CONNECTION_TIMEOUT, EXPORTER_IDLE_S,
                                     MHD_OPTION_END);
        if (d)
                return d;
        if (ss->ss_family == AF_INET6)
                flags |= MHD_USE_IPv6;
        /* The port is the address's (sin6_port lies where sin_port does): the
         * server ignores it for MHD_OPTION_SOCK_ADDR, but names it in its
         * log, where 0 would mislead. */
        return MHD_start_daemon(flags, ntohs(((struct sockaddr_in *) ss)->sin_port), NULL, NULL, exporter_request_cb, x,
                                MHD_OPTION_SOCK_ADDR, (struct sockaddr *) ss,
                                MHD_OPTION_THREAD_POOL_SIZE, EXPORTER_THREADS,
                                MHD_OPTION_CONNECTION_LIMIT, EXPORTER_MAX_CONNECTIONS,
                                MHD_OPTION_CONNECTION_TIMEOUT, EXPORTER_IDLE_S,
                                MHD_OPTION_END);
}

int ctl_exporter_run(const ctl_exporter *e) {
        exporter x = { .e = e, .socket = e->socket };
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
        /* Blocked before the server's threads start, so that they inherit
         * the mask and only sigwait() below takes these signals. */
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
        while (sigwait(&stop, &sig) != 0)
                ;
        fprintf(stderr, "%s%s: stopping\n", e->prefix, sig == SIGTERM ? "SIGTERM" : "SIGINT");
        MHD_stop_daemon(d);
        return CUDACKPT_EXIT_OK;
}

#endif
