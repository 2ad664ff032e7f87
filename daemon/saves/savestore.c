/* savestore.c: the saves directory on disk, worker side (savestore.h). */
#include "saves/savestore.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "base/privdir.h"
#include "fdio.h"

#define MANIFEST_MAX (4 * 1024 * 1024) /* a manifest names a few hundred files */
#define TREE_DEPTH_MAX 16              /* images: the directory and its trees' */
#define HOLD_TRIES 8                   /* a hold's file removed under us: opened again */

/* This node's name in the daemon's own names: its host name, each byte
 * but A-Z a-z 0-9 _ . - as '_' (a '-' in it is safe: stale() takes only
 * the node's own prefix followed by exactly 16 hex digits, and host names
 * "gpu-01" and "gpu_01" must stay two nodes); and this daemon's
 * life, 8 random hex digits that start the random part of each of its
 * names, so that its sweep leaves its own names alone.  Set once, by
 * savestore_open(), before any worker reads them. */
static char node[64] = "node";
static char life[9] = "00000000";

static void take_node_name(void)
{
        char host[256] = "";
        uint32_t x = 0;

        if (getrandom(&x, sizeof(x), 0) != (ssize_t)sizeof(x))
                x = (uint32_t)getpid() ^ (uint32_t)time(NULL);
        snprintf(life, sizeof(life), "%08" PRIx32, x);

        if (gethostname(host, sizeof(host) - 1) < 0 || !host[0])
                return;
        for (size_t i = 0; i < sizeof(node) - 1; i++) {
                char c = host[i];

                node[i] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                                          c == '_' || c == '-' || !c ? c : '_';
                if (!c)
                        return;
        }
        node[sizeof(node) - 1] = '\0';
}

int savestore_open(const char *path, int *ret_fd, char *why, size_t whylen)
{
        int r;

        take_node_name();
        r = privdir_open(path, ret_fd, why, whylen);

        if (r != -ENOENT)
                return r;
        /* Only the last name is made: the directory above must exist (and
         * is checked by privdir_open() like any other). */
        if (mkdir(path, 0700) < 0 && errno != EEXIST) {
                snprintf(why, whylen, "mkdir %s: %s", path, strerror(errno));
                return -errno;
        }
        return privdir_open(path, ret_fd, why, whylen);
}

int savestore_uid_dir(int dirfd, uid_t uid, bool create, int *ret_fd)
{
        char name[16];
        struct stat st;
        int fd;

        snprintf(name, sizeof(name), "%u", (unsigned)uid);
        if (create && mkdirat(dirfd, name, 0700) < 0 && errno != EEXIST)
                return -errno;
        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077)) {
                close(fd);
                return -EPERM;
        }
        *ret_fd = fd;
        return 0;
}

/* What name (below fd) and everything inside take on disk. */
static uint64_t tree_bytes(int fd, const char *name, int depth)
{
        struct stat st;
        uint64_t sum;
        DIR *d;
        struct dirent *e;
        int sub;

        if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return 0;
        sum = (uint64_t)st.st_blocks * 512;
        if (!S_ISDIR(st.st_mode) || depth >= TREE_DEPTH_MAX)
                return sum;
        sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0)
                return sum;
        d = fdopendir(sub);
        if (!d) {
                close(sub);
                return sum;
        }
        while ((e = readdir(d)))
                if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                        sum += tree_bytes(dirfd(d), e->d_name, depth + 1);
        closedir(d);
        return sum;
}

/* The job's name in the save's manifest: its run record's name, less the
 * "u<UID>-" the daemon put before the caller's. */
static void job_of(int savefd, uid_t uid, char *job, size_t size)
{
        char *text = malloc(MANIFEST_MAX), prefix[24];
        cJSON *m;
        const cJSON *name;

        job[0] = '\0';
        if (!text || fdio_read_at(savefd, "manifest.json", text, MANIFEST_MAX) < 0) {
                free(text);
                return;
        }
        m = cJSON_Parse(text);
        free(text);
        name = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m, "run"), "name");
        snprintf(prefix, sizeof(prefix), "u%u-", (unsigned)uid);
        if (cJSON_IsString(name) && strncmp(name->valuestring, prefix, strlen(prefix)) == 0)
                snprintf(job, size, "%s", name->valuestring + strlen(prefix));
        cJSON_Delete(m);
}

int savestore_info(int uidfd, uid_t uid, const char *save, struct savestore_info *ret)
{
        struct stat st;
        int fd;

        if (save[0] == '.' || strlen(save) > SAVESTORE_NAME_MAX)
                return -ENOENT;
        fd = openat(uidfd, save, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOTDIR || errno == ELOOP ? -ENOENT : -errno;
        if (fstat(fd, &st) < 0) {
                close(fd);
                return -errno;
        }
        memset(ret, 0, sizeof(*ret));
        snprintf(ret->save, sizeof(ret->save), "%s", save);
        ret->created = (int64_t)st.st_mtime;
        job_of(fd, uid, ret->job, sizeof(ret->job));
        close(fd);
        ret->bytes = tree_bytes(uidfd, save, 0);
        return 0;
}

static int by_name(const void *a, const void *b)
{
        return strcmp(((const struct savestore_info *)a)->save, ((const struct savestore_info *)b)->save);
}

int savestore_list(int uidfd, uid_t uid, struct savestore_info **ret, size_t *ret_n)
{
        struct savestore_info *v = NULL, *nv;
        size_t n = 0, cap = 0;
        struct dirent *e;
        DIR *d;
        int r = fdio_opendir(uidfd, &d);

        if (r < 0)
                return r;
        while ((e = readdir(d))) {
                if (e->d_name[0] == '.')
                        continue;
                if (n == cap) {
                        cap = cap ? cap * 2 : 16;
                        nv = realloc(v, cap * sizeof(*v));
                        if (!nv) {
                                r = -ENOMEM;
                                break;
                        }
                        v = nv;
                }
                if (savestore_info(uidfd, uid, e->d_name, &v[n]) == 0)
                        n++;
        }
        closedir(d);
        if (r < 0) {
                free(v);
                return r;
        }
        if (n > 1)
                qsort(v, n, sizeof(*v), by_name);
        *ret = v;
        *ret_n = n;
        return 0;
}

/* The saves in one uid's directory (names not starting with '.'). */
static size_t count_in(int fd)
{
        DIR *d;
        struct dirent *e;
        size_t n = 0;

        if (fdio_opendir(fd, &d) < 0)
                return 0;
        while ((e = readdir(d)))
                n += e->d_name[0] != '.';
        closedir(d);
        return n;
}

/* fn(uid directory) summed over every uid's directory below dirfd. */
static int sum_uids(int dirfd, size_t (*fn)(int uidfd), size_t *ret_n)
{
        DIR *d;
        struct dirent *e;
        size_t n = 0;
        int r = fdio_opendir(dirfd, &d), fd;

        if (r < 0)
                return r;
        while ((e = readdir(d))) {
                if (e->d_name[0] == '.')
                        continue;
                fd = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd >= 0) {
                        n += fn(fd);
                        close(fd);
                }
        }
        closedir(d);
        *ret_n = n;
        return 0;
}

int savestore_count_all(int dirfd, size_t *ret_n)
{
        return sum_uids(dirfd, count_in, ret_n);
}

void savestore_tmp_name(const char *what, char *buf, size_t size)
{
        uint32_t x = 0;

        if (getrandom(&x, sizeof(x), 0) != (ssize_t)sizeof(x))
                x = (uint32_t)getpid() << 16 ^ (uint32_t)time(NULL);
        snprintf(buf, size, ".%s-%s-%s%08" PRIx32, what, node, life, x);
}

/* Whether name is one of this node's own left by an earlier daemon:
 * ".dump-NODE-" or ".remove-NODE-" and exactly 16 hex digits (so that node
 * "n1" is not "n1.a"'s prefix) not starting with this daemon's life. */
static bool stale(const char *name)
{
        static const char *const whats[] = { "dump", "remove" };
        char prefix[SAVESTORE_TMP_MAX];
        size_t n;

        for (size_t i = 0; i < 2; i++) {
                n = (size_t)snprintf(prefix, sizeof(prefix), ".%s-%s-", whats[i], node);
                if (strncmp(name, prefix, n) == 0 && strlen(name + n) == 16 &&
                    strspn(name + n, "0123456789abcdef") == 16 && strncmp(name + n, life, 8) != 0)
                        return true;
        }
        return false;
}

/* This node's own names in one uid's directory, removed. */
static size_t sweep_uid(int uidfd)
{
        DIR *d;
        struct dirent *e;
        size_t n = 0;

        if (fdio_opendir(uidfd, &d) < 0)
                return 0;
        while ((e = readdir(d)))
                if (stale(e->d_name) && savestore_remove_tree(uidfd, e->d_name) == 0)
                        n++;
        closedir(d);
        if (n > 0)
                (void)fsync(uidfd);
        return n;
}

static void hold_name(const char *save, char *buf, size_t size)
{
        snprintf(buf, size, ".hold-%s", save);
}

int savestore_hold(int uidfd, const char *save, int *ret_fd)
{
        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
        char name[SAVESTORE_NAME_MAX + 8];
        int fd, r;

        hold_name(save, name, sizeof(name));
        for (int tries = 0; tries < HOLD_TRIES; tries++) {
                struct stat held, named;

                fd = openat(uidfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd < 0)
                        return -errno;
                if (fcntl(fd, F_OFD_SETLK, &fl) < 0) {
                        r = errno == EAGAIN || errno == EACCES ? -EBUSY : -errno;
                        close(fd);
                        return r;
                }
                /* A holder removes the file before it lets go
                 * (savestore_unhold()): a lock taken on the file it removed
                 * after this one opened it holds nothing, as the next
                 * holder makes a new file. */
                if (fstat(fd, &held) == 0 && fstatat(uidfd, name, &named, AT_SYMLINK_NOFOLLOW) == 0 &&
                    held.st_dev == named.st_dev && held.st_ino == named.st_ino) {
                        *ret_fd = fd;
                        return 0;
                }
                close(fd);
        }
        return -EBUSY;
}

void savestore_unhold(int uidfd, const char *save)
{
        char name[SAVESTORE_NAME_MAX + 8];

        hold_name(save, name, sizeof(name));
        (void)unlinkat(uidfd, name, 0);
}

int savestore_sweep(int dirfd, size_t *ret_n)
{
        *ret_n = 0;
        return sum_uids(dirfd, sweep_uid, ret_n);
}

static int remove_in(int fd, int depth)
{
        DIR *d;
        struct dirent *e;
        int r = fdio_opendir(fd, &d), r2;

        if (r < 0)
                return r;
        while ((e = readdir(d))) {
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                        continue;
                if (unlinkat(fd, e->d_name, 0) == 0)
                        continue;
                if (errno != EISDIR || depth >= TREE_DEPTH_MAX) {
                        r = -errno;
                        continue;
                }
                int sub = openat(fd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                r2 = sub < 0 ? -errno : remove_in(sub, depth + 1);
                if (sub >= 0)
                        close(sub);
                if (r2 == 0 && unlinkat(fd, e->d_name, AT_REMOVEDIR) < 0)
                        r2 = -errno;
                if (r2 < 0)
                        r = r2;
        }
        closedir(d);
        return r;
}

int savestore_remove_tree(int dirfd, const char *name)
{
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), r;

        if (fd < 0)
                return errno == ENOTDIR ? (unlinkat(dirfd, name, 0) < 0 ? -errno : 0) : -errno;
        r = remove_in(fd, 0);
        close(fd);
        if (r == 0 && unlinkat(dirfd, name, AT_REMOVEDIR) < 0)
                r = -errno;
        return r;
}

int savestore_install(int uidfd, const char *tmp, const char *save, bool replace)
{
        int r = 0;

        if (renameat2(uidfd, tmp, uidfd, save, RENAME_NOREPLACE) == 0)
                return fsync(uidfd) < 0 ? -errno : 0;
        if (errno != EEXIST || !replace)
                return -errno;
        /* The old save goes under tmp's name and the new one under save's
         * in one step: at no time is there no save of that name. */
        if (renameat2(uidfd, tmp, uidfd, save, RENAME_EXCHANGE) < 0)
                return -errno;
        if (fsync(uidfd) < 0)
                return -errno;
        (void)savestore_remove_tree(uidfd, tmp);
        if (fsync(uidfd) < 0)
                r = -errno;
        return r;
}

int savestore_remove(int uidfd, const char *save)
{
        char tmp[SAVESTORE_TMP_MAX];
        int r;

        if (save[0] == '.')
                return -ENOENT;
        savestore_tmp_name("remove", tmp, sizeof(tmp));
        if (renameat2(uidfd, save, uidfd, tmp, RENAME_NOREPLACE) < 0)
                return -errno;
        if (fsync(uidfd) < 0)
                return -errno;
        r = savestore_remove_tree(uidfd, tmp);
        if (fsync(uidfd) < 0 && r == 0)
                r = -errno;
        return r;
}
