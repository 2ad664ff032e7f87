/* storefile.h: a small file of the daemon's own state, written whole,
 * atomically and durably, and read back without trusting it.
 *
 * Writing: the text goes to a temporary file of an unpredictable name
 * (mkostemp, mode 0600) beside the file, is fsync'ed, renamed over the
 * file, and the directory is fsync'ed; a failure at any step removes the
 * temporary file and leaves the old file as it was.
 * Reading: the file must be a regular file (not a symbolic link), owned by
 * the daemon's user, of mode 0600, with one link, at most max bytes long.
 * storefile_dir_safe() tells whether only the daemon's user may write a
 * directory (no one else may then replace or squat its files).  Worker
 * threads or the start: these block on the disk.  Nothing here logs. */
#ifndef CUDACKPT_STOREFILE_H
#define CUDACKPT_STOREFILE_H

#include <stdbool.h>
#include <stddef.h>

/* 0, or -errno with why set. */
int storefile_write(const char *path, const char *text, size_t len, char *why, size_t whylen);
/* The contents (malloc'ed, NUL-terminated) into *ret.  -ENOENT: there is
 * none; other -errno: refused or unreadable, with why set. */
int storefile_read(const char *path, size_t max, char **ret, size_t *ret_len, char *why, size_t whylen);
/* Whether dir is a directory owned by the daemon's user that no one else
 * may write; false with why set otherwise. */
bool storefile_dir_safe(const char *dir, char *why, size_t whylen);

#endif
