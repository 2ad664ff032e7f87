/* saveinetsk.h: the TCP connections a dump's images hold, as CRIU 4.2
 * wrote them from the kernel's sockets: the inet_sk_entry (isk, field 4)
 * of each file_entry in a tree's files.img (images/fdinfo.proto,
 * images/sk-inet.proto), decoded here field by field (protobuf's wire
 * format: varints and length-delimited fields; an entry past
 * SAVEINETSK_ENTRY_MAX bytes, a field of an unknown wire type or a
 * truncated one makes the image refused).  savelockrules.h takes a lock
 * rule from a dump's log only for a connection found here, so that a line
 * of the log a job could shape (a file name with a newline) names no rule
 * of a connection the job does not have.
 *
 * An IPv6 socket whose peer is an IPv4-mapped address is an IPv4
 * connection, as CRIU's lock takes it.  Its ns_id (field 18) numbers its
 * net namespace as the dump's netns-ID.img do.  Worker threads only. */
#ifndef CUDACKPT_SAVEINETSK_H
#define CUDACKPT_SAVEINETSK_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SAVEINETSK_ENTRY_MAX (1u << 20)

struct saveinetsk_conn {
        bool v6;
        char local[INET6_ADDRSTRLEN], remote[INET6_ADDRSTRLEN]; /* inet_ntop's form */
        uint16_t lport, rport;
        bool has_ns_id;                 /* ns_id: its net namespace's number in the dump */
        uint32_t ns_id;
        bool input_taken, output_taken; /* a lock rule of each chain found for it */
};

struct saveinetsk_conns {
        struct saveinetsk_conn *v;
        size_t n, cap;
};

/* The TCP connections in treefd's files.img, appended to *conns: 0, or
 * -errno (-EBADMSG: not an image of CRIU's files as this reads them). */
int saveinetsk_read(int treefd, struct saveinetsk_conns *conns);
void saveinetsk_free(struct saveinetsk_conns *conns);

#endif
