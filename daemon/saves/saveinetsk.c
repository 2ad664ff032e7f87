/* saveinetsk.c: the TCP connections of a dump's images (saveinetsk.h). */
#include "saves/saveinetsk.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define IMG_COMMON_MAGIC 0x54564319u    /* criu/include/magic.h */
#define FILES_MAGIC 0x56303138u
#define FILE_ENTRY_ISK 4                /* file_entry's inet_sk_entry */
#define ISK_FAMILY 3
#define ISK_PROTO 5
#define ISK_SRC_PORT 7
#define ISK_DST_PORT 8
#define ISK_SRC_ADDR 11
#define ISK_DST_ADDR 12
#define ISK_NS_ID 18                    /* the socket's net namespace, as CRIU numbers them */

/* A message's bytes, read from pos. */
struct msg {
        const uint8_t *p;
        size_t len, pos;
};

static int varint(struct msg *m, uint64_t *ret)
{
        uint64_t v = 0;

        for (unsigned shift = 0; shift < 64; shift += 7) {
                uint8_t b;

                if (m->pos >= m->len)
                        return -EBADMSG;
                b = m->p[m->pos++];
                v |= (uint64_t)(b & 0x7f) << shift;
                if (!(b & 0x80)) {
                        *ret = v;
                        return 0;
                }
        }
        return -EBADMSG;
}

/* The next field: its number, and its value (a varint, or a fixed one's
 * bits) or its bytes (*sub, length-delimited).  0, 1 at the end, or
 * -EBADMSG. */
static int field(struct msg *m, unsigned *ret_num, uint64_t *ret_val, struct msg *sub)
{
        uint64_t tag, n = 0;

        if (m->pos == m->len)
                return 1;
        if (varint(m, &tag) < 0 || (tag >> 3) == 0 || (tag >> 3) > 536870911)
                return -EBADMSG;
        *ret_num = (unsigned)(tag >> 3);
        *sub = (struct msg){ 0 };
        switch (tag & 7) {
        case 0:
                return varint(m, ret_val);
        case 1:
        case 5:
                n = (tag & 7) == 1 ? 8 : 4;
                break;
        case 2:
                if (varint(m, &n) < 0)
                        return -EBADMSG;
                *sub = (struct msg){ .p = m->p + m->pos, .len = n };
                break;
        default:
                return -EBADMSG;
        }
        if (n > m->len - m->pos)
                return -EBADMSG;
        *ret_val = 0;
        if (!sub->p)
                memcpy(ret_val, m->p + m->pos, n); /* fixed64 or fixed32: only skipped */
        m->pos += n;
        return 0;
}

/* An inet_sk_entry's fields of a TCP connection. */
struct isk {
        uint64_t family, proto, sport, dport, ns_id;
        bool has_ns_id;
        uint32_t src[4], dst[4];
        size_t n_src, n_dst;
};

/* One address word of a repeated uint32, unpacked or packed. */
static int addr_words(uint64_t val, const struct msg *packed, uint32_t *out, size_t *n)
{
        struct msg m = *packed;

        if (!packed->p) {
                if (*n >= 4 || val > UINT32_MAX)
                        return -EBADMSG;
                out[(*n)++] = (uint32_t)val;
                return 0;
        }
        while (m.pos < m.len) {
                if (varint(&m, &val) < 0 || *n >= 4 || val > UINT32_MAX)
                        return -EBADMSG;
                out[(*n)++] = (uint32_t)val;
        }
        return 0;
}

static int isk_of(struct msg m, struct isk *k)
{
        struct msg sub;
        uint64_t v;
        unsigned num;
        int r;

        *k = (struct isk){ 0 };
        while ((r = field(&m, &num, &v, &sub)) == 0) {
                if (num == ISK_SRC_ADDR || num == ISK_DST_ADDR)
                        r = addr_words(v, &sub, num == ISK_SRC_ADDR ? k->src : k->dst,
                                       num == ISK_SRC_ADDR ? &k->n_src : &k->n_dst);
                else if (num == ISK_FAMILY)
                        k->family = v;
                else if (num == ISK_PROTO)
                        k->proto = v;
                else if (num == ISK_SRC_PORT)
                        k->sport = v;
                else if (num == ISK_DST_PORT)
                        k->dport = v;
                else if (num == ISK_NS_ID) {
                        k->ns_id = v;
                        k->has_ns_id = true;
                }
                if (r < 0)
                        return r;
        }
        return r < 0 ? r : 0;
}

static int add(struct saveinetsk_conns *c, const struct saveinetsk_conn *x)
{
        if (c->n == c->cap) {
                size_t cap = c->cap ? 2 * c->cap : 8;
                struct saveinetsk_conn *v = reallocarray(c->v, cap, sizeof(*v));

                if (!v)
                        return -ENOMEM;
                c->v = v;
                c->cap = cap;
        }
        c->v[c->n++] = *x;
        return 0;
}

/* A TCP connection of k (ports of both ends), as CRIU's lock names it. */
static int take_isk(const struct isk *k, struct saveinetsk_conns *c)
{
        struct saveinetsk_conn x = { .v6 = k->family == AF_INET6 };
        const uint32_t *src = k->src, *dst = k->dst;
        size_t words = x.v6 ? 4 : 1;

        if (k->proto != IPPROTO_TCP || (k->family != AF_INET && k->family != AF_INET6) || k->sport == 0 ||
            k->dport == 0 || k->sport > 65535 || k->dport > 65535)
                return 0;
        if (k->n_src != words || k->n_dst != words)
                return -EBADMSG;
        if (x.v6 && dst[2] == htonl(0x0000ffff)) { /* IPv4-mapped: CRIU's lock takes it as IPv4 */
                x.v6 = false;
                src += 3;
                dst += 3;
        }
        if (!inet_ntop(x.v6 ? AF_INET6 : AF_INET, src, x.local, sizeof(x.local)) ||
            !inet_ntop(x.v6 ? AF_INET6 : AF_INET, dst, x.remote, sizeof(x.remote)))
                return -EBADMSG;
        x.has_ns_id = k->has_ns_id && k->ns_id <= UINT32_MAX;
        x.ns_id = (uint32_t)k->ns_id;
        x.lport = (uint16_t)k->sport;
        x.rport = (uint16_t)k->dport;
        return add(c, &x);
}

/* One file_entry: its inet_sk_entry, if any. */
static int take_entry(const uint8_t *p, size_t len, struct saveinetsk_conns *c)
{
        struct msg m = { .p = p, .len = len }, sub;
        struct isk k;
        uint64_t v;
        unsigned num;
        int r;

        while ((r = field(&m, &num, &v, &sub)) == 0)
                if (num == FILE_ENTRY_ISK && sub.p && ((r = isk_of(sub, &k)) < 0 || (r = take_isk(&k, c)) < 0))
                        return r;
        return r < 0 ? r : 0;
}

/* len bytes: 0; 1 at the end of the file before any; -EBADMSG cut short;
 * or -errno. */
static int read_full(int fd, void *buf, size_t len)
{
        size_t got = 0;

        while (got < len) {
                ssize_t n = read(fd, (char *)buf + got, len - got);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return got ? -EBADMSG : 1;
                got += (size_t)n;
        }
        return 0;
}

static int read_entries(int fd, struct saveinetsk_conns *c)
{
        uint32_t head[2], len;
        uint8_t *buf = NULL;
        int r = read_full(fd, head, sizeof(head));

        if (r != 0 || head[0] != IMG_COMMON_MAGIC || head[1] != FILES_MAGIC)
                return r < 0 ? r : -EBADMSG;
        while ((r = read_full(fd, &len, sizeof(len))) == 0) {
                uint8_t *b = len <= SAVEINETSK_ENTRY_MAX ? realloc(buf, len ? len : 1) : NULL;

                if (!b) {
                        r = len <= SAVEINETSK_ENTRY_MAX ? -ENOMEM : -EBADMSG;
                        break;
                }
                buf = b;
                if ((r = read_full(fd, buf, len)) != 0 || (r = take_entry(buf, len, c)) < 0) {
                        r = r > 0 ? -EBADMSG : r;
                        break;
                }
        }
        free(buf);
        return r > 0 ? 0 : r;
}

int saveinetsk_read(int treefd, struct saveinetsk_conns *conns)
{
        int fd = openat(treefd, "files.img", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK), r;
        struct stat st;

        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                r = -errno;
        else if (!S_ISREG(st.st_mode) || st.st_uid != geteuid()) /* criu's, as the daemon's root */
                r = -EPERM;
        else
                r = read_entries(fd, conns);
        close(fd);
        return r;
}

void saveinetsk_free(struct saveinetsk_conns *conns)
{
        free(conns->v);
        *conns = (struct saveinetsk_conns){ 0 };
}
