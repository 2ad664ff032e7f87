/* uuid.h: GPU UUIDs as clients write them (the spellings of
 * common/gpu-uuid.h) and as the driver takes them (CUuuid). */
#ifndef CUDACKPT_UUID_H
#define CUDACKPT_UUID_H

#include <stdbool.h>
#include "cuda-api.h"

#define UUID_STRING_MAX 41 /* "GPU-" + 36 + NUL */

int uuid_parse(const char *s, CUuuid *ret_uuid);
void uuid_format(const CUuuid *u, char buf[static UUID_STRING_MAX]);
bool uuid_equal(const CUuuid *a, const CUuuid *b);

#endif
