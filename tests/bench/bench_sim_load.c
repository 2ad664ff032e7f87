/* bench_sim_load.c: the load parts of cudackpt-bench-sim (bench_sim.c):
 * GetState from N concurrent clients, a thread each or multiplexed by
 * epoll on a few, and the daemon's memory with many idle connections. */
#include "bench_sim.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

typedef struct bench_sim_client {
        pthread_t thread;
        const char *socket_path;
        pthread_barrier_t *start;
        const pid_t *pids;
        long npids;
        int index;
        uint64_t deadline_ns; /* set by the main thread before the barrier opens */
        uint64_t *deadline_ptr;
        double *lat;          /* microseconds */
        size_t cap, n;
        uint64_t end_ns;
        long errors;
        int connect_error;
        char err[384];
} bench_sim_client;

static void bench_sim_note_error(bench_sim_client *c, int r, const cudackpt_reply *reply, int pid)
{
        if (c->errors++ > 0)
                return;
        if (r < 0)
                snprintf(c->err, sizeof(c->err), "GetState %d: transport error %s", pid, strerror(-r));
        else if (reply->error)
                snprintf(c->err, sizeof(c->err), "GetState %d: %s %s", pid, reply->error,
                         reply->parameters_json ? reply->parameters_json : "");
        else
                snprintf(c->err, sizeof(c->err), "GetState %d: state %s (want running)", pid,
                         reply->state ? reply->state : "(none)");
}

static void *bench_sim_client_main(void *arg)
{
        bench_sim_client *c = arg;
        cudackpt_client *conn = NULL;
        int r = cudackpt_client_connect(c->socket_path, &conn);
        if (r < 0)
                c->connect_error = r;
        else
                cudackpt_client_set_timeout(conn, 30000);
        /* Everyone connects first: the clock starts when all are connected. */
        pthread_barrier_wait(c->start);
        uint64_t deadline = *c->deadline_ptr;
        for (size_t i = 0; conn && i < c->cap; i++) {
                cudackpt_reply reply;
                int pid = (int)c->pids[(size_t)c->index % (size_t)c->npids];
                cudackpt_reply_init(&reply);
                uint64_t t0 = bench_now_ns();
                r = cudackpt_get_state(conn, pid, &reply);
                uint64_t t1 = bench_now_ns();
                if (r < 0 || reply.error || !reply.state || strcmp(reply.state, CUDACKPT_STATE_RUNNING) != 0)
                        bench_sim_note_error(c, r, &reply, pid);
                cudackpt_reply_clear(&reply);
                c->lat[c->n++] = (double)(t1 - t0) / 1e3;
                if (r < 0 || t1 >= deadline)
                        break;
        }
        c->end_ns = bench_now_ns();
        cudackpt_client_free(conn);
        return NULL;
}

/* The multiplexed load generator (as wrk does it): each of a few threads
 * drives many connections through epoll, every connection keeping exactly
 * one GetState in flight, so N clients are N concurrent requests without N
 * client threads competing with the daemon for the CPUs. */
typedef struct bench_sim_mconn {
        int fd;
        int pid;
        size_t sent;          /* requests sent on this connection */
        uint64_t t0;          /* when the request in flight was sent */
        char buf[4096];
        size_t len;
        char req[160];
        size_t req_len;
} bench_sim_mconn;

typedef struct bench_sim_mthread {
        pthread_t thread;
        pthread_barrier_t *start;
        uint64_t *deadline_ptr;
        bench_sim_mconn *conns;
        long n;
        size_t cap;           /* requests per connection at most */
        bench_samples lat;
        uint64_t end_ns;
        long errors;
        int connect_errors;
        char err[384];
} bench_sim_mthread;

static void bench_sim_mnote(bench_sim_mthread *t, const char *what, const char *detail)
{
        if (t->errors++ == 0)
                snprintf(t->err, sizeof(t->err), "%s: %s", what, detail);
}

static int bench_sim_msend(bench_sim_mthread *t, bench_sim_mconn *c)
{
        c->t0 = bench_now_ns();
        if (send(c->fd, c->req, c->req_len, MSG_NOSIGNAL) != (ssize_t)c->req_len) {
                bench_sim_mnote(t, "send", strerror(errno));
                return -1;
        }
        c->sent++;
        return 0;
}

/* Handles the replies buffered on c; returns 1 when c is finished. */
static int bench_sim_mreplies(bench_sim_mthread *t, bench_sim_mconn *c, uint64_t deadline)
{
        char *nul;

        while ((nul = memchr(c->buf, '\0', c->len))) {
                uint64_t t1 = bench_now_ns();
                size_t n = (size_t)(nul - c->buf);
                cJSON *m = cJSON_ParseWithLength(c->buf, n);
                const cJSON *p = m ? cJSON_GetObjectItemCaseSensitive(m, "parameters") : NULL;
                const cJSON *st = p ? cJSON_GetObjectItemCaseSensitive(p, "state") : NULL;
                if (!m || cJSON_GetObjectItemCaseSensitive(m, "error") || !cJSON_IsString(st) ||
                    strcmp(st->valuestring, CUDACKPT_STATE_RUNNING) != 0)
                        bench_sim_mnote(t, "GetState reply", m ? "not a running state" : "not JSON");
                cJSON_Delete(m);
                bench_samples_add(&t->lat, (double)(t1 - c->t0) / 1e3);
                c->len -= n + 1;
                memmove(c->buf, nul + 1, c->len);
                if (c->sent >= t->cap || t1 >= deadline)
                        return 1;
                if (bench_sim_msend(t, c) < 0)
                        return 1;
        }
        return 0;
}

static void *bench_sim_mthread_main(void *arg)
{
        bench_sim_mthread *t = arg;
        int ep = epoll_create1(EPOLL_CLOEXEC);
        long active = 0;

        for (long i = 0; ep >= 0 && i < t->n; i++) {
                bench_sim_mconn *c = &t->conns[i];
                struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
                if (c->fd >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) == 0)
                        active++;
        }
        pthread_barrier_wait(t->start);
        uint64_t deadline = *t->deadline_ptr;
        for (long i = 0; i < t->n; i++)
                if (t->conns[i].fd >= 0 && bench_sim_msend(t, &t->conns[i]) < 0)
                        active--;
        while (active > 0 && ep >= 0) {
                struct epoll_event evs[64];
                int k = epoll_wait(ep, evs, 64, 30000);
                if (k <= 0) {
                        if (k < 0 && errno == EINTR)
                                continue;
                        bench_sim_mnote(t, "epoll_wait", k == 0 ? "no reply within 30 s" : strerror(errno));
                        break;
                }
                for (int e = 0; e < k; e++) {
                        bench_sim_mconn *c = evs[e].data.ptr;
                        ssize_t r = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, MSG_DONTWAIT);
                        if (r < 0 && (errno == EAGAIN || errno == EINTR))
                                continue;
                        if (r <= 0 || (c->len += (size_t)r) == sizeof(c->buf) ||
                            bench_sim_mreplies(t, c, deadline)) {
                                if (r <= 0)
                                        bench_sim_mnote(t, "connection", r == 0 ? "closed by the daemon" : strerror(errno));
                                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                                active--;
                        }
                }
        }
        t->end_ns = bench_now_ns();
        if (ep >= 0)
                close(ep);
        return NULL;
}

static int bench_sim_connect_raw(const char *path)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0)
                return -errno;
        if (strlen(path) >= sizeof(sa.sun_path)) {
                close(fd);
                return -ENAMETOOLONG;
        }
        memcpy(sa.sun_path, path, strlen(path) + 1);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int e = -errno;
                close(fd);
                return e;
        }
        return fd;
}

static int bench_sim_level_mux(const bench_sim_cfg *cfg, const bench_daemon *d, const pid_t *pids, long nclients,
                               bench_samples *ret_lat, uint64_t *ret_t0, uint64_t *ret_t_end, long *ret_errors,
                               long *ret_connect_errors, char *first_err, size_t first_len)
{
        long nt = cfg->client_threads < nclients ? cfg->client_threads : nclients;
        bench_sim_mthread *th = calloc((size_t)nt, sizeof(*th));
        bench_sim_mconn *conns = calloc((size_t)nclients, sizeof(*conns));
        pthread_barrier_t start;
        uint64_t deadline = 0;
        size_t cap = (size_t)(cfg->max_requests / nclients);

        if (!th || !conns || pthread_barrier_init(&start, NULL, (unsigned)nt + 1) != 0) {
                free(th);
                free(conns);
                return -ENOMEM;
        }
        for (long i = 0; i < nclients; i++) {
                bench_sim_mconn *c = &conns[i];
                c->pid = (int)pids[(size_t)i % (size_t)cfg->targets];
                c->req_len = (size_t)snprintf(c->req, sizeof(c->req),
                                              "{\"method\":\"io.cudackpt.Process.GetState\",\"parameters\":{\"pid\":%d}}",
                                              c->pid) + 1; /* the NUL that ends a Varlink message */
                c->fd = bench_sim_connect_raw(d->socket_path);
                if (c->fd < 0)
                        (*ret_connect_errors)++;
        }
        /* Connections are dealt round-robin: thread k drives k, k+nt, ... */
        for (long k = 0; k < nt; k++) {
                th[k].start = &start;
                th[k].deadline_ptr = &deadline;
                th[k].cap = cap < 1 ? 1 : cap;
                th[k].conns = calloc((size_t)(nclients / nt + 1), sizeof(bench_sim_mconn));
                if (!th[k].conns)
                        abort();
                for (long i = k; i < nclients; i += nt)
                        th[k].conns[th[k].n++] = conns[i];
                if (pthread_create(&th[k].thread, NULL, bench_sim_mthread_main, &th[k]) != 0)
                        abort();
        }
        deadline = bench_now_ns() + (uint64_t)cfg->seconds_ms * 1000000ULL;
        pthread_barrier_wait(&start);
        *ret_t0 = bench_now_ns();
        *ret_t_end = *ret_t0;
        for (long k = 0; k < nt; k++) {
                pthread_join(th[k].thread, NULL);
                for (size_t i = 0; i < th[k].lat.n; i++)
                        bench_samples_add(ret_lat, th[k].lat.v[i]);
                *ret_errors += th[k].errors;
                if (th[k].errors && !first_err[0])
                        snprintf(first_err, first_len, "%s", th[k].err);
                if (th[k].end_ns > *ret_t_end)
                        *ret_t_end = th[k].end_ns;
                for (long i = 0; i < th[k].n; i++)
                        if (th[k].conns[i].fd >= 0)
                                close(th[k].conns[i].fd);
                bench_samples_free(&th[k].lat);
                free(th[k].conns);
        }
        pthread_barrier_destroy(&start);
        free(th);
        free(conns);
        return 0;
}

static int bench_sim_report(const bench_daemon *d, long nclients, double *samples, size_t total, uint64_t t0,
                            uint64_t t_end, long errors, long connect_errors, const char *first_err,
                            bench_samples *lat);

int bench_sim_level(const bench_sim_cfg *cfg, const bench_daemon *d, const pid_t *pids, long nclients)
{
        if (cfg->client_threads > 0) {
                bench_samples lat = {0};
                uint64_t t0 = 0, t_end = 0;
                long errors = 0, connect_errors = 0;
                char first[384] = "";
                int r = bench_sim_level_mux(cfg, d, pids, nclients, &lat, &t0, &t_end, &errors, &connect_errors,
                                            first, sizeof(first));
                if (r < 0)
                        return r;
                return bench_sim_report(d, nclients, lat.v, lat.n, t0, t_end, errors, connect_errors,
                                        first[0] ? first : NULL, &lat);
        }
        bench_sim_client *cl = calloc((size_t)nclients, sizeof(*cl));
        pthread_barrier_t start;
        uint64_t deadline = 0;
        size_t cap = (size_t)(cfg->max_requests / nclients);
        if (cap < 1)
                cap = 1;
        if (!cl || pthread_barrier_init(&start, NULL, (unsigned)nclients + 1) != 0) {
                free(cl);
                return -ENOMEM;
        }
        for (long i = 0; i < nclients; i++) {
                cl[i].socket_path = d->socket_path;
                cl[i].start = &start;
                cl[i].pids = pids;
                cl[i].npids = cfg->targets;
                cl[i].index = (int)i;
                cl[i].deadline_ptr = &deadline;
                cl[i].cap = cap;
                cl[i].lat = calloc(cap, sizeof(double));
                if (!cl[i].lat) {
                        fprintf(stderr, "cudackpt-bench-sim: out of memory\n");
                        abort();
                }
        }
        for (long i = 0; i < nclients; i++) {
                int e = pthread_create(&cl[i].thread, NULL, bench_sim_client_main, &cl[i]);
                if (e != 0) {
                        /* The others wait at the barrier for this one: fatal. */
                        fprintf(stderr, "cudackpt-bench-sim: pthread_create: %s\n", strerror(e));
                        abort();
                }
        }
        /* The barrier orders this write before every client's read. */
        uint64_t t0 = bench_now_ns();
        deadline = t0 + (uint64_t)cfg->seconds_ms * 1000000ULL;
        pthread_barrier_wait(&start);
        t0 = bench_now_ns();
        uint64_t t_end = t0;
        size_t total = 0;
        long errors = 0, connect_errors = 0;
        const char *first_err = NULL;
        for (long i = 0; i < nclients; i++) {
                pthread_join(cl[i].thread, NULL);
                total += cl[i].n;
                errors += cl[i].errors;
                if (cl[i].connect_error)
                        connect_errors++;
                if (!first_err && cl[i].errors)
                        first_err = cl[i].err;
                if (cl[i].end_ns > t_end)
                        t_end = cl[i].end_ns;
        }
        pthread_barrier_destroy(&start);

        double *all = calloc(total ? total : 1, sizeof(double));
        size_t k = 0;
        for (long i = 0; all && i < nclients; i++) {
                memcpy(all + k, cl[i].lat, cl[i].n * sizeof(double));
                k += cl[i].n;
        }
        for (long i = 0; i < nclients; i++)
                free(cl[i].lat);
        free(cl);
        bench_samples lat = { .v = all, .n = all ? total : 0, .cap = total };
        return bench_sim_report(d, nclients, lat.v, lat.n, t0, t_end, errors, connect_errors, first_err, &lat);
}

/* Prints one level's line; frees *lat. */
static int bench_sim_report(const bench_daemon *d, long nclients, double *samples, size_t total, uint64_t t0,
                            uint64_t t_end, long errors, long connect_errors, const char *first_err,
                            bench_samples *lat)
{
        int r = 0;
        bench_stats st;
        bench_stats_compute(samples, total, &st);
        double secs = (double)(t_end - t0) / 1e9;
        double rps = secs > 0 ? (double)total / secs : 0;
        long rss = bench_vmrss_kib(d->pid);
        printf("  %8ld %10zu %8.2f %12.0f %9.1f %9.1f %9.1f %9.1f %10ld\n", nclients, total, secs, rps, st.p50, st.p90,
               st.p99, st.max, rss);
        printf("RESULT bench=sim-getstate clients=%ld requests=%zu seconds=%.3f rps=%.0f p50_us=%.2f p90_us=%.2f "
               "p99_us=%.2f max_us=%.2f errors=%ld connect_errors=%ld daemon_rss_kib=%ld\n",
               nclients, total, secs, rps, st.p50, st.p90, st.p99, st.max, errors, connect_errors, rss);
        if (errors || connect_errors) {
                printf("ERROR: %ld clients: %ld failed requests, %ld failed connections%s%s\n", nclients, errors,
                       connect_errors, first_err ? "; first: " : "", first_err ? first_err : "");
                r = -EIO;
        }
        bench_samples_free(lat);
        return r;
}

/* 2000 GetState calls of pid on a connection of their own: their
 * latency in *ret_stats; returns how many failed. */
static long bench_sim_probe(const bench_daemon *d, pid_t pid, bench_stats *ret_stats)
{
        bench_samples lat = { 0 };
        cudackpt_client *probe = NULL;
        long errors = 0;
        if (cudackpt_client_connect(d->socket_path, &probe) == 0) {
                for (int i = 0; i < 2000; i++) {
                        cudackpt_reply reply;
                        cudackpt_reply_init(&reply);
                        uint64_t t0 = bench_now_ns();
                        int e = cudackpt_get_state(probe, (int)pid, &reply);
                        uint64_t t1 = bench_now_ns();
                        if (e < 0 || reply.error)
                                errors++;
                        cudackpt_reply_clear(&reply);
                        bench_samples_add(&lat, (double)(t1 - t0) / 1e3);
                }
        } else {
                errors++;
        }
        cudackpt_client_free(probe);
        bench_stats_compute(lat.v, lat.n, ret_stats);
        bench_samples_free(&lat);
        return errors;
}

/* RSS with idle_conns connections open, each of which made one call (so the
 * daemon has accepted it and set it up). */
int bench_sim_idle_conns(const bench_sim_cfg *cfg, const bench_daemon *d, const pid_t *pids, long rss_idle)
{
        long n = cfg->idle_conns, opened = 0, errors = 0;
        cudackpt_client **cs = calloc((size_t)n, sizeof(*cs));
        char first[384] = "";
        int r = 0;
        if (!cs)
                return -ENOMEM;
        for (long i = 0; i < n; i++) {
                cudackpt_reply reply;
                int e = cudackpt_client_connect(d->socket_path, &cs[i]);
                if (e < 0) {
                        snprintf(first, sizeof(first), "connection %ld: %s", i, strerror(-e));
                        errors++;
                        break;
                }
                opened++;
                cudackpt_client_set_timeout(cs[i], 30000);
                cudackpt_reply_init(&reply);
                e = cudackpt_get_state(cs[i], (int)pids[i % cfg->targets], &reply);
                if (e < 0 || reply.error) {
                        if (errors++ == 0)
                                snprintf(first, sizeof(first), "connection %ld: %s", i,
                                         e < 0 ? strerror(-e) : reply.error);
                }
                cudackpt_reply_clear(&reply);
        }
        long rss_open = bench_vmrss_kib(d->pid);

        /* One more client's latency while they stay open. */
        bench_stats st;
        errors += bench_sim_probe(d, pids[0], &st);

        for (long i = 0; i < opened; i++)
                cudackpt_client_free(cs[i]);
        free(cs);
        /* Closing is asynchronous on the daemon side: one round trip on a new
         * connection lets it see the hang-ups queued before that call. */
        cudackpt_client *last = NULL;
        if (cudackpt_client_connect(d->socket_path, &last) == 0) {
                cudackpt_reply reply;
                cudackpt_reply_init(&reply);
                cudackpt_get_state(last, (int)pids[0], &reply);
                cudackpt_reply_clear(&reply);
                cudackpt_client_free(last);
        }
        long rss_closed = bench_vmrss_kib(d->pid);

        printf("  daemon VmRSS: idle %ld KiB; with %ld open connections %ld KiB (%+.2f KiB per connection);"
               " after closing them %ld KiB\n",
               rss_idle, opened, rss_open, opened ? (double)(rss_open - rss_idle) / (double)opened : 0, rss_closed);
        printf("  GetState with %ld idle connections open: p50 %.1f us, p99 %.1f us\n", opened, st.p50, st.p99);
        printf("RESULT bench=sim-rss idle_kib=%ld conns=%ld open_kib=%ld per_conn_kib=%.3f closed_kib=%ld "
               "probe_p50_us=%.2f probe_p99_us=%.2f errors=%ld\n",
               rss_idle, opened, rss_open, opened ? (double)(rss_open - rss_idle) / (double)opened : 0, rss_closed,
               st.p50, st.p99, errors);
        if (errors) {
                printf("ERROR: %ld failures with many connections open%s%s\n", errors, first[0] ? "; first: " : "",
                       first);
                r = -EIO;
        }
        return r;
}
