/* methods.h: the table from a Varlink method to its handler.
 *
 * A method is a row: the handler and the feature object it is given (the
 * group table, the lease table, ...), so that features reach their own
 * state through their table rather than through the server.
 * methods_message_cb() is the connections' message callback: it parses a
 * message into a call, answers what is wrong with the call itself, and
 * hands the rest to its method's row.  Loop thread only. */
#ifndef CUDACKPT_METHODS_H
#define CUDACKPT_METHODS_H

#include <stdbool.h>
#include <stddef.h>

#include "varlink/proto.h"

struct conn;
struct group_table;
struct lease_table;
struct list_table;
struct metrics;
struct proccall;
struct saves;
struct status;
struct watch_table;

typedef void (*methods_handler_cb)(void *feature, struct conn *c, struct proto_call *call);

struct methods_row {
        methods_handler_cb fn;
        void *feature;          /* fn's first argument */
        bool no_parameters;     /* a parameter is refused before fn */
};

/* The features the handlers are given: the server's, outliving the table. */
struct methods_features {
        struct proccall *proccall;
        struct group_table *groups;
        struct list_table *lists;
        struct lease_table *leases;
        struct watch_table *watch;
        struct saves *saves;
        struct status *status;
        struct metrics *metrics; /* counts the connections cut for what is not a call */
};

struct methods {
        struct methods_row rows[PROTO_METHODS];
        struct metrics *metrics;
};

void methods_init(struct methods *m, const struct methods_features *f);
/* One whole message of c (conn.h's message_cb; c->owner->userdata is the
 * table). */
void methods_message_cb(struct conn *c, const char *msg, size_t len);

#endif
