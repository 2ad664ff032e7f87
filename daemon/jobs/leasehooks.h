/* leasehooks.h: groups that ask for a lease (group.h) are answered by the
 * lease table (lease.h): its admission, its pending lease and its grant,
 * with the group's members as a lease names them.  Neither knows the
 * other; the server wires them. */
#ifndef CUDACKPT_LEASEHOOKS_H
#define CUDACKPT_LEASEHOOKS_H

#include "jobs/group.h"
#include "jobs/lease.h"

/* The hooks that send a group's lease to t. */
void leasehooks_of(struct lease_table *t, struct group_lease_hooks *ret);

#endif
