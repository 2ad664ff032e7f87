/* digest.c: XXH3-128 of every image file, computed and checked by a small
 * pool of threads (see digest.h).
 *
 * The work is one list of files over every tree, largest first, taken one
 * at a time by up to CTL_DIGEST_MAX_THREADS threads: a job's images are a
 * few large page files and many small ones, and one tree is the common
 * case, so a thread per tree alone would hash the big file on one core
 * while the others wait.  Each file is opened through its tree's
 * directory descriptor (O_NOFOLLOW, no FIFO waited on) and must be a
 * regular file. */
#include "digest.h"
#include "fdio.h"

#include "json.h"

#include <xxhash.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DIGEST_BUF (1024 * 1024)

int ctl_hasher_init(ctl_hasher *h) {
        h->bytes = 0;
        h->state = XXH3_createState();
        if (!h->state || XXH3_128bits_reset(h->state) != XXH_OK) {
                XXH3_freeState(h->state);
                h->state = NULL;
                return -ENOMEM;
        }
        return 0;
}

void ctl_hasher_update(ctl_hasher *h, const void *data, size_t len) {
        (void) XXH3_128bits_update(h->state, data, len);
        h->bytes += len;
}

void ctl_hasher_finish(ctl_hasher *h, char hex[CTL_DIGEST_HEX_SIZE]) {
        XXH128_canonical_t c;

        XXH128_canonicalFromHash(&c, XXH3_128bits_digest(h->state));
        for (size_t i = 0; i < sizeof(c.digest); i++)
                snprintf(hex + 2 * i, 3, "%02x", c.digest[i]);
        XXH3_freeState(h->state);
        h->state = NULL;
}

bool ctl_digest_skipped_name(const char *name) {
        return strcmp(name, "dump.log") == 0 || strcmp(name, "restore.log") == 0 ||
               strcmp(name, "stats-restore") == 0;
}

bool ctl_digest_name_ok(const char *name) {
        size_t len = strlen(name);

        if (len == 0 || len > 255 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
                return false;
        for (size_t i = 0; i < len; i++)
                if (name[i] == '/' || name[i] <= ' ' || name[i] > '~')
                        return false;
        return true;
}

/* ---- the pool --------------------------------------------------------------- */

/* One file to hash. */
typedef struct digest_item {
        const ctl_digest_tree *tree;
        const char *name;
        const ctl_digest_file *want;      /* verify: the manifest's; compute: NULL */
        uint64_t size;                    /* read */
        char hex[CTL_DIGEST_HEX_SIZE];
        int r;                            /* 0, -errno, -EFBIG/-EBADMSG (verify) */
} digest_item;

typedef struct digest_pool {
        digest_item *items;
        size_t n;
        atomic_size_t next;
        atomic_uint_fast64_t bytes;
} digest_pool;

/* Hashes it->name in its tree; the bytes read. */
static void digest_one(digest_item *it, char *buf) {
        int fd = openat(it->tree->dir_fd, it->name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        struct stat st;
        ctl_hasher h;
        ssize_t k;

        if (fd < 0) {
                it->r = errno == ELOOP ? -EBADMSG : -errno;
                return;
        }
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                it->r = -EBADMSG;
                close(fd);
                return;
        }
        /* Truncated or grown: said without reading it. */
        if (it->want && (uint64_t) st.st_size != it->want->size) {
                it->size = (uint64_t) st.st_size;
                it->r = -EFBIG;
                close(fd);
                return;
        }
        (void) posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
        it->r = ctl_hasher_init(&h);
        while (it->r == 0 && (k = read(fd, buf, DIGEST_BUF)) != 0) {
                if (k < 0 && errno != EINTR)
                        it->r = -errno;
                else if (k > 0)
                        ctl_hasher_update(&h, buf, (size_t) k);
        }
        close(fd);
        it->size = h.bytes;
        if (h.state)
                ctl_hasher_finish(&h, it->hex);
        if (it->r == 0 && it->want && it->size != it->want->size)
                it->r = -EFBIG;
        else if (it->r == 0 && it->want && strcmp(it->hex, it->want->hex) != 0)
                it->r = -EBADMSG;
}

static void *digest_worker(void *data) {
        digest_pool *p = data;
        char *buf = malloc(DIGEST_BUF);
        size_t i;

        while ((i = atomic_fetch_add(&p->next, 1)) < p->n) {
                if (!buf) {
                        p->items[i].r = -ENOMEM;
                        continue;
                }
                digest_one(&p->items[i], buf);
                atomic_fetch_add(&p->bytes, p->items[i].size);
        }
        free(buf);
        return NULL;
}

/* Every item hashed, by up to CTL_DIGEST_MAX_THREADS threads. */
static uint64_t digest_run(digest_item *items, size_t n) {
        digest_pool p = { .items = items, .n = n };
        pthread_t th[CTL_DIGEST_MAX_THREADS];
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        size_t want = cpus < 1 ? 1 : (size_t) cpus, started = 0;

        atomic_init(&p.next, 0);
        atomic_init(&p.bytes, 0);
        if (want > CTL_DIGEST_MAX_THREADS)
                want = CTL_DIGEST_MAX_THREADS;
        if (want > n)
                want = n;
        /* The calling thread is one of them. */
        for (; started + 1 < want; started++)
                if (pthread_create(&th[started], NULL, digest_worker, &p) != 0)
                        break;
        digest_worker(&p);
        for (size_t i = 0; i < started; i++)
                pthread_join(th[i], NULL);
        return atomic_load(&p.bytes);
}

/* ---- listing the directories ------------------------------------------------ */

typedef struct digest_list {
        digest_item *items;
        size_t n, cap;
        char **names;                     /* owned copies of the names */
} digest_list;

static int digest_list_add(digest_list *l, const ctl_digest_tree *t, const char *name, off_t size) {
        if (l->n == l->cap) {
                size_t cap = l->cap ? 2 * l->cap : 64;
                digest_item *items = realloc(l->items, cap * sizeof(*items));
                char **names = items ? realloc(l->names, cap * sizeof(*names)) : NULL;

                if (items)
                        l->items = items;
                if (!names)
                        return -ENOMEM;
                l->names = names;
                l->cap = cap;
        }
        l->names[l->n] = strdup(name);
        if (!l->names[l->n])
                return -ENOMEM;
        l->items[l->n] = (digest_item) { .tree = t, .name = l->names[l->n], .size = (uint64_t) size };
        l->n++;
        return 0;
}

static void digest_list_free(digest_list *l) {
        for (size_t i = 0; i < l->n; i++)
                free(l->names[i]);
        free(l->names);
        free(l->items);
}

/* Each entry of t's directory but "." and ".."; -EBADMSG for the first
 * that is not a regular file, or one not named as an image may be (its
 * name into bad).  Skipped names (regular files too) are left out. */
static int digest_list_tree(digest_list *l, const ctl_digest_tree *t, char *bad, size_t bad_size) {
        struct dirent *de;
        struct stat st;
        DIR *d;
        int r = fdio_opendir(t->dir_fd, &d);

        if (r < 0)
                return r;
        while (r == 0 && (errno = 0, de = readdir(d))) {
                bool skipped = ctl_digest_skipped_name(de->d_name);

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                /* A log criu would write through (a link) is no log. */
                if (!ctl_digest_name_ok(de->d_name) ||
                    fstatat(t->dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode)) {
                        snprintf(bad, bad_size, "%s/%s", t->name, de->d_name);
                        r = -EBADMSG;
                } else if (!skipped)
                        r = digest_list_add(l, t, de->d_name, st.st_size);
        }
        if (r == 0 && errno)
                r = -errno;
        closedir(d);
        return r;
}

static int digest_cmp_size(const void *a, const void *b) {
        const digest_item *x = a, *y = b;

        return (x->size < y->size) - (x->size > y->size);
}

static int digest_cmp_file(const void *a, const void *b) {
        return strcmp(((const ctl_digest_file *) a)->name, ((const ctl_digest_file *) b)->name);
}

const ctl_digest_file *ctl_digest_find(const ctl_digest_set *set, const char *name) {
        ctl_digest_file key = { .name = (char *) name };

        return set->n ? bsearch(&key, set->files, set->n, sizeof(key), digest_cmp_file) : NULL;
}

/* The results of l's items of tree t into t->set, sorted by name. */
static int digest_collect(const digest_list *l, const ctl_digest_tree *t) {
        size_t k = 0;

        ctl_digest_set_free(t->set);
        for (size_t i = 0; i < l->n; i++)
                k += l->items[i].tree == t;
        t->set->files = calloc(k + 1, sizeof(*t->set->files));
        if (!t->set->files)
                return -ENOMEM;
        for (size_t i = 0; i < l->n; i++) {
                ctl_digest_file *f = &t->set->files[t->set->n];

                if (l->items[i].tree != t)
                        continue;
                f->name = strdup(l->items[i].name);
                if (!f->name)
                        return -ENOMEM;
                f->size = l->items[i].size;
                memcpy(f->hex, l->items[i].hex, sizeof(f->hex));
                t->set->n++;
        }
        qsort(t->set->files, t->set->n, sizeof(*t->set->files), digest_cmp_file);
        return 0;
}

int ctl_digest_compute(ctl_digest_tree *trees, size_t n, uint64_t *ret_bytes, char *err, size_t err_size) {
        digest_list l = { 0 };
        char bad[300] = "";
        uint64_t bytes = 0;
        int r = 0;

        for (size_t i = 0; r == 0 && i < n; i++)
                r = digest_list_tree(&l, &trees[i], bad, sizeof(bad));
        if (r == 0) {
                qsort(l.items, l.n, sizeof(*l.items), digest_cmp_size);
                bytes = digest_run(l.items, l.n);
        }
        for (size_t i = 0; r == 0 && i < l.n; i++)
                if (l.items[i].r < 0) {
                        snprintf(bad, sizeof(bad), "%s/%s", l.items[i].tree->name, l.items[i].name);
                        r = l.items[i].r;
                }
        for (size_t i = 0; r == 0 && i < n; i++)
                r = digest_collect(&l, &trees[i]);
        if (r < 0)
                snprintf(err, err_size, "%s%s%s", bad, *bad ? ": " : "",
                         r == -EBADMSG ? "not a regular file named as criu names its images" : strerror(-r));
        if (ret_bytes)
                *ret_bytes = bytes;
        digest_list_free(&l);
        return r;
}

/* What is wrong with item it, said into err. */
static void digest_say(const digest_item *it, char *err, size_t err_size) {
        const char *t = it->tree->name;

        if (it->r == -ENOENT)
                snprintf(err, err_size, "%s/%s is missing", t, it->name);
        else if (it->r == -EFBIG)
                snprintf(err, err_size, "%s/%s is %s: %llu bytes, the manifest says %llu", t, it->name,
                         it->size < it->want->size ? "truncated" : "longer than it was dumped",
                         (unsigned long long) it->size, (unsigned long long) it->want->size);
        else if (it->r == -EBADMSG && it->hex[0])
                snprintf(err, err_size, "%s/%s was changed: its digest is not the manifest's", t, it->name);
        else if (it->r == -EBADMSG)
                snprintf(err, err_size, "%s/%s is not a regular file", t, it->name);
        else
                snprintf(err, err_size, "%s/%s: %s", t, it->name, strerror(-it->r));
}

/* Verify's list: the manifest's files of every tree, and the first entry
 * of a directory the manifest does not name (into err). */
static int digest_verify_list(const ctl_digest_tree *trees, size_t n, digest_list *l, char *err, size_t err_size) {
        char bad[300] = "";
        int r = 0;

        for (size_t i = 0; r == 0 && i < n; i++) {
                digest_list found = { 0 };

                r = digest_list_tree(&found, &trees[i], bad, sizeof(bad));
                for (size_t j = 0; r == 0 && j < found.n; j++)
                        /* criu writes its dump's statistics after
                         * post-dump, where dump computes the digests: a
                         * stats-dump the manifest does not name is
                         * criu's (an older dump's manifest names it,
                         * and it is then checked). */
                        if (!ctl_digest_find(trees[i].set, found.items[j].name) &&
                            strcmp(found.items[j].name, "stats-dump") != 0) {
                                snprintf(bad, sizeof(bad), "%s/%s", trees[i].name, found.items[j].name);
                                r = -EEXIST;
                        }
                digest_list_free(&found);
                for (size_t j = 0; r == 0 && j < trees[i].set->n; j++) {
                        r = digest_list_add(l, &trees[i], trees[i].set->files[j].name, 0);
                        if (r == 0)
                                l->items[l->n - 1].want = &trees[i].set->files[j];
                }
        }
        if (r == -EBADMSG || r == -EEXIST)
                snprintf(err, err_size, "%s %s", bad, r == -EEXIST ? "is not in the manifest (an extra file)"
                                                                    : "is not a regular file named as criu names its images");
        else if (r < 0)
                snprintf(err, err_size, "%s", strerror(-r));
        return r == -EEXIST ? -EBADMSG : r;
}

int ctl_digest_verify(const ctl_digest_tree *trees, size_t n, uint64_t *ret_bytes, char *err, size_t err_size) {
        digest_list l = { 0 };
        uint64_t bytes = 0;
        int r = digest_verify_list(trees, n, &l, err, err_size);

        if (r == 0)
                bytes = digest_run(l.items, l.n);
        /* The first in the manifest's order: the same message every time. */
        for (size_t i = 0; r == 0 && i < l.n; i++)
                if (l.items[i].r < 0) {
                        digest_say(&l.items[i], err, err_size);
                        r = l.items[i].r == -ENOENT || l.items[i].r == -EFBIG ? -EBADMSG : l.items[i].r;
                }
        if (ret_bytes)
                *ret_bytes = bytes;
        digest_list_free(&l);
        return r;
}

/* ---- JSON ------------------------------------------------------------------- */

cJSON *ctl_digest_to_json(const ctl_digest_set *set) {
        cJSON *a = cJSON_CreateArray();

        for (size_t i = 0; a && i < set->n; i++) {
                cJSON *o = cJSON_CreateObject();

                if (o && !cJSON_AddItemToArray(a, o)) {
                        cJSON_Delete(o);
                        o = NULL;
                }
                /* o, once in a, goes with it. */
                if (!o || !cJSON_AddStringToObject(o, "name", set->files[i].name) ||
                    !cJSON_AddNumberToObject(o, "size", (double) set->files[i].size) ||
                    !cJSON_AddStringToObject(o, "xxh3_128", set->files[i].hex)) {
                        cJSON_Delete(a);
                        return NULL;
                }
        }
        return a;
}

static bool digest_hex_ok(const char *s) {
        if (strlen(s) != CTL_DIGEST_HEX_SIZE - 1)
                return false;
        for (; *s; s++)
                if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
                        return false;
        return true;
}

int ctl_digest_from_json(const cJSON *files, ctl_digest_set *ret) {
        const cJSON *o;
        int count = cJSON_GetArraySize(files);

        *ret = (ctl_digest_set) { 0 };
        if (!cJSON_IsArray(files) || count > CTL_DIGEST_MAX_FILES)
                return -EINVAL;
        ret->files = calloc((size_t) count + 1, sizeof(*ret->files));
        if (!ret->files)
                return -ENOMEM;
        cJSON_ArrayForEach(o, files) {
                const char *name = json_get_string(o, "name"), *hex = json_get_string(o, "xxh3_128");
                long long size;
                ctl_digest_file *f = &ret->files[ret->n];

                if (!name || !hex || !json_get_integer(o, "size", 0, JSON_MAX_EXACT, &size) ||
                    !ctl_digest_name_ok(name) || ctl_digest_skipped_name(name) || !digest_hex_ok(hex) ||
                    (ret->n > 0 && strcmp(ret->files[ret->n - 1].name, name) >= 0))
                        return -EINVAL;
                f->name = strdup(name);
                if (!f->name)
                        return -ENOMEM;
                f->size = (uint64_t) size;
                memcpy(f->hex, hex, sizeof(f->hex));
                ret->n++;
        }
        return 0;
}

void ctl_digest_set_free(ctl_digest_set *set) {
        if (!set)
                return;
        for (size_t i = 0; set->files && i < set->n; i++)
                free(set->files[i].name);
        free(set->files);
        *set = (ctl_digest_set) { 0 };
}
