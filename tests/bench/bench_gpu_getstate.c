/* bench_gpu_getstate.c: the getstate benchmark (see bench_gpu.c). */
#include "bench_gpu.h"

/* ------------------------------------------------------------------------
 * 1. GetState: daemon round trip vs direct driver call
 * ------------------------------------------------------------------------ */
/* The same driver call handed to a libuv worker thread and its completion
 * back to a loop, as the daemon does: the cost of the two thread hand-offs
 * on this machine, with no socket, parsing or pinning. */
struct bench_gpu_hop {
        uv_work_t work;
        const bench_gpu_driver *drv;
        int pid;
        CUprocessState state;
        CUresult result;
        uint64_t call_ns; /* the driver call alone, on the worker */
};

static void bench_gpu_hop_work(uv_work_t *w)
{
        struct bench_gpu_hop *h = w->data;
        uint64_t t0 = bench_now_ns();

        h->result = h->drv->get_state(h->pid, &h->state);
        h->call_ns = bench_now_ns() - t0;
}

static void bench_gpu_hop_done(uv_work_t *w, int status)
{
        (void)w;
        (void)status;
}

/* The same with a thread that spins instead of sleeping between calls: the
 * floor of any hand-off, and the driver call on a thread that never idles. */
struct bench_gpu_spin {
        const bench_gpu_driver *drv;
        int pid;
        atomic_long seq, done; /* requests posted, requests finished */
        atomic_int stop;
        CUprocessState state;
        CUresult result;
        uint64_t call_ns;
};

static void *bench_gpu_spin_main(void *arg)
{
        struct bench_gpu_spin *sp = arg;
        long seen = 0;

        while (!atomic_load(&sp->stop)) {
                if (atomic_load(&sp->seq) == seen)
                        continue;
                seen++;
                uint64_t t0 = bench_now_ns();
                sp->result = sp->drv->get_state(sp->pid, &sp->state);
                sp->call_ns = bench_now_ns() - t0;
                atomic_store(&sp->done, seen);
        }
        return NULL;
}

static long bench_gpu_spins(const bench_gpu_driver *drv, int pid, long calls, double *lat, double *call)
{
        struct bench_gpu_spin sp = { .drv = drv, .pid = pid };
        pthread_t th;
        long errors = 0;

        if (pthread_create(&th, NULL, bench_gpu_spin_main, &sp) != 0)
                return calls;
        for (long i = -100; i < calls; i++) {
                uint64_t t0 = bench_now_ns();
                long want = atomic_fetch_add(&sp.seq, 1) + 1;
                while (atomic_load(&sp.done) != want)
                        ;
                uint64_t dt = bench_now_ns() - t0;
                if (sp.result != CUDA_SUCCESS || sp.state != CU_PROCESS_STATE_RUNNING)
                        errors++;
                if (i >= 0) {
                        lat[i] = (double)dt / 1e3;
                        call[i] = (double)sp.call_ns / 1e3;
                }
        }
        atomic_store(&sp.stop, 1);
        pthread_join(th, NULL);
        return errors;
}

static long bench_gpu_hops(const bench_gpu_driver *drv, int pid, long calls, double *lat, double *call)
{
        struct bench_gpu_hop h = { .drv = drv, .pid = pid };
        uv_loop_t loop;
        long errors = 0;

        if (uv_loop_init(&loop) < 0)
                return calls;
        h.work.data = &h;
        for (long i = -100; i < calls; i++) {
                uint64_t t0 = bench_now_ns();
                h.state = CU_PROCESS_STATE_FAILED;
                uv_queue_work(&loop, &h.work, bench_gpu_hop_work, bench_gpu_hop_done);
                uv_run(&loop, UV_RUN_DEFAULT);
                uint64_t dt = bench_now_ns() - t0;
                if (h.result != CUDA_SUCCESS || h.state != CU_PROCESS_STATE_RUNNING)
                        errors++;
                if (i >= 0) {
                        lat[i] = (double)dt / 1e3;
                        call[i] = (double)h.call_ns / 1e3;
                }
        }
        uv_loop_close(&loop);
        return errors;
}

/* The paths the getstate bench times, in the order it prints them. */
enum bench_gpu_gs_path {
        BENCH_GPU_GS_DIRECT,      /* the driver call in this process */
        BENCH_GPU_GS_DAEMON,      /* GetState, a client that sleeps for its reply */
        BENCH_GPU_GS_CLIENTSPIN,  /* GetState, a client that spins for its reply */
        BENCH_GPU_GS_NOSPIN,      /* GetState, a daemon with lane_spin_us 0 */
        BENCH_GPU_GS_INFO,        /* GetInfo: a round trip with no worker */
        BENCH_GPU_GS_INFOSPIN,    /* GetInfo, a client that spins */
        BENCH_GPU_GS_HOP,         /* the driver call through a uv worker */
        BENCH_GPU_GS_HOPCALL,     /* the call alone, on that worker */
        BENCH_GPU_GS_SPIN,        /* the driver call through a spinning thread */
        BENCH_GPU_GS_SPINCALL,    /* the call alone, on that thread */
        BENCH_GPU_GS_N,
};

static const struct {
        const char *label, *key;
} bench_gpu_gs_paths[BENCH_GPU_GS_N] = {
        [BENCH_GPU_GS_DIRECT] = { "direct driver call (in-process)", "bench=getstate path=direct" },
        [BENCH_GPU_GS_DAEMON] = { "daemon (client library, 1 conn)", "bench=getstate path=daemon" },
        [BENCH_GPU_GS_CLIENTSPIN] = { "daemon, client spins for reply", "bench=getstate path=daemon-clientspin" },
        [BENCH_GPU_GS_NOSPIN] = { "daemon, lane_spin_us 0", "bench=getstate path=daemon-nospin" },
        [BENCH_GPU_GS_INFO] = { "parts: GetInfo via daemon (no wkr)", "bench=getstate path=getinfo" },
        [BENCH_GPU_GS_INFOSPIN] = { "parts: GetInfo, client spins", "bench=getstate path=getinfo-clientspin" },
        [BENCH_GPU_GS_HOP] = { "parts: direct call via uv worker", "bench=getstate path=uvhop" },
        [BENCH_GPU_GS_HOPCALL] = { "parts: the call alone, on the worker", "bench=getstate path=uvhop-call" },
        [BENCH_GPU_GS_SPIN] = { "floor: via a spinning thread", "bench=getstate path=spin" },
        [BENCH_GPU_GS_SPINCALL] = { "floor: the call alone, spinning thread", "bench=getstate path=spin-call" },
};

/* The latencies of every path (calls entries each, in us) and the failed
 * calls of each. */
typedef struct bench_gpu_gs {
        double *lat[BENCH_GPU_GS_N];
        long errors[BENCH_GPU_GS_N];
        bench_stats st[BENCH_GPU_GS_N];
} bench_gpu_gs;

/* Calls of each path made untimed before the timed ones. */
#define BENCH_GPU_GS_WARMUP 100
/* The three GetState paths compared are timed in this many interleaved
 * rounds, so that a drift of a shared machine hits them alike: each of the
 * six orders twice, so that each path follows each other one as often. */
#define BENCH_GPU_GS_ROUNDS 12
/* Untimed calls at the start of each stretch: the path's threads awake
 * whatever ran before. */
#define BENCH_GPU_GS_STRETCH_WARMUP 20
/* The spin of the spinning client: more than a GetState takes on a GPU. */
#define BENCH_GPU_CLIENT_SPIN_US 1000

/* Back-to-back direct driver GetStates of pid (warmup untimed calls
 * first) into lat; returns the failed ones. */
static long bench_gpu_direct_getstates(const bench_gpu_driver *drv, int pid, long warmup, long calls, double *lat)
{
        long errors = 0;

        for (long i = -warmup; i < calls; i++) {
                CUprocessState st = CU_PROCESS_STATE_FAILED;
                uint64_t t0 = bench_now_ns();
                CUresult cr = drv->get_state(pid, &st);
                uint64_t dt = bench_now_ns() - t0;
                if ((cr != CUDA_SUCCESS || st != CU_PROCESS_STATE_RUNNING) && errors++ == 0)
                        bench_gpu_fail("direct cuCheckpointProcessGetState(%d): %s state %d", pid,
                                       bench_gpu_cu_name(drv, cr), (int)st);
                if (i >= 0)
                        lat[i] = (double)dt / 1e3;
        }
        return errors;
}

/* Back-to-back GetStates of pid through the daemon (warmup untimed calls
 * first); returns the failed ones. */
static long bench_gpu_daemon_getstates(cudackpt_client *c, int pid, long warmup, long calls, double *lat)
{
        long errors = 0;

        for (long i = -warmup; i < calls; i++) {
                cudackpt_reply reply;
                char err[512];
                cudackpt_reply_init(&reply);
                uint64_t t0 = bench_now_ns();
                int cr = cudackpt_get_state(c, pid, &reply);
                uint64_t dt = bench_now_ns() - t0;
                if (bench_gpu_reply_ok("GetState", pid, cr, &reply, CUDACKPT_STATE_RUNNING, err, sizeof(err)) < 0 &&
                    errors++ == 0)
                        bench_gpu_fail("%s", err);
                cudackpt_reply_clear(&reply);
                if (i >= 0)
                        lat[i] = (double)dt / 1e3;
        }
        return errors;
}

/* Back-to-back GetInfo calls (a round trip that needs no worker), with
 * BENCH_GPU_GS_WARMUP untimed ones first; returns the failed ones. */
static long bench_gpu_daemon_getinfos(cudackpt_client *c, long calls, double *lat)
{
        long errors = 0;

        for (long i = -BENCH_GPU_GS_WARMUP; i < calls; i++) {
                cudackpt_reply reply;
                cudackpt_reply_init(&reply);
                uint64_t t0 = bench_now_ns();
                int cr = cudackpt_call(c, "org.varlink.service.GetInfo", NULL, &reply);
                uint64_t dt = bench_now_ns() - t0;
                if (cr < 0 || reply.error)
                        errors++;
                cudackpt_reply_clear(&reply);
                if (i >= 0)
                        lat[i] = (double)dt / 1e3;
        }
        return errors;
}

/* The daemon d restarted with lane_spin_us 0 (d and *c are the new ones),
 * and its GetStates timed: the same path without the lane's spinning. */
static long bench_gpu_getstates_no_spin(const bench_gpu_cfg *cfg, bench_daemon *d, cudackpt_client **c, int pid,
                                        double *lat)
{
        char path[PATH_MAX];
        FILE *f;

        cudackpt_client_free(*c);
        *c = NULL;
        bench_gpu_daemon_stop(d);
        d->pid = 0; /* out_daemon stops only the new one, if it starts */
        snprintf(path, sizeof(path), "%s/no-spin.json", cfg->workdir);
        f = fopen(path, "we");
        if (!f)
                return cfg->calls;
        fprintf(f, "{\"lane_spin_us\": 0}\n");
        fclose(f);
        if (bench_gpu_daemon_start_with(cfg, path, d) < 0)
                return cfg->calls;
        if (bench_gpu_connect(d, c) < 0)
                return cfg->calls;
        return bench_gpu_daemon_getstates(*c, pid, BENCH_GPU_GS_WARMUP, cfg->calls, lat);
}

/* One stretch of n timed calls of one of the three compared paths, into
 * its array from entry off; warmup untimed calls first. */
static void bench_gpu_gs_stretch(bench_gpu_gs *gs, enum bench_gpu_gs_path path, const bench_gpu_driver *drv,
                                 cudackpt_client *c, cudackpt_client *cs, int pid, long warmup, long off, long n)
{
        double *lat = gs->lat[path] + off;

        if (path == BENCH_GPU_GS_DIRECT)
                gs->errors[path] += bench_gpu_direct_getstates(drv, pid, warmup, n, lat);
        else
                gs->errors[path] += bench_gpu_daemon_getstates(path == BENCH_GPU_GS_DAEMON ? c : cs, pid, warmup,
                                                               n, lat);
}

/* Direct calls, a client that sleeps (c) and one that spins (cs), timed in
 * BENCH_GPU_GS_ROUNDS rounds of calls/rounds calls each, the rounds going
 * through the six orders of the three. */
static void bench_gpu_gs_rounds(const bench_gpu_cfg *cfg, bench_gpu_gs *gs, const bench_gpu_driver *drv,
                                cudackpt_client *c, cudackpt_client *cs, int pid)
{
        static const enum bench_gpu_gs_path D = BENCH_GPU_GS_DIRECT, V = BENCH_GPU_GS_DAEMON,
                                            S = BENCH_GPU_GS_CLIENTSPIN;
        static const enum bench_gpu_gs_path orders[6][3] = { { D, V, S }, { V, S, D }, { S, D, V },
                                                             { D, S, V }, { S, V, D }, { V, D, S } };
        long rounds = cfg->calls < BENCH_GPU_GS_ROUNDS ? 1 : BENCH_GPU_GS_ROUNDS, per = cfg->calls / rounds;

        for (int k = 0; k < 3; k++)
                bench_gpu_gs_stretch(gs, orders[0][k], drv, c, cs, pid, BENCH_GPU_GS_WARMUP, 0, 0);
        for (long round = 0; round < rounds; round++) {
                long off = round * per, n = round == rounds - 1 ? cfg->calls - off : per;
                for (int k = 0; k < 3; k++)
                        bench_gpu_gs_stretch(gs, orders[round % 6][k], drv, c, cs, pid,
                                             BENCH_GPU_GS_STRETCH_WARMUP, off, n);
        }
}

static void bench_gpu_gs_print(bench_gpu_gs *gs, long calls)
{
        const bench_stats *sd = &gs->st[BENCH_GPU_GS_DIRECT], *sv = &gs->st[BENCH_GPU_GS_DAEMON];
        const bench_stats *sn = &gs->st[BENCH_GPU_GS_NOSPIN], *scs = &gs->st[BENCH_GPU_GS_CLIENTSPIN];
        const bench_stats *sh = &gs->st[BENCH_GPU_GS_HOP], *si = &gs->st[BENCH_GPU_GS_INFO];

        bench_gpu_lat_header();
        for (int k = 0; k < BENCH_GPU_GS_N; k++) {
                bench_stats_compute(gs->lat[k], (size_t)calls, &gs->st[k]);
                bench_gpu_print_lat(bench_gpu_gs_paths[k].label, bench_gpu_gs_paths[k].key, &gs->st[k],
                                    gs->errors[k]);
        }
        printf("  daemon overhead at p50: %+.1f us (x%.2f); with lane_spin_us 0: %+.1f us (x%.2f); client spinning:"
               " %+.1f us (x%.2f)\n",
               sv->p50 - sd->p50, sd->p50 > 0 ? sv->p50 / sd->p50 : 0, sn->p50 - sd->p50,
               sd->p50 > 0 ? sn->p50 / sd->p50 : 0, scs->p50 - sd->p50, sd->p50 > 0 ? scs->p50 / sd->p50 : 0);
        printf("RESULT bench=getstate daemon_vs_direct_p50=%.3f nospin_vs_direct_p50=%.3f"
               " clientspin_vs_direct_p50=%.3f\n",
               sd->p50 > 0 ? sv->p50 / sd->p50 : 0, sd->p50 > 0 ? sn->p50 / sd->p50 : 0,
               sd->p50 > 0 ? scs->p50 / sd->p50 : 0);
        printf("  of which thread hand-off %+.1f us, socket round trip %.1f us, the rest (pinning, queueing) %+.1f us\n",
               sh->p50 - sd->p50, si->p50, sv->p50 - sh->p50 - si->p50);
}

/* The parts of the daemon's path, each timed alone after the rounds: a
 * round trip that needs no worker (GetInfo, sleeping and spinning), the
 * driver call through a worker thread in-process, and through a spinning
 * thread. */
static void bench_gpu_gs_parts(const bench_gpu_cfg *cfg, bench_gpu_gs *gs, const bench_gpu_driver *drv,
                               cudackpt_client *c, cudackpt_client *cs, int pid)
{
        gs->errors[BENCH_GPU_GS_INFO] = bench_gpu_daemon_getinfos(c, cfg->calls, gs->lat[BENCH_GPU_GS_INFO]);
        gs->errors[BENCH_GPU_GS_INFOSPIN] =
                bench_gpu_daemon_getinfos(cs, cfg->calls, gs->lat[BENCH_GPU_GS_INFOSPIN]);
        gs->errors[BENCH_GPU_GS_HOP] = gs->errors[BENCH_GPU_GS_HOPCALL] =
                bench_gpu_hops(drv, pid, cfg->calls, gs->lat[BENCH_GPU_GS_HOP], gs->lat[BENCH_GPU_GS_HOPCALL]);
        gs->errors[BENCH_GPU_GS_SPIN] = gs->errors[BENCH_GPU_GS_SPINCALL] =
                bench_gpu_spins(drv, pid, cfg->calls, gs->lat[BENCH_GPU_GS_SPIN], gs->lat[BENCH_GPU_GS_SPINCALL]);
        if (gs->errors[BENCH_GPU_GS_HOP] || gs->errors[BENCH_GPU_GS_INFO] || gs->errors[BENCH_GPU_GS_INFOSPIN] ||
            gs->errors[BENCH_GPU_GS_SPIN])
                bench_gpu_fail("GetState parts: %ld failed through a uv worker, %ld through a spinning thread, "
                               "%ld failed GetInfo calls",
                               gs->errors[BENCH_GPU_GS_HOP], gs->errors[BENCH_GPU_GS_SPIN],
                               gs->errors[BENCH_GPU_GS_INFO] + gs->errors[BENCH_GPU_GS_INFOSPIN]);
}

/* The two clients of the getstate bench: *c sleeps for its replies, *cs
 * spins for BENCH_GPU_CLIENT_SPIN_US. */
static int bench_gpu_gs_connect(const bench_daemon *d, cudackpt_client **c, cudackpt_client **cs)
{
        int r;

        if ((r = bench_gpu_connect(d, c)) < 0 || (r = bench_gpu_connect(d, cs)) < 0)
                return r;
        /* $CUDACKPT_SPIN_US would make the sleeping one spin too. */
        r = cudackpt_client_set_spin(*c, 0);
        if (r == 0)
                r = cudackpt_client_set_spin(*cs, BENCH_GPU_CLIENT_SPIN_US);
        if (r < 0)
                bench_gpu_fail("cudackpt_client_set_spin: %s", strerror(-r));
        return r;
}

int bench_gpu_getstate(const bench_gpu_cfg *cfg)
{
        bench_daemon d;
        bench_gpu_target t;
        bench_gpu_driver drv;
        cudackpt_client *c = NULL, *cs = NULL;
        bench_gpu_gs gs = { 0 };
        int r;

        printf("\n== 1. GetState round trip: daemon vs direct driver call (%ld calls, idle %ld MiB target;"
               " direct, daemon and daemon-clientspin interleaved in %d rounds) ==\n",
               cfg->calls, cfg->idle_mib, BENCH_GPU_GS_ROUNDS);
        if ((r = bench_gpu_driver_load(cfg, &drv)) < 0)
                return r;
        if ((r = bench_gpu_daemon_start(cfg, &d)) < 0)
                return r;
        if ((r = bench_gpu_targets_start(cfg, "getstate", 1, cfg->idle_mib, &t)) < 0)
                goto out_daemon;
        if ((r = bench_gpu_gs_connect(&d, &c, &cs)) < 0)
                goto out_client;
        for (int k = 0; k < BENCH_GPU_GS_N; k++)
                if (!(gs.lat[k] = calloc((size_t)cfg->calls, sizeof(double))))
                        r = -ENOMEM;
        if (r < 0)
                goto out_client;

        bench_gpu_gs_rounds(cfg, &gs, &drv, c, cs, t.pid);
        bench_gpu_gs_parts(cfg, &gs, &drv, c, cs, t.pid);
        cudackpt_client_free(cs);
        cs = NULL;
        gs.errors[BENCH_GPU_GS_NOSPIN] = bench_gpu_getstates_no_spin(cfg, &d, &c, t.pid, gs.lat[BENCH_GPU_GS_NOSPIN]);
        bench_gpu_gs_print(&gs, cfg->calls);
        for (int k = 0; k < BENCH_GPU_GS_N; k++)
                if (gs.errors[k])
                        r = -EIO;
out_client:
        for (int k = 0; k < BENCH_GPU_GS_N; k++)
                free(gs.lat[k]);
        cudackpt_client_free(cs);
        cudackpt_client_free(c);
        bench_gpu_targets_stop(&t, 1);
out_daemon:
        bench_gpu_daemon_stop(&d);
        return r;
}
