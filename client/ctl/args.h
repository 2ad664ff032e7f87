/* args.h: the arguments every command line of cudackptctl parses alike (a
 * pid, a count, a GPU map), its usage errors, and the way to the daemon
 * (the socket, the connection).  Private to cudackptctl. */
#ifndef CUDACKPT_CTL_ARGS_H
#define CUDACKPT_CTL_ARGS_H

#include <cudackpt/client.h>

#include <stdbool.h>
#include <stddef.h>

/* A decimal pid: digits only, 1..INT_MAX.  -EINVAL or -ERANGE otherwise. */
int ctl_parse_pid(const char *s, int *ret_pid);

/* A decimal count: digits only, 0..max.  -EINVAL or -ERANGE otherwise. */
int ctl_parse_uint(const char *s, unsigned long long max, unsigned long long *ret_value);

/* A GPU mapping being collected from OLD=NEW[,OLD=NEW...] arguments, in the
 * form cudackpt_restore() takes: old0, new0, old1, new1, ..., NULL. */
typedef struct ctl_map {
        char **items;   /* NULL until the first pair; then NULL-terminated */
        size_t n_items; /* strings in items, twice the number of pairs */
} ctl_map;

/* Append the pairs of one argument.  -EINVAL for a malformed argument (an
 * empty list or side, a pair without exactly one '='), -EEXIST when an old
 * UUID is named twice, -ENOMEM.  The map is unchanged on failure. */
int ctl_map_add(ctl_map *m, const char *arg);
void ctl_map_free(ctl_map *m);

/* A usage error of a command line: "NAME: MESSAGE" and then tail (the
 * hint and the newline) on stderr; returns status, the exit status. */
__attribute__((format(printf, 4, 5)))
int ctl_usage_fail(int status, const char *name, const char *tail, const char *fmt, ...);

/* The socket to use: option, else $CUDACKPT_SOCKET when not empty, else
 * the default.  Resolved here, not in the library, to name it in errors. */
const char *ctl_socket_path(const char *option);

/* What to do when the daemon cannot be reached (doctor advises it too). */
#define CTL_UNREACHABLE_ADVICE \
        "systemctl start cudackptd.socket (or name the socket with --socket or $" CUDACKPT_SOCKET_ENV ")"

/* Connects *ret_client to the daemon at path.  A path with no socket file
 * is said at once, on stderr after prefix, before connecting waits for a
 * daemon that may be starting; a failure is said with the path, the reason
 * and CTL_UNREACHABLE_ADVICE.  0, or CUDACKPT_EXIT_UNREACHABLE. */
int ctl_connect_daemon(const char *prefix, const char *path, cudackpt_client **ret_client);

#endif
