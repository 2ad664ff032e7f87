/* bench_sim.c: cudackptd's own cost, measured on any machine.
 *
 * Starts the daemon with the simulated driver (--driver=libcudackpt-sim.so)
 * and `env CUDACKPT_SIM=1 sleep ...` targets, then measures GetState
 * requests per second and p50/p99 latency with 1, 16 and 256 concurrent
 * clients (one connection and one thread each, bounded in count and time),
 * and the daemon's resident memory (VmRSS) idle and with 1000 open
 * connections.  The driver costs nothing here, so the numbers are the
 * daemon's: parsing, queueing, the pidfd/procfs checks and the reply.
 * Then GetState latency on one connection with --watchers Watch streams open
 * against none, with and without a Lock/Unlock loop on another target
 * (bench_watch.h), and a watcher storm by another uid against root's GetState
 * and the daemon's memory (bench_storm.h).  First, before the daemon of the
 * other parts starts, what daemons cost the system calls of processes they
 * do not serve (bench_syscall.h).  Last, GetState via the daemon against
 * GetInfo and the simulator's direct call with the lane's spinning off and
 * on, each on a daemon of its own, through a client that sleeps for its
 * replies and one that spins (bench_spin.h).  --only= picks the parts:
 * syscall, getstate (the levels), rss (the open connections), watchers,
 * storm, spin.
 * Prints a report and "RESULT key=value ..." lines; timing never fails it,
 * a failed request does (exit 1). */
#include <cjson/cJSON.h>
#include <cudackpt/client.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "bench_common.h"
#include "bench_spin.h"
#include "bench_storm.h"
#include "bench_syscall.h"
#include "bench_watch.h"

#define BENCH_SIM_MAX_LEVELS 16
#define BENCH_SIM_MAX_TARGETS 1024

typedef struct bench_sim_cfg {
        const char *daemon_path;
        const char *sim_path;
        const char *log_level;
        long levels[BENCH_SIM_MAX_LEVELS];
        int nlevels;
        long seconds_ms;
        long max_requests;
        long targets;
        long idle_conns;
        long client_threads; /* 0: a thread per client; N: N threads multiplexing them */
        const char *config_extra; /* more "key": value pairs for the daemon's configuration */
        int run_getstate, run_rss, run_watchers, run_storm, run_syscall, run_spin; /* --only */
        long spin_calls;     /* spin: timed calls of each kind per setting */
        long syscall_calls;  /* syscall: getppid() calls per block */
        long syscall_rounds; /* syscall: blocks of each condition */
        long storm_seconds;  /* storm: how long */
        long storm_uid;      /* storm: its uid */
        long watchers;       /* watchers: Watch connections */
        long watch_calls;    /* watchers: timed GetState calls per condition */
        long watch_rounds;   /* watchers: rounds of the four blocks */
        long watch_rate;     /* watchers: Lock/Unlock cycles per second, 0 back to back */
} bench_sim_cfg;

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

static int bench_sim_level(const bench_sim_cfg *cfg, const bench_daemon *d, const pid_t *pids, long nclients)
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

/* RSS with idle_conns connections open, each of which made one call (so the
 * daemon has accepted it and set it up). */
static int bench_sim_idle_conns(const bench_sim_cfg *cfg, const bench_daemon *d, const pid_t *pids,
                                long rss_idle)
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
        bench_samples lat = {0};
        cudackpt_client *probe = NULL;
        if (cudackpt_client_connect(d->socket_path, &probe) == 0) {
                for (int i = 0; i < 2000; i++) {
                        cudackpt_reply reply;
                        cudackpt_reply_init(&reply);
                        uint64_t t0 = bench_now_ns();
                        int e = cudackpt_get_state(probe, (int)pids[0], &reply);
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
        bench_stats st;
        bench_stats_compute(lat.v, lat.n, &st);
        bench_samples_free(&lat);

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

static void bench_sim_usage(FILE *f)
{
        fprintf(f, "usage: cudackpt-bench-sim --daemon=PATH --sim=PATH [--clients=1,16,256] [--seconds-ms=2000]\n"
                   "                          [--max-requests=1000000] [--targets=16] [--idle-conns=1000]\n"
                   "                          [--client-threads=1] [--config-extra=TEXT] [--log-level=warning]\n"
                   "                          [--only=syscall,getstate,rss,watchers,storm,spin] [--watchers=100]\n"
                   "                          [--watch-calls=12000] [--watch-rounds=6] [--watch-rate=100]\n"
                   "                          [--storm-seconds=5] [--storm-uid=4243] [--syscall-calls=1000000]\n"
                   "                          [--syscall-rounds=7] [--spin-calls=5000]\n"
                   "  --clients=LIST     concurrency levels: connections, each with one request in flight\n"
                   "  --config-extra=TEXT more \"key\": value pairs for the daemon's configuration\n"
                   "  --client-threads=N threads driving them through epoll (default 1); 0: one thread\n"
                   "                     per client, each calling the client library\n"
                   "  --seconds-ms=N     duration of each level\n"
                   "  --max-requests=N   bound on the requests of each level (shared by its clients)\n"
                   "  --targets=N        simulated CUDA processes the clients spread over\n"
                   "  --idle-conns=N     connections held open for the memory measurement\n"
                   "  --only=LIST        parts to run: syscall (getppid with no daemon, a default one and\n"
                   "                     one with process_index_tracepoint), getstate (the levels), rss (idle connections),\n"
                   "                     watchers (GetState with Watch streams open), storm (another\n"
                   "                     uid's unread watchers, root's GetState), spin (GetState, GetInfo\n"
                   "                     and the direct call, lane_spin_us 0 and 200, clients sleeping\n"
                   "                     and spinning); default all\n"
                   "  --watchers=N       Watch connections of the watchers part\n"
                   "  --watch-calls=N    its timed GetState calls per condition (over all rounds)\n"
                   "  --watch-rounds=N   its rounds, each of four alternating blocks\n"
                   "  --watch-rate=N     its Lock/Unlock loop's cycles per second (0: back to back)\n"
                   "  --storm-seconds=N  how long the storm lasts\n"
                   "  --storm-uid=N      the storm's uid (needs root)\n"
                   "  --syscall-calls=N  getppid() calls per timed block of the syscall part\n"
                   "  --syscall-rounds=N its blocks of each condition (the median is reported)\n"
                   "  --spin-calls=N     timed calls of each kind per setting of the spin part\n");
}

/* The syscall part, before the daemon of the other parts starts. */
static int bench_sim_syscall(const bench_sim_cfg *cfg, const char *workdir)
{
        bench_syscall_cfg sc = {
                .daemon_path = cfg->daemon_path,
                .sim_path = cfg->sim_path,
                .workdir = workdir,
                .calls = cfg->syscall_calls,
                .rounds = cfg->syscall_rounds,
        };
        char log[600];
        int r = bench_syscall_run(&sc);

        /* Its daemons' log, not to be read as the daemon's of the other
         * parts (kept after a failure, which it explains). */
        snprintf(log, sizeof(log), "%s/cudackptd.log", workdir);
        if (r == 0)
                (void)unlink(log);
        return r;
}

/* Keeps or removes the work directory; the exit status. */
static int bench_sim_finish(const bench_sim_cfg *cfg, char *workdir, int failed)
{
        /* A debug run is for reading the daemon's log afterwards. */
        if (failed || strcmp(cfg->log_level, "debug") == 0)
                printf("work directory kept (daemon log): %s\n", workdir);
        else
                bench_remove_workdir(workdir);
        free(workdir);
        return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
        bench_sim_cfg cfg = {
                .log_level = "warning",
                .levels = {1, 16, 256},
                .nlevels = 3,
                .seconds_ms = 2000,
                .max_requests = 1000000,
                .targets = 16,
                .idle_conns = 1000,
                .client_threads = 1,
                .run_getstate = 1,
                .run_rss = 1,
                .run_watchers = 1,
                .run_storm = 1,
                .run_syscall = 1,
                .run_spin = 1,
                .spin_calls = 5000,
                .syscall_calls = 1000000,
                .syscall_rounds = 7,
                .storm_seconds = 5,
                .storm_uid = 4243,
                .watchers = 100,
                .watch_calls = 12000,
                .watch_rounds = 6,
                .watch_rate = 100,
        };
        char *workdir = NULL, config_path[512];
        pid_t pids[BENCH_SIM_MAX_TARGETS];
        long started = 0;
        bench_daemon d;
        int r, failed = 0;

        for (int i = 1; i < argc; i++) {
                const char *a = argv[i], *v = strchr(a, '=');
                int bad = 0;
                if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
                        bench_sim_usage(stdout);
                        return 0;
                } else if (!v) {
                        bad = 1;
                } else if (strncmp(a, "--daemon=", 9) == 0) {
                        cfg.daemon_path = v + 1;
                } else if (strncmp(a, "--sim=", 6) == 0) {
                        cfg.sim_path = v + 1;
                } else if (strncmp(a, "--log-level=", 12) == 0) {
                        cfg.log_level = v + 1;
                } else if (strncmp(a, "--clients=", 10) == 0) {
                        cfg.nlevels = bench_parse_list(v + 1, cfg.levels, BENCH_SIM_MAX_LEVELS);
                        bad = cfg.nlevels < 0;
                        for (int k = 0; !bad && k < cfg.nlevels; k++)
                                bad = cfg.levels[k] > 4096;
                } else if (strncmp(a, "--seconds-ms=", 13) == 0) {
                        bad = bench_parse_long(v + 1, 1, 3600000, &cfg.seconds_ms) < 0;
                } else if (strncmp(a, "--max-requests=", 15) == 0) {
                        bad = bench_parse_long(v + 1, 1, 100000000, &cfg.max_requests) < 0;
                } else if (strncmp(a, "--targets=", 10) == 0) {
                        bad = bench_parse_long(v + 1, 1, BENCH_SIM_MAX_TARGETS, &cfg.targets) < 0;
                } else if (strncmp(a, "--config-extra=", 15) == 0) {
                        cfg.config_extra = v + 1;
                } else if (strncmp(a, "--client-threads=", 17) == 0) {
                        bad = bench_parse_long(v + 1, 0, 64, &cfg.client_threads) < 0;
                } else if (strncmp(a, "--idle-conns=", 13) == 0) {
                        bad = bench_parse_long(v + 1, 0, 100000, &cfg.idle_conns) < 0;
                } else if (strncmp(a, "--only=", 7) == 0) {
                        char list[256], *save = NULL;
                        cfg.run_getstate = cfg.run_rss = cfg.run_watchers = cfg.run_storm = cfg.run_syscall = cfg.run_spin = 0;
                        snprintf(list, sizeof(list), "%s", v + 1);
                        for (char *w = strtok_r(list, ", ", &save); w && !bad; w = strtok_r(NULL, ", ", &save)) {
                                if (strcmp(w, "getstate") == 0)
                                        cfg.run_getstate = 1;
                                else if (strcmp(w, "rss") == 0)
                                        cfg.run_rss = 1;
                                else if (strcmp(w, "watchers") == 0)
                                        cfg.run_watchers = 1;
                                else if (strcmp(w, "storm") == 0)
                                        cfg.run_storm = 1;
                                else if (strcmp(w, "syscall") == 0)
                                        cfg.run_syscall = 1;
                                else if (strcmp(w, "spin") == 0)
                                        cfg.run_spin = 1;
                                else
                                        bad = 1;
                        }
                        bad = bad || !(cfg.run_getstate || cfg.run_rss || cfg.run_watchers || cfg.run_storm ||
                                       cfg.run_syscall || cfg.run_spin);
                } else if (strncmp(a, "--watchers=", 11) == 0) {
                        bad = bench_parse_long(v + 1, 1, 100000, &cfg.watchers) < 0;
                } else if (strncmp(a, "--watch-calls=", 14) == 0) {
                        bad = bench_parse_long(v + 1, 1, 100000000, &cfg.watch_calls) < 0;
                } else if (strncmp(a, "--watch-rounds=", 15) == 0) {
                        bad = bench_parse_long(v + 1, 1, 1000, &cfg.watch_rounds) < 0;
                } else if (strncmp(a, "--storm-seconds=", 16) == 0) {
                        bad = bench_parse_long(v + 1, 1, 3600, &cfg.storm_seconds) < 0;
                } else if (strncmp(a, "--storm-uid=", 12) == 0) {
                        bad = bench_parse_long(v + 1, 1, 4294967294L, &cfg.storm_uid) < 0;
                } else if (strncmp(a, "--syscall-calls=", 16) == 0) {
                        bad = bench_parse_long(v + 1, 1000, 1000000000, &cfg.syscall_calls) < 0;
                } else if (strncmp(a, "--syscall-rounds=", 17) == 0) {
                        bad = bench_parse_long(v + 1, 1, 100, &cfg.syscall_rounds) < 0;
                } else if (strncmp(a, "--spin-calls=", 13) == 0) {
                        bad = bench_parse_long(v + 1, 1, 10000000, &cfg.spin_calls) < 0;
                } else if (strncmp(a, "--watch-rate=", 13) == 0) {
                        bad = bench_parse_long(v + 1, 0, 1000000, &cfg.watch_rate) < 0;
                } else {
                        bad = 1;
                }
                if (bad) {
                        fprintf(stderr, "cudackpt-bench-sim: bad option %s\n", a);
                        bench_sim_usage(stderr);
                        return 2;
                }
        }
        if (!cfg.daemon_path || !cfg.sim_path) {
                bench_sim_usage(stderr);
                return 2;
        }
        setvbuf(stdout, NULL, _IOLBF, 0);
        signal(SIGPIPE, SIG_IGN);

        /* Both ends of every connection live in this process tree; the
         * daemon inherits the limit. */
        long maxc = 0;
        for (int k = 0; k < cfg.nlevels; k++)
                if (cfg.levels[k] > maxc)
                        maxc = cfg.levels[k];
        if (cfg.idle_conns > maxc)
                maxc = cfg.idle_conns;
        if (cfg.run_watchers && cfg.watchers + 2 > maxc)
                maxc = cfg.watchers + 2;
        long nofile = bench_raise_nofile(2 * maxc + 1024);
        if (nofile < maxc + 256)
                printf("warning: RLIMIT_NOFILE is %ld; %ld connections may not fit\n", nofile, maxc);

        if ((r = bench_make_workdir("cudackpt-bench-sim", &workdir)) < 0) {
                fprintf(stderr, "cudackpt-bench-sim: work directory: %s\n", strerror(-r));
                return 1;
        }
        /* Limits high enough that the benchmark measures, not the limits. */
        snprintf(config_path, sizeof(config_path), "%s/config.json", workdir);
        FILE *f = fopen(config_path, "we");
        if (!f) {
                fprintf(stderr, "cudackpt-bench-sim: %s: %s\n", config_path, strerror(errno));
                return 1;
        }
        fprintf(f,
                "{\"max_connections\": %ld, \"max_connections_per_uid\": %ld, \"idle_timeout_ms\": 600000,\n"
                " \"max_queue_per_pid\": 4096, \"max_queue_total\": 65536%s%s}\n",
                maxc + 1024, maxc + 1024, cfg.config_extra ? ", " : "", cfg.config_extra ? cfg.config_extra : "");
        fclose(f);

        if (cfg.run_syscall && bench_sim_syscall(&cfg, workdir) < 0)
                failed = 1;
        if (!(cfg.run_getstate || cfg.run_rss || cfg.run_watchers || cfg.run_storm || cfg.run_spin))
                return bench_sim_finish(&cfg, workdir, failed);
        bench_daemon_opts o = {
                .daemon_path = cfg.daemon_path,
                .driver_path = cfg.sim_path,
                .config_path = config_path,
                .log_level = cfg.log_level,
                .workdir = workdir,
                .ready_timeout_ms = 30000,
        };
        if ((r = bench_daemon_start(&o, &d)) < 0) {
                printf("ERROR: cudackptd did not become ready (%s); log: %s/cudackptd.log\n", strerror(-r), workdir);
                return 1;
        }
        long rss_idle = bench_vmrss_kib(d.pid);

        static const char *const target_env[] = {"CUDACKPT_SIM=1", NULL};
        for (long i = 0; i < cfg.targets; i++) {
                char *targv[] = {"sleep", "100000", NULL};
                if ((r = bench_spawn(targv, target_env, NULL, -1, &pids[i])) < 0) {
                        printf("ERROR: cannot start sleep: %s\n", strerror(-r));
                        failed = 1;
                        break;
                }
                started++;
        }

        if (!failed) {
                cudackpt_client *c = NULL;
                cudackpt_reply reply;
                cudackpt_reply_init(&reply);
                if (cudackpt_client_connect(d.socket_path, &c) < 0) {
                        printf("ERROR: cannot connect to %s\n", d.socket_path);
                        failed = 1;
                }
                /* bench_spawn returned after the exec, so the sim sees CUDACKPT_SIM=1. */
                for (long i = 0; !failed && i < started; i++) {
                        r = cudackpt_get_state(c, (int)pids[i], &reply);
                        if (r < 0 || reply.error || !reply.state || strcmp(reply.state, "running") != 0) {
                                printf("ERROR: GetState of simulated target %d: %s %s\n", (int)pids[i],
                                       r < 0 ? strerror(-r) : (reply.error ? reply.error : reply.state),
                                       reply.parameters_json ? reply.parameters_json : "");
                                failed = 1;
                        }
                        cudackpt_reply_clear(&reply);
                }
                cudackpt_client_free(c);
        }

        /* Each part runs when the set-up worked, whatever the parts before found. */
        int ready = !failed;
        if (ready && cfg.run_getstate) {
                printf("== 6. GetState through cudackptd on the simulated driver (%ld targets, %ld ms per level,"
                       " at most %ld requests; %s) ==\n",
                       cfg.targets, cfg.seconds_ms, cfg.max_requests,
                       cfg.client_threads ? "clients multiplexed by epoll" : "a thread per client");
                if (cfg.client_threads)
                        printf("  client threads: %ld\n", cfg.client_threads);
                printf("  %8s %10s %8s %12s %9s %9s %9s %9s %10s\n", "clients", "requests", "seconds", "req/s",
                       "p50 us", "p90 us", "p99 us", "max us", "RSS KiB");
                for (int k = 0; k < cfg.nlevels; k++)
                        if (bench_sim_level(&cfg, &d, pids, cfg.levels[k]) < 0)
                                failed = 1;
        }
        if (ready && cfg.run_rss && cfg.idle_conns > 0 && bench_sim_idle_conns(&cfg, &d, pids, rss_idle) < 0)
                failed = 1;
        if (ready && cfg.run_watchers) {
                /* The Lock/Unlock loop gets a target of its own. */
                char *targv[] = {"sleep", "100000", NULL};
                pid_t load_pid = 0;
                if ((r = bench_spawn(targv, target_env, NULL, -1, &load_pid)) < 0) {
                        printf("ERROR: cannot start sleep: %s\n", strerror(-r));
                        failed = 1;
                } else {
                        bench_watch_cfg wc = {
                                .socket_path = d.socket_path,
                                .tag = "sim",
                                .probe_pid = (int)pids[0],
                                .load_pid = (int)load_pid,
                                .watchers = cfg.watchers,
                                .calls = cfg.watch_calls,
                                .rounds = cfg.watch_rounds,
                                .warmup = 200,
                                .load_rate = cfg.watch_rate,
                        };
                        if (bench_watch_run(&wc) < 0)
                                failed = 1;
                        bench_kill(load_pid);
                }
        }

        if (ready && cfg.run_storm) {
                /* The daemon's default watcher limits: the storm meets them. */
                bench_storm_cfg sc = {
                        .socket_path = d.socket_path,
                        .daemon_pid = d.pid,
                        .probe_pid = (int)pids[0],
                        .uid = (uid_t)cfg.storm_uid,
                        .seconds = cfg.storm_seconds,
                        .calls = 5000,
                        .targets = 4,
                        .max_watcher_bytes = 256 * 1024,
                        .max_watch_bytes = 32L * 1024 * 1024,
                        .max_watchers_per_uid = 16,
                };
                chmod(workdir, 0755); /* the storm's uid reaches the socket */
                if (bench_storm_run(&sc) < 0)
                        failed = 1;
        }
        if (ready && cfg.run_spin) {
                bench_spin_cfg pc = {
                        .daemon_path = cfg.daemon_path,
                        .sim_path = cfg.sim_path,
                        .log_level = cfg.log_level,
                        .pid = (int)pids[0],
                        .calls = cfg.spin_calls,
                        .idle_ms = 3000,
                        .spin_us = {0, 200},
                        .n_spin = 2,
                };
                if (bench_spin_run(&pc) < 0)
                        failed = 1;
        }
        for (long i = 0; i < started; i++)
                bench_kill(pids[i]);
        int status = bench_daemon_stop(&d, 10000);
        if (status != 0) {
                printf("ERROR: cudackptd exit status %d after SIGTERM (want 0)\n", status);
                failed = 1;
        }
        return bench_sim_finish(&cfg, workdir, failed);
}
