/* savesetup.c: the saves feature's table at start (savesetup.h). */
#include "saves/savesetup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cudackpt/protocol.h"
#include "base/log.h"

extern char **environ;

/* One name on the way to the program: root's (or the daemon's user's),
 * not writable by others unless sticky (the program itself: not at all). */
static int check_one(const char *p, bool file, char *why, size_t whylen)
{
        struct stat st;

        if (stat(p, &st) < 0) {
                snprintf(why, whylen, "%s: %s", p, strerror(errno));
                return -errno;
        }
        if ((st.st_uid != 0 && st.st_uid != geteuid()) ||
            ((st.st_mode & (S_IWGRP | S_IWOTH)) && (file || !(st.st_mode & S_ISVTX)))) {
                snprintf(why, whylen, "%s may be changed by others than root", p);
                return -EPERM;
        }
        if (file && (!S_ISREG(st.st_mode) || access(p, X_OK) < 0)) {
                snprintf(why, whylen, "%s is no program", p);
                return -ENOEXEC;
        }
        return 0;
}

/* path (absolute, resolved) is a program only root may change, all the
 * way up: the daemon runs it as root. */
static int check_program(const char *path, char *why, size_t whylen)
{
        char dir[PATH_MAX], *slash;
        int r = check_one(path, true, why, whylen);

        snprintf(dir, sizeof(dir), "%s", path);
        while (r == 0 && (slash = strrchr(dir, '/'))) {
                *slash = '\0';
                r = check_one(dir[0] ? dir : "/", false, why, whylen);
                if (!dir[0])
                        break;
        }
        return r;
}

/* The configured cudackptctl, else the first one found beside the
 * daemon's own executable. */
static void find_ctl(struct saves *t)
{
        static const char *const beside[] = { "cudackptctl", "../bin/cudackptctl", "../client/cudackptctl" };
        char exe[PATH_MAX], path[PATH_MAX + 32], *slash;
        ssize_t n;

        if (t->cfg->ctl_path) {
                char *real = realpath(t->cfg->ctl_path, NULL);
                if (!real)
                        snprintf(t->ctl_why, sizeof(t->ctl_why), "%s: %s", t->cfg->ctl_path, strerror(errno));
                else if (check_program(real, t->ctl_why, sizeof(t->ctl_why)) == 0)
                        t->ctl = real;
                if (!t->ctl)
                        free(real);
                return;
        }
        n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (n <= 0 || !(exe[n] = '\0', slash = strrchr(exe, '/'))) {
                snprintf(t->ctl_why, sizeof(t->ctl_why), "the daemon's own path is not known: set ctl_path");
                return;
        }
        *slash = '\0';
        snprintf(t->ctl_why, sizeof(t->ctl_why), "no cudackptctl beside %.200s: set ctl_path", exe);
        for (size_t i = 0; i < sizeof(beside) / sizeof(beside[0]); i++) {
                snprintf(path, sizeof(path), "%s/%s", exe, beside[i]);
                char *real = access(path, X_OK) == 0 ? realpath(path, NULL) : NULL;
                if (!real)
                        continue;
                if (check_program(real, t->ctl_why, sizeof(t->ctl_why)) == 0)
                        t->ctl = real;
                else
                        free(real);
                return;
        }
}

/* The capabilities the commands need (run's namespaces, mounts and drop
 * to the user; CRIU's ptrace and file access), in both the bounding and
 * the effective set: the packaged unit's sandbox leaves most of them out
 * (cudackptd-jobs.conf lifts it). */
static void check_caps(struct saves *t)
{
        static const struct {
                int bit;
                const char *name;
        } need[] = { { 1, "CAP_DAC_OVERRIDE" }, { 6, "CAP_SETGID" }, { 7, "CAP_SETUID" },
                     { 19, "CAP_SYS_PTRACE" }, { 21, "CAP_SYS_ADMIN" } };
        unsigned long long bnd = 0, eff = 0;
        char line[256];
        FILE *f = fopen("/proc/self/status", "re");

        while (f && fgets(line, sizeof(line), f)) {
                (void)sscanf(line, "CapBnd: %llx", &bnd);
                (void)sscanf(line, "CapEff: %llx", &eff);
        }
        if (f)
                fclose(f);
        for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
                if (!(bnd & eff & (1ULL << need[i].bit))) {
                        snprintf(t->ctl_why, sizeof(t->ctl_why),
                                 "the daemon lacks %s, which its commands need (under systemd: "
                                 "the cudackptd-jobs.conf drop-in, docs/configuration.md)", need[i].name);
                        free(t->ctl);
                        t->ctl = NULL;
                        return;
                }
        /* CRIU reads a dumped process's resource limits (prlimit), which
         * another uid's needs this one. */
        t->others_unsaveable = !(bnd & eff & (1ULL << 24));
        if (t->others_unsaveable)
                log_warning("The daemon lacks CAP_SYS_RESOURCE: it runs users' jobs but can save only root's "
                            "(CRIU reads the resource limits of the processes it dumps)");
}

/* What the commands do not inherit: the daemon's own socket is named
 * anew, and systemd's words to the daemon are the daemon's alone. */
static bool dropped(const char *e)
{
        static const char *const names[] = { CUDACKPT_SOCKET_ENV, "NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID",
                                             "LISTEN_FDNAMES", "WATCHDOG_USEC", "WATCHDOG_PID" };

        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                if (strncmp(e, names[i], strlen(names[i])) == 0 && e[strlen(names[i])] == '=')
                        return true;
        return false;
}

/* The daemon's environment with CUDACKPT_SOCKET naming its own socket. */
static int build_env(struct saves *t)
{
        size_t n = 0, k = 0;

        while (environ[n])
                n++;
        t->env = calloc(n + 2, sizeof(char *));
        if (!t->env)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (!dropped(environ[i]))
                        t->env[k++] = strdup(environ[i]);
        if (asprintf(&t->env[k], "%s=%s", CUDACKPT_SOCKET_ENV, t->cfg->socket_path) < 0)
                t->env[k] = NULL;
        for (size_t i = 0; i <= k; i++)
                if (!t->env[i])
                        return -ENOMEM;
        return 0;
}

/* The sweep of what a daemon before this one left on this node
 * (savestore_sweep()), on a worker thread with a descriptor of its own. */
struct sweep {
        uv_work_t work;
        int fd;
        size_t n;
        int r;
};

static void sweep_work(uv_work_t *w)
{
        struct sweep *s = w->data;

        s->r = savestore_sweep(s->fd, &s->n);
}

static void sweep_after(uv_work_t *w, int status)
{
        struct sweep *s = w->data;

        if (status == 0 && s->r < 0)
                log_warning("Failed to sweep the saves directory: %s", strerror(-s->r));
        else if (status == 0 && s->n > 0)
                log_notice("Removed %zu unfinished dump(s) of this node's previous daemon from the saves directory",
                           s->n);
        close(s->fd);
        free(s);
}

static void sweep_start(struct saves *t)
{
        struct sweep *s = calloc(1, sizeof(*s));

        if (!s || (s->fd = fcntl(t->dir_fd, F_DUPFD_CLOEXEC, 3)) < 0) {
                free(s);
                return;
        }
        s->work.data = s;
        if (uv_queue_work(t->loop, &s->work, sweep_work, sweep_after) < 0) {
                close(s->fd);
                free(s);
        }
}

int savesetup_init(struct saves *t, const struct saves_deps *deps, char *why, size_t whylen)
{
        static const char *const job_keys[] = { "max_jobs", "max_jobs_per_uid", "max_jobs" };
        static const char *const op_keys[] = { "max_save_operations", "max_save_operations_per_uid",
                                               "max_save_operations" };
        const struct config *cfg = deps->cfg;
        int r;

        *t = (struct saves){ .loop = deps->loop, .cfg = cfg, .metrics = deps->metrics, .life = deps->life,
                             .dir_fd = -1, .barriers = { .loop = deps->loop, .cfg = cfg, .life = deps->life } };
        share_init(&t->jobs_share, job_keys, cfg->max_jobs, cfg->max_jobs_per_uid, 0);
        share_init(&t->ops_share, op_keys, cfg->max_save_operations, cfg->max_save_operations_per_uid, 0);
        savelocks_init(&t->locks, deps->loop, cfg, deps->life, deps->runtime_dir);
        find_ctl(t);
        if (t->ctl)
                check_caps(t);
        if (!t->ctl)
                log_warning("StartJob and RestoreJob are refused: %s", t->ctl_why);
        r = build_env(t);
        if (r < 0) {
                snprintf(why, whylen, "out of memory");
                return r;
        }
        if (!cfg->saves_dir)
                return 0;
        r = savestore_open(cfg->saves_dir, &t->dir_fd, why, whylen);
        if (r < 0)
                return r;
        log_info("Saves are kept in %s%s%s", cfg->saves_dir, t->ctl ? ", made by " : "", t->ctl ? t->ctl : "");
        sweep_start(t);
        return 0;
}

void savesetup_free(struct saves *t)
{
        if (t->env)
                for (char **e = t->env; *e; e++)
                        free(*e);
        free(t->env);
        free(t->ctl);
        if (t->dir_fd >= 0)
                close(t->dir_fd);
        share_free(&t->jobs_share);
        share_free(&t->ops_share);
        savebusy_free(&t->busy);
        savelocks_free(&t->locks);
        t->env = NULL;
        t->ctl = NULL;
        t->dir_fd = -1;
}
