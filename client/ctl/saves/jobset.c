/* jobset.c: the part saves' names of a job saved across nodes (jobset.h). */
#include "jobset.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

uint32_t jobset_node_hash(const char *node) {
        uint32_t h = 2166136261u;

        for (const unsigned char *p = (const unsigned char *)node; *p; p++) {
                h ^= *p;
                h *= 16777619u;
        }
        return h;
}

int jobset_part_name(const char *save, uint32_t gen, uint32_t node_hash, char *buf, size_t size) {
        size_t n = strlen(save);

        if (n == 0 || n > JOBSET_SAVE_MAX || gen == 0 || size < n + JOBSET_SUFFIX_LEN + 1)
                return -EINVAL;
        snprintf(buf, size, "%s.g%08x.n%08x", save, (unsigned)gen, (unsigned)node_hash);
        return 0;
}

/* 8 lower-case hex digits at s: true with *ret. */
static bool jobset_hex8(const char *s, uint32_t *ret) {
        uint32_t v = 0;

        for (int i = 0; i < 8; i++) {
                char c = s[i];

                if (c >= '0' && c <= '9')
                        v = v << 4 | (uint32_t)(c - '0');
                else if (c >= 'a' && c <= 'f')
                        v = v << 4 | (uint32_t)(c - 'a' + 10);
                else
                        return false;
        }
        *ret = v;
        return true;
}

bool jobset_part_parse(const char *name, const char *save, uint32_t node_hash, uint32_t *ret_gen) {
        size_t n = strlen(save);
        uint32_t gen, hash;

        if (strlen(name) != n + JOBSET_SUFFIX_LEN || strncmp(name, save, n) != 0)
                return false;
        name += n;
        if (strncmp(name, ".g", 2) != 0 || !jobset_hex8(name + 2, &gen) || strncmp(name + 10, ".n", 2) != 0 ||
            !jobset_hex8(name + 12, &hash) || gen == 0 || hash != node_hash)
                return false;
        *ret_gen = gen;
        return true;
}
