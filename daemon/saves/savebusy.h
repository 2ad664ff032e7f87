/* savebusy.h: the saves a dump or a restore is working on now, by uid and
 * name: a second one on the same save is refused (SaveBusy) rather than
 * queued.  Loop thread only. */
#ifndef CUDACKPT_SAVEBUSY_H
#define CUDACKPT_SAVEBUSY_H

#include <stdbool.h>
#include <sys/types.h>

struct savebusy_entry;

struct savebusy {
        struct savebusy_entry *head;
};

bool savebusy_has(const struct savebusy *b, uid_t uid, const char *save);
/* Marks save busy: 0, or -ENOMEM. */
int savebusy_take(struct savebusy *b, uid_t uid, const char *save);
/* Ends one savebusy_take() of save. */
void savebusy_give(struct savebusy *b, uid_t uid, const char *save);
void savebusy_free(struct savebusy *b);

#endif
