/* runinherit.c: what a job gets of the run command's process
 * (runinherit.h).
 *
 * Why a tenant's job gets nothing of root's: the job lives on after the
 * run command returns, as the user.  A descriptor of root's terminal lets
 * it read what root types next, write escape sequences to it, and ioctl
 * it; any other descriptor root's caller left open is root's resource
 * too; an ignored signal (a shell's `&` ignores SIGINT and SIGQUIT) would
 * stay ignored in the job; and root's environment may hold root's
 * secrets (a token, a proxy's credentials).  What CRIU must then dump is
 * /dev/null and a regular file, both reopened by path on restore. */
#include "runinherit.h"

#include "safedir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char **environ;

/* Whether e ("NAME=VALUE") of root's environment goes to a tenant's job
 * (CTL_RUN_ENV_KEPT). */
static bool inherit_env_kept(const char *e) {
        static const char *const keep[] = { "PATH=", "LANG=", "LANGUAGE=", "LC_", "TZ=", "CUDACKPT_" };

        for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
                if (strncmp(e, keep[i], strlen(keep[i])) == 0)
                        return true;
        return false;
}

/* A tenant's environment into h->env: the kept names, then HOME, USER
 * and LOGNAME of user's passwd entry ("" or none: left out). */
static int inherit_env(ctl_run_inherit *h, const char *user) {
        struct passwd *pw = user[0] ? getpwnam(user) : NULL;
        size_t n = 0, k = 0;

        while (environ[n])
                n++;
        h->env = calloc(n + 4, sizeof(char *));
        if (!h->env)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (inherit_env_kept(environ[i]) && !(h->env[k++] = strdup(environ[i])))
                        return -ENOMEM;
        if (pw && (asprintf(&h->env[k++], "HOME=%s", pw->pw_dir) < 0 ||
                   asprintf(&h->env[k++], "USER=%s", pw->pw_name) < 0 ||
                   asprintf(&h->env[k++], "LOGNAME=%s", pw->pw_name) < 0)) {
                h->env[k - 1] = NULL;
                return -ENOMEM;
        }
        return 0;
}

/* fd moved above the standard descriptors (a caller may have started us
 * with one of them closed), close-on-exec; the new one, or -errno. */
static int inherit_high(int fd) {
        int high;

        if (fd > STDERR_FILENO)
                return fd;
        high = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
        high = high < 0 ? -errno : high;
        close(fd);
        return high;
}

/* base in dir_fd: made (0600, the tenant's) or, already there, checked as
 * runinherit.h says; the descriptor or -errno (err said). */
static int inherit_open_in(int dir_fd, const char *path, const char *base, bool tenant, uid_t uid, gid_t gid,
                           char *err, size_t err_size) {
        const int flags = O_WRONLY | O_APPEND | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC;
        int fd = openat(dir_fd, base, flags | O_CREAT | O_EXCL, 0600), made = fd >= 0, r = 0;
        struct stat st;

        /* Already there: not opened blocking (a FIFO) before it is checked. */
        if (fd < 0 && errno == EEXIST)
                fd = openat(dir_fd, base, flags | O_NONBLOCK);
        if (fd < 0) {
                r = -errno;
                snprintf(err, err_size, "cannot open %s: %s", path,
                         r == -ELOOP ? "it is a symbolic link" : strerror(-r));
                return r;
        }
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
            (st.st_uid != 0 && (!tenant || st.st_uid != uid)))
                r = -EPERM;
        else if ((made && tenant && fchown(fd, uid, gid) < 0) || fcntl(fd, F_SETFL, O_APPEND) < 0)
                r = -errno;
        if (r == -EPERM)
                snprintf(err, err_size, "%s is not a regular file of one link, root's%s", path,
                         tenant ? " or the user's" : "");
        else if (r < 0)
                snprintf(err, err_size, "%s: %s", path, strerror(-r));
        if (r < 0) {
                if (made)
                        (void) unlinkat(dir_fd, base, 0);
                close(fd);
                return r;
        }
        return inherit_high(fd);
}

/* An ignored signal stays ignored across exec (a handler cannot be here:
 * exec resets it), so every one is set back to SIG_DFL, by the system call
 * itself: glibc's sigaction() refuses the two signals it keeps for its
 * threads (32 and 33), which a parent that ignores them passes on too.  A
 * kernel sigaction of all zeros is SIG_DFL, no flags, an empty mask,
 * whatever the architecture's layout of the structure. */
static void run_inherit_default_signals(void) {
        unsigned long dfl[4] = { 0 };

        for (int sig = 1; sig < _NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        (void) syscall(SYS_rt_sigaction, sig, dfl, NULL, (size_t) (_NSIG / 8));
}

/* --output's file (runinherit.h); the descriptor or -errno (err said). */
static int inherit_output(const char *path, bool tenant, uid_t uid, gid_t gid, char *err, size_t err_size) {
        const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
        char dir[PATH_MAX], why[PATH_MAX + 256];
        int dir_fd, r;

        if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
                snprintf(err, err_size, "%s does not name a file", path);
                return -EINVAL;
        }
        /* A bare name: the working directory (the walk starts there). */
        if ((size_t) snprintf(dir, sizeof(dir), "%.*s", slash ? (int) (slash - path) + 1 : 0, path) >= sizeof(dir)) {
                snprintf(err, err_size, "%s: %s", path, strerror(ENAMETOOLONG));
                return -ENAMETOOLONG;
        }
        r = ctl_safedir_open(dir, false, &dir_fd, why, sizeof(why));
        if (r < 0) {
                snprintf(err, err_size, "%s's directory must be root's, writable by root alone: %s", path, why);
                return r;
        }
        r = inherit_open_in(dir_fd, path, base, tenant, uid, gid, err, err_size);
        close(dir_fd);
        return r;
}

int ctl_run_inherit_make(ctl_run_inherit *h, bool tenant, uid_t uid, gid_t gid, const char *user,
                         const char *output, char *err, size_t err_size) {
        int r = 0;

        *h = (ctl_run_inherit) { .tenant = tenant, .out_fd = -1, .env = tenant ? NULL : environ };
        if (output) {
                r = inherit_output(output, tenant, uid, gid, err, err_size);
                if (r < 0)
                        return r;
                h->out_fd = r;
        }
        if (tenant) {
                r = inherit_env(h, user);
                if (r < 0) {
                        snprintf(err, err_size, "the job's environment: %s", strerror(-r));
                        ctl_run_inherit_free(h);
                        return r;
                }
        }
        return 0;
}

int ctl_run_inherit_apply(const ctl_run_inherit *h) {
        int null, out;

        if (!h->tenant && h->out_fd < 0)
                return 0;
        null = open("/dev/null", O_RDWR | O_CLOEXEC);
        null = null < 0 ? -errno : inherit_high(null);
        if (null < 0)
                return null;
        out = h->out_fd >= 0 ? h->out_fd : null;
        if (dup2(null, STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0 || dup2(out, STDERR_FILENO) < 0)
                return -errno;
        close(null);
        if (!h->tenant)
                return 0;
        /* Closed at the exec of cudackpt-init: the report pipe is made
         * inheritable again after this, on its own. */
        if (close_range(STDERR_FILENO + 1, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
                return -errno;
        run_inherit_default_signals();
        return 0;
}

void ctl_run_inherit_free(ctl_run_inherit *h) {
        if (h->out_fd >= 0)
                close(h->out_fd);
        h->out_fd = -1;
        if (h->tenant && h->env) {
                for (size_t i = 0; h->env[i]; i++)
                        free(h->env[i]);
                free(h->env);
        }
        h->env = NULL;
}
