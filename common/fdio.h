/* fdio.h: whole writes and directory listings through descriptors, the
 * two loops that the daemon's store files and the client's image files
 * both need. */
#ifndef CUDACKPT_COMMON_FDIO_H
#define CUDACKPT_COMMON_FDIO_H

#include <dirent.h>
#include <stddef.h>

/* All len bytes of buf written to fd: EINTR retried, a short write
 * continued; 0, or -errno (-EIO for a write that wrote nothing). */
int fdio_write_all(int fd, const void *buf, size_t len);

/* A listing of dir_fd's directory from its start, on a descriptor of its
 * own (dir_fd's offset untouched, dir_fd still the caller's): *ret to
 * closedir(); 0 or -errno. */
int fdio_opendir(int dir_fd, DIR **ret);

#endif
