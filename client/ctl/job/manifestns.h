/* manifestns.h: manifest.json's keys for trees that are pid namespaces of
 * their own (nstree.h): per tree "pid_namespace": true and "ns_pids" (each
 * of its pids inside the namespace), per member "ns_pid".  A manifest
 * without them (an older dump) has plain trees only, restored as before
 * (every pid of the job must be free).  Called by manifest.c with the
 * fields of its trees and members (this room knows not its types). */
#ifndef CUDACKPT_CTL_MANIFESTNS_H
#define CUDACKPT_CTL_MANIFESTNS_H

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>

/* Adds a tree's keys to its object o (none when not pid_ns); false when
 * out of memory. */
bool ctl_manifest_ns_write_tree(cJSON *o, bool pid_ns, const int *ns_pids, size_t n);
/* Adds a member's key to its object o (none when ns_pid is 0). */
bool ctl_manifest_ns_write_member(cJSON *o, int ns_pid);
/* Reads the keys of tree object o, whose root and n pids are read already:
 * *ret_pid_ns and *ret_ns_pids (to free(); NULL when not a namespace).
 * 0, -EINVAL (malformed), -EBADMSG (ns_pids that do not fit the pids: not
 * one per pid, the root's not 1 or another's 1, one twice) or -ENOMEM. */
int ctl_manifest_ns_read_tree(const cJSON *o, int root, const int *pids, size_t n, bool *ret_pid_ns,
                              int **ret_ns_pids);
/* A tree whose root has a mount namespace of its own (a run job's: the
 * node's mounts and a /proc of its pid namespace, runmntns.h): per tree
 * "mount_namespace": true, which tells restore to give criu what such a
 * namespace needs (criumntns.h).  A manifest without it (a dump before run
 * made one, or a plain tree) restores as before.  Adds it to o when mnt_ns;
 * false when out of memory. */
bool ctl_manifest_ns_write_mnt(cJSON *o, bool mnt_ns);
/* Reads it from tree object o: 0, or -EINVAL (not a boolean, or on a tree
 * that is no pid namespace's). */
int ctl_manifest_ns_read_mnt(const cJSON *o, bool pid_ns, bool *ret_mnt_ns);
/* Reads the key of member object o into *ret_ns_pid (0: none): 0 or -EINVAL. */
int ctl_manifest_ns_read_member(const cJSON *o, int *ret_ns_pid);
/* The ns_pid a member of pid must have in a tree of pids and ns_pids (n;
 * ns_pids NULL: a plain tree): its pid in the namespace, or 0. */
int ctl_manifest_ns_expected(int pid, const int *pids, const int *ns_pids, size_t n);

#endif
