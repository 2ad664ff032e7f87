/* criulog.c: what criu said, shown (criulog.h). */
#include "criulog.h"

#include "describe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void ctl_criu_print_lines(const char *text) {
        char *copy = strdup(text), *nl;

        for (char *line = copy; line && *line; line = nl ? nl + 1 : NULL) {
                nl = strchr(line, '\n');
                if (nl)
                        *nl = '\0';
                fputs("  ", stderr);
                ctl_fputs_safe(line, stderr);
                fputc('\n', stderr);
        }
        free(copy);
}

void ctl_criu_print_log_tail(int dir_fd, const char *name, int lines) {
        int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
        char *buf = NULL, *p, *start;
        size_t cap = 0, len = 0;
        int seen = 0;

        if (!f) {
                fprintf(stderr, "  (cannot read %s: %s)\n", name, strerror(errno));
                if (fd >= 0)
                        close(fd);
                return;
        }
        /* The whole log is a few MB at most: read it, print its end. */
        for (;;) {
                if (cap - len < 4096) {
                        char *nb = realloc(buf, cap ? 2 * cap : 65536);
                        if (!nb)
                                break;
                        buf = nb;
                        cap = cap ? 2 * cap : 65536;
                }
                size_t k = fread(buf + len, 1, cap - len - 1, f);
                if (k == 0)
                        break;
                len += k;
        }
        fclose(f);
        if (!buf)
                return;
        buf[len] = '\0';
        start = buf;
        for (p = buf + len; p > buf; p--)
                if (p[-1] == '\n' && p != buf + len && ++seen == lines) {
                        start = p;
                        break;
                }
        ctl_criu_print_lines(start);
        free(buf);
}
