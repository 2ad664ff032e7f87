/* archivewrite.c: a dump's image directory as one tar.zst stream, and back
 * (see archivewrite.h).  libarchive writes and parses the tar (pax) stream,
 * through callbacks into zstream.c's zstd; nothing here knows tar. */
#include "archivewrite.h"

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
#include <time.h>
#include <unistd.h>

#define ARCHIVE_BUF (1024 * 1024)
/* As manifest.c's own bound on the file. */
#define ARCHIVE_MANIFEST_MAX (16 * 1024 * 1024)

int ctl_archive_entry_name(const char *name, char *tree, size_t size, const char **ret_file) {
        const char *slash, *p;

        if (strcmp(name, CTL_MANIFEST_NAME) == 0)
                return 0;
        if (strncmp(name, "tree-", 5) != 0 || !(slash = strchr(name, '/')))
                return -EINVAL;
        /* A pid: 1 to 10 digits, no leading zero, as manifest.c names trees. */
        p = name + 5;
        if (slash == p || slash - p > 10 || *p == '0')
                return -EINVAL;
        for (; p < slash; p++)
                if (*p < '0' || *p > '9')
                        return -EINVAL;
        if (!ctl_digest_name_ok(slash + 1) || ctl_digest_skipped_name(slash + 1) || (size_t) (slash - name) >= size)
                return -EINVAL;
        memcpy(tree, name, (size_t) (slash - name));
        tree[slash - name] = '\0';
        *ret_file = slash + 1;
        return 1;
}

/* ---- writing ---------------------------------------------------------------- */

typedef struct awrite {
        struct archive *ar;
        ctl_zout z;
        unsigned char *buf;
        char *err;
        size_t err_size;
} awrite;

static la_ssize_t awrite_cb(struct archive *ar, void *data, const void *buf, size_t len) {
        awrite *w = data;

        (void) ar;
        return ctl_zout_write(&w->z, buf, len) < 0 ? -1 : (la_ssize_t) len;
}

static int awrite_fail(awrite *w, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int awrite_fail(awrite *w, int r, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(w->err, w->err_size, fmt, ap);
        va_end(ap);
        return r;
}

/* name (size bytes, from fd) as one entry; want: its digest, checked. */
static int awrite_file(awrite *w, const char *name, int fd, uint64_t size, const char *want) {
        struct archive_entry *e = archive_entry_new();
        char hex[CTL_DIGEST_HEX_SIZE];
        ctl_hasher h;
        ssize_t k;
        int r = e ? ctl_hasher_init(&h) : -ENOMEM;

        if (r < 0) {
                archive_entry_free(e);
                return awrite_fail(w, r, "out of memory");
        }
        archive_entry_set_pathname(e, name);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0600);
        archive_entry_set_size(e, (la_int64_t) size);
        archive_entry_set_mtime(e, time(NULL), 0);
        if (archive_write_header(w->ar, e) != ARCHIVE_OK)
                r = -EIO;
        archive_entry_free(e);
        while (r == 0 && h.bytes < size && (k = read(fd, w->buf, ARCHIVE_BUF)) != 0) {
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0 || (uint64_t) k > size - h.bytes)
                        r = k < 0 ? -errno : -EBADMSG;
                else if (archive_write_data(w->ar, w->buf, (size_t) k) != k)
                        r = -EIO;
                else
                        ctl_hasher_update(&h, w->buf, (size_t) k);
        }
        if (r == 0 && h.bytes != size)
                r = -EBADMSG;
        ctl_hasher_finish(&h, hex);
        if (r == 0 && want && strcmp(hex, want) != 0)
                r = -EBADMSG;
        if (r == -EBADMSG)
                return awrite_fail(w, r, "%s changed since it was hashed: not sent", name);
        if (r == -EIO)
                return awrite_fail(w, r, "cannot write the archive: %s",
                                   w->z.r < 0 ? strerror(-w->z.r) : archive_error_string(w->ar));
        return r < 0 ? awrite_fail(w, r, "%s: %s", name, strerror(-r)) : 0;
}

/* Every file of tree t's digests, from its directory in dir_fd. */
static int awrite_tree(awrite *w, int dir_fd, const ctl_manifest_tree *t, ctl_archive_stats *st) {
        char name[PATH_MAX];
        int tree_fd, r;

        r = ctl_safedir_sub(dir_fd, t->images, false, &tree_fd);
        if (r < 0)
                return awrite_fail(w, r, "%s: %s", t->images, strerror(-r));
        for (size_t i = 0; r == 0 && i < t->files->n; i++) {
                const ctl_digest_file *f = &t->files->files[i];
                int fd = openat(tree_fd, f->name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

                snprintf(name, sizeof(name), "%s/%s", t->images, f->name);
                if (fd < 0)
                        r = awrite_fail(w, -errno, "%s: %s", name, strerror(errno));
                else
                        r = awrite_file(w, name, fd, f->size, f->hex);
                if (fd >= 0)
                        close(fd);
                st->files += r == 0;
                st->image_bytes += r == 0 ? f->size : 0;
        }
        close(tree_fd);
        return r;
}

int ctl_archive_write(int dir_fd, const ctl_manifest *m, int out_fd, ctl_archive_stats *st, char *err,
                      size_t err_size) {
        awrite w = { .err = err, .err_size = err_size };
        double t0 = monotime_ms_exact();
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        struct stat mst;
        int fd = -1, r;

        *st = (ctl_archive_stats) { 0 };
        if (!ctl_manifest_has_digests(m))
                return awrite_fail(&w, -EINVAL, "the manifest has no digests");
        w.buf = malloc(ARCHIVE_BUF);
        w.ar = archive_write_new();
        r = w.buf && w.ar ? ctl_zout_open(&w.z, out_fd, CTL_ARCHIVE_ZSTD_LEVEL,
                                          cpus > CTL_ARCHIVE_MAX_THREADS ? CTL_ARCHIVE_MAX_THREADS : (int) cpus)
                          : -ENOMEM;
        if (r == 0 && (archive_write_set_format_pax_restricted(w.ar) != ARCHIVE_OK ||
                       archive_write_set_bytes_in_last_block(w.ar, 1) != ARCHIVE_OK ||
                       archive_write_open2(w.ar, &w, NULL, awrite_cb, NULL, NULL) != ARCHIVE_OK))
                r = -EIO;
        if (r < 0)
                awrite_fail(&w, r, "cannot start the archive: %s", strerror(-r));
        /* The manifest first: the reader knows every file before it comes. */
        if (r == 0) {
                fd = openat(dir_fd, CTL_MANIFEST_NAME, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
                r = fd < 0 || fstat(fd, &mst) < 0 || !S_ISREG(mst.st_mode)
                            ? awrite_fail(&w, -EIO, "cannot read %s back", CTL_MANIFEST_NAME)
                            : awrite_file(&w, CTL_MANIFEST_NAME, fd, (uint64_t) mst.st_size, NULL);
        }
        for (size_t i = 0; r == 0 && i < m->n_trees; i++)
                r = awrite_tree(&w, dir_fd, &m->trees[i], st);
        if (r == 0 && archive_write_close(w.ar) != ARCHIVE_OK)
                r = awrite_fail(&w, -EIO, "cannot end the archive: %s", archive_error_string(w.ar));
        if (r == 0 && ctl_zout_finish(&w.z) < 0)
                r = awrite_fail(&w, w.z.r, "cannot write the archive: %s", strerror(-w.z.r));
        if (fd >= 0)
                close(fd);
        st->stream_bytes = w.z.out_bytes;
        st->ms = monotime_ms_exact() - t0;
        if (w.ar)
                archive_write_free(w.ar);
        ctl_zout_free(&w.z);
        free(w.buf);
        return r;
}
