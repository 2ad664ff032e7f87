/* jobset.h: the saves of a job that runs on several nodes (`cudackptctl
 * job start --slurm`): one part save per node and generation, named
 * `S.gGGGGGGGG.nHHHHHHHH` (S the user's save name, G the set's generation
 * in hex, H a hash of the node's name), so that a node finds its own parts
 * of S among the user's saves, and the coordinator takes only a
 * generation every node has whole.  Pure: names only.  Private to
 * cudackptctl. */
#ifndef CUDACKPT_CTL_NODES_JOBSET_H
#define CUDACKPT_CTL_NODES_JOBSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a part save's name adds to S: ".g" 8 hex ".n" 8 hex. */
#define JOBSET_SUFFIX_LEN 20u
/* The longest S: a part save's name is a save name (48 at most). */
#define JOBSET_SAVE_MAX (48u - JOBSET_SUFFIX_LEN)
/* The highest generation (8 hex digits). */
#define JOBSET_GEN_MAX 0xffffffffu

/* FNV-1a (32 bits) of a node's name: which node a part save is of. */
uint32_t jobset_node_hash(const char *node);

/* The part save of node_hash in generation gen of save, into buf (at
 * least 49 bytes).  0, or -EINVAL (save too long, gen 0). */
int jobset_part_name(const char *save, uint32_t gen, uint32_t node_hash, char *buf, size_t size);

/* Whether name is a part save of save and node_hash: true with *ret_gen
 * (1 and up). */
bool jobset_part_parse(const char *name, const char *save, uint32_t node_hash, uint32_t *ret_gen);

#endif
