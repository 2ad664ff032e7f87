/* workdir.h: the private image directory of dump and restore --archive
 * (criu needs a directory: the archive is streamed from or into one that
 * only this command uses, removed afterwards), and the checked parent of
 * such a directory or of an archive file. */
#ifndef CUDACKPT_CTL_WORKDIR_H
#define CUDACKPT_CTL_WORKDIR_H

#include <limits.h>
#include <stddef.h>

typedef struct ctl_workdir {
        int parent_fd;                /* the directory it is in; -1: none made */
        int fd;                       /* it, opened (O_DIRECTORY) */
        char name[64];                /* its name in parent_fd: cudackpt-archive.RANDOM */
        char path[PATH_MAX];          /* its path, for criu's directory checks and messages */
} ctl_workdir;

/* path opened (O_RDONLY|O_DIRECTORY, following links as the path says)
 * into *ret_fd and checked on the descriptor: a directory of root's or of
 * this user's that no one else may write, or that is sticky (as /tmp:
 * others may add entries but not rename or remove ours).  -errno and a
 * sentence in err on failure. */
int ctl_workdir_parent(const char *path, int *ret_fd, char *err, size_t err_size);

/* A fresh directory (mode 0700, a random name made with O_EXCL semantics)
 * in parent (ctl_workdir_parent()), opened and checked to be this user's
 * into *ret.  -errno and a sentence in err on failure. */
int ctl_workdir_make(const char *parent, ctl_workdir *ret, char *err, size_t err_size);

/* w removed with what is in it (files, and directories of files: what a
 * dump or an unpacked archive holds), never following a link.  0, or the
 * first -errno (what could not be removed is left). */
int ctl_workdir_remove(ctl_workdir *w);

/* A random name "PREFIX.RANDOM" (24 hex digits) into name. */
int ctl_workdir_random_name(const char *prefix, char *name, size_t size);

#endif
