/* test_criu_restoresocks.c: restore --owner (what cudackptd's RestoreJob
 * runs) refuses a job whose sockets CRIU would give a port its owner
 * could not have taken.  CRIU re-creates a job's sockets in the restored
 * tasks while they are root, and sets SO_REUSEADDR and SO_REUSEPORT on
 * each before binding it again: a job that listened on a TCP port and held
 * a UDP one, neither with SO_REUSEPORT, restored after a root service took
 * those ports with SO_REUSEPORT, joined the service's groups (its listener
 * then got every connection to the port); one that listened below
 * ip_unprivileged_port_start got that port back however the port's uid
 * stood.  Each is refused (exit status 12, the port said), the restored
 * processes ended before they ran; the service gone, the same images
 * restore, and a job whose sockets had SO_REUSEPORT restores beside a
 * service of its owner's (what the owner could have joined itself).
 * And a job's TCP connection to a service, saved as the daemon saves
 * (--tcp-established, --network-lock skip: the service's end stays), whose
 * addresses and ports another process took meanwhile, is not restored
 * into that live connection: the kernel refuses criu's repair-mode
 * connect, the restore fails, the other connection goes on.
 *
 * The job is root's (here criu cannot dump another uid's job without
 * CAP_SYS_RESOURCE); the check holds uid 0 to the same ports as any user
 * (as restoreaccess checks files without root's capabilities).
 *
 * Skips as integration.criu does (citest_probe). */
#include "criu_run_itest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <glob.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* A socket of type on 127.0.0.1:port (SO_REUSEPORT when reuseport),
 * listening when a stream; -1 with errno when the bind failed. */
static int sock_at(int type, unsigned port, bool reuseport)
{
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                                  .sin_port = htons((uint16_t)port) };
        int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0), on = 1;
        ck_assert_int_ge(fd, 0);
        if (reuseport)
                ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)), 0);
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || (type == SOCK_STREAM && listen(fd, 64) < 0)) {
                int e = errno;
                close(fd);
                errno = e;
                return -1;
        }
        return fd;
}

/* A port of 127.0.0.1 free now for TCP and UDP, at or above lo (0: any). */
static unsigned free_port(unsigned lo)
{
        for (unsigned p = lo; lo == 0 || p < lo + 100; p++) {
                int t = sock_at(SOCK_STREAM, p, false);
                struct sockaddr_in sa;
                socklen_t len = sizeof(sa);
                if (t < 0)
                        continue;
                ck_assert_int_eq(getsockname(t, (struct sockaddr *)&sa, &len), 0);
                unsigned got = ntohs(sa.sin_port);
                int u = sock_at(SOCK_DGRAM, got, false);
                close(t);
                if (u >= 0) {
                        close(u);
                        return got;
                }
        }
        ck_abort_msg("no free port from %u", lo);
        return 0;
}

/* The job "sk": criu_target with more of its environment ("K=V ..."),
 * dumped into x's images (its TCP connections too when established, as
 * the daemon's saves do). */
static void dump_job(struct citest_ctx *x, const char *more, bool established)
{
        const char *const *env = crun_env(x);
        const char *d = itest_strdupf("%s/sk", x->d->dir), *pids = itest_strdupf("%s/pids", d);
        ck_assert_int_eq(mkdir(d, 0755), 0);
        const char *script = itest_strdupf("%s %s single 1 %s/result 1 3>>%s & wait", more,
                                           citest_need_env("CUDACKPT_TEST_CRIU_TARGET"), d, pids);
        const char *const args[] = { "--name", "sk", "--no-cgroup", "--user=0:0", "--", "/bin/sh", "-c", script, NULL };
        pid_t run = crun_start(env, itest_strdupf("%s/run.out", x->d->dir), -1, args);
        (void)crun_init_of(x, "sk", NULL);
        crun_await_text(pids, "\n");
        cjob_expect_ok(cjob_ctl(env, "dump", "--run", "sk", "--owner=0", "--images", x->img, established ? "--" : NULL,
                                "--tcp-established", "--network-lock", "skip", NULL),
                       "dump --owner=0");
        cjob_wait(run);
}

/* The job "sk" listening on TCP tcp and bound to UDP udp (more: one more
 * "K=V" of its environment, or ""), dumped. */
static void dump_ports_job(struct citest_ctx *x, unsigned tcp, unsigned udp, const char *more)
{
        dump_job(x, itest_strdupf("CRIU_TARGET_TCP=%u CRIU_TARGET_UDP=%u %s", tcp, udp, more), false);
}

/* restore --owner=0 of x's images: refused for naming all of said, and
 * no job left. */
static void restore_refused(struct citest_ctx *x, const char *said, const char *also)
{
        struct citest_run *res = cjob_ctl(crun_env(x), "restore", "--images", x->img, "--owner=0", NULL);
        bool ran = access(itest_strdupf("%s/runs/sk", x->d->dir), F_OK) == 0;
        assert_run(res->status == 12 && strstr(res->out, said) && strstr(res->out, also) && !ran, res,
                   "restore --owner=0: exit %d, the job %s (want 12, '%s', '%s')", res->status,
                   ran ? "restored" : "not restored", said, also);
}

/* restore --owner=0 of x's images succeeds; the job then ended. */
static void restore_ok(struct citest_ctx *x)
{
        cjob_expect_ok(cjob_ctl(crun_env(x), "restore", "--images", x->img, "--owner=0", NULL), "restore --owner=0");
        pid_t init = crun_init_of(x, "sk", NULL);
        ck_assert_int_eq(kill(init, SIGKILL), 0);
        citest_await_gone(init, AWAIT_MS);
}

START_TEST(reuseport_group_joined_refused)
{
        struct citest_ctx x;
        citest_setup(&x);
        unsigned tcp = free_port(0), udp = free_port(0);
        dump_ports_job(&x, tcp, udp, "");

        /* A root service on the job's TCP port, then on its UDP port, each
         * with SO_REUSEPORT (the job's sockets had none). */
        int svc = sock_at(SOCK_STREAM, tcp, true);
        ck_assert_int_ge(svc, 0);
        restore_refused(&x, "TCP socket (descriptor", itest_strdupf("127.0.0.1 port %u, which it shares", tcp));
        close(svc);
        svc = sock_at(SOCK_DGRAM, udp, true);
        ck_assert_int_ge(svc, 0);
        restore_refused(&x, "UDP socket (descriptor", itest_strdupf("127.0.0.1 port %u, which it shares", udp));
        close(svc);

        /* The ports free again: the same images restore. */
        restore_ok(&x);
}
END_TEST

START_TEST(privileged_port_refused)
{
        struct citest_ctx x;
        citest_setup(&x);
        unsigned tcp = free_port(900), udp = free_port(0);
        dump_ports_job(&x, tcp, udp, "");
        restore_refused(&x, itest_strdupf("listening on 127.0.0.1 port %u", tcp), "below ip_unprivileged_port_start");
}
END_TEST

START_TEST(owners_reuseport_group_restores)
{
        struct citest_ctx x;
        citest_setup(&x);
        unsigned tcp = free_port(0), udp = free_port(0);
        dump_ports_job(&x, tcp, udp, "CRIU_TARGET_REUSEPORT=1");

        /* A service of the owner's (uid 0), which the job's sockets, with
         * SO_REUSEPORT, could have joined themselves. */
        int t = sock_at(SOCK_STREAM, tcp, true), u = sock_at(SOCK_DGRAM, udp, true);
        ck_assert(t >= 0 && u >= 0);
        restore_ok(&x);
        close(t);
        close(u);
}
END_TEST

/* The TCP state of fd (TCP_INFO). */
static int tcp_state(int fd)
{
        struct tcp_info ti;
        socklen_t len = sizeof(ti);
        ck_assert_int_eq(getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len), 0);
        return ti.tcpi_state;
}

START_TEST(taken_connection_not_joined)
{
        struct citest_ctx x;
        citest_setup(&x);
        /* A root service; the job's connection to it from port lport. */
        int svc = sock_at(SOCK_STREAM, free_port(0), false);
        ck_assert_int_ge(svc, 0);
        struct sockaddr_in sa;
        socklen_t len = sizeof(sa);
        ck_assert_int_eq(getsockname(svc, (struct sockaddr *)&sa, &len), 0);
        unsigned sport = ntohs(sa.sin_port), lport = free_port(0);
        dump_job(&x, itest_strdupf("CRIU_TARGET_CONNECT=%u:%u", lport, sport), true);
        int old = accept4(svc, NULL, NULL, SOCK_CLOEXEC);
        ck_assert_int_ge(old, 0);
        /* No lock, no reset: the service's end stays. */
        ck_assert_int_eq(tcp_state(old), TCP_ESTABLISHED);

        /* Another process takes the same addresses and ports (its SYN
         * answered by the old end, which its reset ends, then accepted). */
        int taker = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), on = 1;
        ck_assert_int_ge(taker, 0);
        ck_assert_int_eq(setsockopt(taker, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)), 0);
        sa.sin_port = htons((uint16_t)lport);
        ck_assert_int_eq(bind(taker, (struct sockaddr *)&sa, sizeof(sa)), 0);
        sa.sin_port = htons((uint16_t)sport);
        ck_assert_int_eq(connect(taker, (struct sockaddr *)&sa, sizeof(sa)), 0);
        int theirs = accept4(svc, NULL, NULL, SOCK_CLOEXEC);
        ck_assert_int_ge(theirs, 0);

        /* The restore cannot put the job's socket in that connection: the
         * kernel refuses the repair-mode connect; theirs goes on. */
        struct citest_run *res = cjob_ctl(crun_env(&x), "restore", "--images", x.img, "--owner=0", "--",
                                          "--tcp-established", "--network-lock", "skip", NULL);
        bool ran = access(itest_strdupf("%s/runs/sk", x.d->dir), F_OK) == 0;
        glob_t logs = { 0 };
        ck_assert_int_eq(glob(itest_strdupf("%s/tree-*/restore.log", x.img), 0, NULL, &logs), 0);
        char *log = citest_slurp_raw(logs.gl_pathv[0]);
        bool refused = log && strstr(log, "Can't connect inet socket back: Cannot assign requested address");
        assert_run(res->status != 0 && !ran && refused, res,
                   "restore over a taken connection: exit %d, the job %s, criu's log %s the repair-mode connect refused",
                   res->status, ran ? "restored" : "not restored", refused ? "has" : "lacks");
        free(log);
        globfree(&logs);
        char got[3] = "";
        ck_assert_int_eq(write(taker, "ok", 2), 2);
        ck_assert_int_eq(read(theirs, got, 2), 2);
        ck_assert_str_eq(got, "ok");
        ck_assert_int_eq(tcp_state(taker), TCP_ESTABLISHED);
        close(theirs);
        close(taker);
        close(old);
        close(svc);
}
END_TEST

int main(void)
{
        const TTest *tests[] = { reuseport_group_joined_refused, privileged_port_refused, owners_reuseport_group_restores,
                                 taken_connection_not_joined, NULL };

        return citest_main("criu_restoresocks", 8.0 * JOB_TIMEOUT_MS / 1000, tests);
}
