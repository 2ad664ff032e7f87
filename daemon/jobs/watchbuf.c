/* watchbuf.c: watchers' output buffers and their bounds (watchbuf.h). */
#include "jobs/watchbuf.h"

#include <stdlib.h>
#include <string.h>

void watchbuf_pool_init(struct watchbuf_pool *p, size_t max_one, size_t max_all, unsigned limit, unsigned reserved)
{
        *p = (struct watchbuf_pool){ .max_one = max_one, .max_all = max_all, .max_unprivileged = max_all };
        if (limit > 0)
                p->max_unprivileged = max_all - max_all / limit * reserved;
}

/* b now takes mem bytes: the pool's count follows. */
static void account(struct watchbuf_pool *p, struct watchbuf *b, size_t mem)
{
        p->mem = p->mem - b->mem + mem;
        if (!b->privileged)
                p->mem_unprivileged = p->mem_unprivileged - b->mem + mem;
        b->mem = mem;
}

/* Whether b may take mem bytes. */
static bool may_take(const struct watchbuf_pool *p, const struct watchbuf *b, size_t mem)
{
        return mem <= p->max_one && p->mem - b->mem + mem <= p->max_all &&
               (b->privileged || p->mem_unprivileged - b->mem + mem <= p->max_unprivileged);
}

bool watchbuf_append(struct watchbuf_pool *p, struct watchbuf *b, const char *data, size_t len)
{
        size_t need = b->len + len;

        if (b->cut)
                return false;
        if (need > b->cap) {
                size_t cap = b->cap ? b->cap : 1024;
                char *nb;
                while (cap < need)
                        cap *= 2;
                if (!may_take(p, b, cap + b->in_flight) || !(nb = realloc(b->out, cap))) {
                        b->cut = true;
                        return false;
                }
                b->out = nb;
                b->cap = cap;
                account(p, b, cap + b->in_flight);
        }
        memcpy(b->out + b->len, data, len);
        b->len = need;
        return true;
}

char *watchbuf_take(struct watchbuf_pool *p, struct watchbuf *b, size_t *ret_len, size_t *ret_cap)
{
        char *data = b->out;

        *ret_len = b->len;
        *ret_cap = b->cap;
        b->out = NULL;
        b->len = b->cap = 0;
        account(p, b, 0);
        return data;
}

void watchbuf_writing(struct watchbuf_pool *p, struct watchbuf *b, size_t cap)
{
        b->in_flight = cap;
        account(p, b, cap);
}

void watchbuf_drained(struct watchbuf_pool *p, struct watchbuf *b)
{
        account(p, b, b->cap);
        b->in_flight = 0;
}

size_t watchbuf_release(struct watchbuf_pool *p, struct watchbuf *b)
{
        size_t mem = b->mem;

        account(p, b, 0);
        free(b->out);
        b->out = NULL;
        b->len = b->cap = 0;
        return mem;
}
