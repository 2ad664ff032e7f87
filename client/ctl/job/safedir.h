/* safedir.h: opening a directory root will trust, so that what is checked
 * is what is used (dump and restore --images).
 *
 * The path is walked from "/" one component at a time (openat, O_NOFOLLOW):
 * every directory on the way must belong to root or to this user and be
 * writable by no group or other user, or else have the sticky bit (as /tmp:
 * others may add entries but not rename or remove ours; the next step then
 * checks that what it finds is root's or ours).  A symbolic link on the way
 * is followed only when it lies in a directory no one else may write, or
 * is itself root's or this user's; ".." is refused.  The last component
 * must be a directory of this user's that no group or other user may write,
 * and not a symbolic link.  The descriptor is what root uses from then on:
 * CRIU gets it as /proc/self/fd/N, files are made through openat(). */
#ifndef CUDACKPT_SAFEDIR_H
#define CUDACKPT_SAFEDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

/* Whether st is of type (S_IFDIR, S_IFREG) and this user's, writable by no
 * group or other. */
bool ctl_safedir_owned(const struct stat *st, mode_t type);

/* path opened as above (O_RDONLY|O_DIRECTORY) into *ret_fd; with create, its
 * last component is made (mode 0700) when missing.  -errno and a sentence
 * in err on failure (-EPERM: a directory that others may write or that
 * belongs to someone else, -ELOOP: the last one a link). */
int ctl_safedir_open(const char *path, bool create, int *ret_fd, char *err, size_t err_size);

/* path, a file whose content root will trust (restore --archive FILE),
 * opened O_RDONLY: its directory walked as every directory on the way
 * above (so it may be sticky, as /tmp), then the file itself, not a link,
 * checked on its descriptor as ctl_safedir_owned() wants it.  -errno and a
 * sentence in err (-EPERM: another user's, or writable by others). */
int ctl_safedir_open_file(const char *path, int *ret_fd, char *err, size_t err_size);

/* name, a directory right inside dir_fd, opened (O_DIRECTORY|O_NOFOLLOW)
 * and checked on the descriptor as ctl_safedir_owned() wants it; with
 * create made (0700) when missing.  -EEXIST when something else is there. */
int ctl_safedir_sub(int dir_fd, const char *name, bool create, int *ret_fd);

#endif
