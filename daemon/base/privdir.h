/* privdir.h: a directory that only the daemon's user may change, opened
 * and checked once and then used through its descriptor.
 *
 * The daemon keeps state there that it reads back as root (the lease
 * store), so nobody else may create, replace or remove a name in it, nor
 * swap the directory itself for another.  privdir_open() walks the path
 * from / one component at a time (openat, O_DIRECTORY | O_NOFOLLOW; a
 * symbolic link is followed only when root or the daemon's user owns it)
 * and checks with fstat, on the descriptor it opened:
 *   - the directory itself: owned by root or by the daemon's user, not
 *     writable by its group or by others;
 *   - each directory above it: owned by root or by the daemon's user, and
 *     either not writable by group or others or sticky (/tmp: others may
 *     not rename or remove an entry they do not own, and every entry on
 *     the way is checked to be root's).
 * The caller keeps the descriptor and reaches the files inside only
 * relative to it (openat, renameat), never through the path again. */
#ifndef CUDACKPT_PRIVDIR_H
#define CUDACKPT_PRIVDIR_H

#include <stddef.h>

/* Opens and checks path (absolute, or relative to the working directory).
 * 0 and *ret_fd (O_RDONLY | O_DIRECTORY | O_CLOEXEC), or -errno with why
 * set: -EPERM when a check fails, what open() said otherwise. */
int privdir_open(const char *path, int *ret_fd, char *why, size_t whylen);

#endif
