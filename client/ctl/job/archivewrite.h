/* archivewrite.h: a dump as one stream: a tar (pax) archive from libarchive of
 * manifest.json and every image file its digests name, compressed by
 * libzstd (multithreaded); archiveread.h reads it back, checked entry by
 * entry.
 *
 *   manifest.json                 first, so that what follows is known
 *   tree-ROOT/NAME ...            each file of each tree, as the manifest names it
 *
 * The reader takes the stream as hostile (it runs as root): the first
 * entry must be the manifest (at most its reader's size, with digests);
 * every other one a regular file (no link, device, directory, FIFO) named
 * tree-ROOT/NAME for a tree of the manifest and a file of its digests, once,
 * of the size they say, written into a fresh file of the private directory
 * (O_EXCL, O_NOFOLLOW, mode 0600) while it is hashed; a digest that
 * differs ends the read.  The whole stream holds every file of the
 * manifest, and no more than the limits allow. */
#ifndef CUDACKPT_CTL_ARCHIVEWRITE_H
#define CUDACKPT_CTL_ARCHIVEWRITE_H

#include "manifest.h"

#include <stddef.h>
#include <stdint.h>

/* The defaults of restore --archive-max-files and --archive-max-bytes. */
#define CTL_ARCHIVE_MAX_FILES 100000ULL
#define CTL_ARCHIVE_MAX_FILES_TEXT "100000"
#define CTL_ARCHIVE_MAX_BYTES (1ULL << 40)
#define CTL_ARCHIVE_MAX_BYTES_TEXT "1 TiB"
/* zstd's level (its default), and the most compressing threads. */
#define CTL_ARCHIVE_ZSTD_LEVEL 3
#define CTL_ARCHIVE_MAX_THREADS 8

typedef struct ctl_archive_limits {
        unsigned long long max_files;     /* image files an archive may hold */
        unsigned long long max_bytes;     /* their total size, unpacked */
} ctl_archive_limits;

typedef struct ctl_archive_stats {
        uint64_t files;
        uint64_t image_bytes;             /* the image files' bytes */
        uint64_t stream_bytes;            /* the compressed stream's */
        double ms;
} ctl_archive_stats;

/* What an entry's name says: 0 for "manifest.json"; 1 for
 * "tree-ROOT/NAME" (ROOT a pid, NAME as ctl_digest_name_ok() wants it),
 * "tree-ROOT" into tree (size bytes) and *ret_file pointing at NAME;
 * -EINVAL for any other name ("../x", "/x", "tree-1/a/b", ...). */
int ctl_archive_entry_name(const char *name, char *tree, size_t size, const char **ret_file);

/* dir_fd's manifest.json and every file m's digests name, each checked
 * against its digest as it is read (a file changed since it was hashed
 * is not sent: -EBADMSG), streamed into out_fd.  0 or -errno, err says
 * why; stats into *st. */
int ctl_archive_write(int dir_fd, const ctl_manifest *m, int out_fd, ctl_archive_stats *st, char *err,
                      size_t err_size);

#endif
