/* criumntns.h: what criu dump and restore are told about a tree with a
 * mount namespace of its own (a run job's: a copy of the node's mounts with
 * a /proc of its pid namespace, runmntns.h; manifestns.h records it).
 *
 * CRIU dumps a mount namespace that is not its own, every mount of it.
 * Each of the job's mounts but /proc is a copy of one of the node's, so
 * dump gets --external mnt[]: CRIU then finds, for each such mount, the
 * node's mount it is a copy of and records it by its path there (an
 * "autodetected external mount") instead of its contents; /proc it dumps
 * as a proc mount, made afresh in the restored pid namespace.  Restore
 * gets --external mnt[] (bind each such mount again from that path in the
 * restoring criu's namespace) and --root / (the namespace's root mount is
 * the node's /: without a root, CRIU 4.2's mount engine fails, "BUG at
 * criu/mount.c:48").  So the restoring node must have the same mounts at
 * the same paths, as it must have the job's files.  The job's mounts are
 * private (runmntns.c): no --enable-external-masters or -sharing is
 * needed.  A tree without a mount namespace of its own (a plain tree, a
 * run job dumped before it had one) gets none of these words. */
#ifndef CUDACKPT_CTL_CRIUMNTNS_H
#define CUDACKPT_CTL_CRIUMNTNS_H

#include <stdbool.h>
#include <stddef.h>

/* The most words ctl_criu_mntns_words() adds. */
#define CTL_CRIU_MNTNS_MAX_WORDS 4

/* Appends to words (n of them now, room for n + CTL_CRIU_MNTNS_MAX_WORDS + 1)
 * criu's words for a tree with (mnt_ns) or without a mount namespace of its
 * own, for restore or dump, and the terminating NULL; the new count. */
size_t ctl_criu_mntns_words(const char **words, size_t n, bool mnt_ns, bool restore);

#endif
