/* bench_gpu_list.c: the list benchmark (see bench_gpu.c). */
#include "bench_gpu.h"

/* ------------------------------------------------------------------------
 * 7. ListProcesses vs a /proc scan with GetState on every pid
 * ------------------------------------------------------------------------ */
static long bench_gpu_count_procs(void)
{
        DIR *dir = opendir("/proc");
        struct dirent *de;
        long n = 0;
        if (!dir)
                return -errno;
        while ((de = readdir(dir)))
                if (de->d_name[0] >= '1' && de->d_name[0] <= '9')
                        n++;
        closedir(dir);
        return n;
}

/* The baseline's pool: each run, the main thread scans /proc into pids,
 * the workers take pids off a shared index and ask the driver for each
 * one's state, skipping stopped processes (the driver would wait for them
 * without end) and zombies. */
typedef struct bench_gpu_scan {
        const bench_gpu_driver *drv;
        pthread_barrier_t go, end;
        pid_t *pids;
        size_t npids, cap;
        atomic_size_t next;
        atomic_long found, skipped, calls;
        pid_t *cuda; /* found[i]: pids whose GetState succeeded (unordered) */
        /* Set: the workers run the daemon's own test (discover_maps_driver)
         * instead of state + GetState, for the breakdown of its time. */
        const struct discover_lib *maps;
        atomic_int quit;
} bench_gpu_scan;

/* The state letter of /proc/PID/stat, or 0. */
static char bench_gpu_proc_state(pid_t pid)
{
        char path[64], buf[512];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        ssize_t len = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (len <= 0)
                return 0;
        buf[len] = '\0';
        char *paren = strrchr(buf, ')');
        return paren && paren[1] == ' ' ? paren[2] : 0;
}

static void *bench_gpu_scan_main(void *arg)
{
        bench_gpu_scan *s = arg;
        for (;;) {
                pthread_barrier_wait(&s->go);
                if (atomic_load(&s->quit))
                        return NULL;
                for (;;) {
                        size_t i = atomic_fetch_add(&s->next, 1);
                        if (i >= s->npids)
                                break;
                        if (s->maps) {
                                if (discover_maps_driver(s->pids[i], s->maps) == 1)
                                        s->cuda[atomic_fetch_add(&s->found, 1)] = s->pids[i];
                                continue;
                        }
                        char st = bench_gpu_proc_state(s->pids[i]);
                        if (st == 0 || st == 'T' || st == 't' || st == 'Z' || st == 'X') {
                                atomic_fetch_add(&s->skipped, 1);
                                continue;
                        }
                        CUprocessState ps;
                        atomic_fetch_add(&s->calls, 1);
                        if (s->drv->get_state((int)s->pids[i], &ps) == CUDA_SUCCESS)
                                s->cuda[atomic_fetch_add(&s->found, 1)] = s->pids[i];
                }
                pthread_barrier_wait(&s->end);
        }
}

/* The /proc scan alone: every pid but this process's into s->pids. */
static int bench_gpu_scan_proc(bench_gpu_scan *s)
{
        DIR *dir = opendir("/proc");
        struct dirent *de;
        pid_t self = getpid();
        if (!dir)
                return -errno;
        s->npids = 0;
        while ((de = readdir(dir))) {
                char *end;
                long v = strtol(de->d_name, &end, 10);
                if (de->d_name[0] < '1' || de->d_name[0] > '9' || *end || v == self)
                        continue;
                if (s->npids == s->cap) {
                        size_t cap = s->cap ? s->cap * 2 : 4096;
                        pid_t *p = realloc(s->pids, cap * sizeof(*p)), *q = realloc(s->cuda, cap * sizeof(*q));
                        if (p)
                                s->pids = p;
                        if (q)
                                s->cuda = q;
                        if (!p || !q) {
                                closedir(dir);
                                return -ENOMEM;
                        }
                        s->cap = cap;
                }
                s->pids[s->npids++] = (pid_t)v;
        }
        closedir(dir);
        return 0;
}

/* The pool over the pids of the last scan. */
static void bench_gpu_scan_pool(bench_gpu_scan *s)
{
        atomic_store(&s->next, 0);
        atomic_store(&s->found, 0);
        atomic_store(&s->skipped, 0);
        atomic_store(&s->calls, 0);
        pthread_barrier_wait(&s->go);
        pthread_barrier_wait(&s->end);
}

/* One baseline run: scan, then the pool; 0 or -errno. */
static int bench_gpu_scan_run(bench_gpu_scan *s)
{
        int r = bench_gpu_scan_proc(s);

        if (r == 0)
                bench_gpu_scan_pool(s);
        return r;
}

/* Where ListProcesses's time goes, on the same machine: the /proc scan
 * alone, and the daemon's test of one process (open its maps, PROCMAP_QUERY
 * over its executable file mappings) over every pid from one thread and
 * from the pool; medians of runs. */
static void bench_gpu_list_parts(bench_gpu_scan *s, const struct discover_lib *lib, long runs, long pool)
{
        double *a = calloc((size_t)runs, sizeof(double)), *b = calloc((size_t)runs, sizeof(double)),
               *c = calloc((size_t)runs, sizeof(double));
        bench_stats sa, sb, sc;
        size_t n = 0;

        if (!a || !b || !c)
                goto out;
        s->maps = lib;
        for (long i = 0; i < runs; i++) {
                uint64_t t0 = bench_now_ns();
                if (bench_gpu_scan_proc(s) < 0)
                        goto out;
                uint64_t t1 = bench_now_ns();
                n = 0;
                for (size_t k = 0; k < s->npids; k++)
                        n += discover_maps_driver(s->pids[k], lib) == 1;
                uint64_t t2 = bench_now_ns();
                bench_gpu_scan_pool(s);
                uint64_t t3 = bench_now_ns();
                a[i] = bench_gpu_ms(t1 - t0);
                b[i] = bench_gpu_ms(t2 - t1);
                c[i] = bench_gpu_ms(t3 - t2);
        }
        bench_stats_compute(a, (size_t)runs, &sa);
        bench_stats_compute(b, (size_t)runs, &sb);
        bench_stats_compute(c, (size_t)runs, &sc);
        printf("  where ListProcesses's time goes (p50 of %ld runs, %zu processes, %zu map the driver):\n", runs,
               s->npids, n);
        printf("    /proc scan alone                                  %9.2f ms\n", sa.p50);
        printf("    maps test of every process, 1 thread              %9.2f ms (%.2f us a process)\n", sb.p50,
               s->npids ? sb.p50 * 1e3 / (double)s->npids : 0.0);
        printf("    maps test of every process, %2ld threads            %9.2f ms\n", pool, sc.p50);
        printf("RESULT bench=list-parts scan_ms=%.3f maps_1_ms=%.3f maps_pool_ms=%.3f pool=%ld processes=%zu\n",
               sa.p50, sb.p50, sc.p50, pool, s->npids);
out:
        s->maps = NULL;
        free(a);
        free(b);
        free(c);
}

/* 0 when every target pid is in pids[0..n). */
static int bench_gpu_has_targets(const pid_t *pids, size_t n, const bench_gpu_target *t, int nt, const char *who)
{
        for (int i = 0; i < nt; i++) {
                size_t j = 0;
                while (j < n && pids[j] != t[i].pid)
                        j++;
                if (j == n) {
                        bench_gpu_fail("%s did not find target %d", who, (int)t[i].pid);
                        return -ENOENT;
                }
        }
        return 0;
}

/* One ListProcesses call: the pids listed into *pids (grown as needed);
 * every target must be listed "running". */
static int bench_gpu_list_call(cudackpt_client *c, const bench_gpu_target *t, int nt, pid_t **pids, size_t *cap,
                               size_t *ret_n)
{
        cudackpt_reply reply;
        size_t n = 0;
        int r;
        cudackpt_reply_init(&reply);
        r = cudackpt_call(c, CUDACKPT_METHOD_LIST_PROCESSES, NULL, &reply);
        if (r < 0 || reply.error) {
                bench_gpu_fail("ListProcesses: %s %.400s", r < 0 ? strerror(-r) : reply.error,
                               r < 0 ? "" : reply.parameters_json);
                cudackpt_reply_clear(&reply);
                return -EIO;
        }
        cJSON *p = cJSON_Parse(reply.parameters_json);
        const cJSON *procs = cJSON_GetObjectItemCaseSensitive(p, "processes"), *x;
        r = cJSON_IsArray(procs) ? 0 : -EPROTO;
        cJSON_ArrayForEach(x, procs)
        {
                const cJSON *pid = cJSON_GetObjectItemCaseSensitive(x, "pid");
                const cJSON *st = cJSON_GetObjectItemCaseSensitive(x, "state");
                if (!cJSON_IsNumber(pid)) {
                        r = -EPROTO;
                        continue;
                }
                for (int i = 0; i < nt; i++)
                        if (t[i].pid == (pid_t)pid->valueint &&
                            (!cJSON_IsString(st) || strcmp(st->valuestring, CUDACKPT_STATE_RUNNING) != 0)) {
                                bench_gpu_fail("ListProcesses: target %d listed as %.200s", (int)t[i].pid,
                                               reply.parameters_json);
                                r = -EIO;
                        }
                if (n == *cap) {
                        size_t nc = *cap ? *cap * 2 : 64;
                        pid_t *np = realloc(*pids, nc * sizeof(*np));
                        if (!np) {
                                r = -ENOMEM;
                                break;
                        }
                        *pids = np;
                        *cap = nc;
                }
                (*pids)[n++] = (pid_t)pid->valueint;
        }
        if (r == -EPROTO)
                bench_gpu_fail("ListProcesses: unexpected reply %.400s", reply.parameters_json);
        cJSON_Delete(p);
        cudackpt_reply_clear(&reply);
        if (r == 0)
                r = bench_gpu_has_targets(*pids, n, t, nt, "ListProcesses");
        if (r == 0)
                *ret_n = n;
        return r;
}

/* Prints up to 8 pids of a[] that are not in b[], with their command names. */
static void bench_gpu_list_diff(const char *what, const pid_t *a, size_t na, const pid_t *b, size_t nb)
{
        int shown = 0;
        for (size_t i = 0; i < na; i++) {
                size_t j = 0;
                while (j < nb && b[j] != a[i])
                        j++;
                if (j < nb)
                        continue;
                char path[64], comm[64] = "?";
                snprintf(path, sizeof(path), "/proc/%d/comm", (int)a[i]);
                FILE *f = fopen(path, "re");
                if (f) {
                        if (fgets(comm, sizeof(comm), f))
                                comm[strcspn(comm, "\n")] = '\0';
                        fclose(f);
                }
                if (shown++ == 0)
                        printf("  %s:", what);
                if (shown <= 8)
                        printf(" %d (%s)", (int)a[i], comm);
        }
        if (shown)
                printf("%s\n", shown > 8 ? " ..." : "");
}

/* Times runs ListProcesses calls (after two untimed ones) into lat. */
static int bench_gpu_list_only(cudackpt_client *c, const bench_gpu_target *t, int nt, long runs, double *lat)
{
        pid_t *listed = NULL;
        size_t cap = 0, n = 0;
        int r = 0;
        for (long i = -2; i < runs && r == 0; i++) {
                uint64_t a = bench_now_ns();
                r = bench_gpu_list_call(c, t, nt, &listed, &cap, &n);
                if (i >= 0)
                        lat[i] = bench_gpu_ms(bench_now_ns() - a);
        }
        free(listed);
        return r;
}

/* What the list benchmark measured: the timed calls of each kind, what
 * the last of them found, and the processes on the machine. */
typedef struct bench_gpu_list_result {
        double *lat_list, *lat_scan, *lat_noindex;
        pid_t *listed;
        size_t listed_cap, listed_n;
        long found, calls, skipped, total;
        int have_index;
} bench_gpu_list_result;

/* The baseline's pool of n threads on scan, waiting at its barriers; NULL
 * if the barriers cannot be made. */
static pthread_t *bench_gpu_list_pool(bench_gpu_scan *scan, long n)
{
        if (pthread_barrier_init(&scan->go, NULL, (unsigned)n + 1) != 0)
                return NULL;
        pthread_barrier_init(&scan->end, NULL, (unsigned)n + 1);
        pthread_t *pool = calloc((size_t)n, sizeof(*pool));
        if (!pool)
                abort();
        for (long i = 0; i < n; i++)
                if (pthread_create(&pool[i], NULL, bench_gpu_scan_main, scan) != 0)
                        abort(); /* the barriers count every thread */
        return pool;
}

/* Lets the pool's threads go and joins them. */
static void bench_gpu_list_pool_end(bench_gpu_scan *scan, pthread_t *pool, int threads)
{
        atomic_store(&scan->quit, 1);
        pthread_barrier_wait(&scan->go);
        for (int i = 0; i < threads; i++)
                pthread_join(pool[i], NULL);
        pthread_barrier_destroy(&scan->go);
        pthread_barrier_destroy(&scan->end);
}

/* Starts nsleep idle `sleep` processes into sleepers; *ret_started says
 * how many started, whatever it returns. */
static int bench_gpu_list_sleepers(pid_t *sleepers, long nsleep, long *ret_started)
{
        *ret_started = 0;
        for (long i = 0; i < nsleep; i++) {
                char *argv[] = { "sleep", "100000", NULL };
                int e = bench_spawn(argv, NULL, NULL, -1, &sleepers[i]);
                if (e < 0) {
                        bench_gpu_fail("cannot start idle process %ld of %ld: %s", i + 1, nsleep, strerror(-e));
                        return e;
                }
                (*ret_started)++;
        }
        return 0;
}

/* The daemon started with config (JSON) written to the work directory
 * as name. */
static int bench_gpu_list_daemon(const bench_gpu_cfg *cfg, const char *name, const char *config, bench_daemon *ret)
{
        char path[PATH_MAX];
        FILE *f;
        snprintf(path, sizeof(path), "%s/%s", cfg->workdir, name);
        if (!(f = fopen(path, "w")) || fputs(config, f) < 0 || fclose(f) != 0)
                return -EIO;
        return bench_gpu_daemon_start_with(cfg, path, ret);
}

/* Two untimed calls of each, then runs of ListProcesses and of the
 * baseline scan taking turns. */
static int bench_gpu_list_rounds(cudackpt_client *c, const bench_gpu_target *t, int n, bench_gpu_scan *scan, long runs,
                                 bench_gpu_list_result *res)
{
        int r = 0;
        for (long i = -2; i < runs && r == 0; i++) {
                uint64_t a = bench_now_ns();
                if ((r = bench_gpu_list_call(c, t, n, &res->listed, &res->listed_cap, &res->listed_n)) < 0)
                        break;
                uint64_t b = bench_now_ns();
                if ((r = bench_gpu_scan_run(scan)) < 0) {
                        bench_gpu_fail("baseline scan: %s", strerror(-r));
                        break;
                }
                uint64_t e = bench_now_ns();
                res->found = atomic_load(&scan->found);
                res->calls = atomic_load(&scan->calls);
                res->skipped = atomic_load(&scan->skipped);
                if ((r = bench_gpu_has_targets(scan->cuda, (size_t)res->found, t, n, "the baseline")) < 0)
                        break;
                if (i >= 0) {
                        res->lat_list[i] = bench_gpu_ms(b - a);
                        res->lat_scan[i] = bench_gpu_ms(e - b);
                }
        }
        return r;
}

static void bench_gpu_list_report(const bench_gpu_cfg *cfg, const bench_gpu_scan *scan,
                                  const bench_gpu_list_result *res)
{
        long runs = cfg->list_runs, total = res->total;
        bench_stats sl, ss, sn;
        bench_stats_compute(res->lat_list, (size_t)runs, &sl);
        bench_stats_compute(res->lat_scan, (size_t)runs, &ss);
        bench_stats_compute(res->lat_noindex, (size_t)runs, &sn);
        double speed = sl.p50 > 0 ? ss.p50 / sl.p50 : 0;
        printf("  %-52s %9s %9s %9s %9s\n", "", "min ms", "p50 ms", "p90 ms", "max ms");
        printf("  %-52s %9.2f %9.2f %9.2f %9.2f\n",
               res->have_index ? "ListProcesses through the daemon (process index)"
                               : "ListProcesses through the daemon (no index)",
               sl.min, sl.p50, sl.p90, sl.max);
        printf("  %-52s %9.2f %9.2f %9.2f %9.2f\n", "ListProcesses, process_index_max 0 (/proc)", sn.min, sn.p50,
               sn.p90, sn.max);
        printf("  %-52s %9.2f %9.2f %9.2f %9.2f\n", "baseline: /proc scan + GetState per pid, pool", ss.min, ss.p50,
               ss.p90, ss.max);
        printf("  ListProcesses listed %zu CUDA processes; the baseline found %ld (%ld driver calls, %ld"
               " stopped/zombie/gone skipped) among %ld processes\n",
               res->listed_n, res->found, res->calls, res->skipped, total);
        bench_gpu_list_diff("found by the baseline, not listed", scan->cuda, (size_t)res->found, res->listed,
                            res->listed_n);
        bench_gpu_list_diff("listed, not found by the baseline", res->listed, res->listed_n, scan->cuda,
                            (size_t)res->found);
        printf("  speed-up x%.1f at the median (goals: ListProcesses < 20 ms: %s; >= x5: %s)\n", speed,
               sl.p50 < 20 ? "met" : "MISSED", speed >= 5 ? "met" : "MISSED");
        printf("RESULT bench=list processes=%ld cuda_listed=%zu cuda_baseline=%ld runs=%ld list_min_ms=%.3f "
               "list_p50_ms=%.3f list_p90_ms=%.3f scan_min_ms=%.3f scan_p50_ms=%.3f scan_p90_ms=%.3f "
               "pool=%ld speedup=%.2f index=%d noindex_min_ms=%.3f noindex_p50_ms=%.3f\n",
               total, res->listed_n, res->found, runs, sl.min, sl.p50, sl.p90, ss.min, ss.p50, ss.p90, cfg->pool,
               speed, res->have_index, sn.min, sn.p50);
        printf("SUMMARY | ListProcesses, %ld processes (%zu CUDA) | min %.2f ms, median %.2f ms | < 20 ms:"
               " **%s** |\n",
               total, res->listed_n, sl.min, sl.p50, sl.p50 < 20 ? "met" : "missed");
        printf("SUMMARY | baseline: /proc scan + cuCheckpointProcessGetState per pid, %ld threads | min %.2f"
               " ms, median %.2f ms | |\n",
               cfg->pool, ss.min, ss.p50);
        printf("SUMMARY | ListProcesses speed-up over the baseline | x%.1f (median) | >= x5: **%s** |\n", speed,
               speed >= 5 ? "met" : "missed");
}

/* With the idle processes running: the daemon with its process index,
 * the targets, the timed rounds against the baseline's pool, the daemon
 * again without the index, and the report. */
static int bench_gpu_list_measure(const bench_gpu_cfg *cfg)
{
        bench_daemon d;
        bench_gpu_driver drv;
        bench_gpu_target t[BENCH_GPU_MAX_PROCS];
        bench_gpu_scan scan;
        bench_gpu_list_result res = { 0 };
        pthread_t *pool = NULL;
        int n = (int)cfg->procs, r = 0, threads = 0;
        long runs = cfg->list_runs;
        cudackpt_client *c = NULL;

        memset(&scan, 0, sizeof(scan));
        if ((r = bench_gpu_driver_load(cfg, &drv)) < 0)
                return r;
        /* The index on kernels without BPF trampolines too (the tracepoint
         * way), which the default leaves to /proc scans. */
        if ((r = bench_gpu_list_daemon(cfg, "index.json", "{\"process_index_tracepoint\": true}\n", &d)) < 0)
                return r;
        res.have_index = bench_gpu_await_index(&d);
        if ((r = bench_gpu_targets_start(cfg, "list", n, cfg->idle_mib, t)) < 0)
                goto out_daemon;
        res.total = bench_gpu_count_procs();
        printf("  processes in /proc now: %ld\n", res.total);
        res.lat_list = calloc((size_t)runs, sizeof(double));
        res.lat_scan = calloc((size_t)runs, sizeof(double));
        res.lat_noindex = calloc((size_t)runs, sizeof(double));
        scan.drv = &drv;
        if (!res.lat_list || !res.lat_scan || !res.lat_noindex || bench_gpu_connect(&d, &c) < 0 ||
            (pool = bench_gpu_list_pool(&scan, cfg->pool)) == NULL) {
                r = -ENOMEM;
                goto out_targets;
        }
        threads = (int)cfg->pool;

        r = bench_gpu_list_rounds(c, t, n, &scan, runs, &res);
        for (int i = 0; i < n; i++)
                if (bench_gpu_target_check(&t[i]) < 0)
                        r = -EIO;
        if (r == 0) {
                struct discover_lib lib;
                if (discover_lib_of(drv.get_state, &lib) == 0)
                        bench_gpu_list_parts(&scan, &lib, runs, cfg->pool);
        }
        /* The same daemon without its process index: every process in /proc. */
        if (r == 0) {
                cudackpt_client_free(c);
                c = NULL;
                bench_gpu_daemon_stop(&d);
                if ((r = bench_gpu_list_daemon(cfg, "noindex.json", "{\"process_index_max\": 0}\n", &d)) < 0)
                        goto out_targets;
                if ((r = bench_gpu_connect(&d, &c)) == 0)
                        r = bench_gpu_list_only(c, t, n, runs, res.lat_noindex);
        }
        if (r == 0)
                bench_gpu_list_report(cfg, &scan, &res);
        bench_gpu_list_pool_end(&scan, pool, threads);
out_targets:
        free(pool);
        free(scan.pids);
        free(scan.cuda);
        free(res.listed);
        free(res.lat_list);
        free(res.lat_scan);
        free(res.lat_noindex);
        cudackpt_client_free(c);
        bench_gpu_targets_stop(t, n);
out_daemon:
        bench_gpu_daemon_stop(&d);
        return r;
}

int bench_gpu_list(const bench_gpu_cfg *cfg)
{
        pid_t *sleepers = NULL;
        long nsleep = 0, started = 0, before;
        int r;

        printf("\n== 7. ListProcesses with %ld processes on the machine (%ld CUDA targets) vs a /proc scan with"
               " GetState from %ld threads (%ld runs each) ==\n",
               cfg->processes, cfg->procs, cfg->pool, cfg->list_runs);
        /* The idle processes first: a fork of this process maps the driver
         * until it execs, once the driver is loaded here. */
        before = bench_gpu_count_procs();
        nsleep = cfg->processes - before - cfg->procs;
        if (nsleep < 0)
                nsleep = 0;
        bench_raise_nofile(4096);
        sleepers = calloc((size_t)nsleep + 1, sizeof(*sleepers));
        if (!sleepers)
                return -ENOMEM;
        uint64_t t0 = bench_now_ns();
        r = bench_gpu_list_sleepers(sleepers, nsleep, &started);
        printf("  %ld idle sleep processes started in %.1f s (%ld processes there before)\n", started,
               bench_gpu_ms(bench_now_ns() - t0) / 1e3, before);
        if (r == 0)
                r = bench_gpu_list_measure(cfg);
        for (long i = 0; i < started; i++)
                kill(sleepers[i], SIGKILL);
        for (long i = 0; i < started; i++)
                while (waitpid(sleepers[i], NULL, 0) < 0 && errno == EINTR)
                        ;
        free(sleepers);
        return r;
}
