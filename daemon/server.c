/* server.c: building and wiring the daemon's parts, accepting connections
 * (their limits; net/peer.c reads their credentials), the start-up on
 * workers, signals, systemd notification, and the stop as a hold count
 * (server.h). */
#include "server.h"

#include "host/discover.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "auth/access.h"
#include "net/conn.h"
#include "net/listen.h"
#include "net/peer.h"
#include "jobs/leasehooks.h"
#include "base/log.h"
#include "host/procindex.h"
#include "saves/savesetup.h"

static struct server *server_of_conn(const struct conn *c)
{
        return (struct server *)((char *)c->owner - offsetof(struct server, conn_owner));
}

/* c's last reference is gone: it leaves the server's list, its share and
 * the holds on the daemon's life. */
static void conn_free_cb(struct conn *c)
{
        struct server *s = server_of_conn(c);

        share_give(&s->conns_share, c->caller.uid, access_privileged(s->cfg, &c->caller));
        if (c->prev)
                c->prev->next = c->next;
        else
                s->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        s->n_conns--;
        accept_freed(&s->listen.accept); /* its descriptors are free */
        life_release(&s->life);
}

static void refused_close_cb(uv_handle_t *h)
{
        free(h);
}

/* A connection accepted (accept.h): admitted within the limits, or closed. */
static void connection_cb(void *data, int fd)
{
        struct server *s = data;
        struct conn *c;
        struct share_refusal limit = { 0 };

        if (life_stopping(&s->life)) {
                close(fd);
                return;
        }
        if (s->conns_share.used >= s->conns_share.limit) {
                metrics_count(&s->metrics, METRICS_REFUSED_MAX_CONNECTIONS);
                log_warning("Refusing connection: too many connections in total (limit %u)",
                            s->cfg->max_connections);
                close(fd);
                return;
        }
        c = calloc(1, sizeof(*c));
        if (!c || uv_pipe_init(s->loop, &c->pipe, 0) < 0) {
                free(c);
                close(fd);
                return;
        }
        c->owner = &s->conn_owner;
        if (uv_pipe_open(&c->pipe, fd) < 0) {
                close(fd);
                c->pipe.data = c;
                uv_close((uv_handle_t *)&c->pipe, refused_close_cb);
                return;
        }
        peer_read(fd, &c->caller);
        if (share_take(&s->conns_share, c->caller.uid, access_privileged(s->cfg, &c->caller), &limit) < 0) {
                bool mine = limit.verdict == SHARE_UID_FULL;
                metrics_count(&s->metrics, mine ? METRICS_REFUSED_MAX_PER_UID : METRICS_REFUSED_MAX_CONNECTIONS);
                log_warning("Refusing connection from uid %u pid %d: too many connections %s (limit %u)",
                            (unsigned)c->caller.uid, (int)c->caller.pid,
                            mine ? "of this uid" : "of unprivileged callers", limit.limit);
                if (c->caller.has_pidfd)
                        close(c->caller.pidfd);
                pidns_free(&c->caller.pidns);
                uv_close((uv_handle_t *)&c->pipe, refused_close_cb);
                return;
        }
        metrics_count(&s->metrics, METRICS_CONNECTIONS_ACCEPTED);
        c->next = s->conns;
        if (s->conns)
                s->conns->prev = c;
        s->conns = c;
        s->n_conns++;
        life_hold(&s->life); /* until conn_free_cb */
        (void)conn_start(c);
}

static void notify_status(struct server *s)
{
        if (!s->notify)
                return;
        sd_notifyf(0, "STATUS=%s: %u connections, %u operations running, %u queued",
                   life_stopping(&s->life) ? "Stopping" : "Serving", s->n_conns, s->sched.n_running,
                   s->sched.n_ops - s->sched.n_running);
}

static void notify_timer_cb(uv_timer_t *t)
{
        struct server *s = t->data;

        /* This runs on the loop thread: a ping proves the loop turns. */
        if (s->watchdog_usec > 0)
                sd_notify(0, "WATCHDOG=1");
        notify_status(s);
}

static void close_handle(uv_handle_t *h)
{
        if (!uv_is_closing(h))
                uv_close(h, NULL);
}

static void op_started_cb(void *ctx, const struct sched_op *op)
{
        struct server *s = ctx;

        watch_op_started(&s->watch, op);
}

static void op_finished_cb(void *ctx, const struct sched_op *op)
{
        struct server *s = ctx;

        watch_op_finished(&s->watch, op);
        /* Only an operation that reached its process says anything of it. */
        if (op->result.pinned)
                lease_op_finished(&s->leases, op->result.pinned_pid, op->result.pinned_start_time, op->method,
                                  &op->result);
}

/* Everything that held the daemon's life has finished: the last handles
 * close and the loop ends. */
static void stopped_cb(struct life *l)
{
        struct server *s = (struct server *)((char *)l - offsetof(struct server, life));

        lease_close(&s->leases);
        watch_close(&s->watch);
        sched_close(&s->sched);
        close_handle((uv_handle_t *)&s->sig_term);
        close_handle((uv_handle_t *)&s->sig_int);
        if (s->notify)
                close_handle((uv_handle_t *)&s->notify_timer);
}

/* The stop begins: no more connections.  The features' stop hooks run
 * next (the leases are kept), then stop_serving_cb. */
static void stop_cb(struct life_hook *h)
{
        struct server *s = (struct server *)((char *)h - offsetof(struct server, stop_hook));

        log_info("Shutting down: %u operations running, %u connections", s->sched.n_running,
                 s->n_conns);
        if (s->notify)
                sd_notify(0, "STOPPING=1");
        listen_stop(&s->listen);
}

/* Queued operations are answered with ShuttingDown and idle connections
 * closed; busy ones close once answered (conn_request_done). */
static void stop_serving_cb(struct life_hook *h)
{
        struct server *s = (struct server *)((char *)h - offsetof(struct server, stop_serving_hook));
        struct conn *c, *next;

        (void)sched_cancel_queued(&s->sched);
        for (c = s->conns; c; c = next) {
                next = c->next;
                if (!c->busy || c->streaming)
                        conn_close(c);
        }
}

static void signal_cb(uv_signal_t *h, int signum)
{
        struct server *s = h->data;

        if (life_stopping(&s->life)) {
                log_warning("Second signal %s: exiting at once with %u driver calls running",
                            strsignal(signum), s->sched.n_running);
                _exit(1);
        }
        life_stop(&s->life);
}

static void driver_work_cb(uv_work_t *w)
{
        struct server *s = w->data;

        if (driver_open(&s->drv, s->cfg->driver_path) == 0) {
                (void)driver_start(&s->drv);
                /* The file to look for in targets' maps (discover.h). */
                (void)discover_lib_of(*(void **)&s->drv.cu_get_state, &s->source.driver_lib);
        }
}

static void index_work_cb(uv_work_t *w)
{
        struct server *s = w->data;

        if (procindex_open(&s->source.driver_lib, s->cfg->process_index_max, s->cfg->process_index_tracepoint,
                           &s->index_opened, s->index_why, sizeof(s->index_why)) < 0)
                s->index_opened = NULL;
}

static void index_ready_cb(uv_work_t *w, int status)
{
        struct server *s = w->data;
        struct procindex *ix = s->index_opened;

        (void)status;
        s->index_opening = false;
        if (ix && life_stopping(&s->life)) {
                procindex_free(ix);
        } else if (ix) {
                atomic_store(&s->source.index, ix);
                bool tp = strcmp(procindex_hook(ix), "tracepoint") == 0;
                log_info("Process index ready (BPF, mmaps seen by %s%s): ListProcesses and Watch read only the "
                         "processes that may map the driver",
                         procindex_hook(ix),
                         tp ? ", as process_index_tracepoint asks: every system call on the node costs ~17 ns "
                              "more while the daemon runs"
                            : " on security_mmap_file");
        } else {
                log_info("No process index (%s): ListProcesses and Watch scan /proc", s->index_why);
        }
        s->index_opened = NULL;
        life_release(&s->life);
}

static void gpumem_work_cb(uv_work_t *w)
{
        struct server *s = w->data;

        (void)gpumem_open(&s->gpumem, s->cfg->nvml_path);
}

static void gpumem_ready_cb(uv_work_t *w, int status)
{
        struct server *s = w->data;

        (void)status;
        s->gpumem_opening = false;
        if (s->gpumem.available)
                log_info("NVML from %s, %u GPU(s): ListProcesses shows the GPU memory of each process",
                         s->cfg->nvml_path, s->gpumem.n_gpus);
        else
                log_info("No NVML (%s): ListProcesses shows no GPU memory", s->gpumem.reason);
        /* From now on the listings read it (list.c, on the loop thread),
         * and restores are checked against it. */
        list_gpumem_ready(&s->lists);
        fit_ready(&s->fit);
        if (fit_active(&s->fit))
                log_info("Restores are checked against the GPUs' free memory (margin %" PRIu64 " MiB)",
                         s->cfg->restore_gpu_margin_mib);
        else
                log_warning("Restores are not checked against the GPUs' free memory: %s",
                            s->gpumem.available ? "NVML lacks nvmlDeviceGetMemoryInfo" : s->gpumem.reason);
        life_release(&s->life);
}

/* After the driver: the index looks for the file the driver was loaded from. */
static void index_start(struct server *s)
{
        if (s->cfg->process_index_max == 0) {
                log_info("No process index (process_index_max is 0): ListProcesses and Watch scan /proc");
                return;
        }
        if (!s->source.driver_lib.known) {
                log_info("No process index (the driver's file is not known): ListProcesses and Watch scan /proc");
                return;
        }
        s->index_work.data = s;
        if (uv_queue_work(s->loop, &s->index_work, index_work_cb, index_ready_cb) == 0) {
                s->index_opening = true;
                life_hold(&s->life); /* until index_ready_cb */
        }
}

static void driver_ready_cb(uv_work_t *w, int status)
{
        struct server *s = w->data;
        int r;

        (void)status;
        /* The first line an operator reads says which driver serves. */
        if (s->drv.simulated)
                log_warning("SIMULATED CUDA DRIVER loaded from %s: no GPU is involved, for development and tests only",
                            s->cfg->driver_path);
        if (s->drv.available)
                log_info("CUDA driver %d.%d from %s, %u GPU(s)", s->drv.version / 1000,
                         s->drv.version % 1000 / 10, s->cfg->driver_path, s->drv.n_devices);
        else
                log_error("No usable CUDA driver: %s; every operation will fail with DriverUnavailable",
                          s->drv.reason);

        if (life_stopping(&s->life)) {
                life_release(&s->life); /* start-up's */
                return;
        }
        r = listen_start(&s->listen, s->loop, s->cfg, &s->metrics, connection_cb, s);
        if (r < 0) {
                s->exit_code = 1;
                life_stop(&s->life);
                life_release(&s->life); /* start-up's */
                return;
        }
        index_start(s);
        s->gpumem_work.data = s;
        if (uv_queue_work(s->loop, &s->gpumem_work, gpumem_work_cb, gpumem_ready_cb) == 0) {
                s->gpumem_opening = true;
                life_hold(&s->life); /* until gpumem_ready_cb */
        }
        /* Before READY=1 and before any call is read: the leases the last
         * daemon left are honoured first. */
        lease_restore(&s->leases);
        if (s->notify) {
                sd_notify(0, "READY=1");
                notify_status(s);
                uint64_t period = s->watchdog_usec > 0 ? s->watchdog_usec / 2 / 1000 : 5000;
                if (period < 1)
                        period = 1;
                uv_timer_start(&s->notify_timer, notify_timer_cb, period, period);
        }
        life_release(&s->life); /* start-up's */
}

/* The GPU records of the last daemon are read back (fit.h), in the
 * directory the lease store opened and checked (privdir.h), through a
 * descriptor of its own: none where the lease store has none. */
static int fit_start(struct server *s)
{
        char why[512];
        int fd = s->leases.store_fd >= 0 ? fcntl(s->leases.store_fd, F_DUPFD_CLOEXEC, 0) : -1;
        int r = fit_init(&s->fit, s->cfg, &s->gpumem, fd, s->runtime_dir, why, sizeof(why));

        if (r < 0)
                return r;
        s->sched.fit = &s->fit;
        if (!s->fit.store)
                log_warning("No store of GPU records (%s): after a restart, restores are checked against an "
                            "estimate from host memory",
                            s->leases.store_fd < 0 ? "the runtime directory is not one only root may change"
                                                   : "cannot duplicate its descriptor");
        else if (why[0])
                log_warning("GPU records in %s refused: %s", s->fit.store, why);
        else if (s->fit.n_recs)
                log_info("GPU records of %zu checkpointed process(es) read back from %s", s->fit.n_recs,
                         s->fit.store);
        return 0;
}

/* The jobs run for callers and their saves (savesetup.h): a saves_dir
 * that cannot be used stops the start. */
static int saves_start(struct server *s)
{
        char why[512];
        int r = savesetup_init(&s->saves, &(struct saves_deps){ .loop = s->loop, .cfg = s->cfg,
                                                                .metrics = &s->metrics, .life = &s->life,
                                                                .runtime_dir = s->runtime_dir },
                               why, sizeof(why));

        if (r < 0)
                log_error("Failed to use saves_dir %s: %s", s->cfg->saves_dir, why);
        return r;
}

/* SIGTERM and SIGINT stop the daemon; systemd's notification socket and
 * watchdog, when it gives them. */
static void signals_init(struct server *s)
{
        uint64_t usec = 0;

        s->notify = secure_getenv("NOTIFY_SOCKET") != NULL;
        if (sd_watchdog_enabled(0, &usec) > 0)
                s->watchdog_usec = usec;
        uv_signal_init(s->loop, &s->sig_term);
        uv_signal_init(s->loop, &s->sig_int);
        s->sig_term.data = s->sig_int.data = s;
        uv_signal_start(&s->sig_term, signal_cb, SIGTERM);
        uv_signal_start(&s->sig_int, signal_cb, SIGINT);
        if (s->notify) {
                uv_timer_init(s->loop, &s->notify_timer);
                s->notify_timer.data = s;
        }
}

int server_init(struct server *s, uv_loop_t *loop, const struct config *cfg)
{
        struct group_lease_hooks hooks;
        int r;

        memset(s, 0, sizeof(*s));
        s->loop = loop;
        s->cfg = cfg;
        life_init(&s->life, stopped_cb);
        s->stop_hook.stop_cb = stop_cb;
        life_on_stop(&s->life, &s->stop_hook);
        s->conn_owner = (struct conn_owner){ .loop = loop, .cfg = cfg, .metrics = &s->metrics, .life = &s->life,
                                             .message_cb = methods_message_cb, .free_cb = conn_free_cb,
                                             .userdata = &s->methods };
        r = sched_init(&s->sched, loop, cfg, &s->drv, proccall_op_done_cb);
        if (r < 0)
                return r;
        s->sched.hooks = (struct sched_hooks){ .started = op_started_cb, .finished = op_finished_cb, .ctx = s };
        metrics_init(&s->metrics);
        static const char *const conn_keys[] = { "max_connections", "max_connections_per_uid",
                                                 "max_connections_reserved" };

        share_init(&s->conns_share, conn_keys, cfg->max_connections, cfg->max_connections_per_uid,
                   cfg->max_connections_reserved);
        s->conns_share.per_uid_everyone = true; /* root's leaks are bounded too */
        s->source.index_max = cfg->process_index_max;
        jobs_init(&s->jobs, loop, cfg, &s->drv, &s->sched, &s->metrics, &s->source, &s->life);
        leasehooks_of(&s->leases, &hooks);
        group_init(&s->groups, &s->jobs, &hooks);
        list_init(&s->lists, &s->jobs, &s->gpumem);
        s->runtime_dir = config_runtime_dir(cfg);
        lease_init(&s->leases,
                   &(struct lease_deps){ .loop = loop, .cfg = cfg, .metrics = &s->metrics, .life = &s->life,
                                         .groups = &s->groups, .watch = &s->watch },
                   s->runtime_dir);
        r = fit_start(s);
        if (r < 0)
                return r;
        watch_init(&s->watch, &(struct watch_deps){ .loop = loop, .cfg = cfg, .sched = &s->sched,
                                                    .metrics = &s->metrics, .source = &s->source, .life = &s->life });
        r = saves_start(s);
        if (r < 0)
                return r;
        s->proccall = (struct proccall){ .cfg = cfg, .drv = &s->drv, .sched = &s->sched, .metrics = &s->metrics,
                                         .life = &s->life, .leases = &s->leases };
        s->status = (struct status){ .cfg = cfg, .drv = &s->drv, .sched = &s->sched, .source = &s->source,
                                     .jobs = &s->jobs, .leases = &s->leases, .watch = &s->watch, .metrics = &s->metrics,
                                     .n_conns = &s->n_conns, .index_opening = &s->index_opening,
                                     .index_why = s->index_why };
        methods_init(&s->methods, &(struct methods_features){ .proccall = &s->proccall, .groups = &s->groups,
                                                              .lists = &s->lists,
                                                              .leases = &s->leases, .watch = &s->watch,
                                                              .saves = &s->saves, .status = &s->status, .metrics = &s->metrics });
        s->stop_serving_hook.stop_cb = stop_serving_cb;
        life_on_stop(&s->life, &s->stop_serving_hook);
        signals_init(s);
        return 0;
}

int server_run(struct server *s)
{
        life_hold(&s->life); /* start-up's: until driver_ready_cb */
        s->driver_work.data = s;
        uv_queue_work(s->loop, &s->driver_work, driver_work_cb, driver_ready_cb);
        uv_run(s->loop, UV_RUN_DEFAULT);
        return s->exit_code;
}

void server_free(struct server *s)
{
        procindex_free(atomic_load(&s->source.index));
        gpumem_close(&s->gpumem);
        fit_free(&s->fit);
        sched_free(&s->sched);
        driver_close(&s->drv);
        listen_free(&s->listen);
        share_free(&s->conns_share);
        jobs_free(&s->jobs);
        watch_free(&s->watch);
        savesetup_free(&s->saves);
        free(s->runtime_dir);
}
