/* discover.h: finding processes in /proc for group selectors and
 * ListProcesses.
 *
 * A CUDA process is one that maps the driver library.  The driver's file
 * stays mapped after a checkpoint, when the process holds no GPU device
 * file and NVML no longer lists it, so this finds checkpointed processes
 * too (driver-behaviour.md, "What shows a CUDA process").  A mapping is
 * the driver when it is the very file the daemon loaded (same device and
 * inode: a container's bind-mounted copy counts, and so does the test
 * simulator) or any file named libcuda.so*.  Whether the process has
 * initialised CUDA is for the driver to say (GetState), afterwards.
 *
 * Everything here reads /proc and may block: worker threads only. */
#ifndef CUDACKPT_DISCOVER_H
#define CUDACKPT_DISCOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The longest cgroup path kept; longer ones do not match any selector. */
#define DISCOVER_CGROUP_MAX 4096

struct discover_lib {
        bool known;
        unsigned major, minor; /* as /proc/PID/maps writes the device */
        unsigned long long ino;
        char path[4096];       /* as loaded; "" when too long */
};

/* The file behind the loaded library that defines symbol (dladdr). */
int discover_lib_of(const void *symbol, struct discover_lib *ret);

/* 1 when pid maps the driver library as code, 0 when not (kernel threads,
 * plain processes), -errno when its maps cannot be read (gone, or not ours).
 * Asks the kernel with PROCMAP_QUERY where it can (Linux 6.11: a few
 * ioctls on the executable file mappings, several times cheaper than the
 * text, which costs most of a scan of /proc), else reads the text. */
int discover_maps_driver(pid_t pid, const struct discover_lib *lib);
/* The same by one way only, for the tests: DISCOVER_MAPS_QUERY gives
 * -ENOTTY or -EINVAL on a kernel without the ioctl. */
enum discover_maps_how { DISCOVER_MAPS_ANY, DISCOVER_MAPS_QUERY, DISCOVER_MAPS_TEXT };
int discover_maps_driver_how(pid_t pid, const struct discover_lib *lib, enum discover_maps_how how);
/* The test on the text of a maps file; for the unit tests. */
bool discover_maps_text_has_driver(const char *text, size_t len, const struct discover_lib *lib);

/* The cgroup v2 path of pid: the "0::" line of /proc/PID/cgroup. */
int discover_cgroup(pid_t pid, char *buf, size_t size);
/* The root of pid's cgroup namespace as this process's cgroup paths write
 * it: "" when pid shares this process's cgroup namespace.  Otherwise the
 * root of pid's cgroup2 mount in its mountinfo (the kernel writes it in the
 * reader's namespace; a container mounts its namespace's root there), "/"
 * counting as "" again; -ENOENT when pid has no cgroup2 mount. */
int discover_cgroup_ns_root(pid_t pid, char *buf, size_t size);
/* Whether the cgroup v2 group path (one of this process's paths, "/" or
 * "/a/b") exists: 1 when it does, 0 when not, -ENOENT when this process
 * has no cgroup2 mount of its namespace's root to look in (then nobody can
 * tell), another -errno when the mount cannot be read. */
int discover_cgroup_exists(const char *path);
/* Whether cgroup path is sel or below it ("/a/b" is within "/a", "/ab" is not). */
bool discover_cgroup_within(const char *path, const char *sel);

/* Every process in /proc, ascending; *ret_pids is malloc()ed. */
int discover_all(pid_t **ret_pids, size_t *ret_n);
/* root and all its descendants (through every thread's children file),
 * root first; at most max entries (-E2BIG past it); -ESRCH when root is gone. */
int discover_tree(pid_t root, size_t max, pid_t **ret_pids, size_t *ret_n);
/* The effective uid owning /proc/PID, a cheap first look at the owner. */
int discover_owner(pid_t pid, uid_t *ret_uid);
/* The parent of pid (field 4 of /proc/PID/stat); 0 for pid 1 and the
 * kernel's threads. */
int discover_ppid(pid_t pid, pid_t *ret_ppid);
/* The command name (comm), sanitised to printable ASCII. */
int discover_comm(pid_t pid, char *buf, size_t size);

#endif
