/* host.h: small questions cudackptctl asks of the host it runs on: the
 * contents of a small file (/proc, /sys), where a program is on $PATH, and
 * what a program prints, within a time limit.  Used by doctor and by
 * dump's process tree.  Private to client/. */
#ifndef CUDACKPT_HOST_H
#define CUDACKPT_HOST_H

#include <stddef.h>
#include <sys/types.h>

/* Reads at most size - 1 bytes of path into buf, NUL-terminated; returns
 * the length or -errno. */
ssize_t ctl_host_read_file(const char *path, char *buf, size_t size);

/* The first executable regular file called name in a directory of $PATH
 * (a default list when unset) into buf.  Empty components, which mean the
 * current directory, are not searched.  -ENOENT when there is none. */
int ctl_host_find_program(const char *name, char *buf, size_t size);

/* The criu that dump and restore run, into buf: $CUDACKPT_CRIU when set and
 * not empty (-ENOENT when it names no executable regular file), else criu
 * on $PATH as ctl_host_find_program() finds it. */
#define CTL_HOST_CRIU_ENV "CUDACKPT_CRIU"
int ctl_host_find_criu(char *buf, size_t size);

/* Runs path with argv (stdin and stderr /dev/null) and collects what it
 * writes to stdout into out (cut at size - 1 bytes, NUL-terminated).
 * After timeout_ms it is killed, with whatever it started (its own
 * process group).  Returns its wait status, or -errno (-ETIMEDOUT when it
 * was killed). */
int ctl_host_run_program(const char *path, char *const argv[], char *out, size_t size, int timeout_ms);

#endif
