/* fdio.h: whole writes, small whole reads and directory listings through
 * descriptors, the loops that the daemon's store files and the client's
 * image, /proc and host files all need. */
#ifndef CUDACKPT_COMMON_FDIO_H
#define CUDACKPT_COMMON_FDIO_H

#include <dirent.h>
#include <stddef.h>
#include <sys/types.h>

/* All len bytes of buf written to fd: EINTR retried, a short write
 * continued; 0, or -errno (-EIO for a write that wrote nothing). */
int fdio_write_all(int fd, const void *buf, size_t len);

/* Up to size - 1 bytes of the file name names relative to dir_fd
 * (AT_FDCWD: the working directory), NUL-ended into buf (size > 0): the
 * length, or -errno.  EINTR retried, short reads continued. */
ssize_t fdio_read_at(int dir_fd, const char *name, char *buf, size_t size);

/* A listing of dir_fd's directory from its start, on a descriptor of its
 * own (dir_fd's offset untouched, dir_fd still the caller's): *ret to
 * closedir(); 0 or -errno. */
int fdio_opendir(int dir_fd, DIR **ret);

#endif
