/* digest.h: the digest of every image file of a dump (XXH3-128, from
 * libxxhash), computed by dump after criu wrote them and checked before
 * anything is restored (restore --images, restore --archive, verify).
 *
 * A digest catches a file that was changed, truncated, lost or added on
 * the way (a disk, a copy, a network); it is no signature: who can write
 * the images can write the manifest beside them. */
#ifndef CUDACKPT_CTL_DIGEST_H
#define CUDACKPT_CTL_DIGEST_H

#include <cJSON.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* XXH3-128 in canonical (big-endian) lowercase hex, and its NUL. */
#define CTL_DIGEST_HEX_SIZE 33
/* The most threads hashing at once (fewer on a smaller machine). */
#define CTL_DIGEST_MAX_THREADS 8
/* The most files one tree's list may name. */
#define CTL_DIGEST_MAX_FILES 100000

typedef struct ctl_digest_file {
        char *name;                       /* a file right in the tree's directory */
        uint64_t size;
        char hex[CTL_DIGEST_HEX_SIZE];
} ctl_digest_file;

/* The files of one tree, sorted by name (strcmp), each once. */
typedef struct ctl_digest_set {
        ctl_digest_file *files;
        size_t n;
} ctl_digest_set;

/* One tree's directory, as dump or restore opened it. */
typedef struct ctl_digest_tree {
        int dir_fd;
        const char *name;                 /* "tree-ROOT", for messages */
        ctl_digest_set *set;              /* filled by compute, read by verify */
} ctl_digest_tree;

/* Incremental hashing of one file's bytes (the archive reader's). */
typedef struct ctl_hasher {
        void *state;
        uint64_t bytes;
} ctl_hasher;

int ctl_hasher_init(ctl_hasher *h);
void ctl_hasher_update(ctl_hasher *h, const void *data, size_t len);
/* The digest of what was fed, as hex; the state freed. */
void ctl_hasher_finish(ctl_hasher *h, char hex[CTL_DIGEST_HEX_SIZE]);

/* What criu writes into a tree's directory beside the images and a
 * restore does not read: its logs (dump.log, restore.log) and restore's
 * statistics (stats-restore).  Not digested; allowed as extras. */
bool ctl_digest_skipped_name(const char *name);
/* Whether name may name an image: one path component (no '/', not "." or
 * ".."), 1 to 255 bytes, printable ASCII. */
bool ctl_digest_name_ok(const char *name);

/* Every regular file of each tree's directory (skipped names aside)
 * hashed, in parallel, into *trees[i].set (replaced).  A directory entry
 * that is not a regular file is refused (-EBADMSG); err says which.  0 or
 * -errno; bytes (if not NULL) gets how much was read. */
int ctl_digest_compute(ctl_digest_tree *trees, size_t n, uint64_t *ret_bytes, char *err, size_t err_size);
/* Each tree's directory against its set: every file there, of its size and
 * digest, and nothing else (skipped names aside).  0, -EBADMSG (err names
 * the first file at fault, and what is wrong), or another -errno. */
int ctl_digest_verify(const ctl_digest_tree *trees, size_t n, uint64_t *ret_bytes, char *err, size_t err_size);
/* The file of set named name, or NULL. */
const ctl_digest_file *ctl_digest_find(const ctl_digest_set *set, const char *name);

/* [{"name": N, "size": S, "xxh3_128": HEX}, ...] of set; NULL when out of
 * memory. */
cJSON *ctl_digest_to_json(const ctl_digest_set *set);
/* The reverse, checked (names as ctl_digest_name_ok() wants them, not
 * skipped ones, sorted and each once, sizes whole numbers, digests 32
 * lowercase hex digits, at most CTL_DIGEST_MAX_FILES): 0, -EINVAL, -ENOMEM. */
int ctl_digest_from_json(const cJSON *files, ctl_digest_set *ret);
void ctl_digest_set_free(ctl_digest_set *set);

#endif
