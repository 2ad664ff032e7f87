/* restoresocks.c: the sockets of a restored job made its owner's, and
 * checked for a port its owner could not have taken (restoresocks.h).
 *
 * CRIU restores a job's sockets in the restored tasks while they are still
 * root (they get their own credentials only at the end of the restore):
 * every socket comes back owned by uid 0, whatever uid made it.  The
 * kernel lets a socket join a port's SO_REUSEPORT group only when the two
 * have the same owner, so a user's restored listener could, later, join a
 * root service's group and take a share of its connections; and CRIU
 * itself sets SO_REUSEADDR and SO_REUSEPORT on every inet socket before it
 * binds it again, as root, clearing them only once it is bound: at the
 * restore a listener the job had made without SO_REUSEPORT joins a root
 * service's group on its port (and then takes every connection the group
 * gets: seen on 6.18), and binds below ip_unprivileged_port_start.
 *
 * So, while criu still holds the tasks, each socket the job holds is
 * taken (pidfd_getfd) and chowned to the owner (the kernel keeps a
 * socket's owner uid in its inode: fchown changes it), and a job is
 * refused that holds a TCP or UDP socket on a port its owner may not bind,
 * or a listening TCP or a UDP socket that shares its port with one the job
 * does not hold (which the job got at the restore, not before) unless
 * that one is the owner's and the job's socket has SO_REUSEPORT: what the
 * owner could have joined itself.  Whom a port is shared with is read from
 * the namespace's /proc/net tables, the job's own sockets known by inode.
 *
 * What the chown cannot give back: a socket's file stays root's (its
 * f_cred: what iptables' and nftables' owner matches see), and a unix
 * socket listening stays one whose peers see root's credentials
 * (SO_PEERCRED): docs/security.md says so. */
#include "restoresocks.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* A socket the job holds, as taken from the process. */
typedef struct rsk_own {
        unsigned long ino;
        int pid, fd;
        int proto;              /* IPPROTO_TCP, IPPROTO_UDP; 0: another kind */
        bool listening, reuseport;
        uint8_t addr[16];       /* IPv6, or IPv4 mapped */
        unsigned port;
} rsk_own;

/* A line of a network namespace's /proc/net/{tcp,udp}{,6}. */
typedef struct rsk_peer {
        int proto;
        uint8_t addr[16];
        unsigned port, state;
        uid_t uid;
        unsigned long ino;
} rsk_peer;

typedef struct rsk_ctx {
        uid_t uid;
        rsk_own *own;
        size_t n_own;
        bool loaded;            /* the tables of this namespace (its nsfs inode) below */
        dev_t netns_dev;
        ino_t netns_ino;
        rsk_peer *peers;        /* its listening TCP and its UDP sockets */
        size_t n_peers, cap_peers;
        int unpriv;             /* its ip_unprivileged_port_start */
        char *refused;
        size_t size;
        char err[256];
} rsk_ctx;

#define TCP_LISTEN_STATE 0x0a

static int rsk_fail(rsk_ctx *c, int r, const char *what, int pid) {
        snprintf(c->err, sizeof(c->err), "cannot check the sockets process %d holds (%s): %s", pid, what,
                 strerror(-r));
        return r;
}

static void rsk_map4(uint8_t a[16], const void *v4) {
        memset(a, 0, 10);
        a[10] = a[11] = 0xff;
        memcpy(a + 12, v4, 4);
}

static bool rsk_any(const uint8_t a[16]) {
        static const uint8_t zero[16], any4[16] = { [10] = 0xff, [11] = 0xff };

        return memcmp(a, zero, 16) == 0 || memcmp(a, any4, 16) == 0;
}

static const char *rsk_addr_text(const uint8_t a[16], char *buf, size_t size) {
        static const uint8_t mapped[12] = { [10] = 0xff, [11] = 0xff };

        if (memcmp(a, mapped, 12) == 0)
                return inet_ntop(AF_INET, a + 12, buf, (socklen_t) size);
        return inet_ntop(AF_INET6, a, buf, (socklen_t) size);
}

/* fd (taken from the process) described into o; 0 or -errno. */
static int rsk_describe(int fd, rsk_own *o) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(int), alen = sizeof(ss);
        int domain = 0, proto = 0, on = 0;

        if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0)
                return -errno;
        if (domain != AF_INET && domain != AF_INET6)
                return 0;
        len = sizeof(int);
        if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len) < 0)
                return -errno;
        if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
                return 0;
        if (getsockname(fd, (struct sockaddr *) &ss, &alen) < 0)
                return -errno;
        if (ss.ss_family == AF_INET) {
                const struct sockaddr_in *s4 = (const struct sockaddr_in *) &ss;

                rsk_map4(o->addr, &s4->sin_addr);
                o->port = ntohs(s4->sin_port);
        } else {
                const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *) &ss;

                memcpy(o->addr, &s6->sin6_addr, 16);
                o->port = ntohs(s6->sin6_port);
        }
        o->proto = proto;
        len = sizeof(int);
        if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) < 0)
                return -errno;
        o->listening = on != 0;
        len = sizeof(int);
        if (getsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, &len) < 0)
                return -errno;
        o->reuseport = on != 0;
        return 0;
}

/* The socket at descriptor fd of pin (inode ino), made uid's and noted. */
static int rsk_take(rsk_ctx *c, const ctl_pin *pin, int fd, unsigned long ino) {
        rsk_own *v, o = { .ino = ino, .pid = pin->pid, .fd = fd };
        struct stat st;
        int mine, r = 0;

        for (size_t i = 0; i < c->n_own; i++)
                if (c->own[i].ino == ino)
                        return 0;
        mine = (int) syscall(SYS_pidfd_getfd, pin->pidfd, fd, 0);
        if (mine < 0)
                return rsk_fail(c, -errno, "taking a socket", pin->pid);
        if (fstat(mine, &st) < 0)
                r = -errno;
        else if (!S_ISSOCK(st.st_mode) || st.st_ino != ino)
                r = -ESTALE;
        else if (fchown(mine, c->uid, (gid_t) -1) < 0)
                r = -errno;
        else
                r = rsk_describe(mine, &o);
        close(mine);
        if (r < 0)
                return rsk_fail(c, r, "a socket", pin->pid);
        v = realloc(c->own, (c->n_own + 1) * sizeof(*v));
        if (!v)
                return rsk_fail(c, -ENOMEM, "its sockets", pin->pid);
        c->own = v;
        c->own[c->n_own++] = o;
        return 0;
}

static int rsk_process(rsk_ctx *c, const ctl_pin *pin) {
        char dir[64], link[64 + 256], target[64];
        unsigned long ino;
        struct dirent *de;
        int r = 0;
        DIR *d;

        snprintf(dir, sizeof(dir), "/proc/%d/fd", pin->pid);
        d = opendir(dir);
        if (!d)
                return rsk_fail(c, -errno, "its descriptors", pin->pid);
        while (r == 0 && (de = readdir(d))) {
                ssize_t k;

                if (de->d_name[0] == '.')
                        continue;
                snprintf(link, sizeof(link), "%s/%s", dir, de->d_name);
                k = readlink(link, target, sizeof(target) - 1);
                if (k < 0) {
                        r = rsk_fail(c, -errno, "a descriptor", pin->pid);
                        break;
                }
                target[k] = '\0';
                if (sscanf(target, "socket:[%lu]", &ino) == 1)
                        r = rsk_take(c, pin, atoi(de->d_name), ino);
        }
        closedir(d);
        return r;
}

/* path's lines ("sl local rem st ... uid timeout inode") of proto appended. */
static int rsk_read_table(rsk_ctx *c, const char *path, int proto, bool v6) {
        char *line = NULL;
        size_t len = 0;
        FILE *f = fopen(path, "re");
        int r = 0;

        if (!f)
                return errno == ENOENT ? 0 : -errno; /* no IPv6 here */
        while (r == 0 && getline(&line, &len, f) > 0) {
                char local[40];
                rsk_peer p = { .proto = proto };
                rsk_peer *v;
                unsigned int w[4];

                /* A TCP socket shares a listener's port only listening. */
                if (sscanf(line, " %*d: %39[0-9A-Fa-f]:%x %*s %x %*s %*s %*s %u %*d %lu", local, &p.port, &p.state,
                           &p.uid, &p.ino) != 5 || strlen(local) != (v6 ? 32u : 8u) ||
                    (proto == IPPROTO_TCP && p.state != TCP_LISTEN_STATE))
                        continue;
                /* Each 32-bit word printed as the host reads it in memory. */
                for (size_t i = 0; i < (v6 ? 4u : 1u); i++)
                        if (sscanf(local + 8 * i, "%8x", &w[i]) != 1)
                                w[i] = 0;
                if (v6)
                        memcpy(p.addr, w, 16);
                else
                        rsk_map4(p.addr, w);
                if (c->n_peers == c->cap_peers) {
                        size_t cap = c->cap_peers ? 2 * c->cap_peers : 64;

                        v = realloc(c->peers, cap * sizeof(*v));
                        if (!v) {
                                r = -ENOMEM;
                                break;
                        }
                        c->peers = v;
                        c->cap_peers = cap;
                }
                c->peers[c->n_peers++] = p;
        }
        free(line);
        fclose(f);
        return r;
}

/* In a child that entered the namespace nsfd: its ip_unprivileged_port_start. */
static int rsk_unpriv_start(int nsfd) {
        int p[2], v = -1, ws = 0;
        pid_t child;

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        child = fork();
        if (child == 0) {
                FILE *f = setns(nsfd, CLONE_NEWNET) == 0 ? fopen("/proc/sys/net/ipv4/ip_unprivileged_port_start", "re")
                                                         : NULL;

                close(p[0]);
                if (!f || fscanf(f, "%d", &v) != 1 || write(p[1], &v, sizeof(v)) != (ssize_t) sizeof(v))
                        _exit(1);
                _exit(0);
        }
        close(p[1]);
        if (child > 0 && read(p[0], &v, sizeof(v)) != (ssize_t) sizeof(v))
                v = -1;
        close(p[0]);
        while (child > 0 && waitpid(child, &ws, 0) < 0 && errno == EINTR)
                ;
        return child < 0 ? -EAGAIN : v < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0 ? -EIO : v;
}

/* The tables and port limit of pid's network namespace, unless read. */
static int rsk_netns(rsk_ctx *c, int pid) {
        static const struct { const char *name; int proto; bool v6; } tables[] = {
                { "tcp", IPPROTO_TCP, false }, { "tcp6", IPPROTO_TCP, true },
                { "udp", IPPROTO_UDP, false }, { "udp6", IPPROTO_UDP, true } };
        char path[64];
        struct stat st;
        int fd, r = 0;

        snprintf(path, sizeof(path), "/proc/%d/ns/net", pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0) {
                r = -errno;
                if (fd >= 0)
                        close(fd);
                return rsk_fail(c, r, "its network namespace", pid);
        }
        if (c->loaded && st.st_dev == c->netns_dev && st.st_ino == c->netns_ino) {
                close(fd);
                return 0;
        }
        c->loaded = false;
        c->n_peers = 0;
        c->unpriv = rsk_unpriv_start(fd);
        close(fd);
        if (c->unpriv < 0)
                return rsk_fail(c, c->unpriv, "ip_unprivileged_port_start", pid);
        for (size_t i = 0; r == 0 && i < sizeof(tables) / sizeof(tables[0]); i++) {
                snprintf(path, sizeof(path), "/proc/%d/net/%s", pid, tables[i].name);
                r = rsk_read_table(c, path, tables[i].proto, tables[i].v6);
        }
        if (r < 0)
                return rsk_fail(c, r, "its network namespace's sockets", pid);
        c->loaded = true;
        c->netns_dev = st.st_dev;
        c->netns_ino = st.st_ino;
        return 0;
}

static bool rsk_held(const rsk_ctx *c, unsigned long ino) {
        for (size_t i = 0; i < c->n_own; i++)
                if (c->own[i].ino == ino)
                        return true;
        return false;
}

static int rsk_refuse(rsk_ctx *c, const rsk_own *o, const char *why) {
        char addr[INET6_ADDRSTRLEN];

        snprintf(c->refused, c->size, "process %d holds a %s socket (descriptor %d) %s %s port %u, %s", o->pid,
                 o->proto == IPPROTO_TCP ? "TCP" : "UDP", o->fd, o->listening ? "listening on" : "bound to",
                 rsk_addr_text(o->addr, addr, sizeof(addr)) ? addr : "?", o->port, why);
        return -EACCES;
}

/* o against its namespace: its port, and whom it shares it with. */
static int rsk_judge(rsk_ctx *c, const rsk_own *o) {
        char why[256];
        int r;

        if (o->proto == 0 || o->port == 0)
                return 0;
        if ((r = rsk_netns(c, o->pid)) < 0)
                return r;
        if (o->port < (unsigned) c->unpriv) {
                snprintf(why, sizeof(why), "below ip_unprivileged_port_start (%d): a port uid %u may not bind, "
                         "which criu bound as root", c->unpriv, (unsigned) c->uid);
                return rsk_refuse(c, o, why);
        }
        if (o->proto == IPPROTO_TCP && !o->listening)
                return 0;
        for (size_t i = 0; i < c->n_peers; i++) {
                const rsk_peer *p = &c->peers[i];

                if (p->proto != o->proto || p->port != o->port || rsk_held(c, p->ino) ||
                    (!rsk_any(p->addr) && !rsk_any(o->addr) && memcmp(p->addr, o->addr, 16) != 0))
                        continue;
                if (p->uid == c->uid && o->reuseport)
                        continue;
                snprintf(why, sizeof(why), "which it shares with a socket the job does not hold (uid %u, inode %lu): "
                         "criu bound it again as root with SO_REUSEPORT, so the job would take that one's %s",
                         (unsigned) p->uid, p->ino, o->proto == IPPROTO_TCP ? "connections" : "datagrams");
                return rsk_refuse(c, o, why);
        }
        return 0;
}

int ctl_restore_socks_check(const ctl_pins *pins, int init, uid_t uid, const char *prefix, char *refused,
                            size_t size) {
        rsk_ctx c = { .uid = uid, .refused = refused, .size = size };
        int r = 0;

        for (size_t i = 0; r == 0 && i < pins->n; i++)
                if (pins->v[i].pid != init)
                        r = rsk_process(&c, &pins->v[i]);
        for (size_t i = 0; r == 0 && i < c.n_own; i++)
                r = rsk_judge(&c, &c.own[i]);
        if (r < 0 && r != -EACCES)
                fprintf(stderr, "%s%s\n", prefix, c.err);
        free(c.own);
        free(c.peers);
        return r;
}
