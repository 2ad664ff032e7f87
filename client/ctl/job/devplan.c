/* devplan.c: the device plan of restore --images (devplan.h). */
#include "devplan.h"

#include "gpu-uuid.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most numbers a version has that count (580.95.05: three). */
#define VERSION_PARTS 4

static int version_parse(const char *s, unsigned long *v) {
        size_t n = 0;

        memset(v, 0, VERSION_PARTS * sizeof(*v));
        while (n < VERSION_PARTS) {
                char *end;
                if (!isdigit((unsigned char) *s))
                        return -EINVAL;
                errno = 0;
                v[n++] = strtoul(s, &end, 10);
                if (errno)
                        return -EINVAL;
                if (*end == '\0')
                        break;
                if (*end != '.')
                        return -EINVAL;
                s = end + 1;
        }
        return n >= 2 || (n == 1 && strchr(s, '.') == NULL) ? 0 : -EINVAL;
}

int ctl_version_cmp(const char *a, const char *b, int *ret) {
        unsigned long x[VERSION_PARTS], y[VERSION_PARTS];

        if (!a || !b || version_parse(a, x) < 0 || version_parse(b, y) < 0)
                return -EINVAL;
        *ret = 0;
        for (size_t i = 0; i < VERSION_PARTS && *ret == 0; i++)
                *ret = (x[i] > y[i]) - (x[i] < y[i]);
        return 0;
}

const char *ctl_plan_check_name(ctl_plan_check c) {
        static const char *const names[] = { "ok", "failed", "unknown", "forced" };
        return names[c];
}

const char *ctl_plan_how_name(ctl_plan_how h) {
        static const char *const names[] = { "kept", "mapped", "chosen", "none" };
        return names[h];
}

const char *ctl_plan_verdict_name(ctl_plan_verdict v) {
        static const char *const names[] = { "fits", "no-records", "older-driver", "no-gpu", "no-memory",
                                             "unknown-gpu" };
        return names[v];
}

void ctl_plan_free(ctl_plan *p) {
        free(p->e);
        *p = (ctl_plan) { 0 };
}

static int node_find(const ctl_node *node, const char *uuid) {
        for (size_t i = 0; uuid && i < node->n_gpus; i++)
                if (gpu_uuid_same(node->gpus[i].uuid, uuid))
                        return (int) i;
        return -1;
}

/* The GPU --device-map sends uuid to, NULL when it does not name it. */
static const char *map_target(const ctl_map *map, const char *uuid) {
        for (size_t k = 0; map && k + 1 < map->n_items; k += 2)
                if (gpu_uuid_same(map->items[k], uuid))
                        return map->items[k + 1];
        return NULL;
}

static ctl_plan_check model_check(const ctl_devrec_gpu *from, const ctl_node_gpu *to) {
        if (!from->name[0] || !to->name[0])
                return CTL_CHECK_UNKNOWN;
        return strcmp(from->name, to->name) == 0 ? CTL_CHECK_OK : CTL_CHECK_FAILED;
}

/* Each GPU's need from the members' records; false when a member's memory
 * was not told (no plan then). */
static bool plan_needs(const ctl_devrec *rec, uint64_t margin, ctl_plan *p) {
        for (size_t i = 0; i < rec->n_members; i++) {
                const ctl_devrec_member *m = &rec->members[i];
                if (!m->known)
                        return false;
                for (size_t j = 0; j < m->n_use; j++)
                        for (size_t k = 0; k < p->n; k++)
                                if (gpu_uuid_same(p->e[k].from->uuid, m->use[j].uuid)) {
                                        p->e[k].need += m->use[j].bytes + margin;
                                        p->e[k].members++;
                                }
        }
        return true;
}

/* The kept and the mapped; false (the entry in p->failed) when the map
 * names a GPU this node lacks. */
static bool plan_fixed(const ctl_node *node, const ctl_map *map, ctl_plan *p) {
        for (size_t k = 0; k < p->n; k++) {
                ctl_plan_entry *e = &p->e[k];
                const char *to = map_target(map, e->from->uuid);
                e->to = node_find(node, to ? to : e->from->uuid);
                e->how = e->to < 0 ? CTL_PLAN_NONE : to ? CTL_PLAN_MAPPED : CTL_PLAN_KEPT;
                if (to && e->to < 0) {
                        p->failed = k;
                        return false;
                }
        }
        return true;
}

static bool taken(const ctl_plan *p, int gpu) {
        for (size_t k = 0; k < p->n; k++)
                if (p->e[k].to == gpu)
                        return true;
        return false;
}

/* Whether node GPU d may take entry e (free, the model, enough room unless
 * force); *ret_model_ok: it is of e's model. */
static bool candidate(const ctl_plan *p, const ctl_node *node, const ctl_plan_entry *e, int d, bool force,
                      bool *ret_model_ok) {
        const ctl_node_gpu *g = &node->gpus[d];

        if (taken(p, d) || model_check(e->from, g) == CTL_CHECK_FAILED)
                return false;
        *ret_model_ok = true;
        return force || !g->free_known || g->free >= e->need;
}

/* A GPU of this node for each entry without one; NO_GPU or NO_MEMORY
 * (p->failed) when one finds none. */
static ctl_plan_verdict plan_choose(const ctl_node *node, bool force, ctl_plan *p) {
        for (size_t k = 0; k < p->n; k++) {
                ctl_plan_entry *e = &p->e[k];
                bool model_ok = false;
                int same = -1;
                if (e->to >= 0)
                        continue;
                for (size_t d = 0; d < node->n_gpus; d++)
                        if (node->gpus[d].index == e->from->index)
                                same = (int) d;
                if (same >= 0 && candidate(p, node, e, same, force, &model_ok))
                        e->to = same;
                for (size_t d = 0; e->to < 0 && d < node->n_gpus; d++)
                        if (candidate(p, node, e, (int) d, force, &model_ok))
                                e->to = (int) d;
                if (e->to < 0) {
                        p->failed = k;
                        return model_ok ? CTL_PLAN_NO_MEMORY : CTL_PLAN_NO_GPU;
                }
                e->how = CTL_PLAN_CHOSEN;
        }
        return CTL_PLAN_FITS;
}

static ctl_plan_check forced(ctl_plan_check c, bool force) {
        return c == CTL_CHECK_FAILED && force ? CTL_CHECK_FORCED : c;
}

/* Every entry's model and memory checks, on the sums per GPU; the verdict. */
static ctl_plan_verdict plan_check(const ctl_node *node, bool force, ctl_plan *p) {
        ctl_plan_verdict v = CTL_PLAN_FITS;

        for (size_t k = 0; k < p->n; k++) {
                ctl_plan_entry *e = &p->e[k];
                const ctl_node_gpu *g = &node->gpus[e->to];
                e->need_there = 0;
                for (size_t j = 0; j < p->n; j++)
                        e->need_there += p->e[j].to == e->to ? p->e[j].need : 0;
                e->model = forced(model_check(e->from, g), force);
                e->memory = !g->free_known ? CTL_CHECK_UNKNOWN
                                           : forced(g->free >= e->need_there ? CTL_CHECK_OK : CTL_CHECK_FAILED, force);
                if (v == CTL_PLAN_FITS && (e->model == CTL_CHECK_FAILED || e->memory == CTL_CHECK_FAILED)) {
                        v = e->model == CTL_CHECK_FAILED ? CTL_PLAN_NO_GPU : CTL_PLAN_NO_MEMORY;
                        p->failed = k;
                }
        }
        return v;
}

int ctl_plan_make(const ctl_devrec *rec, const ctl_node *node, const ctl_map *map, bool force, ctl_plan *ret) {
        ctl_plan p = { .verdict = CTL_PLAN_NO_RECORDS, .driver = CTL_CHECK_UNKNOWN };
        int cmp;

        *ret = p;
        if (!rec || !node)
                return 0;
        p.e = calloc(rec->n_gpus + 1, sizeof(*p.e));
        if (!p.e)
                return -ENOMEM;
        p.n = rec->n_gpus;
        for (size_t k = 0; k < p.n; k++)
                p.e[k] = (ctl_plan_entry) { .from = &rec->gpus[k], .to = -1, .how = CTL_PLAN_NONE };
        if (!plan_needs(rec, node->margin, &p)) {
                *ret = p;
                return 0;
        }
        if (rec->driver_version[0] && node->driver_version[0] &&
            ctl_version_cmp(node->driver_version, rec->driver_version, &cmp) == 0)
                p.driver = forced(cmp >= 0 ? CTL_CHECK_OK : CTL_CHECK_FAILED, force);
        if (!plan_fixed(node, map, &p))
                p.verdict = CTL_PLAN_UNKNOWN_TARGET;
        else if ((p.verdict = plan_choose(node, force, &p)) == CTL_PLAN_FITS)
                p.verdict = plan_check(node, force, &p);
        if (p.verdict == CTL_PLAN_FITS && p.driver == CTL_CHECK_FAILED)
                p.verdict = CTL_PLAN_OLDER_DRIVER;
        *ret = p;
        return 0;
}

int ctl_plan_map(const ctl_plan *p, const ctl_node *node, ctl_map *ret) {
        bool moved = false;

        *ret = (ctl_map) { 0 };
        for (size_t k = 0; k < p->n; k++)
                if (p->e[k].to < 0)
                        return -EINVAL; /* not a fitting plan */
        for (size_t k = 0; k < p->n; k++)
                moved |= !gpu_uuid_same(p->e[k].from->uuid, node->gpus[p->e[k].to].uuid);
        for (size_t k = 0; moved && k < p->n; k++) {
                char pair[2 * 256 + 2];
                snprintf(pair, sizeof(pair), "%s=%s", p->e[k].from->uuid, node->gpus[p->e[k].to].uuid);
                if (ctl_map_add(ret, pair) < 0) {
                        ctl_map_free(ret);
                        return -ENOMEM; /* the UUIDs parse (manifestgpu.c, ListGpus): only memory can fail */
                }
        }
        return 0;
}
