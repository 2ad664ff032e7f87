/* jobholds.h: what the nodes of a job saved across nodes hold of its save
 * S (jobset.h), as their parts' hellos say: each node's generations, the
 * other nodes' parts of S they see, and so the newest generation every
 * node holds whole.  Pure.  Private to cudackptctl. */
#ifndef CUDACKPT_CTL_SAVES_JOBHOLDS_H
#define CUDACKPT_CTL_SAVES_JOBHOLDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

/* The most generations kept of one node (the newest), and the most other
 * nodes' hashes kept. */
#define JOBHOLDS_MAX_GENS 64
#define JOBHOLDS_MAX_OTHERS 64

typedef struct jobholds_node {
        uint32_t hash;                          /* jobset_node_hash() of its name */
        uint32_t gens[JOBHOLDS_MAX_GENS];
        unsigned n_gens;
} jobholds_node;

typedef struct jobholds {
        jobholds_node *v;                       /* the caller's, one a node */
        unsigned n;                             /* those added */
        uint32_t top;                           /* the newest generation any node holds */
        uint32_t others[JOBHOLDS_MAX_OTHERS];   /* nodes whose parts of S the nodes see */
        unsigned n_others;
} jobholds;

/* Adds the hello of node name ("gens": [G...], "others": [H...]) as
 * h->v[h->n].  0, or -ENOTUNIQ: another node added has the same hash (two
 * names that hash alike: their part saves' names would be one). */
int jobholds_add(jobholds *h, const char *name, const cJSON *hello);

/* The newest generation every node added holds, 0 none. */
uint32_t jobholds_whole(const jobholds *h);

/* Whether a node sees parts of S of a node that is none of those added
 * (the job saved on other nodes, a shared saves directory). */
bool jobholds_strangers(const jobholds *h);

#endif
