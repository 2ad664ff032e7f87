/* savebusy.c: the saves being dumped into or restored (savebusy.h). */
#include "saves/savebusy.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct savebusy_entry {
        struct savebusy_entry *next;
        uid_t uid;
        char save[];
};

bool savebusy_has(const struct savebusy *b, uid_t uid, const char *save)
{
        for (const struct savebusy_entry *e = b->head; e; e = e->next)
                if (e->uid == uid && strcmp(e->save, save) == 0)
                        return true;
        return false;
}

int savebusy_take(struct savebusy *b, uid_t uid, const char *save)
{
        size_t len = strlen(save) + 1;
        struct savebusy_entry *e = malloc(sizeof(*e) + len);

        if (!e)
                return -ENOMEM;
        e->uid = uid;
        memcpy(e->save, save, len);
        e->next = b->head;
        b->head = e;
        return 0;
}

void savebusy_give(struct savebusy *b, uid_t uid, const char *save)
{
        for (struct savebusy_entry **p = &b->head; *p; p = &(*p)->next)
                if ((*p)->uid == uid && strcmp((*p)->save, save) == 0) {
                        struct savebusy_entry *e = *p;
                        *p = e->next;
                        free(e);
                        return;
                }
}

void savebusy_free(struct savebusy *b)
{
        while (b->head) {
                struct savebusy_entry *e = b->head;
                b->head = e->next;
                free(e);
        }
}
