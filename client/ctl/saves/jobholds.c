/* jobholds.c: what the nodes hold of a job's save across nodes
 * (jobholds.h). */
#include "jobholds.h"

#include "jobset.h"
#include "json.h"

#include <errno.h>

/* gen into v's newest JOBHOLDS_MAX_GENS: a full list drops its oldest. */
static void jobholds_keep(jobholds_node *v, uint32_t gen) {
        unsigned oldest = 0;

        for (unsigned k = 0; k < v->n_gens; k++) {
                if (v->gens[k] == gen)
                        return;
                if (v->gens[k] < v->gens[oldest])
                        oldest = k;
        }
        if (v->n_gens < JOBHOLDS_MAX_GENS)
                v->gens[v->n_gens++] = gen;
        else if (v->gens[oldest] < gen)
                v->gens[oldest] = gen;
}

static void jobholds_other(jobholds *h, uint32_t hash) {
        for (unsigned k = 0; k < h->n_others; k++)
                if (h->others[k] == hash)
                        return;
        if (h->n_others < JOBHOLDS_MAX_OTHERS)
                h->others[h->n_others++] = hash;
}

int jobholds_add(jobholds *h, const char *name, const cJSON *hello) {
        jobholds_node *v = &h->v[h->n];
        const cJSON *g;

        *v = (jobholds_node){ .hash = jobset_node_hash(name) };
        for (unsigned i = 0; i < h->n; i++)
                if (h->v[i].hash == v->hash)
                        return -ENOTUNIQ;
        cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(hello, "gens"))
                if (json_is_integer(g, 1, JOBSET_GEN_MAX)) {
                        jobholds_keep(v, (uint32_t)g->valuedouble);
                        if ((uint32_t)g->valuedouble > h->top)
                                h->top = (uint32_t)g->valuedouble;
                }
        cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(hello, "others"))
                if (json_is_integer(g, 0, 0xffffffffu))
                        jobholds_other(h, (uint32_t)g->valuedouble);
        h->n++;
        return 0;
}

static bool jobholds_has(const jobholds_node *v, uint32_t gen) {
        for (unsigned k = 0; k < v->n_gens; k++)
                if (v->gens[k] == gen)
                        return true;
        return false;
}

uint32_t jobholds_whole(const jobholds *h) {
        uint32_t best = 0;

        for (unsigned k = 0; h->n && k < h->v[0].n_gens; k++) {
                uint32_t gen = h->v[0].gens[k];
                bool all = gen > best;

                for (unsigned i = 1; all && i < h->n; i++)
                        all = jobholds_has(&h->v[i], gen);
                if (all)
                        best = gen;
        }
        return best;
}

bool jobholds_strangers(const jobholds *h) {
        for (unsigned k = 0; k < h->n_others; k++) {
                bool ours = false;

                for (unsigned i = 0; !ours && i < h->n; i++)
                        ours = h->v[i].hash == h->others[k];
                if (!ours)
                        return true;
        }
        return false;
}
