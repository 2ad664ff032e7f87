/* gpu-uuid.c: parsing and printing GPU UUIDs (gpu-uuid.h). */
#include "gpu-uuid.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static int hexval(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

int gpu_uuid_parse(const char *s, unsigned char ret[GPU_UUID_BYTES])
{
        static const int dashes[] = { 8, 12, 16, 20 }; /* digit counts before each '-' */
        unsigned char bytes[16];
        bool prefixed = false, prev_hyphen = true; /* no leading hyphen */
        int ndigits = 0, nhyphens = 0;

        if (!s)
                return -EINVAL;
        if (strncasecmp(s, "GPU-", 4) == 0) {
                prefixed = true;
                s += 4;
        }
        for (const char *p = s; *p; p++) {
                if (*p == '-') {
                        if (prev_hyphen)
                                return -EINVAL;
                        /* The nvidia-smi spelling has its hyphens in fixed places. */
                        if (prefixed && (nhyphens >= 4 || ndigits != dashes[nhyphens]))
                                return -EINVAL;
                        nhyphens++;
                        prev_hyphen = true;
                        continue;
                }
                int v = hexval(*p);
                if (v < 0 || ndigits >= 32)
                        return -EINVAL;
                if (ndigits % 2 == 0)
                        bytes[ndigits / 2] = (unsigned char)(v << 4);
                else
                        bytes[ndigits / 2] |= (unsigned char)v;
                ndigits++;
                prev_hyphen = false;
        }
        if (ndigits != 32 || prev_hyphen || (prefixed && nhyphens != 4))
                return -EINVAL;
        memcpy(ret, bytes, GPU_UUID_BYTES);
        return 0;
}

void gpu_uuid_format(const unsigned char b[GPU_UUID_BYTES], char buf[GPU_UUID_STRING_MAX])
{
        snprintf(buf, GPU_UUID_STRING_MAX,
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                 b[14], b[15]);
}

bool gpu_uuid_same(const char *a, const char *b)
{
        unsigned char x[GPU_UUID_BYTES], y[GPU_UUID_BYTES];

        return gpu_uuid_parse(a, x) == 0 && gpu_uuid_parse(b, y) == 0 && memcmp(x, y, GPU_UUID_BYTES) == 0;
}
