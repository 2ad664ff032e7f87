/* bench_gpu_group.c: the group benchmark (see bench_gpu.c). */
#include "bench_gpu.h"

/* ------------------------------------------------------------------------
 * 6. A group of N: SuspendGroup+ResumeGroup vs N single calls vs direct
 * ------------------------------------------------------------------------ */
/* {"selector":{"pids":[{"pid":A},...]}}, malloc()ed. */
static char *bench_gpu_pids_selector(const bench_gpu_target *t, int n)
{
        cJSON *root = cJSON_CreateObject(), *sel = cJSON_AddObjectToObject(root, "selector");
        cJSON *pids = sel ? cJSON_AddArrayToObject(sel, "pids") : NULL;
        char *text = NULL;
        for (int i = 0; pids && i < n; i++) {
                cJSON *ref = cJSON_CreateObject();
                if (!ref || !cJSON_AddNumberToObject(ref, "pid", t[i].pid) || !cJSON_AddItemToArray(pids, ref)) {
                        cJSON_Delete(ref);
                        pids = NULL;
                }
        }
        if (pids)
                text = cJSON_PrintUnformatted(root);
        cJSON_Delete(root);
        return text;
}

/* One group call; 0 when it succeeded with n members, each in state want.
 * *ret_daemon_ms: the reply's duration_ms. */
static int bench_gpu_group_call(cudackpt_client *c, const char *method, const char *params, int n, const char *want,
                                double *ret_daemon_ms, char *err, size_t errlen)
{
        cudackpt_reply reply;
        cudackpt_reply_init(&reply);
        int r = cudackpt_call(c, method, params, &reply);
        if (r < 0) {
                snprintf(err, errlen, "%s: transport error %s", method, strerror(-r));
                return -EIO;
        }
        if (reply.error) {
                snprintf(err, errlen, "%s: %s %.400s", method, reply.error, reply.parameters_json);
                cudackpt_reply_clear(&reply);
                return -EIO;
        }
        cJSON *p = cJSON_Parse(reply.parameters_json);
        const cJSON *members = cJSON_GetObjectItemCaseSensitive(p, "members");
        const cJSON *dur = cJSON_GetObjectItemCaseSensitive(p, "duration_ms");
        const cJSON *m;
        int count = 0, bad = 0;
        cJSON_ArrayForEach(m, members)
        {
                const cJSON *st = cJSON_GetObjectItemCaseSensitive(m, "state");
                count++;
                if (!cJSON_IsString(st) || strcmp(st->valuestring, want) != 0)
                        bad++;
        }
        r = 0;
        if (count != n || bad) {
                snprintf(err, errlen, "%s: %d members, %d not %s: %.400s", method, count, bad, want,
                         reply.parameters_json);
                r = -EIO;
        }
        *ret_daemon_ms = cJSON_IsNumber(dur) ? dur->valuedouble : -1;
        cJSON_Delete(p);
        cudackpt_reply_clear(&reply);
        return r;
}

static void bench_gpu_minmed(double *v, size_t n, double *ret_min, double *ret_med)
{
        bench_stats st;
        bench_stats_compute(v, n, &st);
        *ret_min = st.min;
        *ret_med = st.p50;
}

enum { M_GROUP, M_PARALLEL, M_DIRECT, M_COUNT };

/* One run of the group benchmark: its daemon, driver, targets, client and
 * selector, and what it measures: each method's wall time, suspend and
 * resume per repeat (the slowest process's, for the per-process ones),
 * and the daemon's own group duration_ms. */
typedef struct bench_gpu_group_run {
        const bench_gpu_cfg *cfg;
        const bench_daemon *d;
        const bench_gpu_driver *drv;
        bench_gpu_target *t;
        int n;
        cudackpt_client *c;
        char *params;
        double *tot[M_COUNT], *sus[M_COUNT], *res[M_COUNT], *dsus, *dres;
} bench_gpu_group_run;

static int bench_gpu_group_alloc(bench_gpu_group_run *g)
{
        size_t R = (size_t)g->cfg->repeats;
        int ok = 1;
        for (int m = 0; m < M_COUNT; m++) {
                g->tot[m] = calloc(R, sizeof(double));
                g->sus[m] = calloc(R, sizeof(double));
                g->res[m] = calloc(R, sizeof(double));
                if (!g->tot[m] || !g->sus[m] || !g->res[m])
                        ok = 0;
        }
        g->dsus = calloc(R, sizeof(double));
        g->dres = calloc(R, sizeof(double));
        g->params = bench_gpu_pids_selector(g->t, g->n);
        return ok && g->dsus && g->dres && g->params ? 0 : -ENOMEM;
}

static void bench_gpu_group_free(bench_gpu_group_run *g)
{
        cudackpt_client_free(g->c);
        free(g->params);
        for (int m = 0; m < M_COUNT; m++) {
                free(g->tot[m]);
                free(g->sus[m]);
                free(g->res[m]);
        }
        free(g->dsus);
        free(g->dres);
}

/* One SuspendGroup + ResumeGroup: the wall times and the daemon's. */
static int bench_gpu_group_cycle(bench_gpu_group_run *g, double *total, double *s_ms, double *r_ms, double *ds,
                                 double *dr)
{
        char err[1024];
        uint64_t t0 = bench_now_ns();
        int r = bench_gpu_group_call(g->c, CUDACKPT_METHOD_SUSPEND_GROUP, g->params, g->n, CUDACKPT_STATE_CHECKPOINTED,
                                     ds, err, sizeof(err));
        uint64_t t1 = bench_now_ns();
        if (r == 0)
                r = bench_gpu_group_call(g->c, CUDACKPT_METHOD_RESUME_GROUP, g->params, g->n, CUDACKPT_STATE_RUNNING,
                                         dr, err, sizeof(err));
        uint64_t t2 = bench_now_ns();
        if (r < 0) {
                bench_gpu_fail("%s", err);
                return r;
        }
        *total = bench_gpu_ms(t2 - t0);
        *s_ms = bench_gpu_ms(t1 - t0);
        *r_ms = bench_gpu_ms(t2 - t1);
        return 0;
}

/* Method m once, in repeat rep (< 0: a warm-up, a group cycle only). */
static int bench_gpu_group_once(bench_gpu_group_run *g, int m, long rep)
{
        bench_gpu_worker w[BENCH_GPU_MAX_PROCS];
        pthread_barrier_t start;
        double total = 0, s_ms = 0, r_ms = 0, ds = -1, dr = -1;

        if (rep < 0 && m != M_GROUP)
                return 0; /* one warm-up is one group cycle */
        if (m == M_GROUP) {
                if (bench_gpu_group_cycle(g, &total, &s_ms, &r_ms, &ds, &dr) < 0)
                        return -EIO;
        } else {
                total = bench_gpu_parallel(m == M_PARALLEL ? BENCH_GPU_DAEMON : BENCH_GPU_DIRECT, g->d, g->drv, g->t,
                                           g->n, w, &start);
                if (total < 0)
                        return -EIO;
                /* The slowest process's halves. */
                for (int i = 0; i < g->n; i++) {
                        if (w[i].suspend_ms > s_ms)
                                s_ms = w[i].suspend_ms;
                        if (w[i].resume_ms > r_ms)
                                r_ms = w[i].resume_ms;
                }
        }
        if (bench_gpu_all_running(g->drv, g->t, g->n) < 0)
                return -EIO;
        if (rep < 0) {
                printf("  warm-up: group cycle %.2f s\n", total / 1e3);
                return 0;
        }
        g->tot[m][rep] = total;
        g->sus[m][rep] = s_ms;
        g->res[m][rep] = r_ms;
        if (m == M_GROUP) {
                g->dsus[rep] = ds;
                g->dres[rep] = dr;
        }
        return 0;
}

/* The methods' times, the ratios to direct and the SUMMARY lines. */
static void bench_gpu_group_report(const bench_gpu_group_run *g)
{
        static const char *const names[M_COUNT] = { "SuspendGroup + ResumeGroup (1 call each)",
                                                    "N x Suspend/Resume, N connections at once",
                                                    "direct driver calls, N threads" };
        static const char *const keys[M_COUNT] = { "group", "single-parallel", "direct" };
        const bench_gpu_cfg *cfg = g->cfg;
        size_t R = (size_t)cfg->repeats;
        int n = g->n;
        double mn[M_COUNT], md[M_COUNT];

        printf("  %-44s %9s %9s %13s %13s\n", "method (wall, all N)", "min s", "median s", "suspend s", "resume s");
        for (int m = 0; m < M_COUNT; m++) {
                double smin, smed, rmin, rmed;
                bench_gpu_minmed(g->tot[m], R, &mn[m], &md[m]);
                bench_gpu_minmed(g->sus[m], R, &smin, &smed);
                bench_gpu_minmed(g->res[m], R, &rmin, &rmed);
                printf("  %-44s %9.3f %9.3f %13.3f %13.3f\n", names[m], mn[m] / 1e3, md[m] / 1e3, smed / 1e3,
                       rmed / 1e3);
                printf("RESULT bench=group mode=%s procs=%d mib=%ld repeats=%ld min_s=%.3f median_s=%.3f "
                       "suspend_s=%.3f resume_s=%.3f\n",
                       keys[m], n, cfg->proc_mib, cfg->repeats, mn[m] / 1e3, md[m] / 1e3, smed / 1e3, rmed / 1e3);
        }
        double dmin, dmed, rmin, rmed;
        bench_gpu_minmed(g->dsus, R, &dmin, &dmed);
        bench_gpu_minmed(g->dres, R, &rmin, &rmed);
        printf("  (suspend/resume s: the slowest process for the per-process methods; the daemon's own"
               " group duration_ms: suspend %.1f ms, resume %.1f ms, medians)\n",
               dmed, rmed);
        double ratio = md[M_DIRECT] > 0 ? md[M_GROUP] / md[M_DIRECT] : 0;
        double ratio_min = mn[M_DIRECT] > 0 ? mn[M_GROUP] / mn[M_DIRECT] : 0;
        double ratio_par = md[M_DIRECT] > 0 ? md[M_PARALLEL] / md[M_DIRECT] : 0;
        printf("  group / direct: x%.3f at the median, x%.3f at the minimum (goal <= x1.1: %s);"
               " single calls at once / direct: x%.3f\n",
               ratio, ratio_min, ratio <= 1.1 ? "met" : "MISSED", ratio_par);
        printf("  data check: all %d targets verified their buffers intact\n", n);
        printf("RESULT bench=group ratio_group_direct=%.3f ratio_group_direct_min=%.3f "
               "ratio_parallel_direct=%.3f daemon_suspend_ms=%.1f daemon_resume_ms=%.1f data_ok=1\n",
               ratio, ratio_min, ratio_par, dmed, rmed);
        printf("SUMMARY | %d x %ld MiB suspend+resume: SuspendGroup+ResumeGroup | min %.2f s, median %.2f s |"
               " |\n",
               n, cfg->proc_mib, mn[M_GROUP] / 1e3, md[M_GROUP] / 1e3);
        printf("SUMMARY | the same: %d single Suspend/Resume on %d connections at once | min %.2f s, median"
               " %.2f s (x%.3f of direct) | |\n",
               n, n, mn[M_PARALLEL] / 1e3, md[M_PARALLEL] / 1e3, ratio_par);
        printf("SUMMARY | the same: direct driver calls from %d threads | min %.2f s, median %.2f s | |\n", n,
               mn[M_DIRECT] / 1e3, md[M_DIRECT] / 1e3);
        printf("SUMMARY | group / direct | x%.3f (median), x%.3f (min) | <= x1.1: **%s** |\n", ratio, ratio_min,
               ratio <= 1.1 ? "met" : "missed");
}

int bench_gpu_group(const bench_gpu_cfg *cfg)
{
        bench_daemon d;
        bench_gpu_driver drv;
        bench_gpu_target t[BENCH_GPU_MAX_PROCS];
        bench_gpu_group_run g = { .cfg = cfg, .d = &d, .drv = &drv, .t = t, .n = (int)cfg->procs };
        int r;

        printf("\n== 6. Suspend+resume of a group of %d x %ld MiB processes, three ways (%ld repeats,"
               " %ld warm-up) ==\n",
               g.n, cfg->proc_mib, cfg->repeats, cfg->warmup);
        if ((r = bench_gpu_driver_load(cfg, &drv)) < 0)
                return r;
        if ((r = bench_gpu_daemon_start(cfg, &d)) < 0)
                return r;
        uint64_t ts = bench_now_ns();
        if ((r = bench_gpu_targets_start(cfg, "group", g.n, cfg->proc_mib, t)) < 0)
                goto out_daemon;
        printf("  %d targets ready in %.1f s\n", g.n, bench_gpu_ms(bench_now_ns() - ts) / 1e3);
        if (bench_gpu_group_alloc(&g) < 0 || bench_gpu_connect(&d, &g.c) < 0) {
                r = -ENOMEM;
                goto out_free;
        }
        /* Warm-up cycles (the first checkpoint of a process touches fresh
         * host memory), then the repeats; the methods take turns going first
         * so that drift hits all alike. */
        for (long rep = -cfg->warmup; rep < cfg->repeats && r == 0; rep++) {
                for (int k = 0; k < M_COUNT && r == 0; k++)
                        r = bench_gpu_group_once(&g, (int)((k + (rep < 0 ? 0 : rep)) % M_COUNT), rep);
                if (rep >= 0 && r == 0)
                        printf("  repeat %ld: group %.2f s, %d single calls at once %.2f s, direct %.2f s\n", rep + 1,
                               g.tot[M_GROUP][rep] / 1e3, g.n, g.tot[M_PARALLEL][rep] / 1e3,
                               g.tot[M_DIRECT][rep] / 1e3);
        }
        for (int i = 0; i < g.n; i++)
                if (bench_gpu_target_check(&t[i]) < 0)
                        r = -EIO;
        if (r == 0)
                bench_gpu_group_report(&g);
out_free:
        bench_gpu_group_free(&g);
        bench_gpu_targets_stop(t, g.n);
out_daemon:
        bench_gpu_daemon_stop(&d);
        return r;
}
