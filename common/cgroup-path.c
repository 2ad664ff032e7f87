/* cgroup-path.c: the check of a cgroup v2 path (cgroup-path.h). */
#include "cgroup-path.h"

#include <errno.h>
#include <string.h>

int cgroup_path_check(const char *path, size_t *ret_len) {
        size_t n;

        if (path[0] != '/' || (n = strlen(path)) >= 4096)
                return -EINVAL;
        while (n > 1 && path[n - 1] == '/')
                n--;
        for (size_t i = 1; i < n;) {
                size_t j = i;

                while (j < n && path[j] != '/')
                        j++;
                if (j == i || (j - i == 1 && path[i] == '.') ||
                    (j - i == 2 && path[i] == '.' && path[i + 1] == '.'))
                        return -EINVAL;
                i = j + 1;
        }
        if (ret_len)
                *ret_len = n;
        return 0;
}
