/* cgroup-path.h: the one rule for a cgroup v2 path named by a client (a
 * group's or ps's --cgroup, the protocol's Selector "cgroup"), checked by
 * cudackptctl before it asks and by the daemon when it is asked. */
#ifndef CUDACKPT_CGROUP_PATH_H
#define CUDACKPT_CGROUP_PATH_H

#include <stddef.h>

/* A path as /proc/PID/cgroup writes it: absolute, shorter than 4096 bytes,
 * without empty, "." or ".." components; trailing slashes are allowed.
 * Returns 0 and, when ret_len is not NULL, the length without the trailing
 * slashes ("/" stays 1); -EINVAL otherwise. */
int cgroup_path_check(const char *path, size_t *ret_len);

#endif
