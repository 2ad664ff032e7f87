/* criumntns.c: criu's words for a tree's mount namespace (criumntns.h). */
#include "criumntns.h"

size_t ctl_criu_mntns_words(const char **words, size_t n, bool mnt_ns, bool restore) {
        if (mnt_ns) {
                words[n++] = "--external";
                words[n++] = "mnt[]";
        }
        if (mnt_ns && restore) {
                words[n++] = "--root";
                words[n++] = "/";
        }
        words[n] = NULL;
        return n;
}
