/* metrics.c: the counters and their Prometheus text. */
#include "base/metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef CUDACKPT_VERSION
#define CUDACKPT_VERSION "0"
#endif

/* Seconds: a GetState takes tens of microseconds, a checkpoint of a large
 * GPU minutes. */
static const double bounds[METRICS_BUCKETS] = { 0.0001, 0.001, 0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900 };

void metrics_init(struct metrics *m)
{
        struct timespec ts;

        memset(m, 0, sizeof(*m));
        clock_gettime(CLOCK_REALTIME, &ts);
        m->start_time = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void metrics_op(struct metrics *m, enum proto_method method, const char *result, uint64_t duration_ns)
{
        struct metrics_histogram *h;
        double s = (double)duration_ns / 1e9;
        size_t i;

        if (method >= PROTO_METHODS)
                return;
        for (i = 0; i < m->n_results; i++)
                if (m->results[i].method == method && strcmp(m->results[i].result, result) == 0)
                        break;
        if (i == m->n_results && i < METRICS_MAX_RESULTS)
                m->results[m->n_results++] = (struct metrics_result){ .method = method, .result = result };
        if (i < m->n_results)
                m->results[i].n++;
        h = &m->duration[method];
        for (i = 0; i < METRICS_BUCKETS && s > bounds[i]; i++)
                ;
        if (i < METRICS_BUCKETS)
                h->bucket[i]++;
        h->count++;
        h->sum += s;
}

struct text {
        char *buf;
        size_t len, cap;
        bool oom;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct text *t, const char *fmt, ...)
{
        va_list ap;
        int n;

        if (t->oom)
                return;
        for (;;) {
                va_start(ap, fmt);
                n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
                va_end(ap);
                if (n < 0) {
                        t->oom = true;
                        return;
                }
                if ((size_t)n < t->cap - t->len) {
                        t->len += (size_t)n;
                        return;
                }
                size_t cap = t->cap * 2 + (size_t)n;
                char *nb = realloc(t->buf, cap);
                if (!nb) {
                        t->oom = true;
                        return;
                }
                t->buf = nb;
                t->cap = cap;
        }
}

static void family(struct text *t, const char *name, const char *type, const char *help)
{
        put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void gauge(struct text *t, const char *name, const char *help, double v)
{
        family(t, name, "gauge", help);
        put(t, "%s %.17g\n", name, v);
}

static void counters(struct text *t, const struct metrics *m, const char *name, const char *help,
                     const char *label, const enum metrics_counter *cs, const char *const *values, size_t n)
{
        family(t, name, "counter", help);
        for (size_t i = 0; i < n; i++) {
                if (label)
                        put(t, "%s{%s=\"%s\"} %llu\n", name, label, values[i],
                            (unsigned long long)m->counter[cs[i]]);
                else
                        put(t, "%s %llu\n", name, (unsigned long long)m->counter[cs[i]]);
        }
}

/* The daemon and the driver it serves with. */
static void put_build(struct text *t, const struct metrics *m, const struct metrics_gauges *g)
{
        family(t, "cudackpt_build_info", "gauge", "The daemon's version; always 1.");
        put(t, "cudackpt_build_info{version=\"%s\"} 1\n", CUDACKPT_VERSION);
        family(t, "cudackpt_driver_info", "gauge",
               "The CUDA driver the daemon loaded (1), or 0 when it has none usable.");
        put(t, "cudackpt_driver_info{version=\"%d.%d\",simulated=\"%s\"} %d\n", g->driver_version / 1000,
            g->driver_version % 1000 / 10, g->simulated ? "true" : "false", g->driver ? 1 : 0);
        gauge(t, "cudackpt_gpus", "GPUs the driver reports.", g->gpus);
        gauge(t, "cudackpt_start_time_seconds", "When the daemon started, in seconds since the epoch.",
              m->start_time);
        gauge(t, "cudackpt_workers", "Worker threads for driver calls (the workers setting).", g->workers);
}

static void put_durations(struct text *t, const struct metrics *m)
{
        family(t, "cudackpt_operation_duration_seconds", "histogram",
               "Time from a call's arrival to its answer, by method.");
        for (int k = 0; k < PROTO_METHODS; k++) {
                const struct metrics_histogram *h = &m->duration[k];
                const char *name = proto_method_name((enum proto_method)k);
                uint64_t cum = 0;
                if (h->count == 0)
                        continue;
                for (int b = 0; b < METRICS_BUCKETS; b++) {
                        cum += h->bucket[b];
                        put(t, "cudackpt_operation_duration_seconds_bucket{method=\"%s\",le=\"%g\"} %llu\n", name,
                            bounds[b], (unsigned long long)cum);
                }
                put(t, "cudackpt_operation_duration_seconds_bucket{method=\"%s\",le=\"+Inf\"} %llu\n", name,
                    (unsigned long long)h->count);
                put(t, "cudackpt_operation_duration_seconds_sum{method=\"%s\"} %.9g\n", name, h->sum);
                put(t, "cudackpt_operation_duration_seconds_count{method=\"%s\"} %llu\n", name,
                    (unsigned long long)h->count);
        }
}

/* Calls answered and operations in flight. */
static void put_operations(struct text *t, const struct metrics *m, const struct metrics_gauges *g)
{
        family(t, "cudackpt_operations_total", "counter",
               "Calls answered, by method and result (ok or the error's short name).");
        for (size_t i = 0; i < m->n_results; i++)
                put(t, "cudackpt_operations_total{method=\"%s\",result=\"%s\"} %llu\n",
                    proto_method_name(m->results[i].method), m->results[i].result,
                    (unsigned long long)m->results[i].n);

        put_durations(t, m);
        gauge(t, "cudackpt_operations_in_flight", "Operations running on worker threads now.", g->running);
        gauge(t, "cudackpt_operations_queued",
              "Operations waiting behind another on the same process, or for a worker thread.", g->queued);
        gauge(t, "cudackpt_groups_in_flight", "Group operations and ListProcesses calls in flight.", g->groups);
}

static void put_connections(struct text *t, const struct metrics *m, const struct metrics_gauges *g)
{
        gauge(t, "cudackpt_connections", "Client connections open now.", g->connections);
        {
                static const enum metrics_counter c[] = { METRICS_CONNECTIONS_ACCEPTED };
                counters(t, m, "cudackpt_connections_accepted_total", "Client connections accepted.", NULL, c,
                         NULL, 1);
        }
        {
                static const enum metrics_counter c[] = { METRICS_REFUSED_MAX_CONNECTIONS,
                                                          METRICS_REFUSED_MAX_PER_UID };
                static const char *const v[] = { "max_connections", "max_connections_per_uid" };
                counters(t, m, "cudackpt_connections_refused_total",
                         "Connections closed at accept, by the limit reached.", "reason", c, v, 2);
        }
        {
                static const enum metrics_counter c[] = { METRICS_ACCEPT_PAUSED_DESCRIPTORS,
                                                          METRICS_ACCEPT_PAUSED_OTHER };
                static const char *const v[] = { "descriptors", "other" };
                counters(t, m, "cudackpt_accept_pauses_total",
                         "Times accepting connections paused because accept failed (accept_retry_ms), by why: "
                         "descriptors (EMFILE, ENFILE) or other (a seccomp filter's EPERM, ...).",
                         "reason", c, v, 2);
        }
        {
                static const enum metrics_counter c[] = { METRICS_CUT_SLOW_READER, METRICS_CUT_MESSAGE_TOO_LARGE,
                                                          METRICS_CUT_INVALID_REQUEST, METRICS_CUT_IDLE };
                static const char *const v[] = { "slow_reader", "message_too_large", "invalid_request", "idle" };
                counters(t, m, "cudackpt_disconnects_total", "Connections the daemon closed, by reason.",
                         "reason", c, v, 4);
        }
}

static void put_leases(struct text *t, const struct metrics *m, const struct metrics_gauges *g)
{
        gauge(t, "cudackpt_leases", "Leases held now.", g->leases);
        gauge(t, "cudackpt_leased_processes", "Processes under a lease now.", g->leased_processes);
        gauge(t, "cudackpt_lease_store_durable",
              "1 when the leases held will outlive a restart of the daemon (a lease store in a directory only root "
              "may change, its last write worked), 0 when they will not.",
              g->lease_store_durable);
        {
                static const enum metrics_counter c[] = { METRICS_LEASES_GRANTED };
                counters(t, m, "cudackpt_leases_granted_total", "Leases granted.", NULL, c, NULL, 1);
        }
        {
                static const enum metrics_counter c[] = { METRICS_LEASES_RELEASED,  METRICS_LEASES_FINISHED,
                                                          METRICS_LEASES_EXPIRED,   METRICS_LEASES_CLOSED,
                                                          METRICS_LEASES_EXITED,    METRICS_LEASES_SUPERSEDED,
                                                          METRICS_LEASES_NOT_HONOURED };
                static const char *const v[] = { "released", "finished", "expired", "closed",
                                                 "exited",   "superseded", "not_honoured" };
                counters(t, m, "cudackpt_leases_ended_total",
                         "Leases ended, by why: expired and closed ones were undone.", "reason", c, v, 7);
        }
        {
                static const enum metrics_counter c[] = { METRICS_UNDOS_OK, METRICS_UNDOS_FAILED };
                static const char *const v[] = { "ok", "failed" };
                counters(t, m, "cudackpt_lease_undos_total",
                         "Undos of expired or closed leases, by whether every process came back to running.",
                         "result", c, v, 2);
        }
}

/* Watchers, and how the daemon finds the processes it lists. */
static void put_processes(struct text *t, const struct metrics *m, const struct metrics_gauges *g)
{
        gauge(t, "cudackpt_watchers", "Watch streams open now.", g->watchers);
        {
                static const enum metrics_counter c[] = { METRICS_WATCH_EVENTS };
                counters(t, m, "cudackpt_watch_events_total", "Events sent to watchers.", NULL, c, NULL, 1);
        }
        gauge(t, "cudackpt_process_index",
              "1 when ListProcesses and Watch read the BPF process index, 0 when they scan /proc.",
              g->process_index);
        family(t, "cudackpt_process_index_info", "gauge",
               "How the process index sees mmaps: hook fentry, tracepoint (a cost on every system call of the "
               "node), or none (no index: /proc scans).");
        put(t, "cudackpt_process_index_info{hook=\"%s\"} 1\n", g->index_hook ? g->index_hook : "none");
        gauge(t, "cudackpt_process_index_processes",
              "Processes that may map the driver, as the process index last listed them.",
              (double)g->index_processes);
        family(t, "cudackpt_process_scans_total", "counter",
               "Lists of candidate CUDA processes read, by where from: the process index or /proc.");
        put(t, "cudackpt_process_scans_total{source=\"index\"} %llu\n", (unsigned long long)g->scans_index);
        put(t, "cudackpt_process_scans_total{source=\"proc\"} %llu\n", (unsigned long long)g->scans_proc);
}

/* Jobs run for callers and their saves. */
static void put_jobs(struct text *t, const struct metrics *m)
{
        {
                static const enum metrics_counter c[] = { METRICS_JOBS_STARTED };
                counters(t, m, "cudackpt_jobs_started_total", "Jobs started for callers (StartJob, RestoreJob).",
                         NULL, c, NULL, 1);
        }
        {
                static const enum metrics_counter c[] = { METRICS_JOBS_ENDED, METRICS_JOBS_SAVED };
                static const char *const v[] = { "ended", "saved" };
                counters(t, m, "cudackpt_jobs_ended_total",
                         "Jobs run for callers that ended, by how: ended (on their own, or stopped) or saved.",
                         "how", c, v, 2);
        }
        {
                static const enum metrics_counter c[] = { METRICS_SAVES_FAILED };
                counters(t, m, "cudackpt_saves_failed_total", "SaveJob calls that failed after their checks.",
                         NULL, c, NULL, 1);
        }
}

char *metrics_text(const struct metrics *m, const struct metrics_gauges *g)
{
        struct text t = { .cap = 8192 };

        t.buf = malloc(t.cap);
        if (!t.buf)
                return NULL;
        t.buf[0] = '\0';
        put_build(&t, m, g);
        put_operations(&t, m, g);
        put_connections(&t, m, g);
        put_leases(&t, m, g);
        put_processes(&t, m, g);
        put_jobs(&t, m);
        if (t.oom) {
                free(t.buf);
                return NULL;
        }
        return t.buf;
}
