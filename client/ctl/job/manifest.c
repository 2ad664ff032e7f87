/* manifest.c: DIR/manifest.json, what a dump wrote into its image
 * directory, for restore --images.
 *
 *   {"format": "cudackpt-job", "version": 1, "created": "2026-12-03T10:00:00Z",
 *    "host": "node7", "selector": {"tree": 4242}, "criu_version": "4.2",
 *    "left_running": false,
 *    "trees": [{"root": 4242, "images": "tree-4242", "pids": [4242, 4243],
 *               "files": [{"name": "core-4242.img", "size": 1207, "xxh3_128": "5c1e..."}]}],
 *    "members": [{"pid": 4243, "start_time": 4526521, "tree": 4242,
 *                 "gpus": ["GPU-6987cd69-a0ec-5a42-c1ab-ecda53d34e96"]}]}
 *
 * One image directory per tree root (criu's own images and its logs);
 * members are the CUDA processes the daemon suspended, with the GPUs they
 * held memory on before (absent when the daemon had no NVML); each tree's
 * "files" (digest.c: absent in a manifest older than them).  The file is
 * written last, so a directory with a manifest holds a complete dump; read,
 * it is checked as input from anywhere (the images name only directories
 * of the form tree-PID inside DIR). */
#include "manifest.h"
#include "fdio.h"

#include "manifestgpu.h"
#include "manifestns.h"
#include "safedir.h"
#include "json.h"

#include <cJSON.h>

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MANIFEST_FORMAT "cudackpt-job"
#define MANIFEST_VERSION 1
#define MANIFEST_MAX_BYTES (16 * 1024 * 1024)
/* The most JSON values (objects, arrays, numbers, strings...) a manifest
 * may hold: cJSON takes some 70 bytes for each, and 16 MiB of "0,"
 * (1.6 kB of zstd in an archive) made 680 MB of them.  A dump with the
 * most files the digests allow (CTL_DIGEST_MAX_FILES, 4 values each) and
 * its trees and members stays far below. */
#define MANIFEST_MAX_VALUES 1000000

static cJSON *manifest_int_array(const int *v, size_t n) {
        cJSON *a = cJSON_CreateArray();

        for (size_t i = 0; a && i < n; i++) {
                cJSON *x = cJSON_CreateNumber(v[i]);
                if (!x || !cJSON_AddItemToArray(a, x)) {
                        cJSON_Delete(x);
                        cJSON_Delete(a);
                        return NULL;
                }
        }
        return a;
}

static bool manifest_add_member(cJSON *arr, const ctl_manifest_member *m) {
        cJSON *o = cJSON_CreateObject(), *g;

        if (!o || !cJSON_AddItemToArray(arr, o))
                return cJSON_Delete(o), false;
        if (!cJSON_AddNumberToObject(o, "pid", m->pid) ||
            !cJSON_AddNumberToObject(o, "start_time", (double) m->start_time) ||
            !cJSON_AddNumberToObject(o, "tree", m->tree) || !ctl_manifest_ns_write_member(o, m->ns_pid))
                return false;
        if (!m->gpus)
                return true;
        g = cJSON_AddArrayToObject(o, "gpus");
        for (size_t i = 0; g && i < m->n_gpus; i++) {
                cJSON *s = cJSON_CreateString(m->gpus[i]);
                if (!s || !cJSON_AddItemToArray(g, s))
                        return cJSON_Delete(s), false;
        }
        return g != NULL;
}

static cJSON *manifest_to_json(const ctl_manifest *m) {
        cJSON *root = cJSON_CreateObject(), *trees, *members;
        char created[32] = "", host[256] = "";
        time_t now = time(NULL);
        struct tm tm;

        if (!root)
                return NULL;
        if (gmtime_r(&now, &tm))
                strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%SZ", &tm);
        if (gethostname(host, sizeof(host) - 1) < 0)
                host[0] = '\0';
        if (!cJSON_AddStringToObject(root, "format", MANIFEST_FORMAT) ||
            !cJSON_AddNumberToObject(root, "version", MANIFEST_VERSION) ||
            !cJSON_AddStringToObject(root, "created", created) || !cJSON_AddStringToObject(root, "host", host) ||
            !cJSON_AddItemToObject(root, "selector", cJSON_Duplicate(m->selector, 1)) ||
            !cJSON_AddStringToObject(root, "criu_version", m->criu_version ? m->criu_version : "") ||
            !cJSON_AddBoolToObject(root, "left_running", m->left_running) ||
            (m->run && !cJSON_AddItemToObject(root, "run", cJSON_Duplicate(m->run, 1))))
                goto fail;
        trees = cJSON_AddArrayToObject(root, "trees");
        members = cJSON_AddArrayToObject(root, "members");
        if (!trees || !members)
                goto fail;
        for (size_t i = 0; i < m->n_trees; i++) {
                cJSON *t = cJSON_CreateObject();
                if (!t || !cJSON_AddItemToArray(trees, t))
                        goto fail_item;
                if (!cJSON_AddNumberToObject(t, "root", m->trees[i].root) ||
                    !cJSON_AddStringToObject(t, "images", m->trees[i].images) ||
                    !cJSON_AddItemToObject(t, "pids", manifest_int_array(m->trees[i].pids, m->trees[i].n_pids)) ||
                    !ctl_manifest_ns_write_tree(t, m->trees[i].pid_ns, m->trees[i].ns_pids, m->trees[i].n_pids) ||
                    !ctl_manifest_ns_write_mnt(t, m->trees[i].mnt_ns) ||
                    (m->trees[i].files && !cJSON_AddItemToObject(t, "files", ctl_digest_to_json(m->trees[i].files))))
                        goto fail;
                continue;
        fail_item:
                cJSON_Delete(t);
                goto fail;
        }
        for (size_t i = 0; i < m->n_members; i++)
                if (!manifest_add_member(members, &m->members[i]))
                        goto fail;
        if (m->devices && !ctl_devrec_write(m->devices, root))
                goto fail;
        return root;
fail:
        cJSON_Delete(root);
        return NULL;
}

int ctl_manifest_create_part(int dir_fd, char *name, size_t size) {
        unsigned char rnd[12];
        char hex[2 * sizeof(rnd) + 1];
        int fd;

        /* A name no one can guess, made afresh: nothing there is written through. */
        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t) sizeof(rnd))
                return -EIO;
        for (size_t i = 0; i < sizeof(rnd); i++)
                snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
        if ((size_t) snprintf(name, size, "%s.tmp-%s", CTL_MANIFEST_NAME, hex) >= size)
                return -ENAMETOOLONG;
        fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        return fd < 0 ? -errno : fd;
}

int ctl_manifest_write(const ctl_manifest *m, int dir_fd, int fd, const char *part_name) {
        cJSON *root = manifest_to_json(m);
        char *text = root ? cJSON_Print(root) : NULL;
        int r;

        cJSON_Delete(root);
        if (!text)
                return -ENOMEM;
        r = fdio_write_all(fd, text, strlen(text));
        if (r < 0)
                goto out;
        /* On disk before its name says the dump is complete, and the name
         * on disk before the command says so. */
        if (write(fd, "\n", 1) != 1 || fsync(fd) < 0 || renameat(dir_fd, part_name, dir_fd, CTL_MANIFEST_NAME) < 0 ||
            fsync(dir_fd) < 0)
                r = -errno;
out:
        cJSON_free(text);
        return r;
}

/* ---- reading ------------------------------------------------------------------ */

/* A whole number from 1 to INT_MAX. */
static bool manifest_is_pid(const cJSON *v) {
        return json_is_integer(v, 1, INT_MAX);
}

static bool manifest_pid(const cJSON *o, const char *key, int *ret) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

        if (!manifest_is_pid(v))
                return false;
        *ret = (int) v->valuedouble;
        return true;
}

static int manifest_read_tree(const cJSON *t, ctl_manifest_tree *ret) {
        const cJSON *images = cJSON_GetObjectItemCaseSensitive(t, "images");
        const cJSON *pids = cJSON_GetObjectItemCaseSensitive(t, "pids"), *p;
        const cJSON *files = cJSON_GetObjectItemCaseSensitive(t, "files");
        char want[32];
        bool has_root = false;
        int r;

        if (!manifest_pid(t, "root", &ret->root) || !cJSON_IsString(images) || !cJSON_IsArray(pids))
                return -EINVAL;
        /* Only the name dump gives it: nothing outside DIR. */
        snprintf(want, sizeof(want), "tree-%d", ret->root);
        if (strcmp(images->valuestring, want) != 0)
                return -EINVAL;
        ret->images = strdup(want);
        ret->pids = calloc((size_t) cJSON_GetArraySize(pids) + 1, sizeof(int));
        if (!ret->images || !ret->pids)
                return -ENOMEM;
        cJSON_ArrayForEach(p, pids) {
                if (!manifest_is_pid(p))
                        return -EINVAL;
                ret->pids[ret->n_pids++] = (int) p->valuedouble;
                has_root |= ret->pids[ret->n_pids - 1] == ret->root;
        }
        /* criu restores the tree from its root: the root is among its processes. */
        if (!has_root)
                return -EBADMSG;
        r = ctl_manifest_ns_read_tree(t, ret->root, ret->pids, ret->n_pids, &ret->pid_ns, &ret->ns_pids);
        if (r == 0)
                r = ctl_manifest_ns_read_mnt(t, ret->pid_ns, &ret->mnt_ns);
        if (r < 0 || !files)
                return r;
        ret->files = calloc(1, sizeof(*ret->files));
        return ret->files ? ctl_digest_from_json(files, ret->files) : -ENOMEM;
}

static int manifest_read_member(const cJSON *o, ctl_manifest_member *ret) {
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "start_time");
        const cJSON *gpus = cJSON_GetObjectItemCaseSensitive(o, "gpus"), *g;

        if (!manifest_pid(o, "pid", &ret->pid) || !manifest_pid(o, "tree", &ret->tree) ||
            ctl_manifest_ns_read_member(o, &ret->ns_pid) < 0)
                return -EINVAL;
        if (st && (!cJSON_IsNumber(st) || st->valuedouble < 0 || st->valuedouble > 9007199254740992.0 ||
                   st->valuedouble != (double) (uint64_t) st->valuedouble))
                return -EINVAL;
        if (st)
                ret->start_time = (uint64_t) st->valuedouble;
        if (!gpus)
                return 0;
        if (!cJSON_IsArray(gpus))
                return -EINVAL;
        ret->gpus = calloc((size_t) cJSON_GetArraySize(gpus) + 1, sizeof(char *));
        if (!ret->gpus)
                return -ENOMEM;
        cJSON_ArrayForEach(g, gpus) {
                if (!cJSON_IsString(g))
                        return -EINVAL;
                ret->gpus[ret->n_gpus] = strdup(g->valuestring);
                if (!ret->gpus[ret->n_gpus++])
                        return -ENOMEM;
        }
        return 0;
}

/* A pid of a tree, with the tree's root, sorted by pid. */
typedef struct manifest_pid_ref {
        int pid;
        int root;
} manifest_pid_ref;

static int manifest_cmp_ref(const void *a, const void *b) {
        const manifest_pid_ref *x = a, *y = b;

        return (x->pid > y->pid) - (x->pid < y->pid);
}

/* What restore relies on: no pid in two trees (so no root twice either),
 * every member once, in the tree it names.  -EBADMSG if not. */
static int manifest_check(const ctl_manifest *m) {
        manifest_pid_ref *refs, *found, key = { 0 };
        size_t n = 0, k = 0;
        int r = 0;

        for (size_t i = 0; i < m->n_trees; i++)
                n += m->trees[i].n_pids;
        refs = calloc(n + m->n_members + 1, sizeof(*refs));
        if (!refs)
                return -ENOMEM;
        for (size_t i = 0; i < m->n_trees; i++)
                for (size_t j = 0; j < m->trees[i].n_pids; j++)
                        refs[k++] = (manifest_pid_ref) { m->trees[i].pids[j], m->trees[i].root };
        qsort(refs, n, sizeof(*refs), manifest_cmp_ref);
        for (size_t i = 1; r == 0 && i < n; i++)
                if (refs[i].pid == refs[i - 1].pid)
                        r = -EBADMSG;
        for (size_t i = 0; r == 0 && i < m->n_members; i++) {
                key.pid = m->members[i].pid;
                found = bsearch(&key, refs, n, sizeof(*refs), manifest_cmp_ref);
                if (!found || found->root != m->members[i].tree)
                        r = -EBADMSG;
                refs[n + i].pid = m->members[i].pid;
        }
        qsort(refs + n, m->n_members, sizeof(*refs), manifest_cmp_ref);
        for (size_t i = n + 1; r == 0 && i < n + m->n_members; i++)
                if (refs[i].pid == refs[i - 1].pid)
                        r = -EBADMSG;
        free(refs);
        /* A member of a pid namespace's tree has its pid there (and only such a member). */
        for (size_t i = 0; r == 0 && i < m->n_members; i++)
                for (size_t t = 0; t < m->n_trees; t++)
                        if (m->trees[t].root == m->members[i].tree &&
                            m->members[i].ns_pid != ctl_manifest_ns_expected(m->members[i].pid, m->trees[t].pids,
                                                                             m->trees[t].ns_pids, m->trees[t].n_pids))
                                r = -EBADMSG;
        return r;
}

static int manifest_from_json(const cJSON *root, ctl_manifest *m) {
        const cJSON *format = cJSON_GetObjectItemCaseSensitive(root, "format");
        const cJSON *version = cJSON_GetObjectItemCaseSensitive(root, "version");
        const cJSON *trees = cJSON_GetObjectItemCaseSensitive(root, "trees");
        const cJSON *members = cJSON_GetObjectItemCaseSensitive(root, "members"), *x;
        const cJSON *cv = cJSON_GetObjectItemCaseSensitive(root, "criu_version");
        int r;

        if (!cJSON_IsString(format) || strcmp(format->valuestring, MANIFEST_FORMAT) != 0 ||
            !cJSON_IsNumber(version) || version->valuedouble != MANIFEST_VERSION || !cJSON_IsArray(trees) ||
            cJSON_GetArraySize(trees) == 0 || !cJSON_IsArray(members))
                return -EINVAL;
        if (cJSON_GetArraySize(trees) > CTL_JOB_MAX_TREES)
                return -E2BIG;
        m->left_running = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "left_running"));
        m->selector = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(root, "selector"), 1);
        /* Checked where it is used (runrestore.c). */
        if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "run")))
                m->run = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(root, "run"), 1);
        m->criu_version = strdup(cJSON_IsString(cv) ? cv->valuestring : "");
        m->trees = calloc((size_t) cJSON_GetArraySize(trees), sizeof(*m->trees));
        m->members = calloc((size_t) cJSON_GetArraySize(members) + 1, sizeof(*m->members));
        if (!m->criu_version || !m->trees || !m->members)
                return -ENOMEM;
        cJSON_ArrayForEach(x, trees) {
                r = manifest_read_tree(x, &m->trees[m->n_trees++]);
                if (r < 0)
                        return r;
                /* Digests for every tree or for none (a manifest before them). */
                if (!m->trees[m->n_trees - 1].files != !m->trees[0].files)
                        return -EINVAL;
        }
        cJSON_ArrayForEach(x, members) {
                r = manifest_read_member(x, &m->members[m->n_members++]);
                if (r < 0)
                        return r;
        }
        r = ctl_devrec_read(root, m->n_members, &m->devices);
        return r < 0 ? r : manifest_check(m);
}

/* DIR/manifest.json's text, read through dir_fd: a regular file (no
 * link followed, no FIFO waited on) of this user's that no one else may
 * write, since restore runs as root and believes it. */
static int manifest_load(int dir_fd, bool copy, char **ret, char *why, size_t why_size) {
        struct stat st;
        size_t len = 0;
        ssize_t k;
        char *text;
        int fd = openat(dir_fd, CTL_MANIFEST_NAME, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC), r = 0;

        if (fd < 0) {
                r = -errno;
                snprintf(why, why_size, "%s (not an image directory of cudackptctl dump?)",
                         r == -ELOOP ? "it is a symbolic link" : strerror(-r));
                return r;
        }
        if (fstat(fd, &st) < 0 || (copy ? !S_ISREG(st.st_mode) : !ctl_safedir_owned(&st, S_IFREG))) {
                if (copy)
                        snprintf(why, why_size, "it is not a regular file");
                else
                        snprintf(why, why_size, "it is not a regular file of uid %u that no one else may write",
                                 (unsigned) geteuid());
                close(fd);
                return -EPERM;
        }
        text = malloc(MANIFEST_MAX_BYTES + 1);
        while (text && len < MANIFEST_MAX_BYTES && (k = read(fd, text + len, MANIFEST_MAX_BYTES - len)) != 0) {
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0) {
                        r = -errno;
                        break;
                }
                len += (size_t) k;
        }
        close(fd);
        if (!text || r < 0) {
                snprintf(why, why_size, "%s", strerror(text ? -r : ENOMEM));
                free(text);
                return text ? r : -ENOMEM;
        }
        text[len] = '\0';
        *ret = text;
        return 0;
}

/* Whether text holds at most MANIFEST_MAX_VALUES values, counted as the
 * commas and opening brackets outside strings, plus one. */
static bool manifest_values_ok(const char *text) {
        size_t n = 1;
        bool in_string = false;

        for (const char *p = text; *p && n <= MANIFEST_MAX_VALUES; p++) {
                if (in_string && *p == '\\' && p[1])
                        p++;
                else if (*p == '"')
                        in_string = !in_string;
                else if (!in_string && (*p == ',' || *p == '[' || *p == '{'))
                        n++;
        }
        return n <= MANIFEST_MAX_VALUES;
}

static int manifest_read(int dir_fd, bool copy, const char *dir, ctl_manifest *ret, char *err, size_t err_size) {
        ctl_manifest m = { 0 };
        char *text = NULL, why[160];
        cJSON *root = NULL;
        int r;

        r = manifest_load(dir_fd, copy, &text, why, sizeof(why));
        if (r < 0) {
                snprintf(err, err_size, "cannot read %s/%s: %s", dir, CTL_MANIFEST_NAME, why);
                return r;
        }
        if (!manifest_values_ok(text)) {
                snprintf(err, err_size, "%s/%s: more than %d JSON values: not as dump writes it", dir,
                         CTL_MANIFEST_NAME, MANIFEST_MAX_VALUES);
                free(text);
                return -EINVAL;
        }
        root = cJSON_Parse(text);
        r = root ? manifest_from_json(root, &m) : -EINVAL;
        if (r < 0) {
                snprintf(err, err_size, "%s/%s: %s", dir, CTL_MANIFEST_NAME,
                         r == -ENOMEM  ? "out of memory"
                         : r == -E2BIG ? "more trees than restore runs at once (" CTL_JOB_MAX_TREES_TEXT ")"
                         : r == -EBADMSG
                                 ? "its trees and members do not agree (a tree without its root, a pid in two "
                                   "trees or twice a member, a member outside its tree): not as dump wrote it"
                                 : "not a manifest of cudackptctl dump (format 1)");
                ctl_manifest_free(&m);
        } else
                *ret = m;
        cJSON_Delete(root);
        free(text);
        return r;
}

int ctl_manifest_read(int dir_fd, const char *dir, ctl_manifest *ret, char *err, size_t err_size) {
        return manifest_read(dir_fd, false, dir, ret, err, err_size);
}

int ctl_manifest_read_copy(int dir_fd, const char *dir, ctl_manifest *ret, char *err, size_t err_size) {
        return manifest_read(dir_fd, true, dir, ret, err, err_size);
}

bool ctl_manifest_has_digests(const ctl_manifest *m) {
        return m->n_trees > 0 && m->trees[0].files;
}

void ctl_manifest_free(ctl_manifest *m) {
        if (!m)
                return;
        cJSON_Delete(m->selector);
        cJSON_Delete(m->run);
        free(m->criu_version);
        for (size_t i = 0; m->trees && i < m->n_trees; i++) {
                free(m->trees[i].images);
                free(m->trees[i].pids);
                free(m->trees[i].ns_pids);
                ctl_digest_set_free(m->trees[i].files);
                free(m->trees[i].files);
        }
        free(m->trees);
        for (size_t i = 0; m->members && i < m->n_members; i++) {
                for (size_t j = 0; m->members[i].gpus && j < m->members[i].n_gpus; j++)
                        free(m->members[i].gpus[j]);
                free(m->members[i].gpus);
        }
        free(m->members);
        ctl_devrec_free(m->devices);
        *m = (ctl_manifest) { 0 };
}
