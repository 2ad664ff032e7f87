/* runuser.c: the command's directory, output and environment, taken as
 * its user (runuser.h).  Part of cudackpt-init: libc only. */
#include "runuser.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

/* The output: opened by the user (its rights, its umask 022: mode 0644
 * when made), on stdout and stderr.  0 or -errno. */
static int user_output(const char *path) {
        mode_t old = umask(022);
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOCTTY | O_CLOEXEC, 0666), r = 0;

        (void) umask(old);
        if (fd < 0)
                return -errno;
        if (dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0)
                r = -errno;
        if (fd > STDERR_FILENO)
                close(fd);
        return r;
}

/* The memfd's entries (checked by the run command: each NUL-terminated,
 * with '=') as environ.  0 or -errno; fd closed. */
static int user_env(int fd) {
        struct stat st;
        char *buf = NULL, **env = NULL;
        size_t n = 0, off = 0;
        int r = 0;

        if (fstat(fd, &st) < 0)
                r = -errno;
        else if (!(buf = malloc((size_t) st.st_size + 1)))
                r = -ENOMEM;
        else if (pread(fd, buf, (size_t) st.st_size, 0) != st.st_size)
                r = -EIO;
        close(fd);
        for (off_t i = 0; r == 0 && i < st.st_size; i++)
                n += buf[i] == '\0';
        if (r == 0 && !(env = calloc(n + 1, sizeof(char *))))
                r = -ENOMEM;
        if (r < 0) {
                free(buf);
                return r;
        }
        for (size_t k = 0; k < n; k++) {
                env[k] = buf + off;
                off += strlen(buf + off) + 1;
        }
        environ = env;
        return 0;
}

int ctl_run_user_enter(const ctl_run_user *u, int *ret_step) {
        int r = 0;

        *ret_step = 0;
        if (u->chdir && chdir(u->chdir) < 0)
                return -errno;
        *ret_step = 1;
        if (u->output && (r = user_output(u->output)) < 0)
                return r;
        *ret_step = 2;
        return u->env_fd >= 0 ? user_env(u->env_fd) : 0;
}
