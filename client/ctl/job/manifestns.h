/* manifestns.h: manifest.json's keys for trees that are pid namespaces of
 * their own (nstree.h): per tree "pid_namespace": true and "ns_pids", per
 * member "ns_pid".  A manifest without them (an older dump) has plain
 * trees only, restored as before (every pid of the job must be free). */
#ifndef CUDACKPT_CTL_MANIFESTNS_H
#define CUDACKPT_CTL_MANIFESTNS_H

#include "manifest.h"

#include <cJSON.h>
#include <stdbool.h>

/* Adds tr's keys to its object o; false when out of memory. */
bool ctl_manifest_ns_write_tree(cJSON *o, const ctl_manifest_tree *tr);
/* Adds m's key to its object o; false when out of memory. */
bool ctl_manifest_ns_write_member(cJSON *o, const ctl_manifest_member *m);
/* Reads the tree object o's keys into tr (its pids read already): 0,
 * -EINVAL (malformed), -EBADMSG (ns_pids that do not fit its pids: not
 * one per pid, the root not 1, one twice) or -ENOMEM. */
int ctl_manifest_ns_read_tree(const cJSON *o, ctl_manifest_tree *tr);
/* Reads the member object o's key into mb: 0 or -EINVAL. */
int ctl_manifest_ns_read_member(const cJSON *o, ctl_manifest_member *mb);
/* Each member of a namespace tree with the ns_pid its tree gives its pid,
 * no other member with one: 0 or -EBADMSG. */
int ctl_manifest_ns_check(const ctl_manifest *m);

#endif
