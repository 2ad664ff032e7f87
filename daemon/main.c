/* main.c: options, configuration, and the server's loop. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <uv.h>

#include "base/config.h"
#include "base/log.h"
#include "run/sched.h"
#include "server.h"

#ifndef CUDACKPT_VERSION
#define CUDACKPT_VERSION "0"
#endif

static void usage(FILE *f)
{
        fprintf(f,
                "Usage: cudackptd [OPTION]...\n"
                "Coordinate CUDA checkpoint and restore of processes for local clients.\n\n"
                "  --socket=PATH     socket to bind when none is passed by systemd\n"
                "                    (default %s)\n"
                "  --driver=PATH     libcuda.so.1 or a compatible library (default libcuda.so.1)\n"
                "  --config=PATH     configuration file (default %s; may be absent)\n"
                "  --workers=N       worker threads for driver calls (default 16)\n"
                "  --log-level=L     debug, info, notice, warning or err (default info)\n"
                "  --help            show this help\n"
                "  --version         show the version\n",
                "/run/cudackpt/io.cudackpt.Process", CONFIG_DEFAULT_PATH);
}

/* Every connection takes two descriptors (the socket and the peer's pidfd)
 * and every cached target three (pidfd, /proc/PID/stat and status).  The soft
 * limit is raised to the hard one, as systemd advises for programs that do
 * not use select(); what still falls short is said once. */
static void raise_nofile(const struct config *cfg)
{
        rlim_t need = 2 * (rlim_t)cfg->max_connections + 3 * (rlim_t)cfg->max_cached_targets + 64;
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return;
        if (rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void)setrlimit(RLIMIT_NOFILE, &rl);
                (void)getrlimit(RLIMIT_NOFILE, &rl);
        }
        if (rl.rlim_cur < need)
                log_warning("The file descriptor limit (%llu) is below what max_connections and "
                            "max_cached_targets may need (%llu): connections past it will be refused",
                            (unsigned long long)rl.rlim_cur, (unsigned long long)need);
}

struct options {
        const char *socket, *driver, *config, *workers, *level;
};

/* -1 when the daemon goes on, else the exit code (--help, --version, a
 * wrong option). */
static int parse_options(int argc, char **argv, struct options *ret)
{
        static const struct option options[] = {
                { "socket", required_argument, NULL, 's' }, { "driver", required_argument, NULL, 'd' },
                { "config", required_argument, NULL, 'c' }, { "workers", required_argument, NULL, 'w' },
                { "log-level", required_argument, NULL, 'l' }, { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },      { 0 },
        };
        int opt;

        while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
                switch (opt) {
                case 's': ret->socket = optarg; break;
                case 'd': ret->driver = optarg; break;
                case 'c': ret->config = optarg; break;
                case 'w': ret->workers = optarg; break;
                case 'l': ret->level = optarg; break;
                case 'h': usage(stdout); return 0;
                case 'V': printf("cudackptd %s\n", CUDACKPT_VERSION); return 0;
                default: usage(stderr); return 2;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "cudackptd: unexpected argument '%s'\n", argv[optind]);
                return 2;
        }
        return -1;
}

/* The configuration file, then the options over it.  -1 when the daemon
 * goes on, else the exit code. */
static int load_config(struct config *cfg, const struct options *o)
{
        char *err = NULL;
        int r;

        config_init(cfg);
        log_setup(cfg->log_level);
        r = config_load_file(cfg, o->config ? o->config : CONFIG_DEFAULT_PATH, o->config != NULL, &err);
        if (r < 0) {
                log_error("Invalid configuration: %s", err ? err : strerror(-r));
                free(err);
                return 1;
        }
        if ((o->socket && config_set_string(&cfg->socket_path, o->socket) < 0) ||
            (o->driver && config_set_string(&cfg->driver_path, o->driver) < 0))
                return 1;
        if (o->workers) {
                char *end;
                unsigned long n = strtoul(o->workers, &end, 10);
                if (*end || end == o->workers || n < 1 || n > 1024) {
                        fprintf(stderr, "cudackptd: --workers takes a number from 1 to 1024\n");
                        return 2;
                }
                cfg->workers = (unsigned)n;
        }
        if (o->level) {
                int l = log_level_from_string(o->level);
                if (l < 0) {
                        fprintf(stderr, "cudackptd: unknown log level '%s'\n", o->level);
                        return 2;
                }
                cfg->log_level = l;
        }
        log_setup(cfg->log_level);
        return -1;
}

int main(int argc, char **argv)
{
        struct options o = { 0 };
        struct config cfg;
        struct server srv;
        char nbuf[16];
        uv_loop_t loop;
        int r;

        r = parse_options(argc, argv, &o);
        if (r >= 0)
                return r;
        r = load_config(&cfg, &o);
        if (r >= 0)
                return r;
        raise_nofile(&cfg);

        /* libuv sizes its pool from this on first use; a driver call that takes
         * 30 s must not hold up another process's, and driver calls (at most
         * workers at once, sched.h) never hold up the /proc and NVML work. */
        snprintf(nbuf, sizeof(nbuf), "%u", cfg.workers + SCHED_HOUSEKEEPING_THREADS);
        setenv("UV_THREADPOOL_SIZE", nbuf, 1);
        signal(SIGPIPE, SIG_IGN);

        r = uv_loop_init(&loop);
        if (r < 0) {
                log_error("Failed to set up the event loop: %s", uv_strerror(r));
                return 1;
        }
        r = server_init(&srv, &loop, &cfg);
        if (r < 0) {
                log_error("Failed to set up the server: %s", strerror(-r));
                uv_loop_close(&loop);
                config_free(&cfg);
                return 1;
        }
        r = server_run(&srv);
        server_free(&srv);
        uv_loop_close(&loop);
        config_free(&cfg);
        return r;
}
