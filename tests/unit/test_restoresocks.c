/* Unit tests: client/ctl/job/restoresocks.c, what restore --owner does to
 * the sockets of a restored job, on a live process holding sockets root
 * made (as criu makes them): each becomes the owner's, so that the kernel
 * no longer lets it join a root socket's SO_REUSEPORT group (a TCP socket
 * bound and listening later, a UDP one); one sharing its port with a
 * socket of another uid the job does not hold is refused, with the uid
 * said (IPv4, and IPv6 beside a socket on [::]), not one sharing it with
 * the owner's (SO_REUSEPORT) nor one on another address; a TCP socket bound below ip_unprivileged_port_start,
 * not listening (no /proc/net table lists it), is refused.  Needs root;
 * left out otherwise. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runner.h"

#include "restoresocks.h"

#define OTHER_UID 65534

/* A socket of type, SO_REUSEPORT when reuseport, bound to addr:port unless
 * addr is NULL, listening when listening; -1 with errno when that failed. */
static int sock_at(int type, const char *addr, unsigned port, bool reuseport, bool listening)
{
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
        int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0), on = 1;
        ck_assert_int_ge(fd, 0);
        if (reuseport)
                ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)), 0);
        if (addr && (inet_pton(AF_INET, addr, &sa.sin_addr) != 1 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
                     (listening && listen(fd, 8) < 0))) {
                int e = errno;
                close(fd);
                errno = e;
                return -1;
        }
        return fd;
}

static unsigned port_of(int fd)
{
        struct sockaddr_in sa;
        socklen_t len = sizeof(sa);
        ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
        return ntohs(sa.sin_port);
}

/* A child of ours holding keep (n of them) of our descriptors, as the
 * restored job holds what criu made, pinned. */
static ctl_pin start(const int *keep, size_t n)
{
        int p[2];
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid_t c = fork();
        ck_assert_int_ge(c, 0);
        if (c == 0) {
                for (int fd = 3; fd < 1024; fd++) {
                        bool kept = fd == p[1];
                        for (size_t i = 0; i < n; i++)
                                kept |= keep[i] == fd;
                        if (!kept)
                                close(fd);
                }
                close(p[1]);
                for (;;)
                        pause();
        }
        /* EOF once it holds no more than keep (criu holds the processes
         * so when they are checked). */
        close(p[1]);
        char ch;
        ck_assert_int_eq(read(p[0], &ch, 1), 0);
        close(p[0]);
        ctl_pin pin = { .pid = c, .pidfd = (int)syscall(SYS_pidfd_open, c, 0) };
        ck_assert_int_ge(pin.pidfd, 0);
        return pin;
}

static void stop(ctl_pin *pin)
{
        kill(pin->pid, SIGKILL);
        waitpid(pin->pid, NULL, 0);
        close(pin->pidfd);
}

static int check(ctl_pin *pin, uid_t uid, char *refused, size_t size)
{
        ctl_pins pins = { .v = pin, .n = 1 };
        refused[0] = '\0';
        return ctl_restore_socks_check(&pins, 0, uid, "unit: ", refused, size);
}

START_TEST(test_made_owners)
{
        if (geteuid() != 0)
                return;
        char refused[512];
        int udp = sock_at(SOCK_DGRAM, "127.0.0.1", 0, true, false), tcp = sock_at(SOCK_STREAM, NULL, 0, false, false);
        ck_assert(udp >= 0 && tcp >= 0);
        unsigned uport = port_of(udp);
        /* Root's now: another root socket joins its group. */
        int probe = sock_at(SOCK_DGRAM, "127.0.0.1", uport, true, false);
        ck_assert_int_ge(probe, 0);
        close(probe);

        ctl_pin pin = start((int[]){ udp, tcp }, 2);
        ck_assert_int_eq(check(&pin, OTHER_UID, refused, sizeof(refused)), 0);
        stop(&pin);
        struct stat st;
        ck_assert(fstat(udp, &st) == 0 && st.st_uid == OTHER_UID);
        ck_assert(fstat(tcp, &st) == 0 && st.st_uid == OTHER_UID);
        /* The owner's: root's socket may no longer join it... */
        ck_assert_int_lt(sock_at(SOCK_DGRAM, "127.0.0.1", uport, true, false), 0);
        ck_assert_int_eq(errno, EADDRINUSE);
        /* ... nor it, later bound and listening, a root listener's group. */
        int svc = sock_at(SOCK_STREAM, "127.0.0.1", 0, true, true), on = 1;
        ck_assert_int_ge(svc, 0);
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                                  .sin_port = htons((uint16_t)port_of(svc)) };
        ck_assert_int_eq(setsockopt(tcp, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)), 0);
        ck_assert_int_lt(bind(tcp, (struct sockaddr *)&sa, sizeof(sa)), 0);
        ck_assert_int_eq(errno, EADDRINUSE);
        close(svc);
        close(tcp);
        close(udp);
}
END_TEST

START_TEST(test_shared_port)
{
        if (geteuid() != 0)
                return;
        char refused[512];
        /* A root service with SO_REUSEPORT, on TCP and UDP, not the job's... */
        int svc = sock_at(SOCK_STREAM, "127.0.0.1", 0, true, true);
        ck_assert_int_ge(svc, 0);
        unsigned port = port_of(svc);
        int usvc = sock_at(SOCK_DGRAM, "127.0.0.1", port, true, false);
        /* ... the job's listener in its group (root's, as criu made it),
         * and a UDP socket of the job's on that port at another address. */
        int job = sock_at(SOCK_STREAM, "127.0.0.1", port, true, true);
        int other = sock_at(SOCK_DGRAM, "127.0.0.2", port, true, false);
        ck_assert(usvc >= 0 && job >= 0 && other >= 0);
        ctl_pin pin = start((int[]){ job, other }, 2);

        /* The owner root's: what it could have joined itself. */
        ck_assert_int_eq(check(&pin, 0, refused, sizeof(refused)), 0);
        /* Another owner's: refused, the port and the other uid said. */
        ck_assert_int_eq(check(&pin, OTHER_UID, refused, sizeof(refused)), -EACCES);
        char want[128];
        snprintf(want, sizeof(want), "TCP socket (descriptor %d) listening on 127.0.0.1 port %u", job, port);
        ck_assert_msg(strstr(refused, want) && strstr(refused, "the job does not hold (uid 0,"), "%s", refused);
        stop(&pin);
        close(job);
        close(other);
        close(svc);
        close(usvc);
}
END_TEST

START_TEST(test_shared_port_v6)
{
        if (geteuid() != 0)
                return;
        char refused[512];
        struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT };
        int svc = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0), job = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        int on = 1;
        ck_assert(svc >= 0 && job >= 0);
        /* Root's UDP socket on [::], the job's on [::1], the same port. */
        ck_assert_int_eq(setsockopt(svc, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)), 0);
        ck_assert_int_eq(setsockopt(job, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)), 0);
        if (bind(svc, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                ck_assert_int_eq(errno, EADDRNOTAVAIL); /* no IPv6 here */
                close(svc);
                close(job);
                return;
        }
        socklen_t len = sizeof(sa);
        ck_assert_int_eq(getsockname(svc, (struct sockaddr *)&sa, &len), 0);
        sa.sin6_addr = in6addr_loopback;
        ck_assert_int_eq(bind(job, (struct sockaddr *)&sa, sizeof(sa)), 0);
        ctl_pin pin = start(&job, 1);
        ck_assert_int_eq(check(&pin, OTHER_UID, refused, sizeof(refused)), -EACCES);
        char want[128];
        snprintf(want, sizeof(want), "UDP socket (descriptor %d) bound to ::1 port %u", job, ntohs(sa.sin6_port));
        ck_assert_msg(strstr(refused, want) && strstr(refused, "(uid 0,"), "%s", refused);
        stop(&pin);
        close(job);
        close(svc);
}
END_TEST

START_TEST(test_privileged_port)
{
        if (geteuid() != 0)
                return;
        char refused[512];
        int fd = -1;
        unsigned port = 900;
        for (; fd < 0 && port < 1000; port++)
                fd = sock_at(SOCK_STREAM, "127.0.0.1", port, false, false);
        ck_assert_int_ge(fd, 0);
        ctl_pin pin = start(&fd, 1);
        ck_assert_int_eq(check(&pin, 0, refused, sizeof(refused)), -EACCES);
        char want[128];
        snprintf(want, sizeof(want), "bound to 127.0.0.1 port %u, below ip_unprivileged_port_start", port - 1);
        ck_assert_msg(strstr(refused, want), "%s", refused);
        stop(&pin);
        close(fd);
}
END_TEST

const char unit_suite_name[] = "restoresocks";

void unit_tests(TCase *tc)
{
        tcase_add_test(tc, test_made_owners);
        tcase_add_test(tc, test_shared_port);
        tcase_add_test(tc, test_shared_port_v6);
        tcase_add_test(tc, test_privileged_port);
}
