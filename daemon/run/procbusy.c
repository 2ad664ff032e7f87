/* procbusy.c: the processes a mutating operation runs on now (see procbusy.h). */
#include "run/procbusy.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

int procbusy_init(struct procbusy *b, unsigned cap)
{
        b->pids = calloc(cap ? cap : 1, sizeof(*b->pids));
        if (!b->pids)
                return -ENOMEM;
        b->n = 0;
        b->cap = cap;
        uv_mutex_init(&b->lock);
        uv_cond_init(&b->cond);
        return 0;
}

void procbusy_free(struct procbusy *b)
{
        if (!b->pids)
                return;
        uv_cond_destroy(&b->cond);
        uv_mutex_destroy(&b->lock);
        free(b->pids);
        b->pids = NULL;
}

static bool procbusy_has(const struct procbusy *b, pid_t pid)
{
        for (unsigned i = 0; i < b->n; i++)
                if (b->pids[i] == pid)
                        return true;
        return false;
}

void procbusy_enter(struct procbusy *b, pid_t pid)
{
        uv_mutex_lock(&b->lock);
        /* One entry per worker thread at most, so the array has room; the
         * second test only guards against a pool larger than configured. */
        while (procbusy_has(b, pid) || b->n >= b->cap)
                uv_cond_wait(&b->cond, &b->lock);
        b->pids[b->n++] = pid;
        uv_mutex_unlock(&b->lock);
}

void procbusy_leave(struct procbusy *b, pid_t pid)
{
        uv_mutex_lock(&b->lock);
        for (unsigned i = 0; i < b->n; i++)
                if (b->pids[i] == pid) {
                        b->pids[i] = b->pids[--b->n];
                        break;
                }
        uv_cond_broadcast(&b->cond);
        uv_mutex_unlock(&b->lock);
}
