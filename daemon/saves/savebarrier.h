/* savebarrier.h: the barrier a part of a job held across nodes waits at
 * (SaveJob or RestoreJob with barrier: true, PassBarrier).
 *
 * The daemon keeps one end of a socketpair and gives the other to its
 * `cudackptctl dump|restore --barrier-fd=SAVEBARRIER_FD`, which writes
 * its ready line there once its part is dumped and durable (or restored,
 * not yet running) and waits for one byte (client/ctl/job/crossbarrier.h).
 * The ready line is read on the loop (a uv_poll on the daemon's end, never
 * blocking); from then on the job waits at its barrier: the owner's
 * ready_cb gets the call's continues reply {"barrier": "ready"}, and
 * PassBarrier {job, go} of the caller's uid writes 'g' (go) or closes the
 * daemon's end (the part rolls back).  The end is closed too, letting the
 * part roll back, when the held call's connection closes, when
 * barrier_timeout_ms passes after the ready line (the job is frozen
 * meanwhile), when the line is not the ready line, and when the owner
 * releases the barrier (its command exited).  A dump's ready line is
 * answered once its lock rules are counted (spec's locks), or rolled
 * back past their bounds.  Each barrier is a dump or a
 * restore holding one of its uid's save operations: a uid has at most
 * max_save_operations_per_uid.  Loop thread only. */
#ifndef CUDACKPT_SAVEBARRIER_H
#define CUDACKPT_SAVEBARRIER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "base/config.h"
#include "base/life.h"
#include "net/conn.h"
#include "saves/savelocks.h"
#include "saves/savestore.h"
#include "varlink/protomsg.h"

/* The command's descriptor of its end (its --barrier-fd). */
#define SAVEBARRIER_FD 6

struct savebarrier;

/* The barriers of the saves feature (struct saves's). */
struct savebarriers {
        uv_loop_t *loop;
        const struct config *cfg;
        struct life *life;
        struct savebarrier *waiting;    /* the parts waiting at their barrier */
};

struct savebarrier_spec {
        uid_t uid;                      /* the held call's caller: whose job it is */
        pid_t caller_pid;               /* for the audit lines */
        const char *name;               /* the job's name (PassBarrier's job) */
        const char *verb;               /* "dump" or "restore" */
        struct conn *c;                 /* the held call's connection: its closing closes the barrier */
        /* A dump's: its images directory, images below uidfd (dup'ed),
         * whose lock rules are counted (savelocks_hold()) before the
         * ready reply; past a bound the part rolls back (refused). */
        struct savelocks *locks;
        int uidfd;
        const char *images;
        /* The ready line came: reply is the call's continues reply, the
         * owner's to send (or delete). */
        void (*ready_cb)(void *data, cJSON *reply);
        void *data;
};

/* Opens a barrier: 0, *ret_b and *ret_fd (the command's end, which the
 * caller closes once the command is spawned, or not), or -errno. */
int savebarrier_open(struct savebarriers *t, const struct savebarrier_spec *spec, struct savebarrier **ret_b, int *ret_fd);
/* The owner is done with b (its command exited, or never ran): no
 * callback comes any more; a barrier not yet passed is closed.  b frees
 * itself. */
void savebarrier_release(struct savebarrier *b);
/* Whether the part was rolled back because its lock rules would pass a
 * bound: true and *ret_limit, the bound. */
bool savebarrier_refused(const struct savebarrier *b, uint64_t *ret_limit);
/* The part's counted rules (savelocks_hold()) when its go was sent, the
 * caller's to keep (savelocks_keep()); NULL when none was (the rules, if
 * any, were lifted by CRIU: they are let go).  After the command exited. */
struct savelocks_part *savebarrier_take_part(struct savebarrier *b);
/* PassBarrier: answers the call on c at once, {} or NoSuchJob. */
void savebarrier_pass(struct savebarriers *t, struct conn *c, const struct proto_call *call, const char *job, bool go);
/* The criu options of a save's dump and restore into argv (8 entries and
 * a NULL free): --barrier-fd with a barrier, then after "--" the job's TCP
 * connections (save_tcp_established) under the network lock the config
 * names: save_parts_network_lock for a part held at a barrier, whose
 * connections to other nodes need the lock, else save_network_lock. */
void savebarrier_criu_options(const struct config *cfg, bool barrier, const char **argv);

#endif
