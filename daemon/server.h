/* server.h: the daemon as a whole: it builds the parts, wires them
 * together, and runs their start-up and their stop.  Each part is given
 * what it needs at its init (the loop, the configuration, the metrics, the
 * life); what it does is in its own room.
 *
 * Start-up: the driver is loaded and initialised on a worker thread; then
 * the sockets are taken (socket activation) or bound (listen.h); the
 * process index and NVML begin to open on workers; the leases of the last
 * daemon are read back (lease.h); READY=1 is sent; and calls are read.
 * The stop (SIGTERM, SIGINT, or sockets that cannot be served) is a hold
 * count (life.h): stop accepting, keep the leases in their store, answer
 * queued operations with ShuttingDown, close idle connections and busy
 * ones once answered, let running driver calls, groups and the opening of
 * the index and NVML finish; then the loop ends and the daemon exits, 0
 * (1 when no socket could be served).  A second signal exits at once. */
#ifndef CUDACKPT_SERVER_H
#define CUDACKPT_SERVER_H

#include <stdbool.h>
#include <uv.h>

#include "base/config.h"
#include "net/conn.h"
#include "run/driver.h"
#include "host/gpumem.h"
#include "run/fit.h"
#include "jobs/group.h"
#include "jobs/jobs.h"
#include "jobs/lease.h"
#include "jobs/list.h"
#include "net/listen.h"
#include "base/life.h"
#include "methods.h"
#include "base/metrics.h"
#include "proccall.h"
#include "run/sched.h"
#include "saves/savejobs.h"
#include "jobs/select.h"
#include "status.h"
#include "jobs/watch.h"

struct server {
        uv_loop_t *loop;
        const struct config *cfg;
        struct driver drv;
        struct gpumem gpumem;           /* NVML, for ListProcesses (gpumem.h): opened */
        uv_work_t gpumem_work;          /* on a worker after READY=1, */
        bool gpumem_opening;            /* then read by listings (list_gpumem_ready) */
        struct fit fit;                 /* restores checked against free GPU memory (fit.h) */
        struct sched sched;
        struct select_source source;    /* candidate CUDA processes: the index or /proc (select.h) */
        struct jobs jobs;               /* what groups and listings share (jobs.h) */
        struct group_table groups;      /* group operations in flight */
        struct list_table lists;        /* ListProcesses (list.h) */
        struct lease_table leases;      /* leases held (lease.h) */
        struct watch_table watch;       /* watchers (watch.h) */
        struct saves saves;             /* jobs run for callers, their saves (savejobs.h) */
        struct metrics metrics;
        struct proccall proccall;       /* the calls on one process (proccall.h) */
        struct status status;           /* GetStatus and GetMetrics (status.h) */
        struct methods methods;         /* from a method to its handler (methods.h) */
        uv_work_t driver_work;          /* loads the driver off the loop thread */
        uv_work_t index_work;           /* opens the process index off it */
        struct procindex *index_opened; /* index_work's result, and why not */
        char index_why[512];
        bool index_opening;
        struct listen_set listen;       /* the listening sockets (listen.h) */
        char *runtime_dir;              /* the lease store's ($RUNTIME_DIRECTORY or the socket's) */
        uv_signal_t sig_term, sig_int;
        uv_timer_t notify_timer;        /* watchdog pings and STATUS= updates */
        uint64_t watchdog_usec;
        bool notify;                    /* NOTIFY_SOCKET is set */
        struct life life;               /* holds until everything has finished (life.h) */
        struct life_hook stop_hook;     /* the stop's beginning: listeners close */
        struct life_hook stop_serving_hook; /* after the features': queues and connections */
        struct conn_owner conn_owner;   /* what the connections share (conn.h) */
        struct conn *conns;             /* all open connections */
        unsigned n_conns;
        struct share conns_share;       /* open connections, by uid (share.h) */
        int exit_code;
};

int server_init(struct server *s, uv_loop_t *loop, const struct config *cfg);
/* Runs the loop until shutdown; returns the process's exit code. */
int server_run(struct server *s);
void server_free(struct server *s);


#endif
