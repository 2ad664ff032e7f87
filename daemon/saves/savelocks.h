/* savelocks.h: the lock rules that the saves of this node's parts held at
 * a barrier left behind, recorded, bounded and taken away.
 *
 * A part's dump under save_parts_network_lock "iptables" ends its job with
 * CRIU's rules still dropping its connections' packets (savelockrules.h);
 * only a restore of the same save on the same node removes them.  So the
 * daemon counts a held dump's rules from its log at the barrier, before
 * any go (savelocks_hold(): refused past max_locked_connections_per_uid or
 * max_locked_connections, counting the uid's recorded connections and
 * those of its other parts at their barrier), and once the save is
 * installed records them under the save's uid and name (savelocks_keep()).
 * RemoveSave of the save on this node deletes them (savelocks_undo()); a
 * restore of it here that CRIU unlocked drops from the record the rules
 * that iptables no longer finds (savelocks_restored()): a save of that name
 * may be another one, made again on another node, whose restore lifted
 * none of them.
 *
 * The records are this node's, as the rules are: one file, save-locks.json
 * in the daemon's runtime directory (storefile.h: written whole, fsync'ed,
 * read back strictly), carrying the boot id, so that the records outlive a
 * restart of the daemon but not a reboot (which takes the rules along).
 * Without a usable runtime directory they are kept in memory only (said
 * at start).  Under another save_parts_network_lock ("nftables") a dump's
 * rules are neither read nor recorded.  A mutex guards the table: every call but init and free runs
 * on worker threads, where the disk and iptables may block. */
#ifndef CUDACKPT_SAVELOCKS_H
#define CUDACKPT_SAVELOCKS_H

#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#include "base/config.h"
#include "base/life.h"
#include "saves/savelockrules.h"

#define SAVELOCKS_FILE "save-locks.json"

struct savelocks_record;
struct savelocks_part;

struct savelocks {
        uv_loop_t *loop;
        const struct config *cfg;
        struct life *life;
        uv_mutex_t mu;
        int dir_fd;                     /* the runtime directory; -1: in memory only */
        char boot[40];
        struct savelocks_record *records;
        struct savelocks_part *parts;   /* counted at their barrier, not yet kept */
};

/* At start (blocks on the disk): the records a previous daemon of this
 * boot left in runtime_dir (NULL: none). */
void savelocks_init(struct savelocks *t, uv_loop_t *loop, const struct config *cfg, struct life *life,
                    const char *runtime_dir);
void savelocks_free(struct savelocks *t);
/* A held dump of uid at its barrier, its images in images below uidfd:
 * its rules counted.  0 and *ret_part (0 or more rules, counted against
 * the bounds until kept or let go); -EDQUOT with *ret_limit, the bound
 * they would pass; or -errno (the log unreadable).  Worker. */
int savelocks_hold(struct savelocks *t, uid_t uid, int uidfd, const char *images, struct savelocks_part **ret_part,
                   uint64_t *ret_limit);
/* A dump of uid is installed as save: the part's rules (NULL: none, a
 * dump not held) are save's now, and those of an older record of save (a
 * save replaced, or removed on another node) are deleted; save NULL: no
 * save has the part's rules, they are deleted.  Frees part.  Worker. */
void savelocks_keep(struct savelocks *t, uid_t uid, struct savelocks_part *part, const char *save);
/* The part rolled back (CRIU lifted its lock): uncounted, freed. */
void savelocks_let_go(struct savelocks *t, struct savelocks_part *part);
/* RemoveSave of uid's save: its rules deleted, then its record (a rule
 * that iptables cannot delete stays recorded).  Worker. */
void savelocks_undo(struct savelocks *t, uid_t uid, const char *save);
/* A restore of uid's save started on this node under the lock named lock:
 * with "iptables", CRIU removed the rules of its connections, and the
 * record keeps only those still there (iptables -C, on a worker of its
 * own).  Loop. */
void savelocks_restored(struct savelocks *t, uid_t uid, const char *save, const char *lock);

#endif
