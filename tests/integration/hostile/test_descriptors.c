/* test_descriptors.c: a daemon out of file descriptors (net/accept.h).
 * A flood of connections, held open, meets a daemon whose RLIMIT_NOFILE
 * was lowered below what it holds: accept4() fails with EMFILE.
 * The daemon must not spin on its loop (libuv's listener retries at once,
 * for ever): its CPU time over 2 s stays small, the episode is logged once
 * and counted in the metrics, and once the flood hangs up a new client is
 * served.  A daemon whose accept4() a seccomp filter refuses (EPERM) must
 * not spin either. */
#include "attacks_itest.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* Descriptors pid has open now. */
static int open_fds(pid_t pid)
{
        char path[64];
        int n = 0;

        snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
        DIR *d = opendir(path);
        ck_assert_msg(d != NULL, "%s: %s", path, strerror(errno));
        for (struct dirent *e; (e = readdir(d));)
                n += e->d_name[0] != '.';
        closedir(d);
        return n;
}

/* pid's CPU time, user and system, all threads, in seconds. */
static double cpu_seconds(pid_t pid)
{
        char path[64];
        unsigned long long ut = 0, st = 0;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        const char *text = itest_read_text(path);
        const char *p = strrchr(text, ')'); /* the name may hold spaces */
        ck_assert_msg(p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2,
                      "cannot read %s: %s", path, text);
        return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* libuv's reserve descriptor (its "EMFILE trick": /dev/null, opened with
 * the first stream, closed to accept and drop connections when accept
 * fails with EMFILE), the highest /dev/null of pid above stderr; -1: none. */
static int reserve_fd(pid_t pid)
{
        char path[64], target[64];
        int best = -1;

        snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
        DIR *d = opendir(path);
        ck_assert_msg(d != NULL, "%s: %s", path, strerror(errno));
        for (struct dirent *e; (e = readdir(d));) {
                char link[330];
                int fd = atoi(e->d_name);
                snprintf(link, sizeof(link), "%s/%s", path, e->d_name);
                ssize_t n = readlink(link, target, sizeof(target) - 1);
                if (fd > 2 && n > 0 && (target[n] = '\0', strcmp(target, "/dev/null") == 0) && fd > best)
                        best = fd;
        }
        closedir(d);
        return best;
}

static int count_of(const char *text, const char *needle)
{
        int n = 0;

        for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
                n++;
        return n;
}

START_TEST(out_of_descriptors_no_spin)
{
        enum { HELD = 4, FLOOD = 48 };
        /* The default accept_retry_ms, 200. */
        struct itest_daemon *d = itest_daemon_start_default();
        /* The process index and NVML open on workers after the start: what
         * they hold (or give back) is counted first. */
        itest_await_log(d, "rocess index", 10000);
        itest_await_log(d, "NVML", 10000);
        atest_assert_serving(d);

        /* Clients served and held (a socket and a pidfd each in the
         * daemon), then a limit below what the daemon holds: every accept
         * fails with EMFILE until descriptors come free.  The limit is at
         * libuv's reserve descriptor, so that the slot its trick frees is
         * above the limit and makes no room: a daemon relying on the trick
         * spins. */
        struct itest_conn *held[HELD];
        for (int i = 0; i < HELD; i++) {
                held[i] = itest_connect(d);
                atest_assert_get_info(held[i]);
        }
        int have = open_fds(d->pid), reserve = reserve_fd(d->pid);
        rlim_t limit = (rlim_t)(reserve > 0 ? reserve : have - 2);
        struct rlimit lim = { .rlim_cur = limit, .rlim_max = limit };
        ck_assert_msg(prlimit(d->pid, RLIMIT_NOFILE, &lim, NULL) == 0, "prlimit: %s", strerror(errno));

        int fds[FLOOD];
        for (int i = 0; i < FLOOD; i++) {
                fds[i] = atest_raw_connect(d->sock);
                ck_assert_msg(fds[i] >= 0, "flood connection %d: %s", i, strerror(-fds[i]));
        }

        /* 2 s of a daemon that can accept nothing: a spinning loop burns a
         * core (about 2 s of CPU time); a paused one wakes 10 times. */
        double cpu0 = cpu_seconds(d->pid), t0 = itest_now_ms();
        usleep(2000000);
        double cpu = cpu_seconds(d->pid) - cpu0, wall = (itest_now_ms() - t0) / 1000;
        ck_assert_msg(cpu < 0.25, "the daemon used %.2f s of CPU in %.2f s while out of descriptors", cpu, wall);
        itest_await_log(d, "Cannot accept connections: Too many open files", 1000);
        ck_assert_int_eq(count_of(itest_daemon_log(d), "Cannot accept connections"), 1);

        /* The test hangs up: descriptors come free, and a new client is
         * served within a few retries. */
        for (int i = 0; i < HELD; i++)
                itest_conn_close(held[i]);
        for (int i = 0; i < FLOOD; i++)
                close(fds[i]);
        double t1 = itest_now_ms();
        struct itest_conn *c = atest_connect_served(d, 5000);
        atest_assert_get_info(c);
        ck_assert_msg(itest_now_ms() - t1 < 3000, "a new client was served only after %.0f ms",
                      itest_now_ms() - t1);
        itest_await_log(d, "Accepting connections again", 1000);
        const char *text = itest_str(itest_call(c, CUDACKPT_METHOD_GET_METRICS, NULL), "text");
        ck_assert_msg(text && strstr(text, "cudackpt_accept_pauses_total{reason=\"descriptors\"} 1\n"),
                      "metrics: %s", text ? text : "(none)");
        ck_assert_int_eq(count_of(itest_daemon_log(d), "Cannot accept connections"), 1);
        itest_conn_close(c);
}
END_TEST

#ifdef CUDACKPT_ITEST_SECCOMP
#include <seccomp.h>

/* accept4 refused with EPERM by a filter of the test's own process (the
 * daemon it starts inherits it), as a container's profile may: a waiting
 * client is never accepted, and the daemon does not spin; logged once. */
START_TEST(accept_refused_no_spin)
{
        scmp_filter_ctx f = seccomp_init(SCMP_ACT_ALLOW);
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(accept4), 0), 0);
        ck_assert_int_eq(seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(accept), 0), 0);
        ck_assert_int_eq(seccomp_load(f), 0);
        seccomp_release(f);
        struct itest_daemon *d = itest_daemon_start_default();
        int fd = atest_raw_connect(d->sock);
        ck_assert_msg(fd >= 0, "connect: %s", strerror(-fd));

        double cpu0 = cpu_seconds(d->pid);
        usleep(2000000);
        double cpu = cpu_seconds(d->pid) - cpu0;
        ck_assert_msg(cpu < 0.25, "the daemon used %.2f s of CPU in 2 s while accept4 was refused", cpu);
        itest_await_log(d, "Cannot accept connections: Operation not permitted", 1000);
        ck_assert_int_eq(count_of(itest_daemon_log(d), "Cannot accept connections"), 1);
        close(fd);
}
END_TEST
#endif

int main(void)
{
        const TTest *tests[] = { out_of_descriptors_no_spin,
#ifdef CUDACKPT_ITEST_SECCOMP
                                 accept_refused_no_spin,
#endif
                                 NULL };

        return itest_run("integration.descriptors", "descriptors", 60, tests);
}
