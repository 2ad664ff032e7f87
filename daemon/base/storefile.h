/* storefile.h: a small file of the daemon's own state, written whole,
 * atomically and durably, and read back without trusting it.
 *
 * Everything is relative to a directory descriptor the caller opened and
 * checked (privdir.h), never through a path: a directory swapped for a
 * symbolic link after the check changes nothing.
 * Writing: the text goes to a new file of mode 0600 under a name nobody
 * can foresee (name.<16 random hex digits>.tmp, openat O_CREAT | O_EXCL |
 * O_NOFOLLOW), is fsync'ed, renamed over name (renameat), and the
 * directory is fsync'ed; a failure at any step removes the temporary file
 * and leaves the old file as it was.
 * Reading: the file must be a regular file (not a symbolic link), owned by
 * the daemon's user, of mode 0600, with one link, at most max bytes long.
 * Worker threads or the start: these block on the disk.  Nothing here
 * logs. */
#ifndef CUDACKPT_STOREFILE_H
#define CUDACKPT_STOREFILE_H

#include <stddef.h>

/* 0, or -errno with why set. */
int storefile_write(int dirfd, const char *name, const char *text, size_t len, char *why, size_t whylen);
/* The contents (malloc'ed, NUL-terminated) into *ret.  -ENOENT: there is
 * none; other -errno: refused or unreadable, with why set. */
int storefile_read(int dirfd, const char *name, size_t max, char **ret, size_t *ret_len, char *why, size_t whylen);
/* Removes the temporary files of name that a daemon dying while writing
 * left in dirfd. */
void storefile_remove_leftovers(int dirfd, const char *name);
/* The machine's boot id (36 characters; "" when unreadable): a state file
 * that carries it tells a restart of the daemon from a reboot. */
void storefile_boot_id(char out[40]);

#endif
