/* dumpgpus.c: dump's part of the device plan (dumpgpus.h). */
#include "dumpgpus.h"

#include "manifestgpu.h"

#include <cudackpt/protocol.h>

#include <stdlib.h>

cJSON *ctl_dump_gpus_ask(cudackpt_client *client) {
        cudackpt_reply reply;
        cJSON *p = NULL;

        cudackpt_reply_init(&reply);
        if (cudackpt_call(client, CUDACKPT_METHOD_LIST_GPUS, NULL, &reply) == 0 && !reply.error)
                p = cJSON_Parse(reply.parameters_json);
        cudackpt_reply_clear(&reply);
        return p;
}

void ctl_dump_gpus_record(ctl_manifest *m, const cJSON *gpus, const cJSON *processes) {
        int *pids = calloc(m->n_members + 1, sizeof(*pids));

        if (!pids || !gpus || !processes) {
                free(pids);
                return;
        }
        for (size_t i = 0; i < m->n_members; i++)
                pids[i] = m->members[i].pid;
        m->devices = ctl_devrec_collect(gpus, processes, pids, m->n_members);
        free(pids);
}
