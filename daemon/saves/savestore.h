/* savestore.h: the saves directory on disk (saves_dir): one directory per
 * uid, <saves_dir>/<UID>/ (root's, 0700), holding that uid's saves, each
 * the images directory of one dump (cudackptctl dump --images).  A name
 * starting with '.' is the daemon's own (a dump being written, a save
 * being removed) and never a save; it names the node (its host name) so
 * that a daemon starting after a crash sweeps its own node's leftovers and
 * no other node's, in a directory the nodes share.
 *
 * savestore_open() runs once at start; everything else blocks on the disk
 * and runs on worker threads, through descriptors: the saves directory's,
 * opened and checked at start (privdir.h), and a uid's, opened below it
 * without following links.  Nothing is reported done before it is on
 * stable storage: each rename and removal is followed by an fsync of the
 * uid's directory. */
#ifndef CUDACKPT_SAVESTORE_H
#define CUDACKPT_SAVESTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SAVESTORE_NAME_MAX 48
#define SAVESTORE_TMP_MAX 96

struct savestore_info {
        char save[SAVESTORE_NAME_MAX + 1];
        char job[SAVESTORE_NAME_MAX + 1]; /* the name of the job it holds ("" when unknown) */
        uint64_t bytes;                   /* what its files take on disk */
        int64_t created;                  /* seconds since the epoch */
};

/* Opens path as the saves directory, making it (0700) when missing, and
 * checks it as privdir_open() does.  0 and *ret_fd, or -errno with why.
 * Takes this node's name for the daemon's own names, once. */
int savestore_open(const char *path, int *ret_fd, char *why, size_t whylen);
/* uid's directory below dirfd, made (0700) when missing and create is
 * set: 0 and *ret_fd; -ENOENT when missing; -EPERM when it is not root's
 * 0700 directory. */
int savestore_uid_dir(int dirfd, uid_t uid, bool create, int *ret_fd);
/* The saves of uid in its directory (sorted by name), to free(). */
int savestore_list(int uidfd, uid_t uid, struct savestore_info **ret, size_t *ret_n);
/* One save of uid: 0, -ENOENT when there is none. */
int savestore_info(int uidfd, uid_t uid, const char *save, struct savestore_info *ret);
/* How many saves all uids have. */
int savestore_count_all(int dirfd, size_t *ret_n);
/* A fresh name of the daemon's own: ".WHAT-NODE-" and 16 random hex
 * digits ("dump": a dump being written). */
void savestore_tmp_name(const char *what, char *buf, size_t size);
/* The dump in tmp becomes save: a new name (-EEXIST when save exists and
 * replace is not set), or, with replace, exchanged with the old save,
 * which is then removed.  Durable when it returns 0. */
int savestore_install(int uidfd, const char *tmp, const char *save, bool replace);
/* Removes save (-ENOENT when missing), durably; a removal cut short
 * leaves only a name starting with '.'. */
int savestore_remove(int uidfd, const char *save);
/* Holds save across the nodes that share the directory: an open file
 * description's write lock (F_OFD_SETLK, which NFS carries to its server)
 * on ".hold-SAVE" in the uid's directory, made when missing.  0 and
 * *ret_fd (closing it lets go), -EBUSY while another holds it, or -errno.
 * A restore holds its save for as long as its job runs, so that no other
 * node runs a second copy; a removal holds it while it removes it. */
int savestore_hold(int uidfd, const char *save, int *ret_fd);
/* The hold's file of save, gone (with the save, its holder holding it,
 * before it lets go): a lock taken on a file no longer named so is no
 * hold, and savestore_hold() opens the name again. */
void savestore_unhold(int uidfd, const char *save);
/* Removes every uid's names of the daemon's own made on this node by a
 * daemon before this one (which died with them: one daemon serves a node),
 * durably; their number in *ret_n.  This daemon's own names are left. */
int savestore_sweep(int dirfd, size_t *ret_n);
/* Removes name below dirfd and everything inside it (-ENOENT when missing). */
int savestore_remove_tree(int dirfd, const char *name);

#endif
