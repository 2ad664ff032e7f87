/* zstream.h: a zstd stream over a file descriptor (libzstd), as the
 * archive's tar writer and reader use it: the writer compresses with
 * libzstd's worker threads, the reader decompresses block by block. */
#ifndef CUDACKPT_CTL_ZSTREAM_H
#define CUDACKPT_CTL_ZSTREAM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct ctl_zout {
        int fd;
        void *cctx;                       /* ZSTD_CCtx */
        unsigned char *buf;
        size_t size;
        uint64_t in_bytes, out_bytes;
        int r;                            /* the first -errno */
} ctl_zout;

typedef struct ctl_zin {
        int fd;
        void *dctx;                       /* ZSTD_DCtx */
        unsigned char *in, *out;
        size_t in_size, in_pos, in_len, out_size;
        size_t last;                      /* ZSTD_decompressStream()'s last hint: 0 at a frame's end */
        int eof;
        int pending;                      /* the last call filled the buffer: more may be inside zstd */
        uint64_t in_bytes;
        int r;                            /* the first -errno (-EBADMSG: not a zstd stream, or cut short) */
        char why[128];
} ctl_zin;

/* Compressing into fd at level with up to threads workers. */
int ctl_zout_open(ctl_zout *z, int fd, int level, int threads);
/* len bytes of data compressed and written (all of them); 0 or -errno. */
int ctl_zout_write(ctl_zout *z, const void *data, size_t len);
/* The stream ended (its last frame flushed); 0 or -errno. */
int ctl_zout_finish(ctl_zout *z);
void ctl_zout_free(ctl_zout *z);

int ctl_zin_open(ctl_zin *z, int fd);
/* Up to some bytes decompressed into *ret_data: their count, 0 at the
 * stream's end, -errno (z->why says) when it is damaged or cut short. */
ssize_t ctl_zin_read(ctl_zin *z, const void **ret_data);
void ctl_zin_free(ctl_zin *z);

#endif
