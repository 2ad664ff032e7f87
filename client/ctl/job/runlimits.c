/* runlimits.c: another process's resource limits and umask, taken
 * (runlimits.h). */
#include "runlimits.h"

#include "runjoin.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* /proc/PID/limits: a header and 16 lines of 80 columns. */
#define LIMITS_TEXT_MAX 4096

/* The kernel's names (fs/proc/base.c's lnames), in RLIMIT_* order. */
static const struct {
        const char *name;
        int resource;
} limits_names[] = {
        { "Max cpu time", RLIMIT_CPU },           { "Max file size", RLIMIT_FSIZE },
        { "Max data size", RLIMIT_DATA },         { "Max stack size", RLIMIT_STACK },
        { "Max core file size", RLIMIT_CORE },    { "Max resident set", RLIMIT_RSS },
        { "Max processes", RLIMIT_NPROC },        { "Max open files", RLIMIT_NOFILE },
        { "Max locked memory", RLIMIT_MEMLOCK },  { "Max address space", RLIMIT_AS },
        { "Max file locks", RLIMIT_LOCKS },       { "Max pending signals", RLIMIT_SIGPENDING },
        { "Max msgqueue size", RLIMIT_MSGQUEUE }, { "Max nice priority", RLIMIT_NICE },
        { "Max realtime priority", RLIMIT_RTPRIO }, { "Max realtime timeout", RLIMIT_RTTIME },
};

/* "unlimited" or a decimal number. */
static int limits_value(const char *s, char **end, rlim_t *ret) {
        if (strncmp(s, "unlimited", 9) == 0) {
                *ret = RLIM_INFINITY;
                *end = (char *) s + 9;
                return 0;
        }
        errno = 0;
        if (*s < '0' || *s > '9')
                return -EBADMSG;
        uintmax_t v = strtoumax(s, end, 10);
        if (errno || v >= RLIM_INFINITY)
                return -EBADMSG;
        *ret = (rlim_t) v;
        return 0;
}

/* One line of the table: its limit into ret (a name of the table), or
 * -ENOENT for the header, -EBADMSG for anything else. */
static int limits_line(const char *line, ctl_run_limits *ret) {
        for (size_t i = 0; i < sizeof(limits_names) / sizeof(limits_names[0]); i++) {
                size_t n = strlen(limits_names[i].name);
                struct rlimit rl;
                char *p, *end;

                if (strncmp(line, limits_names[i].name, n) != 0 || line[n] != ' ')
                        continue;
                for (p = (char *) line + n; *p == ' '; p++)
                        ;
                if (limits_value(p, &end, &rl.rlim_cur) < 0 || *end != ' ')
                        return -EBADMSG;
                for (p = end; *p == ' '; p++)
                        ;
                if (limits_value(p, &end, &rl.rlim_max) < 0 || rl.rlim_cur > rl.rlim_max ||
                    ret->n == CTL_RUN_LIMITS_MAX)
                        return -EBADMSG;
                ret->resource[ret->n] = limits_names[i].resource;
                ret->lim[ret->n++] = rl;
                return 0;
        }
        return strncmp(line, "Limit ", 6) == 0 ? -ENOENT : -EBADMSG;
}

int ctl_run_limits_parse(const char *text, ctl_run_limits *ret) {
        const char *line = text;

        ret->n = 0;
        while (*line) {
                const char *nl = strchr(line, '\n');
                char buf[256];
                size_t len = nl ? (size_t) (nl - line) : strlen(line);
                int r;

                if (len >= sizeof(buf))
                        return -EBADMSG;
                memcpy(buf, line, len);
                buf[len] = '\0';
                r = len ? limits_line(buf, ret) : 0;
                if (r < 0 && r != -ENOENT)
                        return r;
                line += len + (nl ? 1 : 0);
        }
        return ret->n ? 0 : -EBADMSG;
}

int ctl_run_limits_read(int pidfd, ctl_run_limits *ret, char *err, size_t err_size) {
        char text[LIMITS_TEXT_MAX];
        const char *u;
        int r = ctl_run_pidfd_read(pidfd, "limits", text, sizeof(text));

        *ret = (ctl_run_limits) { 0 };
        if (r == 0)
                r = ctl_run_limits_parse(text, ret);
        if (r == 0)
                r = ctl_run_pidfd_read(pidfd, "status", text, sizeof(text));
        if (r == 0 && (u = strstr(text, "\nUmask:\t")) != NULL) {
                ret->umask = (mode_t) (strtoul(u + 8, NULL, 8) & 0777);
                ret->has_umask = true;
        }
        if (r < 0)
                snprintf(err, err_size, "--limits-of=%d: %s", pidfd,
                         r == -EBADF ? "not a pidfd" : r == -EBADMSG ? "its limits cannot be read"
                                                                     : "its process has ended");
        return r;
}

/* A hard limit above this process's own needs CAP_SYS_RESOURCE (root has
 * it, a container's root may not): the job then gets this process's hard
 * limit, said on stderr, rather than no job at all. */
static int limits_set_one(int resource, struct rlimit want, char *err, size_t err_size) {
        struct rlimit own;

        if (setrlimit(resource, &want) == 0)
                return 0;
        if (errno != EPERM || getrlimit(resource, &own) < 0 || want.rlim_max <= own.rlim_max)
                goto fail;
        fprintf(stderr, "cudackptctl: run: note: limit %d's hard value is above run's own, which the job gets "
                "(no CAP_SYS_RESOURCE)\n", resource);
        want.rlim_max = own.rlim_max;
        if (want.rlim_cur > want.rlim_max)
                want.rlim_cur = want.rlim_max;
        if (setrlimit(resource, &want) == 0)
                return 0;
fail:
        snprintf(err, err_size, "--limits-of: cannot give the job limit %d of its caller: %s", resource,
                 strerror(errno));
        return -errno;
}

int ctl_run_limits_apply(const ctl_run_limits *l, char *err, size_t err_size) {
        for (size_t i = 0; i < l->n; i++) {
                int r = limits_set_one(l->resource[i], l->lim[i], err, err_size);

                if (r < 0)
                        return r;
        }
        if (l->has_umask)
                (void) umask(l->umask);
        return 0;
}
