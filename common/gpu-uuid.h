/* gpu-uuid.h: GPU UUIDs as clients write them, parsed once for the daemon
 * (varlink/uuid.c, into the driver's CUuuid) and cudackptctl (restore
 * --images matching its --device-map against the manifest's GPUs).
 *
 * Accepted spellings: "GPU-" followed by the 8-4-4-4-12 form nvidia-smi
 * prints, or 32 hex digits with optional hyphens between digits (the form
 * cuda.core takes), in either case.  Anything else is refused. */
#ifndef CUDACKPT_COMMON_GPU_UUID_H
#define CUDACKPT_COMMON_GPU_UUID_H

#include <stdbool.h>

#define GPU_UUID_BYTES 16
#define GPU_UUID_STRING_MAX 41 /* "GPU-" + 36 + NUL */

/* 0 and the 16 bytes, or -EINVAL. */
int gpu_uuid_parse(const char *s, unsigned char ret[GPU_UUID_BYTES]);

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", lower case. */
void gpu_uuid_format(const unsigned char u[GPU_UUID_BYTES], char buf[GPU_UUID_STRING_MAX]);

/* Whether a and b both parse, to the same UUID. */
bool gpu_uuid_same(const char *a, const char *b);

#endif
