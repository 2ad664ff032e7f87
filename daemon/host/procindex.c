/* procindex.c: the process index (procindex.h), user space side. */
#include "host/procindex.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if CUDACKPT_HAVE_BPF

#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "base/log.h"

/* The compiled procindex.bpf.c (procindex-bpf.c, generated). */
extern const unsigned char procindex_bpf_object[];
extern const size_t procindex_bpf_object_len;

enum { MMAP_FENTRY, MMAP_TP, FORK, EXEC, EXIT, N_PROGS };
static const char *const prog_names[N_PROGS] = {
        "procindex_mmap_fentry", "procindex_mmap_tp", "procindex_fork", "procindex_exec", "procindex_exit",
};

/* The driver map's value (procindex.bpf.c). */
struct driver_file {
        uint64_t dev, ino;
};

struct procindex {
        struct bpf_object *obj;
        struct bpf_link *links[N_PROGS];
        int procs_fd, lost_fd;
        unsigned max;
        const char *hook;
        atomic_size_t last_size;
};

/* libbpf's own messages are for debugging only: why a way failed is said
 * once, by the caller. */
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
        char buf[512];
        size_t n;

        if (level == LIBBPF_DEBUG)
                return 0;
        vsnprintf(buf, sizeof(buf), fmt, ap);
        n = strlen(buf);
        while (n > 0 && buf[n - 1] == '\n')
                buf[--n] = '\0';
        log_debug("%s", buf);
        return 0;
}

static void close_obj(struct procindex *ix)
{
        for (int i = 0; i < N_PROGS; i++) {
                bpf_link__destroy(ix->links[i]);
                ix->links[i] = NULL;
        }
        bpf_object__close(ix->obj);
        ix->obj = NULL;
}

/* Attaches the programs to load (progs, of the object loaded). */
static int attach(struct procindex *ix, struct bpf_program *progs[N_PROGS], char *why, size_t why_len)
{
        for (int i = 0; i < N_PROGS; i++) {
                if (!bpf_program__autoload(progs[i]))
                        continue;
                ix->links[i] = bpf_program__attach(progs[i]);
                if (!ix->links[i]) {
                        int r = -errno;
                        ix->links[i] = NULL;
                        snprintf(why, why_len, "cannot attach %s: %s", prog_names[i], strerror(-r));
                        return r;
                }
        }
        return 0;
}

/* Loads the object with one way of seeing mmaps and attaches it. */
static int load(struct procindex *ix, const struct discover_lib *lib, int mmap_prog, char *why, size_t why_len)
{
        LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "cudackpt_index");
        struct bpf_program *progs[N_PROGS];
        struct bpf_map *procs, *driver, *lost;
        struct driver_file d = { 0 };
        uint32_t k = 0;
        int r;

        ix->obj = bpf_object__open_mem(procindex_bpf_object, procindex_bpf_object_len, &opts);
        if (!ix->obj) {
                r = -errno;
                snprintf(why, why_len, "cannot open the BPF object: %s", strerror(-r));
                return r;
        }
        for (int i = 0; i < N_PROGS; i++) {
                progs[i] = bpf_object__find_program_by_name(ix->obj, prog_names[i]);
                if (!progs[i]) {
                        snprintf(why, why_len, "the BPF object lacks %s", prog_names[i]);
                        return -ENOENT;
                }
        }
        (void)bpf_program__set_autoload(progs[mmap_prog == MMAP_FENTRY ? MMAP_TP : MMAP_FENTRY], false);
        procs = bpf_object__find_map_by_name(ix->obj, "procs");
        driver = bpf_object__find_map_by_name(ix->obj, "driver");
        lost = bpf_object__find_map_by_name(ix->obj, "lost");
        if (!procs || !driver || !lost) {
                snprintf(why, why_len, "the BPF object lacks its maps");
                return -ENOENT;
        }
        if ((r = bpf_map__set_max_entries(procs, ix->max)) < 0 || (r = bpf_object__load(ix->obj)) < 0) {
                snprintf(why, why_len, "the kernel refused the BPF program (%s): %s", prog_names[mmap_prog],
                         strerror(-r));
                return r;
        }
        ix->procs_fd = bpf_map__fd(procs);
        ix->lost_fd = bpf_map__fd(lost);
        if (lib->known) {
                /* The kernel's encoding of a device number (MKDEV). */
                d.dev = ((uint64_t)lib->major << 20) | lib->minor;
                d.ino = lib->ino;
        }
        if (bpf_map_update_elem(bpf_map__fd(driver), &k, &d, BPF_ANY) < 0) {
                r = -errno;
                snprintf(why, why_len, "cannot set the driver's file: %s", strerror(-r));
                return r;
        }
        r = attach(ix, progs, why, why_len);
        if (r == 0)
                ix->hook = mmap_prog == MMAP_FENTRY ? "fentry" : "tracepoint";
        return r;
}

static void mark_lost(struct procindex *ix)
{
        uint32_t k = 0;
        uint64_t lost = 1;

        (void)bpf_map_update_elem(ix->lost_fd, &k, &lost, BPF_ANY);
}

/* Passes of the first scans at most; past them the index is not trusted. */
#define SEED_MAX_PASSES 8

/* Adds every process that maps the driver now; the kernel adds those that
 * map it from the attach on, and the children of those in the index.  A
 * pass adds what its /proc listing shows; a child forked meanwhile by a
 * process the pass had not added yet is missed by both, so passes go on
 * until one adds nothing: then every process that existed when it began
 * was in the index already, and the kernel saw every fork since.  A maps
 * read that fails for another reason than the process being gone adds it
 * anyway (an entry too many costs a test; one too few, a process). */
static int seed(struct procindex *ix, const struct discover_lib *lib)
{
        const uint8_t one = 1;
        pid_t self = getpid();

        for (int pass = 0; pass < SEED_MAX_PASSES; pass++) {
                pid_t *pids = NULL;
                size_t n = 0, added = 0;
                int r = discover_all(&pids, &n);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < n; i++) {
                        uint32_t key = (uint32_t)pids[i];
                        int k = pids[i] == self ? 0 : discover_maps_driver(pids[i], lib);
                        if (k == 0 || k == -ENOENT || k == -ESRCH)
                                continue;
                        if (bpf_map_update_elem(ix->procs_fd, &key, &one, BPF_NOEXIST) == 0) {
                                added++;
                                continue;
                        }
                        if (errno == EEXIST)
                                continue;
                        if (errno != E2BIG) {
                                r = -errno;
                                free(pids);
                                return r;
                        }
                        mark_lost(ix); /* full: counted as the kernel side counts */
                }
                free(pids);
                if (added == 0)
                        return 0;
        }
        mark_lost(ix);
        return 0;
}

/* Maps the driver's file once and looks for this process in the index: the
 * hook works and its pids are this process's. */
static int self_check(struct procindex *ix, const struct discover_lib *lib, char *why, size_t why_len)
{
        uint32_t key = (uint32_t)getpid();
        uint8_t v;
        void *p;
        int fd, r;

        fd = open(lib->path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                r = -errno;
                snprintf(why, why_len, "cannot open the driver's file %s: %s", lib->path, strerror(-r));
                return r;
        }
        p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
        r = p == MAP_FAILED ? -errno : 0;
        close(fd);
        if (r < 0) {
                snprintf(why, why_len, "cannot map the driver's file: %s", strerror(-r));
                return r;
        }
        munmap(p, 4096);
        if (bpf_map_lookup_elem(ix->procs_fd, &key, &v) < 0) {
                snprintf(why, why_len, "the index did not see this process map the driver (%s; another pid namespace?)",
                         ix->hook);
                return -ENXIO;
        }
        /* The daemon is never a candidate of its own. */
        (void)bpf_map_delete_elem(ix->procs_fd, &key);
        return 0;
}

int procindex_open(const struct discover_lib *lib, unsigned max_entries, bool tracepoint, struct procindex **ret,
                   char *why, size_t why_len)
{
        struct procindex *ix;
        char first[256] = "";
        int r;

        *ret = NULL;
        if (!lib->known || !lib->path[0]) {
                snprintf(why, why_len, "the driver's file is not known");
                return -ENOENT;
        }
        ix = calloc(1, sizeof(*ix));
        if (!ix)
                return -ENOMEM;
        ix->max = max_entries;
        libbpf_set_print(libbpf_print);
        r = load(ix, lib, MMAP_FENTRY, first, sizeof(first));
        if (r < 0 && !tracepoint) {
                /* The tracepoint runs on every system call of every process
                 * on the node: only when asked for. */
                snprintf(why, why_len,
                         "no BPF trampolines here (%s), and the sys_enter_mmap tracepoint, which costs every "
                         "system call on the node, is off (process_index_tracepoint)",
                         first);
        } else if (r < 0) {
                close_obj(ix);
                r = load(ix, lib, MMAP_TP, why, why_len);
                if (r < 0) {
                        size_t n = strlen(why);
                        snprintf(why + n, why_len - n, "; with fentry: %s", first);
                }
        }
        if (r == 0)
                r = self_check(ix, lib, why, why_len);
        if (r == 0) {
                r = seed(ix, lib);
                if (r < 0)
                        snprintf(why, why_len, "cannot fill the index: %s", strerror(-r));
        }
        if (r == 0) {
                /* Reading it needs BPF_MAP_LOOKUP_BATCH (Linux 5.6). */
                pid_t *pids = NULL;
                size_t n = 0;
                r = procindex_candidates(ix, &pids, &n);
                free(pids);
                if (r == -EOVERFLOW)
                        r = 0; /* full already: the callers scan, and say why */
                else if (r < 0)
                        snprintf(why, why_len, "cannot read the index: %s", strerror(-r));
        }
        if (r < 0) {
                procindex_free(ix);
                return r;
        }
        *ret = ix;
        return 0;
}

void procindex_free(struct procindex *ix)
{
        if (!ix)
                return;
        close_obj(ix);
        free(ix);
}

const char *procindex_hook(const struct procindex *ix)
{
        return ix->hook;
}

size_t procindex_last_size(const struct procindex *ix)
{
        return atomic_load_explicit(&ix->last_size, memory_order_relaxed);
}

static bool lost_any(struct procindex *ix)
{
        uint32_t k = 0;
        uint64_t n = 0;

        return bpf_map_lookup_elem(ix->lost_fd, &k, &n) < 0 || n > 0;
}

static int cmp_pid(const void *a, const void *b)
{
        pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

        return (x > y) - (x < y);
}

int procindex_candidates(struct procindex *ix, pid_t **ret_pids, size_t *ret_n)
{
        size_t cap = 256, n = 0;
        uint32_t *keys = malloc(cap * sizeof(*keys)), batch = 0;
        uint8_t *vals = malloc(cap);
        pid_t *pids = NULL;
        bool first = true, end = false;
        int r = keys && vals ? 0 : -ENOMEM;

        if (r == 0 && lost_any(ix))
                r = -EOVERFLOW;
        /* By buckets, in batches: entries deleted meanwhile cost nothing. */
        while (r == 0 && !end) {
                LIBBPF_OPTS(bpf_map_batch_opts, opts);
                uint32_t count = (uint32_t)cap;
                void *p;
                if (bpf_map_lookup_batch(ix->procs_fd, first ? NULL : &batch, &batch, keys, vals, &count, &opts) < 0) {
                        if (errno == ENOSPC && count == 0) {
                                /* One bucket holds more than fits. */
                                cap *= 2;
                                p = realloc(keys, cap * sizeof(*keys));
                                keys = p ? p : keys;
                                p = p ? realloc(vals, cap) : NULL;
                                vals = p ? p : vals;
                                r = p ? 0 : -ENOMEM;
                                continue;
                        }
                        if (errno != ENOENT) {
                                r = -errno;
                                break;
                        }
                        end = true; /* the last batch */
                }
                first = false;
                p = realloc(pids, (n + count + 1) * sizeof(*pids));
                if (!p) {
                        r = -ENOMEM;
                        break;
                }
                pids = p;
                for (uint32_t i = 0; i < count; i++)
                        pids[n++] = (pid_t)keys[i];
        }
        free(keys);
        free(vals);
        if (r == 0 && lost_any(ix))
                r = -EOVERFLOW;
        if (r < 0) {
                free(pids);
                return r;
        }
        if (n > 1)
                qsort(pids, n, sizeof(*pids), cmp_pid);
        atomic_store_explicit(&ix->last_size, n, memory_order_relaxed);
        *ret_pids = pids ? pids : calloc(1, sizeof(*pids));
        *ret_n = n;
        return *ret_pids ? 0 : -ENOMEM;
}

#else /* !CUDACKPT_HAVE_BPF */

int procindex_open(const struct discover_lib *lib, unsigned max_entries, bool tracepoint, struct procindex **ret,
                   char *why, size_t why_len)
{
        (void)lib;
        (void)max_entries;
        (void)tracepoint;
        *ret = NULL;
        snprintf(why, why_len, "built without BPF (libbpf and clang were not found)");
        return -EOPNOTSUPP;
}

void procindex_free(struct procindex *ix)
{
        (void)ix;
}

const char *procindex_hook(const struct procindex *ix)
{
        (void)ix;
        return "none";
}

int procindex_candidates(struct procindex *ix, pid_t **ret_pids, size_t *ret_n)
{
        (void)ix;
        (void)ret_pids;
        (void)ret_n;
        return -EOPNOTSUPP;
}

size_t procindex_last_size(const struct procindex *ix)
{
        (void)ix;
        return 0;
}

#endif
