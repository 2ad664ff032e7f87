/* archiveread.c: restore --archive's reader (see archivewrite.h for the form
 * and the rules).  libarchive parses the tar stream (tar only, no other
 * format or filter), fed by zstream.c's zstd; every entry is judged here
 * before a byte of it is written, and written only through the private
 * directory's descriptors into a file made afresh. */
#include "archiveread.h"
#include "fdio.h"

#include "digest.h"
#include "safedir.h"
#include "zstream.h"
#include "monotime.h"

#include <archive.h>
#include <archive_entry.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define AREAD_BUF (1024 * 1024)
/* As manifest.c's own bound on the file. */
#define AREAD_MANIFEST_MAX (16 * 1024 * 1024)
/* What may follow the tar stream's end in the zstd stream (padding). */
#define AREAD_AFTER_MAX (1024 * 1024)
/* The most of the stream one entry's header may take (its tar blocks,
 * pax or GNU extensions, a sparse map): libarchive keeps what a header
 * says in memory, and a sparse map of a few hundred kB of zstd stream
 * made it allocate gigabytes before the entry could be judged.  A header
 * of an archive of cudackptctl dump is a few kB; libarchive refuses a
 * pax or long-name extension past 1 MiB on its own. */
#define AREAD_HEADER_MAX (4 * 1024 * 1024)

typedef struct aread {
        struct archive *ar;
        ctl_zin z;
        int dir_fd;
        const ctl_archive_limits *lim;
        ctl_manifest *m;
        int *tree_fds;                /* per tree of m, once the manifest is read */
        bool **seen;                  /* per tree, per file of its digests */
        bool in_header;               /* archive_read_next_header() runs */
        uint64_t header_bytes;        /* the stream it has taken so far */
        unsigned char *buf;
        ctl_archive_stats *st;
        char *err;
        size_t err_size;
} aread;

static int aread_fail(aread *c, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int aread_fail(aread *c, int r, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(c->err, c->err_size, fmt, ap);
        va_end(ap);
        return r;
}

static la_ssize_t aread_cb(struct archive *ar, void *data, const void **buf) {
        aread *c = data;
        ssize_t k = ctl_zin_read(&c->z, buf);

        if (k < 0) {
                archive_set_error(ar, EIO, "%s", c->z.why);
                return -1;
        }
        if (c->in_header && (c->header_bytes += (uint64_t) k) > AREAD_HEADER_MAX) {
                archive_set_error(ar, EFBIG, "an entry's header takes more than %d bytes (a bomb of extension or "
                                  "sparse blocks?)", AREAD_HEADER_MAX);
                return -1;
        }
        return k;
}

/* The entry's data into fd, at most max bytes, hashed into h when not
 * NULL; the count in *ret_n. */
static int aread_data(aread *c, const char *name, int fd, uint64_t max, ctl_hasher *h, uint64_t *ret_n) {
        uint64_t n = 0;
        la_ssize_t k;
        int r = 0;

        while (r == 0 && (k = archive_read_data(c->ar, c->buf, AREAD_BUF)) != 0) {
                if (k < 0)
                        return aread_fail(c, -EBADMSG, "%s: %s", name, archive_error_string(c->ar));
                if ((uint64_t) k > max - n)
                        return aread_fail(c, -EBADMSG, "%s is longer than its header says", name);
                n += (uint64_t) k;
                if (h)
                        ctl_hasher_update(h, c->buf, (size_t) k);
                r = fdio_write_all(fd, c->buf, (size_t) k);
        }
        *ret_n = n;
        return r < 0 ? aread_fail(c, r, "cannot write %s: %s", name, strerror(-r)) : 0;
}

/* Whether e is a plain regular file with its size in its header. */
static bool aread_regular(struct archive_entry *e) {
        return archive_entry_filetype(e) == AE_IFREG && !archive_entry_hardlink(e) && !archive_entry_symlink(e) &&
               archive_entry_size_is_set(e) && archive_entry_size(e) >= 0;
}

/* The trees' directories made, the files counted against the limits. */
static int aread_trees(aread *c) {
        const ctl_manifest *m = c->m;
        unsigned long long files = 0, bytes = 0;

        for (size_t i = 0; i < m->n_trees; i++)
                for (size_t j = 0; j < m->trees[i].files->n; j++) {
                        uint64_t size = m->trees[i].files->files[j].size;

                        files++;
                        /* Sizes a hostile manifest adds up past 2^64 must
                         * not wrap round under the limit: saturate. */
                        bytes = size > ULLONG_MAX - bytes ? ULLONG_MAX : bytes + size;
                }
        if (files > c->lim->max_files || bytes > c->lim->max_bytes)
                return aread_fail(c, -E2BIG, "its manifest names %llu files of %llu bytes: more than "
                                  "--archive-max-files (%llu) or --archive-max-bytes (%llu) allow", files, bytes,
                                  c->lim->max_files, c->lim->max_bytes);
        c->tree_fds = calloc(m->n_trees, sizeof(int));
        c->seen = calloc(m->n_trees, sizeof(bool *));
        if (!c->tree_fds || !c->seen)
                return aread_fail(c, -ENOMEM, "out of memory");
        for (size_t i = 0; i < m->n_trees; i++)
                c->tree_fds[i] = -1;
        for (size_t i = 0; i < m->n_trees; i++) {
                int r = ctl_safedir_sub(c->dir_fd, m->trees[i].images, true, &c->tree_fds[i]);

                if (r < 0)
                        return aread_fail(c, r, "cannot make %s: %s", m->trees[i].images, strerror(-r));
                c->seen[i] = calloc(m->trees[i].files->n + 1, sizeof(bool));
                if (!c->seen[i])
                        return aread_fail(c, -ENOMEM, "out of memory");
        }
        return 0;
}

/* The first entry: the manifest, read and checked as restore reads one. */
static int aread_manifest(aread *c, struct archive_entry *e, const char *name) {
        char tree[32], why[512];
        const char *file;
        uint64_t n;
        int fd, r;

        if (!name || ctl_archive_entry_name(name, tree, sizeof(tree), &file) != 0 || !aread_regular(e))
                return aread_fail(c, -EBADMSG, "its first entry is not %s (not an archive of cudackptctl dump)",
                                  CTL_MANIFEST_NAME);
        if (archive_entry_size(e) > AREAD_MANIFEST_MAX)
                return aread_fail(c, -EBADMSG, "its %s is larger than %d bytes", CTL_MANIFEST_NAME,
                                  AREAD_MANIFEST_MAX);
        fd = openat(c->dir_fd, CTL_MANIFEST_NAME, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return aread_fail(c, -errno, "cannot make %s: %s", CTL_MANIFEST_NAME, strerror(errno));
        r = aread_data(c, name, fd, (uint64_t) archive_entry_size(e), NULL, &n);
        if (close(fd) < 0 && r == 0)
                r = aread_fail(c, -errno, "cannot write %s: %s", CTL_MANIFEST_NAME, strerror(errno));
        if (r < 0)
                return r;
        r = ctl_manifest_read(c->dir_fd, "archive", c->m, why, sizeof(why));
        if (r < 0)
                return aread_fail(c, r == -ENOMEM ? r : -EBADMSG, "%s", why);
        if (!ctl_manifest_has_digests(c->m))
                return aread_fail(c, -EBADMSG, "its %s has no digests", CTL_MANIFEST_NAME);
        return aread_trees(c);
}

/* An image file: judged, then written while hashed, then its digest checked. */
static int aread_file(aread *c, struct archive_entry *e, const char *name) {
        char tree[32], hex[CTL_DIGEST_HEX_SIZE];
        const ctl_digest_file *f = NULL;
        const char *file;
        size_t i = 0, j;
        ctl_hasher h;
        uint64_t n;
        int fd, r;

        if (!name || ctl_archive_entry_name(name, tree, sizeof(tree), &file) != 1)
                return aread_fail(c, -EBADMSG, "entry \"%s\" is not named tree-ROOT/FILE", name ? name : "?");
        while (i < c->m->n_trees && strcmp(c->m->trees[i].images, tree) != 0)
                i++;
        if (i < c->m->n_trees)
                f = ctl_digest_find(c->m->trees[i].files, file);
        if (!f)
                return aread_fail(c, -EBADMSG, "%s is not in the manifest (an extra file)", name);
        j = (size_t) (f - c->m->trees[i].files->files);
        if (c->seen[i][j])
                return aread_fail(c, -EBADMSG, "%s comes twice", name);
        c->seen[i][j] = true;
        if (!aread_regular(e))
                return aread_fail(c, -EBADMSG, "%s is not a regular file (a link, directory or device)", name);
        if ((uint64_t) archive_entry_size(e) != f->size)
                return aread_fail(c, -EBADMSG, "%s is %lld bytes, the manifest says %llu", name,
                                  (long long) archive_entry_size(e), (unsigned long long) f->size);
        fd = openat(c->tree_fds[i], file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return aread_fail(c, -errno, "cannot make %s: %s", name, strerror(errno));
        r = ctl_hasher_init(&h);
        if (r == 0)
                r = aread_data(c, name, fd, f->size, &h, &n);
        if (h.state)
                ctl_hasher_finish(&h, hex);
        if (close(fd) < 0 && r == 0)
                r = aread_fail(c, -errno, "cannot write %s: %s", name, strerror(errno));
        if (r == 0 && (n != f->size || strcmp(hex, f->hex) != 0))
                r = aread_fail(c, -EBADMSG, "%s %s: the archive is damaged", name,
                               n != f->size ? "is cut short" : "was changed: its digest is not the manifest's");
        c->st->files += r == 0;
        c->st->image_bytes += r == 0 ? n : 0;
        return r;
}

/* At the end: every file of the manifest came, and the stream is read to
 * its end (its zstd checksum checked, and the writer done: a dump through
 * a pipe ends its job before it closes it). */
static int aread_complete(aread *c) {
        uint64_t after = 0;
        const void *data;
        ssize_t k;

        if (!c->seen)
                return aread_fail(c, -EBADMSG, "it holds no %s", CTL_MANIFEST_NAME);
        while ((k = ctl_zin_read(&c->z, &data)) > 0)
                if ((after += (uint64_t) k) > AREAD_AFTER_MAX)
                        return aread_fail(c, -EBADMSG, "more than %d bytes follow the end of its tar stream",
                                          AREAD_AFTER_MAX);
        if (k < 0)
                return aread_fail(c, (int) k, "%s", c->z.why);
        for (size_t i = 0; i < c->m->n_trees; i++)
                for (size_t j = 0; j < c->m->trees[i].files->n; j++)
                        if (!c->seen[i][j])
                                return aread_fail(c, -EBADMSG, "%s/%s is missing from it", c->m->trees[i].images,
                                                  c->m->trees[i].files->files[j].name);
        return 0;
}

/* The next entry's header, its stream bounded by AREAD_HEADER_MAX. */
static int aread_next_header(aread *c, struct archive_entry **e) {
        int k;

        c->in_header = true;
        c->header_bytes = 0;
        k = archive_read_next_header(c->ar, e);
        c->in_header = false;
        return k;
}

static int aread_entries(aread *c) {
        struct archive_entry *e;
        int r = 0, k;

        while (r == 0 && (k = aread_next_header(c, &e)) != ARCHIVE_EOF) {
                const char *name;

                if (k != ARCHIVE_OK)
                        return aread_fail(c, c->z.r < 0 ? c->z.r : -EBADMSG, "%s",
                                          c->z.r < 0 ? c->z.why : archive_error_string(c->ar));
                name = archive_entry_pathname(e);
                r = c->seen ? aread_file(c, e, name) : aread_manifest(c, e, name);
        }
        return r == 0 ? aread_complete(c) : r;
}

int ctl_archive_read(int in_fd, int dir_fd, const ctl_archive_limits *lim, ctl_manifest *ret, ctl_archive_stats *st,
                     char *err, size_t err_size) {
        aread c = { .dir_fd = dir_fd, .lim = lim, .m = ret, .st = st, .err = err, .err_size = err_size };
        double t0 = monotime_ms_exact();
        int r;

        *st = (ctl_archive_stats) { 0 };
        c.buf = malloc(AREAD_BUF);
        c.ar = archive_read_new();
        r = c.buf && c.ar ? ctl_zin_open(&c.z, in_fd) : -ENOMEM;
        if (r == 0 && (archive_read_support_format_tar(c.ar) != ARCHIVE_OK ||
                       archive_read_open(c.ar, &c, NULL, aread_cb, NULL) != ARCHIVE_OK))
                r = aread_fail(&c, c.z.r < 0 ? c.z.r : -EBADMSG, "%s",
                               c.z.r < 0 ? c.z.why : archive_error_string(c.ar));
        else if (r < 0)
                aread_fail(&c, r, "out of memory");
        if (r == 0)
                r = aread_entries(&c);
        st->stream_bytes = c.z.in_bytes;
        st->ms = monotime_ms_exact() - t0;
        for (size_t i = 0; c.tree_fds && i < ret->n_trees; i++)
                if (c.tree_fds[i] >= 0)
                        close(c.tree_fds[i]);
        for (size_t i = 0; c.seen && i < ret->n_trees; i++)
                free(c.seen[i]);
        free(c.seen);
        free(c.tree_fds);
        if (c.ar)
                archive_read_free(c.ar);
        ctl_zin_free(&c.z);
        free(c.buf);
        return r;
}
