/* host.h: small questions cudackptctl asks of the host it runs on: the
 * contents of a small file (/proc, /sys), where a program is on $PATH, the
 * one way to start a program, and what a program prints, within a time
 * limit.  Used by doctor and by
 * dump's process tree.  Private to client/. */
#ifndef CUDACKPT_HOST_H
#define CUDACKPT_HOST_H

#include <stdbool.h>
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

/* How a program is started (ctl_host_spawn()). */
typedef struct ctl_spawn {
        const char *path;             /* the program; a name found on $PATH with search */
        char *const *argv;            /* NULL-terminated */
        char *const *env;             /* NULL: this process's environment */
        bool search;                  /* path is a name to find on $PATH */
        bool capture;                 /* stdin /dev/null, stdout on a pipe (*ret_fd) */
        bool capture_stderr;          /* with capture: stderr on the pipe too, else /dev/null */
        bool own_group;               /* in a process group of its own (a ^C is not its) */
        const int *default_signals;   /* back to SIG_DFL in it (an ignored one stays so) */
        size_t n_default_signals;
        int keep_fd;                  /* inherited at its number (criu's -D /proc/self/fd/N); -1: none */
        int stdio_fd;                 /* > 0, without capture: its stdin and stdout (a socket: the
                                       * nodes' link), stderr inherited; 0: none */
} ctl_spawn;

/* Starts s: 0 with its pid (and with capture, the read end of its output
 * pipe, to close), or -errno (it could not be run: not found, not
 * executable). */
int ctl_host_spawn(const ctl_spawn *s, pid_t *ret_pid, int *ret_fd);

/* Runs path with argv (stdin and stderr /dev/null) and collects what it
 * writes to stdout into out (cut at size - 1 bytes, NUL-terminated).
 * After timeout_ms it is killed, with whatever it started (its own
 * process group).  Returns its wait status, or -errno (-ETIMEDOUT when it
 * was killed). */
int ctl_host_run_program(const char *path, char *const argv[], char *out, size_t size, int timeout_ms);

#endif
