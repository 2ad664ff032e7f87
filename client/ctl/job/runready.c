/* runready.c: the descriptor options and the ready line (runready.h). */
#include "runready.h"

#include "args.h"

#include <cJSON.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ctl_run_fd_arg(const char *s, int *ret) {
        unsigned long long v;

        if (ctl_parse_uint(s, 1U << 30, &v) < 0 || v <= STDERR_FILENO)
                return -EINVAL;
        if (fcntl((int) v, F_SETFD, FD_CLOEXEC) < 0)
                return -EBADF;
        *ret = (int) v;
        return 0;
}

int ctl_run_ready_write(int fd, const char *name, int pid, uint64_t start_time) {
        struct sigaction ign = { .sa_handler = SIG_IGN }, old;
        cJSON *o = cJSON_CreateObject();
        char *text = NULL, *line = NULL;
        size_t len = 0, off = 0;
        int r = 0;

        if (o && cJSON_AddStringToObject(o, "name", name) && cJSON_AddNumberToObject(o, "pid", pid) &&
            cJSON_AddNumberToObject(o, "start_time", (double) start_time))
                text = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (text) {
                len = strlen(text) + 1;
                line = realloc(text, len + 1);
        }
        if (!line) {
                free(text);
                close(fd);
                return -ENOMEM;
        }
        line[len - 1] = '\n';
        line[len] = '\0';
        /* A reader gone is an error here, not the end of the job's keeper. */
        sigaction(SIGPIPE, &ign, &old);
        while (off < len) {
                ssize_t k = write(fd, line + off, len - off);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        r = k < 0 ? -errno : -EIO;
                        break;
                }
                off += (size_t) k;
        }
        sigaction(SIGPIPE, &old, NULL);
        free(line);
        close(fd);
        return r;
}
