/* addrgroup.c: the groups of --max-per-address (addrgroup.h). */
#include "addrgroup.h"

#include <netinet/in.h>
#include <string.h>

/* The first bits of n bytes of addr, the rest cleared, into out. */
static void keep_bits(const uint8_t *addr, size_t n, unsigned bits, uint8_t *out)
{
        for (size_t i = 0; i < n; i++) {
                unsigned left = bits > 8 * i ? bits - 8 * (unsigned)i : 0;
                out[i] = left >= 8 ? addr[i] : (uint8_t)(addr[i] & (0xffu << (8 - left)));
        }
}

static void of_ipv4(const uint8_t a[4], unsigned prefix, ctl_addrgroup *ret)
{
        if (a[0] == 127) {
                ret->kind = CTL_ADDRGROUP_LOOPBACK;
                return;
        }
        ret->kind = CTL_ADDRGROUP_IPV4;
        keep_bits(a, 4, prefix > 32 ? 32 : prefix, ret->prefix);
}

void ctl_addrgroup_of(const struct sockaddr *sa, unsigned ipv4_prefix, unsigned ipv6_prefix, ctl_addrgroup *ret)
{
        memset(ret, 0, sizeof(*ret));
        if (sa && sa->sa_family == AF_INET) {
                of_ipv4((const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr, ipv4_prefix, ret);
        } else if (sa && sa->sa_family == AF_INET6) {
                const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;

                if (IN6_IS_ADDR_V4MAPPED(a))
                        of_ipv4(a->s6_addr + 12, ipv4_prefix, ret);
                else if (IN6_IS_ADDR_LOOPBACK(a))
                        ret->kind = CTL_ADDRGROUP_LOOPBACK;
                else {
                        ret->kind = CTL_ADDRGROUP_IPV6;
                        keep_bits(a->s6_addr, 16, ipv6_prefix > 128 ? 128 : ipv6_prefix, ret->prefix);
                }
        }
}

bool ctl_addrgroup_equal(const ctl_addrgroup *a, const ctl_addrgroup *b)
{
        return a->kind == b->kind && memcmp(a->prefix, b->prefix, sizeof(a->prefix)) == 0;
}
