/* runmntns.h: the mount namespace of a job started by `cudackptctl run`
 * (runmntns.c): the node's mounts, private, with a /proc of the job's own
 * pid namespace.
 *
 * The CUDA driver needs /proc/<getpid()> to be the calling process: on the
 * H200 (driver 580), a process in a pid namespace of its own that sees the
 * node's /proc fails its first CUDA call with cudaErrorOperatingSystem.
 * So the job's init, cloned with CLONE_NEWPID | CLONE_NEWNS, makes every
 * mount of its copy of the node's private (nothing it mounts propagates
 * back to the node, and CRIU has no peer group outside the job to match on
 * restore) and replaces /proc by a fresh proc of its pid namespace
 * (nosuid, nodev, noexec).  Everything else is what the node shows.
 *
 * A descriptor opened before (what the run command gave the job) names a
 * mount of the node's namespace, which CRIU cannot find in the job's ("Can't
 * lookup mount=N for fd=..."): the init reopens each one by its path there,
 * the same file (device and inode checked), flags and offset. */
#ifndef CUDACKPT_CTL_RUNMNTNS_H
#define CUDACKPT_CTL_RUNMNTNS_H

/* In the job's init, first of all (in its new mount and pid namespaces):
 * every mount private, /proc a fresh proc.  0 or -errno. */
int ctl_run_mntns_make(void);
/* In the job's init, once its descriptors are what the job gets: each one
 * that names a file by a path reopened there by it (the same file, flags,
 * offset and close-on-exec flag).  One that cannot be (the file removed or
 * replaced meanwhile) is kept as it is: the job runs, and a dump says
 * which descriptor CRIU cannot find. */
void ctl_run_mntns_reopen_fds(void);

#endif
