/* jobcoord.h: what the coordinator of a job across nodes (jobnodes.c)
 * knows of its nodes and says to them: the table of the nodes (what each
 * said: its hello, the phase's answer, its job's end, its failure), the
 * lines to every node, the waits for every node's answer with the signals
 * taken between lines, and a failure said.  Private to jobnodes.c and
 * cudackptctl. */
#ifndef CUDACKPT_CTL_SAVES_JOBCOORD_H
#define CUDACKPT_CTL_SAVES_JOBCOORD_H

#include "jobholds.h"
#include "link.h"

#include <cJSON.h>

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

/* How long closing the link (and a line to the nodes) may take. */
#define JOBCOORD_CLOSE_TIMEOUT_MS 10000
/* How often a wait looks at the signals taken. */
#define JOBCOORD_SIGNAL_POLL_MS 100

typedef struct jobcoord_node {
        char name[65];
        bool said;              /* the awaited answer of this phase */
        bool saving;            /* its part of a save has not ended yet */
        bool ended;             /* its job ended, with status */
        int status;
} jobcoord_node;

typedef struct jobcoord {
        const char *prefix;     /* of every line said */
        const sigset_t *save_on; /* the signals that save the job */
        const struct ctl_jobnodes_op *o; /* the command's (jobnodes.h): its own */
        nodes_link *link;
        sigset_t sigs;          /* the signals taken while waiting */
        jobcoord_node *v;
        unsigned n, known;      /* the job's nodes; those that said hello */
        jobholds holds;         /* what they hold of S (holds.v: one a node) */
        int sig;                /* the signal taken, 0 none */
        int pending;            /* a signal that ends the command, taken while saving */
        int again;              /* a save signal taken while saving: saves again if that one rolled back */
        bool gone;              /* the step ended, or the link broke */
        bool failed;            /* the first failure, below */
        char node[65], error[96], what[200];
} jobcoord;

/* src (NULL: "") into dst, cut to size, made printable. */
void jobcoord_copy(char *dst, size_t size, const char *src);

/* The index of the node that said hello as name, -1 none. */
int jobcoord_find(const jobcoord *j, const char *name);

/* One progress line on stderr: prefix, node (NULL: none), text. */
void jobcoord_say(const jobcoord *j, const char *node, const char *text);

/* The next line (0, *ret_json the caller's), a signal taken (1, j->sig),
 * the deadline passed (-ETIMEDOUT; deadline < 0: none) or the link ended
 * (-EPIPE, j->gone). */
int jobcoord_recv(jobcoord *j, long long deadline, cJSON **ret_json);

/* Notes the first failure of this wait (j->failed, node, error, what). */
void jobcoord_fail(jobcoord *j, const char *node, const char *error, const char *what);

/* What any node says at any time: its job ended, a call of its failed. */
void jobcoord_note(jobcoord *j, int i, const cJSON *m);

/* Waits until every node said event ("failed" from one: -EIO; a signal:
 * 1 when signals_end, else it is set aside; the link ended: -EPIPE). */
int jobcoord_await(jobcoord *j, const char *event, int timeout_ms, bool signals_end);

/* A line to every node; -EPIPE (j->gone) when they are gone. */
int jobcoord_send(jobcoord *j, const char *what, const char *key, uint32_t value);

/* A phase's failure, said; the exit status it earns. */
int jobcoord_failure(jobcoord *j, int r, const char *phase);

/* Whether the job ended on every node (true, *ret_status 0) or with a
 * status on one (true: the others are stopped as the link closes). */
bool jobcoord_over(const jobcoord *j, int *ret_status);

#endif
