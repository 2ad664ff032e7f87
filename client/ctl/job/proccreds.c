/* proccreds.c: a process's group credentials (proccreds.h). */
#include "proccreds.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The numbers of a "Groups:" line appended to *groups (as many as memory
 * allows: fewer groups only grant less). */
static void creds_groups(const char *p, gid_t **groups, size_t *n) {
        for (;;) {
                char *end;
                unsigned long g = strtoul(p, &end, 10);
                gid_t *v;

                if (end == p)
                        return;
                v = realloc(*groups, (*n + 1) * sizeof(*v));
                if (!v)
                        return;
                *groups = v;
                (*groups)[(*n)++] = (gid_t) g;
                p = end;
        }
}

int ctl_proc_creds(int pid, gid_t *ret_gid, gid_t **ret_groups, size_t *ret_n) {
        char path[64], *line = NULL;
        size_t len = 0;
        bool gid = false;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/status", pid);
        f = fopen(path, "re");
        if (!f)
                return -errno;
        while (getline(&line, &len, f) > 0) {
                unsigned long v[4];

                if (sscanf(line, "Gid: %lu %lu %lu %lu", &v[0], &v[1], &v[2], &v[3]) == 4) {
                        *ret_gid = (gid_t) v[3];
                        gid = true;
                } else if (strncmp(line, "Groups:", 7) == 0)
                        creds_groups(line + 7, ret_groups, ret_n);
        }
        free(line);
        fclose(f);
        return gid ? 0 : -EINVAL;
}
