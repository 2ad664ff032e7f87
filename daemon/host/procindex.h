/* procindex.h: the kernel's list of the processes that may map the CUDA
 * driver, so that ListProcesses and Watch's scans read a few processes
 * rather than every process in /proc.
 *
 * A small BPF program (procindex.bpf.c) adds a process when it maps the
 * driver's file (the file the daemon loaded, or any libcuda.so*) and when
 * one in the list forks, and removes it when it execs or dies.  Processes
 * that mapped the driver before the index was opened are found by two scans
 * of /proc at the start.  The list is a superset: callers still test each
 * process's maps (discover_maps_driver), so a stale entry costs one test and
 * is never listed.  When an entry could not be added (the list full), the
 * index says so and callers go back to scanning /proc.
 *
 * Needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN), the kernel's BTF, and
 * BPF trampolines (an fentry program on security_mmap_file, which costs
 * only the mmaps of files); or, when the caller allows it, the
 * sys_enter_mmap tracepoint (with tracefs mounted), which costs every
 * system call of every process on the node (about 17 ns each, see
 * docs/performance.md) and so is never chosen by default.  The daemon runs
 * without the index, scanning, when what it needs is missing.
 *
 * procindex_open() blocks (loading, two scans): a worker thread or the
 * start.  procindex_candidates() is a few system calls: any thread. */
#ifndef CUDACKPT_PROCINDEX_H
#define CUDACKPT_PROCINDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "host/discover.h"

struct procindex;

/* Loads and attaches the program, finds the processes that map lib already,
 * and checks that the index sees this process's own mapping of lib (which
 * also proves the pids it keeps are this process's: not so in a pid
 * namespace of its own).  At most max_entries processes.  Where fentry is
 * not available, the tracepoint is used only if tracepoint is true.  0, or
 * -errno with a reason for the log in why. */
int procindex_open(const struct discover_lib *lib, unsigned max_entries, bool tracepoint, struct procindex **ret,
                   char *why, size_t why_len);
void procindex_free(struct procindex *ix);

/* How the index learns of mappings: "fentry" or "tracepoint". */
const char *procindex_hook(const struct procindex *ix);

/* Every process that may map the driver, ascending; *ret_pids is malloc()ed.
 * -EOVERFLOW once the index has missed a process (it was full): scan /proc. */
int procindex_candidates(struct procindex *ix, pid_t **ret_pids, size_t *ret_n);

/* Processes the last procindex_candidates() found (for metrics). */
size_t procindex_last_size(const struct procindex *ix);

#endif
