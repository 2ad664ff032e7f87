/* dumpgpus.c: dump's part of the device plan (dumpgpus.h). */
#include "dumpgpus.h"

#include "manifestgpu.h"

#include <cudackpt/protocol.h>

#include <stdlib.h>

cJSON *ctl_dump_gpus_processes(cudackpt_client *client, const cJSON *selector) {
        cJSON *params = cJSON_CreateObject(), *all, *processes = NULL;
        cudackpt_reply reply;
        char *text;

        if (!params || !cJSON_AddItemToObject(params, "selector", cJSON_Duplicate(selector, 1))) {
                cJSON_Delete(params);
                return NULL;
        }
        text = cJSON_PrintUnformatted(params);
        cJSON_Delete(params);
        cudackpt_reply_init(&reply);
        if (text && cudackpt_call(client, CUDACKPT_METHOD_LIST_PROCESSES, text, &reply) == 0 && !reply.error) {
                all = cJSON_Parse(reply.parameters_json);
                processes = cJSON_DetachItemFromObjectCaseSensitive(all, "processes");
                cJSON_Delete(all);
        }
        cJSON_free(text);
        cudackpt_reply_clear(&reply);
        return processes;
}

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
