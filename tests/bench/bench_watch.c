/* bench_watch.c: GetState latency with Watch streams open (bench_watch.h). */
#include "bench_watch.h"

#include <cudackpt/client.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"

#define BENCH_WATCH_TIMEOUT_MS 30000
#define BENCH_WATCH_CONDS 4

/* The conditions, in the order of an even round. */
enum { BENCH_WATCH_IDLE0, BENCH_WATCH_IDLEN, BENCH_WATCH_LOAD0, BENCH_WATCH_LOADN };

static const char *const bench_watch_series[BENCH_WATCH_CONDS] = {"idle-0", "idle-n", "load-0", "load-n"};

/* A failure to report, the first of each kind kept. */
typedef struct bench_watch_err {
        long n;
        char first[384];
} bench_watch_err;

static void bench_watch_note(bench_watch_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void bench_watch_note(bench_watch_err *e, const char *fmt, ...)
{
        if (e->n++ > 0)
                return;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->first, sizeof(e->first), fmt, ap);
        va_end(ap);
}

/* ---- watchers ---------------------------------------------------------- */

typedef struct bench_watch_set {
        int *fds;
        long n;            /* fds[0..n) are open */
        int stop[2];       /* the main thread writes to stop[1] to end the drain */
        pthread_t thread;
        int draining;
        /* the drain thread's counts, read after it is joined */
        uint64_t bytes, messages, start_ns, end_ns;
        long cut;          /* connections the daemon closed */
        int poll_errno;
} bench_watch_set;

static int bench_watch_connect(const char *path)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

/* Reads fd's first message (up to its NUL) within timeout_ms; 0 when it is
 * the "watching" event.  What follows it in the same read is dropped (the
 * drain counts from the next read on). */
static int bench_watch_first(int fd, int timeout_ms, char *buf, size_t len)
{
        size_t used = 0;
        uint64_t deadline = bench_now_ns() + (uint64_t)timeout_ms * 1000000ULL;

        for (;;) {
                uint64_t now = bench_now_ns();
                if (now >= deadline || used == len - 1)
                        return -ETIMEDOUT;
                struct pollfd p = {.fd = fd, .events = POLLIN};
                int k = poll(&p, 1, (int)((deadline - now) / 1000000ULL) + 1);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return k < 0 ? -errno : -ETIMEDOUT;
                ssize_t got = recv(fd, buf + used, len - 1 - used, MSG_DONTWAIT);
                if (got < 0 && (errno == EINTR || errno == EAGAIN))
                        continue;
                if (got <= 0)
                        return got < 0 ? -errno : -ECONNRESET;
                used += (size_t)got;
                buf[used] = '\0';
                if (memchr(buf, '\0', used)) {
                        /* buf now starts with the first message, NUL-terminated */
                        if (strstr(buf, "\"error\""))
                                return -EPROTO;
                        return strstr(buf, "\"type\":\"watching\"") && strstr(buf, "\"continues\":true") ? 0
                                                                                                      : -EPROTO;
                }
        }
}

static void bench_watch_close_all(bench_watch_set *s)
{
        for (long i = 0; i < s->n; i++)
                close(s->fds[i]);
        s->n = 0;
}

/* Opens n connections, sends Watch with "more": true on each (no selector),
 * then waits for every one's "watching" event. */
static int bench_watch_open(const char *path, long n, bench_watch_set *s, bench_watch_err *err)
{
        static const char req[] = "{\"method\":\"io.cudackpt.Process.Watch\",\"parameters\":{},\"more\":true}";
        char buf[4096];

        for (long i = 0; i < n; i++) {
                int fd = bench_watch_connect(path);
                if (fd < 0) {
                        bench_watch_note(err, "watcher %ld: connect: %s", i, strerror(-fd));
                        bench_watch_close_all(s);
                        return fd;
                }
                s->fds[s->n++] = fd;
                /* sizeof(req) counts the NUL that ends a Varlink message. */
                if (send(fd, req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req)) {
                        int r = -errno;
                        bench_watch_note(err, "watcher %ld: send: %s", i, strerror(errno));
                        bench_watch_close_all(s);
                        return r < 0 ? r : -EIO;
                }
        }
        for (long i = 0; i < n; i++) {
                int r = bench_watch_first(s->fds[i], BENCH_WATCH_TIMEOUT_MS, buf, sizeof(buf));
                if (r < 0) {
                        bench_watch_note(err, "watcher %ld: no \"watching\" event: %s%s%.200s", i, strerror(-r),
                                         r == -EPROTO ? "; got " : "", r == -EPROTO ? buf : "");
                        bench_watch_close_all(s);
                        return r;
                }
        }
        return 0;
}

static void *bench_watch_drain_main(void *arg)
{
        bench_watch_set *s = arg;
        struct pollfd *p = calloc((size_t)s->n + 1, sizeof(*p));
        char buf[1 << 16];

        s->start_ns = bench_now_ns();
        if (!p) {
                s->poll_errno = ENOMEM;
                return NULL;
        }
        p[0] = (struct pollfd){.fd = s->stop[0], .events = POLLIN};
        for (long i = 0; i < s->n; i++)
                p[i + 1] = (struct pollfd){.fd = s->fds[i], .events = POLLIN};
        for (;;) {
                int k = poll(p, (nfds_t)s->n + 1, -1);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        s->poll_errno = errno;
                        break;
                }
                if (p[0].revents)
                        break;
                for (long i = 1; i <= s->n; i++) {
                        if (p[i].fd < 0 || !p[i].revents)
                                continue;
                        ssize_t got = recv(p[i].fd, buf, sizeof(buf), MSG_DONTWAIT);
                        if (got > 0) {
                                const char *q = buf, *end = buf + got;
                                s->bytes += (uint64_t)got;
                                while ((q = memchr(q, '\0', (size_t)(end - q)))) {
                                        s->messages++;
                                        q++;
                                }
                        } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
                                s->cut++;
                                p[i].fd = -1; /* poll skips it; the main thread closes it */
                        }
                }
        }
        s->end_ns = bench_now_ns();
        free(p);
        return NULL;
}

static int bench_watch_drain_start(bench_watch_set *s)
{
        s->bytes = s->messages = 0;
        s->cut = 0;
        s->poll_errno = 0;
        if (pipe2(s->stop, O_CLOEXEC) < 0)
                return -errno;
        if (pthread_create(&s->thread, NULL, bench_watch_drain_main, s) != 0) {
                close(s->stop[0]);
                close(s->stop[1]);
                return -EAGAIN;
        }
        s->draining = 1;
        return 0;
}

static void bench_watch_drain_stop(bench_watch_set *s)
{
        if (!s->draining)
                return;
        while (write(s->stop[1], "x", 1) < 0 && errno == EINTR)
                ;
        pthread_join(s->thread, NULL);
        close(s->stop[0]);
        close(s->stop[1]);
        s->draining = 0;
}

/* ---- the Lock/Unlock loop ----------------------------------------------- */

typedef struct bench_watch_load {
        pthread_t thread;
        cudackpt_client *c;
        int pid;
        long rate;
        atomic_int stop;
        long cycles;
        uint64_t start_ns, end_ns;
        bench_watch_err err;
} bench_watch_load;

static int bench_watch_call_ok(const char *what, int pid, int r, const cudackpt_reply *reply, const char *want,
                               bench_watch_err *err)
{
        if (r < 0)
                bench_watch_note(err, "%s %d: transport error %s", what, pid, strerror(-r));
        else if (reply->error)
                bench_watch_note(err, "%s %d: %s %s", what, pid, reply->error,
                                 reply->parameters_json ? reply->parameters_json : "");
        else if (!reply->state || strcmp(reply->state, want) != 0)
                bench_watch_note(err, "%s %d: state %s (want %s)", what, pid, reply->state ? reply->state : "(none)",
                                 want);
        else
                return 0;
        return -EIO;
}

static void *bench_watch_load_main(void *arg)
{
        bench_watch_load *l = arg;

        l->start_ns = bench_now_ns();
        for (long k = 0; !atomic_load(&l->stop); k++) {
                if (l->rate > 0) {
                        uint64_t at = l->start_ns + (uint64_t)((double)k * 1e9 / (double)l->rate);
                        struct timespec ts = {.tv_sec = (time_t)(at / 1000000000ULL),
                                              .tv_nsec = (long)(at % 1000000000ULL)};
                        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
                                ;
                        if (atomic_load(&l->stop))
                                break;
                }
                cudackpt_reply reply;
                cudackpt_reply_init(&reply);
                int r = cudackpt_lock(l->c, l->pid, -1, &reply);
                int ok = bench_watch_call_ok("Lock", l->pid, r, &reply, CUDACKPT_STATE_LOCKED, &l->err) == 0;
                cudackpt_reply_clear(&reply);
                if (r < 0)
                        break;
                /* An Unlock after a failed Lock fails too; it is tried anyway so
                 * that a lock that did happen is undone. */
                r = cudackpt_unlock(l->c, l->pid, &reply);
                if (ok)
                        bench_watch_call_ok("Unlock", l->pid, r, &reply, CUDACKPT_STATE_RUNNING, &l->err);
                cudackpt_reply_clear(&reply);
                if (r < 0 || l->err.n > 100)
                        break;
                if (ok)
                        l->cycles++;
        }
        l->end_ns = bench_now_ns();
        return NULL;
}

/* ---- blocks -------------------------------------------------------------- */

typedef struct bench_watch_block {
        double p50;             /* this block's median, us */
        double load_rate;       /* Lock/Unlock cycles per second achieved */
        double events_per_s;    /* messages read by the drain, all watchers */
        double seconds;
} bench_watch_block;

typedef struct bench_watch_ctx {
        const bench_watch_cfg *cfg;
        cudackpt_client *probe;
        cudackpt_client *loader;
        bench_watch_set set;
        bench_samples pool[BENCH_WATCH_CONDS];
        bench_watch_block *blocks[BENCH_WATCH_CONDS]; /* [cond][round] */
        bench_watch_err probe_err, watch_err, load_err;
        long cut;
        uint64_t messages[BENCH_WATCH_CONDS];
} bench_watch_ctx;

static int bench_watch_probe(bench_watch_ctx *x, bench_samples *out, long n)
{
        for (long i = 0; i < n; i++) {
                cudackpt_reply reply;
                cudackpt_reply_init(&reply);
                uint64_t t0 = bench_now_ns();
                int r = cudackpt_get_state(x->probe, x->cfg->probe_pid, &reply);
                uint64_t t1 = bench_now_ns();
                bench_watch_call_ok("GetState", x->cfg->probe_pid, r, &reply, CUDACKPT_STATE_RUNNING, &x->probe_err);
                cudackpt_reply_clear(&reply);
                if (r < 0)
                        return r;
                if (out && bench_samples_add(out, (double)(t1 - t0) / 1e3) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static int bench_watch_block_run(bench_watch_ctx *x, int cond, long round, long calls)
{
        const bench_watch_cfg *cfg = x->cfg;
        int with_watchers = cond == BENCH_WATCH_IDLEN || cond == BENCH_WATCH_LOADN;
        int with_load = cond == BENCH_WATCH_LOAD0 || cond == BENCH_WATCH_LOADN;
        bench_watch_load load;
        bench_watch_block *b = &x->blocks[cond][round];
        bench_samples *pool = &x->pool[cond];
        size_t first = pool->n;
        int r = 0;

        memset(&load, 0, sizeof(load));
        memset(b, 0, sizeof(*b));
        if (with_watchers) {
                if ((r = bench_watch_open(cfg->socket_path, cfg->watchers, &x->set, &x->watch_err)) < 0)
                        return r;
                if ((r = bench_watch_drain_start(&x->set)) < 0) {
                        bench_watch_note(&x->watch_err, "drain thread: %s", strerror(-r));
                        bench_watch_close_all(&x->set);
                        return r;
                }
        }
        if (with_load) {
                load.c = x->loader;
                load.pid = cfg->load_pid;
                load.rate = cfg->load_rate;
                atomic_init(&load.stop, 0);
                if (pthread_create(&load.thread, NULL, bench_watch_load_main, &load) != 0) {
                        r = -EAGAIN;
                        bench_watch_note(&x->load_err, "cannot start the Lock/Unlock thread");
                        with_load = 0;
                }
        }
        uint64_t t0 = 0, t1 = 0;
        if (r == 0)
                r = bench_watch_probe(x, NULL, cfg->warmup);
        if (r == 0) {
                t0 = bench_now_ns();
                r = bench_watch_probe(x, pool, calls);
                t1 = bench_now_ns();
        }
        if (with_load) {
                atomic_store(&load.stop, 1);
                pthread_join(load.thread, NULL);
                if (load.err.n) {
                        if (x->load_err.n++ == 0)
                                snprintf(x->load_err.first, sizeof(x->load_err.first), "%s", load.err.first);
                        x->load_err.n += load.err.n - 1;
                }
                double s = (double)(load.end_ns - load.start_ns) / 1e9;
                b->load_rate = s > 0 ? (double)load.cycles / s : 0;
        }
        if (with_watchers) {
                bench_watch_drain_stop(&x->set);
                double s = (double)(x->set.end_ns - x->set.start_ns) / 1e9;
                b->events_per_s = s > 0 ? (double)x->set.messages / s : 0;
                x->messages[cond] += x->set.messages;
                if (x->set.cut) {
                        x->cut += x->set.cut;
                        bench_watch_note(&x->watch_err, "%ld of %ld watchers were disconnected by the daemon (round %ld, %s)",
                                         x->set.cut, cfg->watchers, round, bench_watch_series[cond]);
                }
                if (x->set.poll_errno)
                        bench_watch_note(&x->watch_err, "drain: poll: %s", strerror(x->set.poll_errno));
                bench_watch_close_all(&x->set);
        }
        b->seconds = (double)(t1 - t0) / 1e9;
        if (pool->n > first)
                b->p50 = bench_median(pool->v + first, pool->n - first); /* sorts the block's slice only */
        return r;
}

/* ---- the report ------------------------------------------------------------ */

static void bench_watch_minmax(const double *v, long n, double *ret_min, double *ret_max)
{
        double lo = 0, hi = 0;
        for (long i = 0; i < n; i++) {
                if (i == 0 || v[i] < lo)
                        lo = v[i];
                if (i == 0 || v[i] > hi)
                        hi = v[i];
        }
        *ret_min = lo;
        *ret_max = hi;
}

static double bench_watch_ratio(double a, double b)
{
        return b > 0 ? a / b : 0;
}

/* One with/without comparison: the ratios, pooled and per round. */
static void bench_watch_compare(const bench_watch_ctx *x, const char *label, const char *load, int cond0, int condn,
                                const bench_stats *st, long rounds, int goal)
{
        double per[1024] = {0}, lo, hi;
        long n = rounds < 1024 ? rounds : 1024;
        for (long i = 0; i < n; i++)
                per[i] = bench_watch_ratio(x->blocks[condn][i].p50, x->blocks[cond0][i].p50);
        bench_watch_minmax(per, n, &lo, &hi);
        double per_med = bench_median(per, (size_t)n);
        double p50 = bench_watch_ratio(st[condn].p50, st[cond0].p50);
        double p99 = bench_watch_ratio(st[condn].p99, st[cond0].p99);
        double mean = bench_watch_ratio(st[condn].mean, st[cond0].mean);
        int met = p50 > 0 && p50 <= 1.10;
        printf("  %s: %ld watchers / none: p50 x%.3f (per round x%.3f-x%.3f, median x%.3f), p99 x%.3f, mean x%.3f",
               label, x->cfg->watchers, p50, lo, hi, per_med, p99, mean);
        if (goal)
                printf("\n    goal \"within 10%% of none\" (p50): %s\n", met ? "met" : "missed");
        else
                printf("; within 10%% at p50: %s\n", met ? "yes" : "no");
        printf("RESULT bench=%s-watchers-ratio load=%s watchers=%ld p50_ratio=%.4f p99_ratio=%.4f mean_ratio=%.4f "
               "round_p50_ratio_min=%.4f round_p50_ratio_max=%.4f round_p50_ratio_median=%.4f within_10pct=%s\n",
               x->cfg->tag, load, x->cfg->watchers, p50, p99, mean, lo, hi, per_med, met ? "yes" : "no");
}

/* Each condition's latencies, per round and in all (st), and a RESULT
 * line each. */
static void bench_watch_report_series(const bench_watch_ctx *x, long rounds, bench_stats *st)
{
        const bench_watch_cfg *cfg = x->cfg;
        static const char *const label[BENCH_WATCH_CONDS] = {
                "no watchers, no load", "watchers, no load", "no watchers, Lock/Unlock loop",
                "watchers, Lock/Unlock loop"};

        printf("  %-34s %9s %9s %9s %9s %9s %9s\n", "", "n", "p50 us", "p90 us", "p99 us", "max us", "mean us");
        for (int c = 0; c < BENCH_WATCH_CONDS; c++) {
                long w = c == BENCH_WATCH_IDLEN || c == BENCH_WATCH_LOADN ? cfg->watchers : 0;
                char name[64];
                if (w)
                        snprintf(name, sizeof(name), "%ld %s", w, label[c]);
                else
                        snprintf(name, sizeof(name), "%s", label[c]);
                bench_stats_compute(x->pool[c].v, x->pool[c].n, &st[c]);
                printf("  %-34s %9zu %9.1f %9.1f %9.1f %9.1f %9.1f\n", name, st[c].n, st[c].p50, st[c].p90,
                       st[c].p99, st[c].max, st[c].mean);
        }
        for (int c = 0; c < BENCH_WATCH_CONDS; c++) {
                long w = c == BENCH_WATCH_IDLEN || c == BENCH_WATCH_LOADN ? cfg->watchers : 0;
                double rate = 0, events = 0;
                printf("  per-round p50 us, %-7s", bench_watch_series[c]);
                for (long k = 0; k < rounds; k++) {
                        printf(" %.1f", x->blocks[c][k].p50);
                        rate += x->blocks[c][k].load_rate;
                        events += x->blocks[c][k].events_per_s;
                }
                if (c >= BENCH_WATCH_LOAD0) {
                        printf("; Lock/Unlock cycles/s");
                        for (long k = 0; k < rounds; k++)
                                printf(" %.0f", x->blocks[c][k].load_rate);
                }
                printf("\n");
                rate /= (double)rounds;
                events /= (double)rounds;
                printf("RESULT bench=%s-watchers series=%s watchers=%ld load=%s n=%zu p50_us=%.2f p90_us=%.2f "
                       "p99_us=%.2f max_us=%.2f mean_us=%.2f lock_unlock_per_s=%.0f events_per_s=%.0f\n",
                       cfg->tag, bench_watch_series[c], w,
                       c >= BENCH_WATCH_LOAD0 ? "lock-unlock" : "none", st[c].n, st[c].p50, st[c].p90,
                       st[c].p99, st[c].max, st[c].mean, rate, events);
        }
}

/* The series, then the Lock/Unlock loop's rate and the events the
 * watchers read, without and with watchers, and the comparisons. */
static void bench_watch_report(bench_watch_ctx *x, long rounds)
{
        const bench_watch_cfg *cfg = x->cfg;
        bench_stats st[BENCH_WATCH_CONDS];
        bench_watch_report_series(x, rounds, st);
        double rate0 = 0, raten = 0, ev_idle = 0, ev_load = 0;
        for (long k = 0; k < rounds; k++) {
                rate0 += x->blocks[BENCH_WATCH_LOAD0][k].load_rate / (double)rounds;
                raten += x->blocks[BENCH_WATCH_LOADN][k].load_rate / (double)rounds;
                ev_idle += x->blocks[BENCH_WATCH_IDLEN][k].events_per_s / (double)rounds;
                ev_load += x->blocks[BENCH_WATCH_LOADN][k].events_per_s / (double)rounds;
        }
        printf("  Lock/Unlock loop: %.0f cycles/s with no watchers, %.0f with %ld (x%.3f)\n", rate0, raten,
               cfg->watchers, bench_watch_ratio(raten, rate0));
        printf("  events read by the watchers: %.0f/s in all without load, %.0f/s in all (%.0f/s each)"
               " with the loop; %lu and %lu in total\n",
               ev_idle, ev_load, ev_load / (double)cfg->watchers,
               (unsigned long)x->messages[BENCH_WATCH_IDLEN], (unsigned long)x->messages[BENCH_WATCH_LOADN]);
        bench_watch_compare(x, "no load", "none", BENCH_WATCH_IDLE0, BENCH_WATCH_IDLEN, st, rounds, 1);
        bench_watch_compare(x, "Lock/Unlock loop", "lock-unlock", BENCH_WATCH_LOAD0, BENCH_WATCH_LOADN, st,
                            rounds, 0);
        printf("RESULT bench=%s-watchers-load watchers=%ld rate0_per_s=%.0f raten_per_s=%.0f rate_ratio=%.4f "
               "events_idle_per_s=%.0f events_load_per_s=%.0f\n",
               cfg->tag, cfg->watchers, rate0, raten, bench_watch_ratio(raten, rate0), ev_idle, ev_load);
}

int bench_watch_run(const bench_watch_cfg *cfg)
{
        bench_watch_ctx x;
        long rounds = cfg->rounds, per_block = cfg->calls / cfg->rounds;
        int r = 0;

        memset(&x, 0, sizeof(x));
        x.cfg = cfg;
        if (per_block < 1)
                per_block = 1;
        printf("\n== 8. GetState with %ld Watch streams open (probe pid %d; Lock/Unlock loop on pid %d, %s;"
               " %ld rounds x 4 blocks of %ld calls after %ld warm-up) ==\n",
               cfg->watchers, cfg->probe_pid, cfg->load_pid, cfg->load_rate ? "paced" : "back to back", rounds,
               per_block, cfg->warmup);
        if (cfg->load_rate)
                printf("  Lock/Unlock loop paced at %ld cycles/s\n", cfg->load_rate);
        x.set.fds = calloc((size_t)cfg->watchers, sizeof(int));
        for (int c = 0; c < BENCH_WATCH_CONDS; c++)
                x.blocks[c] = calloc((size_t)rounds, sizeof(bench_watch_block));
        if (!x.set.fds || !x.blocks[0] || !x.blocks[1] || !x.blocks[2] || !x.blocks[3]) {
                r = -ENOMEM;
                goto errors;
        }
        if ((r = cudackpt_client_connect(cfg->socket_path, &x.probe)) < 0 ||
            (r = cudackpt_client_connect(cfg->socket_path, &x.loader)) < 0) {
                bench_watch_note(&x.probe_err, "connect %s: %s", cfg->socket_path, strerror(-r));
                goto errors;
        }
        cudackpt_client_set_timeout(x.probe, BENCH_WATCH_TIMEOUT_MS);
        cudackpt_client_set_timeout(x.loader, BENCH_WATCH_TIMEOUT_MS);

        for (long k = 0; k < rounds && r == 0; k++) {
                for (int i = 0; i < BENCH_WATCH_CONDS && r == 0; i++) {
                        int cond = k % 2 == 0 ? i : BENCH_WATCH_CONDS - 1 - i;
                        r = bench_watch_block_run(&x, cond, k, per_block);
                }
        }

        if (r == 0)
                bench_watch_report(&x, rounds);
errors:
        if (x.probe_err.n)
                printf("ERROR: watchers: %ld failed GetState calls; first: %s\n", x.probe_err.n, x.probe_err.first);
        if (x.watch_err.n)
                printf("ERROR: watchers: %ld watcher failures; first: %s\n", x.watch_err.n, x.watch_err.first);
        if (x.load_err.n)
                printf("ERROR: watchers: %ld failed Lock/Unlock calls; first: %s\n", x.load_err.n, x.load_err.first);
        if (r < 0 && !x.probe_err.n && !x.watch_err.n && !x.load_err.n)
                printf("ERROR: watchers: stopped: %s\n", strerror(-r));
        if (x.probe_err.n || x.watch_err.n || x.load_err.n)
                r = -EIO;
        cudackpt_client_free(x.probe);
        cudackpt_client_free(x.loader);
        for (int c = 0; c < BENCH_WATCH_CONDS; c++) {
                bench_samples_free(&x.pool[c]);
                free(x.blocks[c]);
        }
        free(x.set.fds);
        return r;
}
