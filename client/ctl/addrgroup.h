/* addrgroup.h: which clients of metrics --listen count together for its
 * --max-per-address bound.
 *
 * One host has many addresses: every address of 127.0.0.0/8 is this host,
 * and so is ::1, and an IPv4 client of a dual-stack listener shows as an
 * IPv4-mapped IPv6 address (::ffff:a.b.c.d).  A bound per exact address
 * would let one local client take 16 times the bound from 127.0.0.1 to
 * 127.0.0.16.  So: all of 127.0.0.0/8, ::1 and their mapped forms are one
 * group (loopback); a mapped address is its IPv4 address; any other IPv4
 * address counts with those sharing its first ipv4_prefix bits
 * (--ipv4-prefix, default 32: the address alone) and any other IPv6
 * address with those sharing its first ipv6_prefix bits (--ipv6-prefix,
 * default 64: a site's subnet, which one client can hold whole).  Pure
 * functions, any thread. */
#ifndef CUDACKPT_CTL_ADDRGROUP_H
#define CUDACKPT_CTL_ADDRGROUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#define CTL_ADDRGROUP_IPV4_PREFIX 32u
#define CTL_ADDRGROUP_IPV6_PREFIX 64u

typedef enum ctl_addrgroup_kind {
        CTL_ADDRGROUP_OTHER,    /* not IP: all such clients together */
        CTL_ADDRGROUP_LOOPBACK,
        CTL_ADDRGROUP_IPV4,
        CTL_ADDRGROUP_IPV6,
} ctl_addrgroup_kind;

typedef struct ctl_addrgroup {
        ctl_addrgroup_kind kind;
        uint8_t prefix[16];     /* the address, its bits past the prefix cleared */
} ctl_addrgroup;

/* The group of sa (NULL: CTL_ADDRGROUP_OTHER); prefixes past 32 and 128
 * count as 32 and 128. */
void ctl_addrgroup_of(const struct sockaddr *sa, unsigned ipv4_prefix, unsigned ipv6_prefix, ctl_addrgroup *ret);
bool ctl_addrgroup_equal(const ctl_addrgroup *a, const ctl_addrgroup *b);

#endif
