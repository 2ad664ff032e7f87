/* criubarrier.c: the action script through which every criu of a job
 * waits for the others (criu.c's barrier), and its side in that script.
 *
 * criu executes an action script's path as it is given, without a shell
 * or arguments, at each step.  dump's and restore's script,
 * PRIVATE_DIR/barrier.sh, first runs the user's own --action-script
 * options (criu 4.2 runs every action script even after one failed, and
 * fails afterwards: so theirs run inside this one, and their failure at
 * post-dump or post-restore fails it without reaching the barrier), then,
 * at post-dump or post-restore (images written and tasks frozen; tasks
 * restored and not yet running), runs "cudackptctl criu-barrier SOCKET":
 * that connects to the command and waits for one byte, 'g' to go on. */
#include "criubarrier.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int ctl_criu_barrier_main(const char *sock) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        const char *action = getenv("CRTOOLS_SCRIPT_ACTION");
        char c = 0;
        ssize_t k;
        int fd;

        /* CRIU runs action scripts at every step; only these two wait. */
        if (!action || (strcmp(action, "post-dump") != 0 && strcmp(action, "post-restore") != 0))
                return 0;
        if (strlen(sock) >= sizeof(sa.sun_path))
                return 1;
        strcpy(sa.sun_path, sock);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                fprintf(stderr, "cudackptctl criu-barrier: cannot reach cudackptctl: %s\n", strerror(errno));
                return 1;
        }
        while ((k = read(fd, &c, 1)) < 0 && errno == EINTR)
                ;
        close(fd);
        if (k == 1 && c == 'g')
                return 0;
        fputs("cudackptctl criu-barrier: another tree of the job failed, or cudackptctl ended: not going on "
              "with this tree\n", stderr);
        return 1;
}

bool ctl_criu_is_action_script(char **criu_argv, size_t k, size_t *ret_skip) {
        if (strncmp(criu_argv[k], "--action-script=", 16) == 0) {
                *ret_skip = 0;
                return true;
        }
        if (strcmp(criu_argv[k], "--action-script") == 0 && criu_argv[k + 1]) {
                *ret_skip = 1;
                return true;
        }
        return false;
}

/* The user's --action-script scripts, in the order criu would run them
 * (it runs the last given first), each quoted for sh, to the script f. */
static int barrier_write_user_scripts(FILE *f, char **criu_argv) {
        size_t n = 0, skip;

        while (criu_argv[n])
                n++;
        for (size_t k = n; k-- > 0;) {
                const char *path;

                if (!ctl_criu_is_action_script(criu_argv, k, &skip))
                        continue;
                path = skip ? criu_argv[k + 1] : criu_argv[k] + 16;
                if (strchr(path, '\''))
                        return -EINVAL;
                fprintf(f, "'%s' || rc=1\n", path);
        }
        return 0;
}

/* The path of this program, which the script runs again; NULL (said) when
 * it is gone or cannot be quoted. */
static bool barrier_self(const char *prefix, const char *sock, char *self, size_t size) {
        ssize_t k = readlink("/proc/self/exe", self, size - 1);

        if (k <= 0)
                return false;
        self[k] = '\0';
        if ((size_t) k > 10 && strcmp(self + k - 10, " (deleted)") == 0) {
                fprintf(stderr, "%s%s was removed or replaced since this command started (criu's action script "
                        "runs it)\n", prefix, self);
                errno = ESTALE;
                return false;
        }
        /* Quoted for sh: no path may hold a quote. */
        if (strchr(self, '\'') || strchr(sock, '\'')) {
                fprintf(stderr, "%sthe path of cudackptctl or of the barrier's socket holds a quote\n", prefix);
                errno = EINVAL;
                return false;
        }
        return true;
}

char *ctl_criu_barrier_script(const char *prefix, const char *dir, const char *sock, char **criu_argv) {
        char self[PATH_MAX], *path = NULL;
        FILE *f;
        int r;

        if (!barrier_self(prefix, sock, self, sizeof(self)))
                return NULL;
        if (asprintf(&path, "%s/barrier.sh", dir) < 0)
                return NULL;
        f = fopen(path, "wxe");
        if (!f || fchmod(fileno(f), 0700) < 0) {
                if (f)
                        fclose(f);
                free(path);
                return NULL;
        }
        fputs("#!/bin/sh\n# cudackptctl dump, restore --images: every tree's criu waits here\nrc=0\n", f);
        r = barrier_write_user_scripts(f, criu_argv);
        fprintf(f, "case \"$CRTOOLS_SCRIPT_ACTION\" in post-dump|post-restore) ;; *) exit $rc;; esac\n"
                   "[ $rc = 0 ] || exit 1\nexec '%s' criu-barrier '%s'\n", self, sock);
        if (fclose(f) != 0 || r < 0) {
                if (r < 0) {
                        fprintf(stderr, "%sthe path of an --action-script holds a quote\n", prefix);
                        errno = -r;
                }
                unlink(path);
                free(path);
                return NULL;
        }
        return path;
}
