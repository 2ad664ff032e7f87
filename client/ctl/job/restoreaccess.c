/* restoreaccess.c: what a restored job holds, checked against its owner's
 * rights before it runs (restoreaccess.h).
 *
 * CRIU restores a process's open files, file mappings, executable and
 * working directory by the paths they had when dumped, opened as root.
 * The images are root's (the user cannot change them), but the files
 * those paths name are the user's to change: a job that held
 * /home/u/f open, dumped, then f replaced by a symlink to /etc/shadow (of
 * the same size and mode, which is all CRIU compares) comes back holding
 * /etc/shadow.  So restore --owner checks, while criu still holds the
 * restored tasks (post-restore), every such file against the owner: a
 * child of this command takes the owner's uid and each process's gid and
 * groups, keeps no capability, and for each file reaches, from the
 * process's root, the path the process now holds it by (the path each
 * directory of which the owner must be allowed to search) and checks that
 * it is the same inode and that the owner may open it with the access the
 * process has (read, write, search).  A file deleted by then (a ghost file
 * CRIU made from the images, a memfd) is not reachable by path: only its
 * own permission is checked.  A unix socket bound to a path was bound
 * there again by CRIU, as root: the directory it is in must be one the
 * owner may write to, reached so.  Pipes, other sockets and descriptors
 * that name no path were not opened by path and are left alone, and so are
 * criu's own, which the tasks hold until criu lets them go: its log and
 * its /proc.  A file in flight in a unix socket's queue (sent, not yet
 * received), which criu reopened by path as root, too (scmpeek.h).
 *
 * The descriptors (O_PATH) are opened by this command, as root, through
 * /proc; the child opens nothing there. */
#include "restoreaccess.h"

#include "proccreds.h"
#include "restoresocks.h"
#include "scmpeek.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* How many files one child checks (each holds a descriptor meanwhile). */
#define ACC_BATCH 64
/* How many sockets deep descriptors in flight are checked (one in flight
 * in the queue of a socket itself in flight is 2). */
#define ACC_SCM_DEPTH 4

typedef struct acc_entry {
        int fd;                 /* O_PATH, the very file the process holds */
        int need;               /* R_OK | W_OK | X_OK, or F_OK */
        bool resolve;           /* reached by its path from the process's root */
        char what[PATH_MAX + 64]; /* "descriptor 3", "a mapping", ... */
        char path[PATH_MAX];
} acc_entry;

typedef struct acc_batch {
        pid_t pid;
        int pidfd;
        uid_t uid;
        gid_t gid;
        gid_t *groups;
        size_t n_groups;
        int rootfd;             /* the process's root, O_PATH */
        const struct stat *logs; /* criu's logs */
        size_t n_logs;
        unsigned long *socks;   /* its unix sockets' inodes */
        size_t n_socks;
        const char *scm_what;   /* where the descriptors in flight are */
        acc_entry *v;
        size_t n;
        char *err;
        size_t size;
        int r;
} acc_batch;

/* A child's answer: the entry refused (-1: none, the drop failed) and why. */
typedef struct acc_result {
        int index;
        int err;
} acc_result;

static void acc_fail(acc_batch *b, int r, const char *what, const char *path) {
        if (b->r != 0)
                return;
        b->r = r;
        snprintf(b->err, b->size, "cannot check what process %d holds (%s%s%s): %s", (int) b->pid, what,
                 path ? " " : "", path ? path : "", strerror(-r));
}

/* In the child: the owner's uid, the process's gid and groups, no capability. */
static int acc_drop(const acc_batch *b) {
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = { { 0 } };

        if (setgroups(b->n_groups, b->groups) < 0 || setresgid(b->gid, b->gid, b->gid) < 0 ||
            setresuid(b->uid, b->uid, b->uid) < 0)
                return -errno;
        /* uid 0 keeps its capabilities through setresuid: dropped here. */
        return syscall(SYS_capset, &h, d) < 0 ? -errno : 0;
}

/* In the child: e reached by its path as the owner, and opened so. */
static int acc_one(int rootfd, const acc_entry *e) {
        struct stat held, at;

        if (fstat(e->fd, &held) < 0)
                return -errno;
        if (e->resolve && held.st_nlink > 0) {
                /* A link held as such (O_PATH | O_NOFOLLOW) is the link at its path. */
                struct open_how how = { .flags = O_PATH | O_CLOEXEC | (S_ISLNK(held.st_mode) ? O_NOFOLLOW : 0),
                                        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
                int f = (int) syscall(SYS_openat2, rootfd, e->path, &how, sizeof(how)), r = 0;

                if (f < 0)
                        return -errno;
                if (fstat(f, &at) < 0)
                        r = -errno;
                else if (at.st_dev != held.st_dev || at.st_ino != held.st_ino)
                        r = -EXDEV;
                close(f);
                if (r < 0)
                        return r;
        }
        return syscall(SYS_faccessat2, e->fd, "", e->need, AT_EMPTY_PATH | AT_EACCESS) < 0 ? -errno : 0;
}

static void acc_child(const acc_batch *b, int wfd) {
        acc_result res = { .index = -1, .err = 0 };
        int r = acc_drop(b);

        for (size_t i = 0; r == 0 && i < b->n; i++)
                if ((r = acc_one(b->rootfd, &b->v[i])) < 0)
                        res.index = (int) i;
        res.err = -r;
        if (r < 0 && write(wfd, &res, sizeof(res)) != (ssize_t) sizeof(res))
                _exit(2);
        _exit(r < 0 ? 1 : 0);
}

static const char *acc_need_words(int need) {
        static const char *const words[] = { "reach", "search or run", "write", "write and search",
                                             "read", "read and search", "read and write", "read, write and search" };

        return words[need & 7];
}

/* The child's answer to b's entries. */
static void acc_judge(acc_batch *b, const acc_result *res, ssize_t k, int ws) {
        if (k == (ssize_t) sizeof(*res) && res->index >= 0 && (size_t) res->index < b->n) {
                const acc_entry *e = &b->v[res->index];

                b->r = -EACCES;
                snprintf(b->err, b->size, "process %d holds %s (%s) that uid %u may not %s: %s", (int) b->pid,
                         e->path, e->what, (unsigned) b->uid, acc_need_words(e->need),
                         res->err == EXDEV ? "another file is at that path" : strerror(res->err));
        } else if (k == (ssize_t) sizeof(*res))
                acc_fail(b, -res->err, "taking uid's credentials", NULL);
        else if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
                acc_fail(b, -ECHILD, "the checking process failed", NULL);
}

/* b's entries checked by a child, then closed. */
static void acc_flush(acc_batch *b) {
        acc_result res = { 0 };
        int p[2] = { -1, -1 }, ws = 0;
        ssize_t k = 0;
        pid_t c = -1;

        if (b->n > 0 && b->r == 0 && pipe2(p, O_CLOEXEC) < 0)
                acc_fail(b, -errno, "a pipe", NULL);
        if (b->n > 0 && b->r == 0 && (c = fork()) < 0)
                acc_fail(b, -errno, "fork", NULL);
        if (c == 0) {
                close(p[0]);
                acc_child(b, p[1]);
        }
        if (p[1] >= 0)
                close(p[1]);
        if (c > 0) {
                while ((k = read(p[0], &res, sizeof(res))) < 0 && errno == EINTR)
                        ;
                while (waitpid(c, &ws, 0) < 0 && errno == EINTR)
                        ;
                acc_judge(b, &res, k, ws);
        }
        if (p[0] >= 0)
                close(p[0]);
        for (size_t i = 0; i < b->n; i++)
                close(b->v[i].fd);
        b->n = 0;
}

/* Whether e is one of criu's own descriptors, which the restored tasks
 * hold until criu lets them go: its log (written only), and its /proc (a
 * procfs mounted outside the job's view, so named "/"). */
static bool acc_criu_own(const acc_batch *b, const acc_entry *e) {
        struct statfs sf;
        struct stat st;

        if (fstat(e->fd, &st) < 0)
                return false;
        for (size_t i = 0; e->need == W_OK && i < b->n_logs; i++)
                if (st.st_dev == b->logs[i].st_dev && st.st_ino == b->logs[i].st_ino)
                        return true;
        return strcmp(e->path, "/") == 0 && st.st_ino == 1 && fstatfs(e->fd, &sf) == 0 &&
               sf.f_type == PROC_SUPER_MAGIC;
}

/* fd (O_PATH, of path) to be checked for need; taken over. */
static void acc_put(acc_batch *b, int fd, const char *path, int need, bool resolve, const char *what) {
        acc_entry *e = &b->v[b->n];

        e->fd = fd;
        e->need = need;
        e->resolve = resolve;
        snprintf(e->path, sizeof(e->path), "%s", path);
        snprintf(e->what, sizeof(e->what), "%s", what);
        if (acc_criu_own(b, e)) {
                close(e->fd);
                return;
        }
        if (++b->n == ACC_BATCH)
                acc_flush(b);
}

/* The file /proc link names, to be checked for need; a unix socket's
 * inode noted for acc_sockets(). */
static void acc_add(acc_batch *b, const char *link, int need, bool resolve, const char *what) {
        char path[PATH_MAX];
        unsigned long ino, *v;
        ssize_t k;
        int fd;

        if (b->r != 0)
                return;
        k = readlink(link, path, sizeof(path) - 1);
        if (k < 0) {
                acc_fail(b, -errno, what, link);
                return;
        }
        path[k] = '\0';
        if (sscanf(path, "socket:[%lu]", &ino) == 1) {
                v = realloc(b->socks, (b->n_socks + 1) * sizeof(*v));
                if (!v) {
                        acc_fail(b, -ENOMEM, what, link);
                        return;
                }
                b->socks = v;
                b->socks[b->n_socks++] = ino;
        }
        /* A pipe, a socket, an anonymous inode: not opened by a path. */
        if (path[0] != '/')
                return;
        fd = open(link, O_PATH | O_CLOEXEC);
        if (fd < 0) {
                acc_fail(b, -errno, what, link);
                return;
        }
        acc_put(b, fd, path, need, resolve, what);
}

/* A socket the process has bound at name, which criu bound there again
 * as root: its directory must be one the owner may write to, reached by
 * its path.  A relative name (bound from a directory since left) cannot
 * be checked: refused. */
static void acc_add_bound(acc_batch *b, const char *name) {
        struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
        char dir[PATH_MAX], now[PATH_MAX], what[PATH_MAX + 64], link[64], *slash;
        ssize_t k;
        int fd;

        if (name[0] != '/') {
                b->r = -EACCES;
                snprintf(b->err, b->size, "process %d has a socket bound at the relative path %s, which cannot be "
                         "checked", (int) b->pid, name);
                return;
        }
        snprintf(dir, sizeof(dir), "%s", name);
        slash = strrchr(dir, '/');
        slash[slash == dir] = '\0';
        fd = (int) syscall(SYS_openat2, b->rootfd, dir, &how, sizeof(how));
        if (fd < 0) {
                acc_fail(b, -errno, "the directory of a bound socket", dir);
                return;
        }
        /* Said with the directory it is now. */
        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        k = readlink(link, now, sizeof(now) - 1);
        now[k > 0 ? k : 0] = '\0';
        snprintf(what, sizeof(what), "where its socket %s is bound, now %s", name + (slash - dir) + 1, now);
        acc_put(b, fd, dir, W_OK | X_OK, true, what);
}

/* The process's unix sockets (their inodes noted) bound to a path, as
 * its network namespace's /proc/net/unix says. */
static void acc_sockets(acc_batch *b) {
        char path[64], *line = NULL;
        size_t len = 0;
        FILE *f;

        if (b->r != 0 || b->n_socks == 0)
                return;
        snprintf(path, sizeof(path), "/proc/%d/net/unix", (int) b->pid);
        f = fopen(path, "re");
        if (!f) {
                acc_fail(b, -errno, "its sockets", path);
                return;
        }
        while (b->r == 0 && getline(&line, &len, f) > 0) {
                unsigned long ino;
                bool ours = false;
                int off = 0;
                char *name;

                if (sscanf(line, "%*s %*s %*s %*s %*s %*s %lu %n", &ino, &off) != 1 || off == 0)
                        continue;
                for (size_t i = 0; i < b->n_socks && !ours; i++)
                        ours = b->socks[i] == ino;
                name = line + off;
                name[strcspn(name, "\n")] = '\0';
                /* Unbound, or abstract (no file). */
                if (ours && name[0] && name[0] != '@')
                        acc_add_bound(b, name);
        }
        free(line);
        fclose(f);
}

/* The access descriptor NAME of process pid has ("flags:" of its fdinfo). */
static int acc_fd_need(pid_t pid, const char *name) {
        char path[64 + NAME_MAX], line[128];
        unsigned long flags = O_RDWR;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/fdinfo/%s", (int) pid, name);
        f = fopen(path, "re");
        while (f && fgets(line, sizeof(line), f))
                if (sscanf(line, "flags: %lo", &flags) == 1)
                        break;
        if (f)
                fclose(f);
        if (flags & O_PATH)
                return F_OK;
        return (flags & O_ACCMODE) == O_WRONLY ? W_OK : (flags & O_ACCMODE) == O_RDWR ? R_OK | W_OK : R_OK;
}

/* A descriptor in flight to the process (scmpeek.h; ours now): checked
 * as one it holds. */
static int acc_inflight(void *data, int fd) {
        acc_batch *b = data;
        char link[64], name[16];

        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        snprintf(name, sizeof(name), "%d", fd);
        acc_add(b, link, acc_fd_need(getpid(), name), true, b->scm_what);
        close(fd);
        return b->r;
}

/* The files in flight to its socket at descriptor NAME, as those it holds. */
static void acc_queue(acc_batch *b, const char *name) {
        char what[64 + NAME_MAX];
        int r;

        snprintf(what, sizeof(what), "in flight to its descriptor %s", name);
        b->scm_what = what;
        r = ctl_scm_peek_of(b->pidfd, atoi(name), b->socks[b->n_socks - 1], ACC_SCM_DEPTH, acc_inflight, b);
        if (r == -ELOOP && b->r == 0) {
                b->r = -EACCES;
                snprintf(b->err, b->size, "process %d has descriptors in flight to its descriptor %s nested deeper than "
                         "%d sockets, which cannot be checked", (int) b->pid, name, ACC_SCM_DEPTH);
        } else if (r < 0)
                acc_fail(b, r, "a socket's queue", name);
}

static void acc_fds(acc_batch *b) {
        struct dirent *de;
        char dir[64], link[64 + sizeof(de->d_name)], what[16 + sizeof(de->d_name)];
        DIR *d;

        snprintf(dir, sizeof(dir), "/proc/%d/fd", (int) b->pid);
        d = opendir(dir);
        if (!d) {
                acc_fail(b, -errno, "its descriptors", dir);
                return;
        }
        while (b->r == 0 && (de = readdir(d)))
                if (de->d_name[0] != '.') {
                        snprintf(link, sizeof(link), "%s/%s", dir, de->d_name);
                        size_t socks = b->n_socks;

                        snprintf(what, sizeof(what), "descriptor %s", de->d_name);
                        acc_add(b, link, acc_fd_need(b->pid, de->d_name), true, what);
                        if (b->r == 0 && b->n_socks > socks)
                                acc_queue(b, de->d_name);
                }
        closedir(d);
}

/* Every file mapping: read; written through when shared and writable.
 * The same file and access on the next lines (a library's segments) once. */
static void acc_maps(acc_batch *b) {
        char path[64], link[128], prev[64] = "";
        size_t len = 0;
        char *line = NULL;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/maps", (int) b->pid);
        f = fopen(path, "re");
        if (!f) {
                acc_fail(b, -errno, "its mappings", path);
                return;
        }
        while (b->r == 0 && getline(&line, &len, f) > 0) {
                unsigned long lo, hi, ino;
                char perms[8], dev[16], key[64];
                int need;

                if (sscanf(line, "%lx-%lx %7s %*s %15s %lu", &lo, &hi, perms, dev, &ino) != 5 || ino == 0)
                        continue;
                need = R_OK | (perms[1] == 'w' && perms[3] == 's' ? W_OK : 0);
                snprintf(key, sizeof(key), "%s %lu %d", dev, ino, need);
                if (strcmp(key, prev) == 0)
                        continue;
                snprintf(prev, sizeof(prev), "%s", key);
                snprintf(link, sizeof(link), "/proc/%d/map_files/%lx-%lx", (int) b->pid, lo, hi);
                acc_add(b, link, need, true, "a mapping");
        }
        free(line);
        fclose(f);
}

static int acc_process(acc_batch *b) {
        char link[64];
        int r = ctl_proc_creds(b->pid, &b->gid, &b->groups, &b->n_groups);

        if (r < 0) {
                acc_fail(b, r, "its credentials", NULL);
                return b->r;
        }
        snprintf(link, sizeof(link), "/proc/%d/root", (int) b->pid);
        b->rootfd = open(link, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (b->rootfd < 0)
                acc_fail(b, -errno, "its root", link);
        /* Its root is where paths start: only its own permission. */
        acc_add(b, link, X_OK, false, "its root directory");
        snprintf(link, sizeof(link), "/proc/%d/cwd", (int) b->pid);
        acc_add(b, link, X_OK, true, "its working directory");
        snprintf(link, sizeof(link), "/proc/%d/exe", (int) b->pid);
        acc_add(b, link, X_OK, true, "its executable");
        acc_fds(b);
        acc_sockets(b);
        acc_maps(b);
        acc_flush(b);
        if (b->rootfd >= 0)
                close(b->rootfd);
        free(b->groups);
        free(b->socks);
        return b->r;
}

int ctl_restore_access_check(const ctl_pins *pins, int init, uid_t uid, const ctl_criu_run *runs, size_t n_runs,
                             const char *prefix, char *refused, size_t size) {
        acc_entry *v = calloc(ACC_BATCH, sizeof(*v));
        struct stat *logs = calloc(n_runs + 1, sizeof(*logs));
        char err[PATH_MAX + 256];
        size_t n_logs = 0;
        int r = v && logs ? 0 : -ENOMEM;

        /* criu's logs, each in its tree's directory. */
        for (size_t i = 0; r == 0 && i < n_runs; i++)
                n_logs += runs[i].dir_fd > 0 && runs[i].log_name &&
                          fstatat(runs[i].dir_fd, runs[i].log_name, &logs[n_logs], AT_SYMLINK_NOFOLLOW) == 0;
        for (size_t i = 0; r == 0 && i < pins->n; i++)
                if (pins->v[i].pid != init)
                                r = acc_process(&(acc_batch) { .pid = pins->v[i].pid, .pidfd = pins->v[i].pidfd, .uid = uid, .rootfd = -1, .logs = logs,
                                                       .n_logs = n_logs, .v = v, .err = err, .size = sizeof(err) });
        if (r == -EACCES)
                snprintf(refused, size, "%s", err);
        else if (r < 0)
                fprintf(stderr, "%s%s\n", prefix, r == -ENOMEM && (!v || !logs) ? "out of memory" : err);
        /* criu made its sockets as root too (restoresocks.h). */
        if (r == 0)
                r = ctl_restore_socks_check(pins, init, uid, prefix, refused, size);
        free(logs);
        free(v);
        return r;
}
