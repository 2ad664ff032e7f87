/* runinherit.h: what a job started by `cudackptctl run` gets of the run
 * command's own process (runinherit.c).
 *
 * A job of root's own (no --user) inherits its standard input, output and
 * error, every descriptor not marked close-on-exec, the environment and
 * the signals' dispositions, as any child would.  A tenant's job (--user)
 * gets none of root's: /dev/null for standard input, --output's file (or
 * /dev/null) for standard output and error, no other descriptor, the
 * default disposition for every signal, and an environment of its own:
 * the names CTL_RUN_ENV_KEPT lists taken from root's, and HOME, USER and
 * LOGNAME of the user's passwd entry.  It never holds a terminal of root's
 * (which it could read what root types next from, write to, or ioctl). */
#ifndef CUDACKPT_CTL_RUNINHERIT_H
#define CUDACKPT_CTL_RUNINHERIT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The names of root's environment a tenant's job keeps (a trailing '_':
 * every name with that prefix), for the docs and the help. */
#define CTL_RUN_ENV_KEPT "PATH, LANG, LANGUAGE, LC_*, TZ, CUDACKPT_*"

/* What the job gets: made as root before the job's init exists, applied
 * in the init before it execs cudackpt-init. */
typedef struct ctl_run_inherit {
        bool tenant;              /* --user: nothing of root's */
        int out_fd;               /* --output's file, or -1 */
        char **env;               /* the job's environment (environ unless tenant) */
} ctl_run_inherit;

/* Makes h for a job run as uid:gid (tenant; user its passwd name, "" when
 * it has none) or as root (!tenant), with output its --output (NULL:
 * none).  output is opened for appending (O_WRONLY|O_APPEND, so that
 * CRIU restores it whatever it has grown to) in a directory that must be
 * root's and writable by root alone, walked as safedir.h says: no one but
 * root can then put a link or another file in its place.  A file made
 * there is mode 0600 and, for a tenant, given to the user (its job's
 * output is its own to read); one already there must be a regular file
 * with one link, root's or the user's.  0, or -errno with a sentence in
 * err; h is then empty (ctl_run_inherit_free() may still be called). */
int ctl_run_inherit_make(ctl_run_inherit *h, bool tenant, uid_t uid, gid_t gid, const char *user,
                         const char *output, char *err, size_t err_size);

/* In the job's init, before its exec: the standard descriptors, and for a
 * tenant every other descriptor made close-on-exec and every signal's
 * disposition the default.  0 or -errno. */
int ctl_run_inherit_apply(const ctl_run_inherit *h);

void ctl_run_inherit_free(ctl_run_inherit *h);

#endif
