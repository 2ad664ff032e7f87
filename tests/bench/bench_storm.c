/* bench_storm.c: a watcher storm by one uid against another uid's GetState
 * latency and the daemon's memory (bench_storm.h). */
#include "bench_storm.h"

#include <cudackpt/client.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_common.h"

#define STORM_MAX_WATCHERS 4096
#define STORM_MAX_TARGETS 64
#define STORM_ROUND_MS 50

static const char watch_msg[] = "{\"method\":\"io.cudackpt.Process.Watch\",\"parameters\":{},\"more\":true}";

/* What the storm's child reports at its end. */
struct storm_stats {
        long opened;     /* Watch streams set up */
        long refused;    /* Watch calls answered QueueFull */
        long cut;        /* streams the daemon closed */
        long most;       /* open at once, at the most */
        long cycles;     /* Lock/Unlock cycles made */
        long errors;     /* failed calls */
};

static int storm_connect(const char *path)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0)
                return -errno;
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

/* A Watch stream: 1 set up (left unread from now on), 0 refused, <0 error. */
static int storm_open_watcher(const char *path, int *ret_fd)
{
        char buf[512];
        size_t used = 0;
        int fd = storm_connect(path);

        if (fd < 0)
                return fd;
        if (send(fd, watch_msg, sizeof(watch_msg), MSG_NOSIGNAL) != (ssize_t)sizeof(watch_msg))
                goto fail;
        while (used < sizeof(buf) - 1) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                if (poll(&p, 1, 2000) <= 0)
                        goto fail;
                ssize_t n = recv(fd, buf + used, sizeof(buf) - 1 - used, 0);
                if (n <= 0)
                        goto fail;
                used += (size_t)n;
                buf[used] = '\0';
                if (memchr(buf, '\0', used))
                        break;
        }
        if (strstr(buf, "\"watching\"")) {
                *ret_fd = fd;
                return 1;
        }
        close(fd);
        return strstr(buf, "QueueFull") ? 0 : -EPROTO;
fail:
        close(fd);
        return -EIO;
}

/* Closes the streams the daemon has cut off. */
static void storm_reap(int *fds, long *n, struct storm_stats *st)
{
        for (long i = 0; i < *n;) {
                struct pollfd p = {.fd = fds[i], .events = POLLRDHUP};
                if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR))) {
                        close(fds[i]);
                        fds[i] = fds[--*n];
                        st->cut++;
                        continue;
                }
                i++;
        }
}

static void storm_cycle(cudackpt_client *c, const pid_t *t, long n, struct storm_stats *st)
{
        cudackpt_reply r;

        cudackpt_reply_init(&r);
        for (long i = 0; i < n; i++) {
                if (cudackpt_lock(c, (int)t[i], 0, &r) < 0 || r.error)
                        st->errors++;
                cudackpt_reply_clear(&r);
                if (cudackpt_unlock(c, (int)t[i], &r) < 0 || r.error)
                        st->errors++;
                cudackpt_reply_clear(&r);
                st->cycles++;
        }
}

/* The storm's uid: its processes, then watchers topped up every round and
 * never read, and the Lock/Unlock loop, for cfg->seconds. */
static int storm_child(const bench_storm_cfg *cfg, int out)
{
        static int fds[STORM_MAX_WATCHERS];
        static const char *const env[] = {"CUDACKPT_SIM=1", NULL};
        pid_t t[STORM_MAX_TARGETS];
        long nt = cfg->targets < STORM_MAX_TARGETS ? cfg->targets : STORM_MAX_TARGETS, n = 0;
        struct storm_stats st = {0};
        cudackpt_client *c = NULL;
        cudackpt_reply r;
        char one = 1;

        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (setgroups(0, NULL) < 0 || setresgid(cfg->uid, cfg->uid, cfg->uid) < 0 ||
            setresuid(cfg->uid, cfg->uid, cfg->uid) < 0)
                return 1;
        for (long i = 0; i < nt; i++) {
                char *argv[] = {"sleep", "100000", NULL};
                if (bench_spawn(argv, env, NULL, -1, &t[i]) < 0)
                        return 1;
        }
        if (cudackpt_client_connect(cfg->socket_path, &c) < 0)
                return 1;
        cudackpt_reply_init(&r);
        uint64_t end = bench_now_ns() + (uint64_t)cfg->seconds * 1000000000ULL;
        bool told = false;
        while (bench_now_ns() < end) {
                uint64_t round_end = bench_now_ns() + STORM_ROUND_MS * 1000000ULL;
                storm_reap(fds, &n, &st);
                while (n < STORM_MAX_WATCHERS) {
                        int k = storm_open_watcher(cfg->socket_path, &fds[n]);
                        st.opened += k == 1;
                        st.refused += k == 0;
                        st.errors += k < 0;
                        if (k != 1)
                                break;
                        n++;
                }
                if (n > st.most)
                        st.most = n;
                if (!told) {
                        told = write(out, &one, 1) == 1;
                }
                while (bench_now_ns() < round_end)
                        storm_cycle(c, t, nt, &st);
        }
        for (long i = 0; i < nt; i++)
                bench_kill(t[i]);
        cudackpt_client_free(c);
        return write(out, &st, sizeof(st)) == (ssize_t)sizeof(st) ? 0 : 1;
}

/* GetState round trips on root's process: one sample each (us). */
static int storm_probe(cudackpt_client *c, int pid, bench_samples *s, long n, uint64_t until_ns)
{
        cudackpt_reply r;

        cudackpt_reply_init(&r);
        for (long i = 0; (n <= 0 || i < n) && (!until_ns || bench_now_ns() < until_ns); i++) {
                uint64_t t0 = bench_now_ns();
                int k = cudackpt_get_state(c, pid, &r);
                double us = (double)(bench_now_ns() - t0) / 1e3;
                if (k < 0 || r.error) {
                        printf("ERROR: GetState(%d) during the storm: %s\n", pid, k < 0 ? strerror(-k) : r.error);
                        cudackpt_reply_clear(&r);
                        return -EIO;
                }
                cudackpt_reply_clear(&r);
                if (bench_samples_add(s, us) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static void storm_print(const char *label, bench_samples *s)
{
        bench_stats st;

        bench_stats_compute(s->v, s->n, &st);
        printf("  %-12s %8zu calls   p50 %8.1f us   p99 %8.1f us   max %9.1f us\n", label, st.n, st.p50, st.p99,
               st.max);
        printf("RESULT bench=sim-storm cond=%s calls=%zu p50_us=%.1f p99_us=%.1f max_us=%.1f\n", label, st.n, st.p50,
               st.p99, st.max);
}

/* During the storm: probe in slices, sampling the daemon's RSS between. */
static int storm_measure(const bench_storm_cfg *cfg, cudackpt_client *c, bench_samples *s, long *ret_peak)
{
        uint64_t end = bench_now_ns() + (uint64_t)cfg->seconds * 1000000000ULL;

        while (bench_now_ns() < end) {
                long rss = bench_vmrss_kib(cfg->daemon_pid);
                if (rss > *ret_peak)
                        *ret_peak = rss;
                if (storm_probe(c, cfg->probe_pid, s, 0, bench_now_ns() + 20000000ULL) < 0)
                        return -EIO;
        }
        return 0;
}

int bench_storm_run(const bench_storm_cfg *cfg)
{
        bench_samples quiet = {0}, storm = {0};
        struct storm_stats st = {0};
        cudackpt_client *c = NULL;
        int p[2], status = 0, r = -EIO;
        char one;

        printf("== Watch storm: uid %u opens every watcher it may, never reads, and locks/unlocks %ld processes"
               " for %ld s; root's GetState meanwhile ==\n",
               (unsigned)cfg->uid, cfg->targets, cfg->seconds);
        if (geteuid() != 0) {
                printf("  skipped: needs root, to run the storm as another uid\n");
                return 0;
        }
        if (cudackpt_client_connect(cfg->socket_path, &c) < 0 || pipe2(p, O_CLOEXEC) < 0) {
                printf("ERROR: cannot connect to %s\n", cfg->socket_path);
                cudackpt_client_free(c);
                return -EIO;
        }
        /* Warm: the threads and caches the storm's calls use are there
         * before the idle reading, which the watchers' cost is taken from. */
        struct storm_stats warm = {0};
        pid_t probe = cfg->probe_pid;
        for (int i = 0; i < 200; i++)
                storm_cycle(c, &probe, 1, &warm);
        if (storm_probe(c, cfg->probe_pid, &quiet, cfg->calls, bench_now_ns() + 5000000000ULL) < 0 || warm.errors)
                goto out;
        long rss_idle = bench_vmrss_kib(cfg->daemon_pid), rss_peak = rss_idle;
        pid_t child = fork();
        if (child == 0) {
                close(p[0]);
                _exit(storm_child(cfg, p[1]));
        }
        close(p[1]);
        if (child < 0 || read(p[0], &one, 1) != 1) {
                printf("ERROR: the storm did not start\n");
                goto out;
        }
        if (storm_measure(cfg, c, &storm, &rss_peak) < 0)
                goto out;
        if (read(p[0], &st, sizeof(st)) != (ssize_t)sizeof(st) || waitpid(child, &status, 0) != child ||
            status != 0) {
                printf("ERROR: the storm's process failed (status %d)\n", status);
                goto out;
        }
        /* The daemon gives watchers' memory back a second after they go. */
        usleep(2500000);
        long rss_after = bench_vmrss_kib(cfg->daemon_pid);
        /* What the watchers may hold (their buffers), and each one's
         * connection and bookkeeping (under 8 KiB: its structures, the read
         * buffer its Watch call came in, the write request). */
        long per_uid = cfg->max_watchers_per_uid * cfg->max_watcher_bytes;
        long bound = ((per_uid < cfg->max_watch_bytes ? per_uid : cfg->max_watch_bytes) +
                      cfg->max_watchers_per_uid * 8192) / 1024;

        storm_print("no-storm", &quiet);
        storm_print("storm", &storm);
        printf("  storm: %ld watchers set up (%ld open at once as it saw them), %ld refused (QueueFull), %ld cut off;"
               " %ld Lock/Unlock cycles, %ld failed calls\n",
               st.opened, st.most, st.refused, st.cut, st.cycles, st.errors);
        printf("  daemon RSS: idle %ld KiB, peak %ld KiB (+%ld), after %ld KiB (+%ld); watchers' bound %ld KiB"
               " (max_watchers_per_uid x (max_watcher_bytes + 8 KiB), at most max_watch_bytes): %s\n",
               rss_idle, rss_peak, rss_peak - rss_idle, rss_after, rss_after - rss_idle, bound,
               rss_peak - rss_idle <= bound ? "within" : "OVER");
        printf("RESULT bench=sim-storm watchers=%ld most=%ld refused=%ld cut=%ld cycles=%ld rss_idle_kib=%ld "
               "rss_peak_kib=%ld rss_after_kib=%ld bound_kib=%ld within=%d\n",
               st.opened, st.most, st.refused, st.cut, st.cycles, rss_idle, rss_peak, rss_after, bound,
               rss_peak - rss_idle <= bound);
        r = st.errors ? -EIO : 0;
        if (st.errors)
                printf("ERROR: %ld calls of the storm failed\n", st.errors);
out:
        close(p[0]);
        cudackpt_client_free(c);
        bench_samples_free(&quiet);
        bench_samples_free(&storm);
        return r;
}
