/* runjoin.c: the cgroups of a pidfd's process, joined (runjoin.h). */
#include "runjoin.h"

#include "host.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* /proc/PID/cgroup is small: a line per hierarchy. */
#define JOIN_CGROUP_TEXT_MAX 16384

/* The pid of pidfd (its fdinfo's "Pid:"): 0, -EBADF (not a pidfd) or
 * -ESRCH (its process has ended, or is outside this pid namespace). */
static int join_pid(int pidfd, int *ret) {
        char path[64], text[2048];
        const char *p;

        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
        if (ctl_host_read_file(path, text, sizeof(text)) < 0 || !(p = strstr(text, "\nPid:\t")))
                return -EBADF;
        *ret = atoi(p + 6);
        return *ret > 0 ? 0 : -ESRCH;
}

/* Whether the mount's super options (opts, comma-separated) hold every
 * controller of ctrls (comma-separated, as /proc/PID/cgroup names them). */
static bool join_has_controllers(const char *opts, const char *ctrls, size_t ctrls_len) {
        for (size_t i = 0; i < ctrls_len;) {
                size_t len = strcspn(ctrls + i, ",:"), olen;
                bool found = false;

                if (len > ctrls_len - i)
                        len = ctrls_len - i;
                for (const char *o = opts; *o && !found; o += olen + (o[olen] == ',')) {
                        olen = strcspn(o, ",\n");
                        found = olen == len && strncmp(o, ctrls + i, len) == 0;
                }
                if (!found)
                        return false;
                i += len + 1;
        }
        return true;
}

/* In mountinfo, a mount of the hierarchy (ctrls empty: cgroup2) whose
 * root holds cg: its cgroup.procs for cg into out.  0 or -ENOENT. */
static int join_find(const char *mountinfo, const char *ctrls, size_t ctrls_len, const char *cg, char *out,
                     size_t size) {
        char root[PATH_MAX], mnt[PATH_MAX], fstype[32], opts[1024];

        for (const char *line = mountinfo; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
                const char *dash = strstr(line, " - ");
                size_t rlen;

                if (!dash || sscanf(line, "%*s %*s %*s %4095s %4095s", root, mnt) != 2 ||
                    sscanf(dash, " - %31s %*s %1023s", fstype, opts) != 2)
                        continue;
                if (ctrls_len ? strcmp(fstype, "cgroup") != 0 || !join_has_controllers(opts, ctrls, ctrls_len)
                              : strcmp(fstype, "cgroup2") != 0)
                        continue;
                rlen = strcmp(root, "/") == 0 ? 0 : strlen(root);
                if (strncmp(cg, root, rlen) != 0 || (cg[rlen] != '/' && cg[rlen] != '\0'))
                        continue;
                if ((size_t) snprintf(out, size, "%s%s/cgroup.procs", mnt, cg + rlen) < size)
                        return 0;
        }
        return -ENOENT;
}

/* One line "ID:CONTROLLERS:PATH" of /proc/PID/cgroup: its cgroup.procs
 * opened into j.  0 or -errno (err said). */
static int join_line(ctl_run_join *j, const char *mountinfo, const char *line, size_t len, char *err,
                     size_t err_size) {
        const char *c1 = memchr(line, ':', len), *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t) (c1 + 1 - line)) : NULL;
        char cg[PATH_MAX], procs[PATH_MAX];
        bool required;
        int fd, r;

        if (!c2 || (size_t) (line + len - c2 - 1) >= sizeof(cg)) {
                snprintf(err, err_size, "--cgroups-of: a line of its /proc/PID/cgroup is not ID:CONTROLLERS:PATH");
                return -EBADMSG;
        }
        snprintf(cg, sizeof(cg), "%.*s", (int) (line + len - c2 - 1), c2 + 1);
        required = strcmp(cg, "/") != 0;
        r = join_find(mountinfo, c1 + 1, (size_t) (c2 - c1 - 1), cg, procs, sizeof(procs));
        fd = r == 0 ? open(procs, O_WRONLY | O_CLOEXEC) : -1;
        if (fd < 0 && !required)
                return 0;
        if (fd < 0 || j->n == CTL_RUN_JOIN_MAX) {
                r = fd >= 0 ? -E2BIG : r < 0 ? r : -errno;
                if (fd >= 0)
                        close(fd);
                snprintf(err, err_size, "--cgroups-of: cannot join the cgroup %s (hierarchy \"%.*s\"): %s", cg,
                         (int) (c2 - c1 - 1), c1 + 1, r == -ENOENT ? "the hierarchy is not mounted here"
                                                                    : strerror(-r));
                return r;
        }
        j->procs[j->n] = fd;
        j->required[j->n] = required;
        j->path[j->n++] = strdup(procs);
        return 0;
}

int ctl_run_pidfd_read(int pidfd, const char *file, char *text, size_t size) {
        char path[64];
        int pid = 0, r = join_pid(pidfd, &pid);

        if (r == 0) {
                snprintf(path, sizeof(path), "/proc/%d/%s", pid, file);
                r = ctl_host_read_file(path, text, size) < 0 ? -ESRCH : 0;
        }
        /* Read, then still alive: the text was that process's. */
        if (r == 0 && syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0)
                r = errno == EBADF || errno == EINVAL ? -EBADF : -ESRCH;
        return r;
}

int ctl_run_join_open(int pidfd, ctl_run_join *ret, char *err, size_t err_size) {
        char text[JOIN_CGROUP_TEXT_MAX], *mountinfo = NULL;
        size_t cap = 0;
        FILE *f;
        int r = ctl_run_pidfd_read(pidfd, "cgroup", text, sizeof(text));

        *ret = (ctl_run_join) { 0 };
        if (r < 0) {
                snprintf(err, err_size, "--cgroups-of=%d: %s", pidfd,
                         r == -EBADF ? "not a pidfd" : "its process has ended");
                return r;
        }
        f = fopen("/proc/self/mountinfo", "re");
        if (!f || getdelim(&mountinfo, &cap, '\0', f) < 0) {
                r = -errno;
                snprintf(err, err_size, "--cgroups-of: /proc/self/mountinfo: %s", strerror(-r));
        }
        if (f)
                fclose(f);
        for (const char *line = text; r == 0 && *line;) {
                size_t len = strcspn(line, "\n");

                if (len)
                        r = join_line(ret, mountinfo, line, len, err, err_size);
                line += len + (line[len] == '\n');
        }
        free(mountinfo);
        if (r < 0)
                ctl_run_join_close(ret);
        return r;
}

int ctl_run_join_move(const ctl_run_join *j, pid_t pid, char *err, size_t err_size) {
        char buf[32];
        int len = snprintf(buf, sizeof(buf), "%d\n", (int) pid);

        for (size_t i = 0; i < j->n; i++)
                if (write(j->procs[i], buf, (size_t) len) != len && j->required[i]) {
                        int r = -errno;

                        snprintf(err, err_size, "--cgroups-of: cannot join %s: %s", j->path[i] ? j->path[i] : "?",
                                 strerror(-r));
                        return r;
                }
        return 0;
}

void ctl_run_join_close(ctl_run_join *j) {
        for (size_t i = 0; i < j->n; i++) {
                close(j->procs[i]);
                free(j->path[i]);
        }
        j->n = 0;
}
