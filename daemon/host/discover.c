/* discover.c: /proc scans for group selectors and ListProcesses. */
#include "host/discover.h"

#include "kernel-abi.h"
#include "procfs.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>


int discover_lib_of(const void *symbol, struct discover_lib *ret)
{
        Dl_info info;
        struct stat st;

        *ret = (struct discover_lib){ 0 };
        if (!symbol || dladdr(symbol, &info) == 0 || !info.dli_fname)
                return -ENOENT;
        if (stat(info.dli_fname, &st) < 0)
                return -errno;
        ret->known = true;
        ret->major = major(st.st_dev);
        ret->minor = minor(st.st_dev);
        ret->ino = (unsigned long long)st.st_ino;
        if (strlen(info.dli_fname) < sizeof(ret->path))
                strcpy(ret->path, info.dli_fname);
        return 0;
}

static bool lib_is(const struct discover_lib *lib, unsigned maj, unsigned min, unsigned long long ino)
{
        return lib && lib->known && maj == lib->major && min == lib->minor && ino == lib->ino;
}

static bool is_libcuda(const char *path, size_t len)
{
        const char *base = path;

        for (size_t i = 0; i < len; i++)
                if (path[i] == '/')
                        base = path + i + 1;
        return (size_t)(path + len - base) >= 10 && memcmp(base, "libcuda.so", 10) == 0;
}

/* One line of maps: "start-end perms offset MAJ:MIN INODE   PATH". */
static bool line_is_driver(const char *line, size_t len, const struct discover_lib *lib)
{
        unsigned maj, min;
        unsigned long long ino;
        int path_at = -1;
        char tmp[256], perms[8];
        size_t n = len < sizeof(tmp) - 1 ? len : sizeof(tmp) - 1;

        memcpy(tmp, line, n);
        tmp[n] = '\0';
        if (sscanf(tmp, "%*s %7s %*s %x:%x %llu %n", perms, &maj, &min, &ino, &path_at) < 4)
                return false;
        if (ino == 0 || strlen(perms) < 3 || perms[2] != 'x')
                return false; /* only code counts: a data file is no driver */
        if (lib_is(lib, maj, min, ino))
                return true;
        if (path_at < 0 || (size_t)path_at >= len)
                return false;
        return is_libcuda(line + path_at, len - (size_t)path_at);
}

bool discover_maps_text_has_driver(const char *text, size_t len, const struct discover_lib *lib)
{
        size_t i = 0;

        while (i < len) {
                const char *nl = memchr(text + i, '\n', len - i);
                size_t end = nl ? (size_t)(nl - text) : len;
                if (line_is_driver(text + i, end - i, lib))
                        return true;
                i = end + 1;
        }
        return false;
}

/* The executable file mappings only, one ioctl each (about three in a
 * plain process): no text is formatted, and no path unless asked. */
static int maps_query(int fd, const struct discover_lib *lib)
{
        char name[4096];
        uint64_t addr = 0;

        for (;;) {
                struct procmap_query q = {
                        .size = sizeof(q),
                        .query_flags = PROCMAP_QUERY_COVERING_OR_NEXT_VMA | PROCMAP_QUERY_FILE_BACKED_VMA |
                                       PROCMAP_QUERY_VMA_EXECUTABLE,
                        .query_addr = addr,
                        .vma_name_addr = (uint64_t)(uintptr_t)name,
                        .vma_name_size = sizeof(name),
                };
                if (ioctl(fd, PROCMAP_QUERY, &q) < 0)
                        return errno == ENOENT ? 0 : -errno; /* ENOENT: no mapping above addr */
                if (lib_is(lib, q.dev_major, q.dev_minor, (unsigned long long)q.inode))
                        return 1;
                if (q.vma_name_size > 0 && q.vma_name_size <= sizeof(name) &&
                    is_libcuda(name, strnlen(name, q.vma_name_size)))
                        return 1;
                if (q.vma_end <= addr)
                        return 0; /* no progress: never loop */
                addr = q.vma_end;
        }
}

static int maps_text(int fd, const struct discover_lib *lib)
{
        char buf[65536];
        size_t keep = 0;
        ssize_t k;
        int r = 0;

        /* Whole lines only: a line cut by the buffer is carried over. */
        while ((k = read(fd, buf + keep, sizeof(buf) - keep)) > 0) {
                size_t len = keep + (size_t)k, whole;
                const char *last = memrchr(buf, '\n', len);
                whole = last ? (size_t)(last - buf) + 1 : len;
                if (discover_maps_text_has_driver(buf, whole, lib)) {
                        r = 1;
                        break;
                }
                keep = len - whole;
                if (keep > 4096)
                        keep = 0; /* no line is this long: drop it */
                memmove(buf, buf + whole, keep);
        }
        if (k < 0)
                r = -errno;
        return r;
}

/* Cleared on the first kernel without PROCMAP_QUERY: the text from then on. */
static atomic_bool query_works = true;

int discover_maps_driver_how(pid_t pid, const struct discover_lib *lib, enum discover_maps_how how)
{
        char path[64];
        int fd, r = -ENOTTY;

        snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (how != DISCOVER_MAPS_TEXT && atomic_load_explicit(&query_works, memory_order_relaxed)) {
                r = maps_query(fd, lib);
                /* ENOTTY: no such ioctl; EINVAL: a kernel that knows it
                 * but not these flags. */
                if ((r == -ENOTTY || r == -EINVAL) && how == DISCOVER_MAPS_ANY)
                        atomic_store_explicit(&query_works, false, memory_order_relaxed);
        }
        if ((r == -ENOTTY || r == -EINVAL) && how != DISCOVER_MAPS_QUERY)
                r = maps_text(fd, lib);
        close(fd);
        return r;
}

int discover_maps_driver(pid_t pid, const struct discover_lib *lib)
{
        return discover_maps_driver_how(pid, lib, DISCOVER_MAPS_ANY);
}

static int read_file(const char *path, char *buf, size_t size, size_t *ret_len)
{
        size_t len = 0;
        ssize_t k;
        int fd = open(path, O_RDONLY | O_CLOEXEC);

        if (fd < 0)
                return -errno;
        while (len < size - 1 && (k = read(fd, buf + len, size - 1 - len)) > 0)
                len += (size_t)k;
        close(fd);
        buf[len] = '\0';
        *ret_len = len;
        return 0;
}

int discover_cgroup(pid_t pid, char *buf, size_t size)
{
        char path[64], text[8192];
        const char *cgroup;
        size_t len;
        int r;

        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
        r = read_file(path, text, sizeof(text), &len);
        if (r < 0)
                return r;
        if (procfs_cgroup_v2(text, &cgroup, &len) < 0)
                return -ENOENT;
        if (len >= size)
                return -ENAMETOOLONG;
        memcpy(buf, cgroup, len);
        buf[len] = '\0';
        return 0;
}

static bool same_ns(const char *a, const char *b)
{
        struct stat x, y;

        return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

int discover_cgroup_ns_root(pid_t pid, char *buf, size_t size)
{
        char path[64], line[8192];
        FILE *f;
        int r = -ENOENT;

        snprintf(path, sizeof(path), "/proc/%d/ns/cgroup", (int)pid);
        if (pid <= 0 || same_ns(path, "/proc/self/ns/cgroup")) {
                buf[0] = '\0';
                return 0;
        }
        snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)pid);
        f = fopen(path, "re");
        if (!f)
                return -errno;
        /* "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS...] - FSTYPE SOURCE SUPER" */
        while (r == -ENOENT && fgets(line, sizeof(line), f)) {
                char root[DISCOVER_CGROUP_MAX];
                const char *dash = strstr(line, " - cgroup2 ");
                if (!dash || sscanf(line, "%*s %*s %*s %4095s", root) != 1 || root[0] != '/' || strchr(root, '\\'))
                        continue;
                if (strcmp(root, "/") == 0)
                        root[0] = '\0';
                if (strlen(root) >= size)
                        r = -ENAMETOOLONG;
                else {
                        strcpy(buf, root);
                        r = 0;
                }
        }
        fclose(f);
        return r;
}

/* Opens this process's first cgroup2 mount whose root is its namespace's
 * root (a mount point the kernel had to escape is passed over). */
static int open_cgroup2_root(void)
{
        char line[8192];
        FILE *f = fopen("/proc/self/mountinfo", "re");
        int fd = -ENOENT;

        if (!f)
                return -errno;
        while (fd == -ENOENT && fgets(line, sizeof(line), f)) {
                char root[8], point[4096];
                if (!strstr(line, " - cgroup2 ") || sscanf(line, "%*s %*s %*s %7s %4095s", root, point) != 2 ||
                    strcmp(root, "/") != 0 || strchr(point, '\\'))
                        continue;
                fd = open(point, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0)
                        fd = -errno; /* -ENOENT: gone meanwhile, the next one */
        }
        fclose(f);
        return fd;
}

int discover_cgroup_exists(const char *path)
{
        struct stat st;
        int dir, r;

        if (path[0] != '/')
                return 0;
        dir = open_cgroup2_root();
        if (dir < 0)
                return dir;
        if (path[1] == '\0')
                r = 1;
        else if (fstatat(dir, path + 1, &st, AT_SYMLINK_NOFOLLOW) == 0)
                r = S_ISDIR(st.st_mode);
        else
                r = errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
        close(dir);
        return r;
}

bool discover_cgroup_within(const char *path, const char *sel)
{
        size_t n = strlen(sel);

        if (strcmp(sel, "/") == 0)
                return path[0] == '/';
        return strncmp(path, sel, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static int parse_pid(const char *s, pid_t *ret)
{
        long v = 0;

        if (*s < '1' || *s > '9')
                return -EINVAL;
        for (; *s; s++) {
                if (*s < '0' || *s > '9' || v > 0x3fffffff)
                        return -EINVAL;
                v = v * 10 + (*s - '0');
        }
        *ret = (pid_t)v;
        return 0;
}

static int push(pid_t **a, size_t *n, size_t *cap, pid_t p)
{
        if (*n == *cap) {
                size_t c = *cap ? *cap * 2 : 256;
                pid_t *b = realloc(*a, c * sizeof(**a));
                if (!b)
                        return -ENOMEM;
                *a = b;
                *cap = c;
        }
        (*a)[(*n)++] = p;
        return 0;
}

static int cmp_pid(const void *a, const void *b)
{
        pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

        return (x > y) - (x < y);
}

int discover_all(pid_t **ret_pids, size_t *ret_n)
{
        DIR *d = opendir("/proc");
        struct dirent *e;
        pid_t *a = NULL, p;
        size_t n = 0, cap = 0;

        if (!d)
                return -errno;
        while ((e = readdir(d)))
                if (parse_pid(e->d_name, &p) == 0 && push(&a, &n, &cap, p) < 0) {
                        closedir(d);
                        free(a);
                        return -ENOMEM;
                }
        closedir(d);
        if (n > 1)
                qsort(a, n, sizeof(*a), cmp_pid);
        *ret_pids = a;
        *ret_n = n;
        return 0;
}

/* Field 4 of /proc/PID/stat, after the command name (which may hold
 * spaces and parentheses: the last ')' ends it). */
static int read_ppid(pid_t pid, pid_t *ret)
{
        char path[64], buf[1024];
        size_t len;
        int v;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        if (read_file(path, buf, sizeof(buf), &len) < 0)
                return -ESRCH;
        if (procfs_stat_ppid(buf, &v) < 0)
                return -EINVAL;
        *ret = (pid_t)v;
        return 0;
}

/* Parents are found from every process's stat (the children files need
 * CONFIG_PROC_CHILDREN, which not every kernel has); one pass over /proc. */
int discover_tree(pid_t root, size_t max, pid_t **ret_pids, size_t *ret_n)
{
        _Static_assert(sizeof(pid_t) == sizeof(int), "procfs_descendants() walks ints");
        pid_t *all = NULL, *parent = NULL;
        size_t n_all = 0;
        int r;

        r = discover_all(&all, &n_all);
        if (r < 0)
                return r;
        parent = calloc(n_all ? n_all : 1, sizeof(*parent));
        if (!parent) {
                r = -ENOMEM;
                goto out;
        }
        for (size_t i = 0; i < n_all; i++)
                if (read_ppid(all[i], &parent[i]) < 0)
                        parent[i] = -1; /* gone meanwhile */
        r = procfs_descendants(all, parent, n_all, root, max, ret_pids, ret_n);
out:
        free(parent);
        free(all);
        return r;
}

int discover_owner(pid_t pid, uid_t *ret_uid)
{
        char path[64];
        struct stat st;

        snprintf(path, sizeof(path), "/proc/%d", (int)pid);
        if (stat(path, &st) < 0)
                return -errno;
        *ret_uid = st.st_uid;
        return 0;
}

int discover_ppid(pid_t pid, pid_t *ret_ppid)
{
        char path[64], buf[1024];
        size_t len;
        int ppid, r;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        r = read_file(path, buf, sizeof(buf), &len);
        if (r < 0)
                return r;
        if (procfs_stat_ppid(buf, &ppid) < 0)
                return -EINVAL;
        *ret_ppid = ppid;
        return 0;
}

int discover_comm(pid_t pid, char *buf, size_t size)
{
        char path[64];
        size_t len;
        int r;

        snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
        r = read_file(path, buf, size, &len);
        if (r < 0)
                return r;
        while (len > 0 && buf[len - 1] == '\n')
                buf[--len] = '\0';
        for (size_t i = 0; i < len; i++)
                if ((unsigned char)buf[i] < 0x20 || (unsigned char)buf[i] >= 0x7f)
                        buf[i] = '?';
        return 0;
}
