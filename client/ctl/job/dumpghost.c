/* dumpghost.c: the deleted files of a job dumped for its owner
 * (dumpghost.h).
 *
 * CRIU dumps a deleted file a process holds (a "ghost", up to 1 MiB) into
 * the images, and on restore makes it again, as root, by its path: it
 * creates DIR/NAME.cr.N.ghost with the dumped content, links it as
 * DIR/NAME, opens it and unlinks both.  DIR is walked as root, following
 * links: a user who replaced their DIR by a link to /etc after the dump
 * would have root create /etc/NAME of their content for a moment, as
 * /etc/ld.so.preload, which every setuid program then reads.  That cannot
 * be checked after CRIU did it, so dump --owner refuses, while CRIU holds
 * the processes, a job holding a deleted file whose DIR anyone but root
 * could make lead elsewhere (the owner, or another user whose directory
 * is on the way); one in /tmp or /dev/shm (root's, sticky), or directly
 * in a home directory, is kept (what is made inside DIR is made with
 * O_EXCL, linked without following). */
#include "dumpghost.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct ghost_ctx {
        int pid;
        int rootfd;             /* the process's root, O_PATH */
        int *mnt_ids;           /* its namespace's mounts */
        size_t n_mnt;
        char *err;
        size_t size;
        int r;
} ghost_ctx;

static void ghost_fail(ghost_ctx *g, int r, const char *what) {
        if (g->r != 0)
                return;
        g->r = r;
        snprintf(g->err, g->size, "cannot check the deleted files of process %d (%s): %s", g->pid, what,
                 strerror(-r));
}

/* The mount ids of the process's namespace (/proc/PID/mountinfo). */
static void ghost_mounts(ghost_ctx *g) {
        char path[64], *line = NULL;
        size_t len = 0;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/mountinfo", g->pid);
        f = fopen(path, "re");
        if (!f) {
                ghost_fail(g, -errno, path);
                return;
        }
        while (g->r == 0 && getline(&line, &len, f) > 0) {
                int id, *v;

                if (sscanf(line, "%d", &id) != 1)
                        continue;
                v = realloc(g->mnt_ids, (g->n_mnt + 1) * sizeof(*v));
                if (!v) {
                        ghost_fail(g, -ENOMEM, path);
                        break;
                }
                g->mnt_ids = v;
                g->mnt_ids[g->n_mnt++] = id;
        }
        free(line);
        fclose(f);
}

/* Whether fd (ours) is on a mount of the process's namespace ("mnt_id:"
 * of its fdinfo), not a kernel-internal one (memfd, shmem, SysV). */
static bool ghost_mounted(const ghost_ctx *g, int fd) {
        char path[64], line[128];
        int id = -1;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
        f = fopen(path, "re");
        while (f && fgets(line, sizeof(line), f))
                if (sscanf(line, "mnt_id: %d", &id) == 1)
                        break;
        if (f)
                fclose(f);
        for (size_t i = 0; i < g->n_mnt; i++)
                if (g->mnt_ids[i] == id)
                        return true;
        return false;
}

/* Whether anyone but root could replace the entry e in directory d: d is
 * not root's, or others may write to it (unless it is sticky and e is
 * root's).  Not only the owner: another user whose directory is on the
 * way could make it lead elsewhere when the owner restores. */
static bool ghost_replaceable(const struct stat *d, const struct stat *e) {
        if (d->st_uid != 0)
                return true;
        if (!(d->st_mode & (S_IWGRP | S_IWOTH)))
                return false;
        return !(d->st_mode & S_ISVTX) || e->st_uid != 0;
}

/* 1 when anyone but root could make dir (absolute, from the process's
 * root) lead elsewhere, the first entry on the way so in bad; 0 when not;
 * -errno. */
static int ghost_chain(const ghost_ctx *g, const char *dir, char *bad, size_t size) {
        char copy[PATH_MAX], *save = NULL, *c;
        int cur = fcntl(g->rootfd, F_DUPFD_CLOEXEC, 0), r = 0;

        snprintf(copy, sizeof(copy), "%s", dir);
        for (c = strtok_r(copy, "/", &save); cur >= 0 && r == 0 && c; c = strtok_r(NULL, "/", &save)) {
                struct stat sd, se;
                int next = openat(cur, c, O_PATH | O_NOFOLLOW | O_CLOEXEC);

                if (next < 0 || fstat(cur, &sd) < 0 || fstat(next, &se) < 0)
                        r = -errno;
                else if (strcmp(c, "..") == 0 || !S_ISDIR(se.st_mode) || ghost_replaceable(&sd, &se)) {
                        snprintf(bad, size, "%.*s", (int) (c - copy + strlen(c)), dir);
                        r = 1;
                }
                close(cur);
                cur = next;
        }
        if (cur >= 0)
                close(cur);
        return cur < 0 && r == 0 ? -errno : r;
}

/* The file /proc link names, if a deleted one on a mount: its directory
 * checked. */
static void ghost_one(ghost_ctx *g, const char *link, const char *what) {
        char path[PATH_MAX], bad[PATH_MAX], *slash;
        struct stat st;
        int fd = open(link, O_PATH | O_CLOEXEC), r;
        bool ghost;
        ssize_t k;

        if (fd < 0) {
                ghost_fail(g, -errno, link);
                return;
        }
        ghost = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 0 && ghost_mounted(g, fd);
        close(fd);
        if (!ghost)
                return;
        k = readlink(link, path, sizeof(path) - 1);
        if (k <= 0) {
                ghost_fail(g, k < 0 ? -errno : -EINVAL, link);
                return;
        }
        path[k] = '\0';
        if (k > 10 && strcmp(path + k - 10, " (deleted)") == 0)
                path[k - 10] = '\0';
        slash = strrchr(path, '/');
        if (path[0] != '/' || !slash)
                return;
        *slash = '\0';
        r = ghost_chain(g, path[0] ? path : "/", bad, sizeof(bad));
        if (r < 0)
                ghost_fail(g, r, path);
        else if (r > 0) {
                g->r = -EACCES;
                snprintf(g->err, g->size, "process %d holds the deleted file %s/%s (%s), and %s on its way is not "
                         "root's alone: restoring it, criu would make that file again, as root, wherever %s then leads",
                         g->pid, path, slash + 1, what, bad, bad);
        }
}

/* Every descriptor and file mapping of the process. */
static void ghost_links(ghost_ctx *g, const char *sub, bool maps) {
        char dir[64], link[64 + sizeof(((struct dirent *) 0)->d_name)], what[32 + sizeof(((struct dirent *) 0)->d_name)];
        struct dirent *de;
        DIR *d;

        snprintf(dir, sizeof(dir), "/proc/%d/%s", g->pid, sub);
        d = opendir(dir);
        if (!d) {
                ghost_fail(g, -errno, dir);
                return;
        }
        while (g->r == 0 && (de = readdir(d)))
                if (de->d_name[0] != '.' && strlen(de->d_name) < 48) {
                        snprintf(link, sizeof(link), "%s/%s", dir, de->d_name);
                        snprintf(what, sizeof(what), maps ? "mapped at %s" : "descriptor %s", de->d_name);
                        ghost_one(g, link, what);
                }
        closedir(d);
}

int ctl_dump_ghost_check(const ctl_pins *pins, uid_t uid, char *err, size_t size) {
        int r = 0;

        /* Root could put its files anywhere anyway. */
        for (size_t i = 0; uid != 0 && r == 0 && i < pins->n; i++) {
                ghost_ctx g = { .pid = pins->v[i].pid, .rootfd = -1, .err = err, .size = size };
                char root[64];

                snprintf(root, sizeof(root), "/proc/%d/root", g.pid);
                g.rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (g.rootfd < 0)
                        ghost_fail(&g, -errno, root);
                if (g.r == 0)
                        ghost_mounts(&g);
                if (g.r == 0)
                        ghost_links(&g, "fd", false);
                if (g.r == 0)
                        ghost_links(&g, "map_files", true);
                if (g.rootfd >= 0)
                        close(g.rootfd);
                free(g.mnt_ids);
                r = g.r;
        }
        return r;
}
