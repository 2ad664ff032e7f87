/* zstream.c: zstd over a descriptor (see zstream.h).  Writes are whole
 * (EINTR retried, a short write continued); SIGPIPE is the caller's to
 * ignore, so that a closed pipe is an EPIPE here. */
#include "zstream.h"
#include "fdio.h"

#include <zstd.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ctl_zout_open(ctl_zout *z, int fd, int level, int threads) {
        *z = (ctl_zout) { .fd = fd, .size = ZSTD_CStreamOutSize() };
        z->cctx = ZSTD_createCCtx();
        z->buf = malloc(z->size);
        if (!z->cctx || !z->buf)
                return -ENOMEM;
        if (ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_compressionLevel, level)) ||
            ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_checksumFlag, 1)))
                return -EINVAL;
        /* A libzstd built without threads compresses in this one. */
        if (threads > 1)
                (void) ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_nbWorkers, threads);
        return 0;
}

/* Feeds in (possibly empty) with mode until zstd has taken it all and,
 * for a flush or an end, written all it holds. */
static int zout_feed(ctl_zout *z, const void *data, size_t len, ZSTD_EndDirective mode) {
        ZSTD_inBuffer in = { data, len, 0 };
        size_t left;

        if (z->r < 0)
                return z->r;
        do {
                ZSTD_outBuffer out = { z->buf, z->size, 0 };

                left = ZSTD_compressStream2(z->cctx, &out, &in, mode);
                if (ZSTD_isError(left))
                        return z->r = -EIO;
                z->r = fdio_write_all(z->fd, z->buf, out.pos);
                if (z->r < 0)
                        return z->r;
                z->out_bytes += out.pos;
        } while (mode == ZSTD_e_continue ? in.pos < in.size : left != 0);
        z->in_bytes += len;
        return 0;
}

int ctl_zout_write(ctl_zout *z, const void *data, size_t len) {
        return zout_feed(z, data, len, ZSTD_e_continue);
}

int ctl_zout_finish(ctl_zout *z) {
        return zout_feed(z, NULL, 0, ZSTD_e_end);
}

void ctl_zout_free(ctl_zout *z) {
        ZSTD_freeCCtx(z->cctx);
        free(z->buf);
        z->cctx = NULL;
        z->buf = NULL;
}

int ctl_zin_open(ctl_zin *z, int fd) {
        *z = (ctl_zin) { .fd = fd, .in_size = ZSTD_DStreamInSize(), .out_size = ZSTD_DStreamOutSize(), .last = 1 };
        z->dctx = ZSTD_createDCtx();
        z->in = malloc(z->in_size);
        z->out = malloc(z->out_size);
        return z->dctx && z->in && z->out ? 0 : -ENOMEM;
}

static ssize_t zin_fail(ctl_zin *z, int r, const char *why) {
        snprintf(z->why, sizeof(z->why), "%s", why);
        return z->r = r;
}

ssize_t ctl_zin_read(ctl_zin *z, const void **ret_data) {
        if (z->r < 0)
                return z->r;
        for (;;) {
                ZSTD_outBuffer out = { z->out, z->out_size, 0 };
                ZSTD_inBuffer in = { z->in, z->in_len, z->in_pos };

                if (z->in_pos == z->in_len && !z->eof) {
                        ssize_t k = read(z->fd, z->in, z->in_size);

                        if (k < 0 && errno == EINTR)
                                continue;
                        if (k < 0)
                                return zin_fail(z, -errno, strerror(errno));
                        z->eof = k == 0;
                        z->in_pos = 0;
                        z->in_len = (size_t) k;
                        z->in_bytes += (uint64_t) k;
                        continue;
                }
                /* Every frame ended and flushed: the stream's end; else it was cut short. */
                if (z->in_pos == z->in_len && z->eof && !z->pending)
                        return z->last == 0       ? 0
                               : z->in_bytes == 0 ? zin_fail(z, -EBADMSG, "the stream is empty")
                                                  : zin_fail(z, -EBADMSG, "the stream ends in the middle of a zstd frame");
                z->last = ZSTD_decompressStream(z->dctx, &out, &in);
                if (ZSTD_isError(z->last))
                        return zin_fail(z, -EBADMSG, ZSTD_getErrorName(z->last));
                z->in_pos = in.pos;
                /* A full buffer may leave output inside zstd. */
                z->pending = out.pos == out.size && z->last != 0;
                if (out.pos > 0) {
                        *ret_data = z->out;
                        return (ssize_t) out.pos;
                }
        }
}

void ctl_zin_free(ctl_zin *z) {
        ZSTD_freeDCtx(z->dctx);
        free(z->in);
        free(z->out);
        z->dctx = NULL;
        z->in = z->out = NULL;
}
