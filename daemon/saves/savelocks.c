/* savelocks.c: the lock rules of this node's held saves, recorded,
 * bounded and taken away (savelocks.h). */
#include "saves/savelocks.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "base/log.h"
#include "base/privdir.h"
#include "base/storefile.h"
#include "json.h"
#include "saves/savestore.h"

/* At most this much of a file read back: far more than the bounds allow. */
#define STORE_MAX_BYTES (64u << 20)
#define NAME_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"

struct savelocks_record {
        struct savelocks_record *next;
        uid_t uid;
        char save[SAVESTORE_NAME_MAX + 1];
        struct savelockrules rules;
};

struct savelocks_part {
        struct savelocks_part *next;
        uid_t uid;
        struct savelockrules rules;
};

/* The connections recorded and counted at barriers: uid's, or all uids'
 * with all set.  Under the mutex. */
static size_t used(const struct savelocks *t, uid_t uid, bool all)
{
        size_t n = 0;

        for (const struct savelocks_record *r = t->records; r; r = r->next)
                if (all || r->uid == uid)
                        n += savelockrules_connections(&r->rules);
        for (const struct savelocks_part *p = t->parts; p; p = p->next)
                if (all || p->uid == uid)
                        n += savelockrules_connections(&p->rules);
        return n;
}

static struct savelocks_record **find(struct savelocks *t, uid_t uid, const char *save)
{
        struct savelocks_record **r = &t->records;

        while (*r && ((*r)->uid != uid || strcmp((*r)->save, save) != 0))
                r = &(*r)->next;
        return r;
}

static void record_free(struct savelocks_record *r)
{
        savelockrules_free(&r->rules);
        free(r);
}

/* ---- the file ------------------------------------------------------------- */

/* A rule as the file keeps it: [COMMAND, CHAIN, MARK, SOURCE, SPORT,
 * DESTINATION, DPORT]. */
static cJSON *rule_json(const struct savelockrule *r)
{
        cJSON *a = cJSON_CreateArray();

        if (a) {
                cJSON_AddItemToArray(a, cJSON_CreateString(r->v6 ? "ip6tables" : "iptables"));
                cJSON_AddItemToArray(a, cJSON_CreateString(r->output ? "OUTPUT" : "INPUT"));
                cJSON_AddItemToArray(a, cJSON_CreateString(r->mark));
                cJSON_AddItemToArray(a, cJSON_CreateString(r->src));
                cJSON_AddItemToArray(a, cJSON_CreateNumber(r->sport));
                cJSON_AddItemToArray(a, cJSON_CreateString(r->dst));
                cJSON_AddItemToArray(a, cJSON_CreateNumber(r->dport));
        }
        return a;
}

static bool copy_string(const cJSON *item, char *out, size_t size)
{
        if (!cJSON_IsString(item) || strlen(item->valuestring) >= size)
                return false;
        snprintf(out, size, "%s", item->valuestring);
        return true;
}

static bool port_json(const cJSON *item, uint16_t *ret)
{
        if (!cJSON_IsNumber(item) || item->valuedouble < 1 || item->valuedouble > 65535 ||
            item->valuedouble != (double)(int)item->valuedouble)
                return false;
        *ret = (uint16_t)item->valuedouble;
        return true;
}

/* A rule read back: whether it is one CRIU could have made. */
static bool rule_of(const cJSON *a, struct savelockrule *r)
{
        char cmd[12], chain[8];

        *r = (struct savelockrule){ 0 };
        if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 7 || !copy_string(cJSON_GetArrayItem(a, 0), cmd, sizeof(cmd)) ||
            !copy_string(cJSON_GetArrayItem(a, 1), chain, sizeof(chain)) ||
            !copy_string(cJSON_GetArrayItem(a, 2), r->mark, sizeof(r->mark)) ||
            !copy_string(cJSON_GetArrayItem(a, 3), r->src, sizeof(r->src)) ||
            !port_json(cJSON_GetArrayItem(a, 4), &r->sport) ||
            !copy_string(cJSON_GetArrayItem(a, 5), r->dst, sizeof(r->dst)) ||
            !port_json(cJSON_GetArrayItem(a, 6), &r->dport))
                return false;
        r->v6 = strcmp(cmd, "ip6tables") == 0;
        r->output = strcmp(chain, "OUTPUT") == 0;
        return (r->v6 || strcmp(cmd, "iptables") == 0) && (r->output || strcmp(chain, "INPUT") == 0) &&
               savelockrules_valid(r);
}

static cJSON *records_json(const struct savelocks *t)
{
        cJSON *o = cJSON_CreateObject(), *a = o ? cJSON_AddArrayToObject(o, "records") : NULL;

        if (!a) {
                cJSON_Delete(o);
                return NULL;
        }
        cJSON_AddStringToObject(o, "boot_id", t->boot);
        for (const struct savelocks_record *r = t->records; r; r = r->next) {
                cJSON *e = cJSON_CreateObject(), *rules = e ? cJSON_AddArrayToObject(e, "rules") : NULL;

                if (!rules) {
                        cJSON_Delete(e);
                        cJSON_Delete(o);
                        return NULL;
                }
                cJSON_AddNumberToObject(e, "uid", (double)r->uid);
                cJSON_AddStringToObject(e, "save", r->save);
                for (size_t i = 0; i < r->rules.n; i++)
                        cJSON_AddItemToArray(rules, rule_json(&r->rules.v[i]));
                cJSON_AddItemToArray(a, e);
        }
        return o;
}

/* The records onto stable storage, whole.  Under the mutex. */
static void store(struct savelocks *t)
{
        cJSON *o;
        char *text, why[256];
        int r;

        if (t->dir_fd < 0)
                return;
        o = records_json(t);
        text = o ? cJSON_PrintUnformatted(o) : NULL;
        cJSON_Delete(o);
        r = text ? storefile_write(t->dir_fd, SAVELOCKS_FILE, text, strlen(text), why, sizeof(why)) : -ENOMEM;
        if (r < 0)
                log_error("Failed to write the saves' lock rules to %s: %s; a restart of the daemon forgets "
                          "the latest", SAVELOCKS_FILE, text ? why : "out of memory");
        free(text);
}

/* One record read back: NULL when it is none (said). */
static struct savelocks_record *record_of(const cJSON *e)
{
        const cJSON *rules = cJSON_GetObjectItemCaseSensitive(e, "rules"), *item, *each;
        struct savelocks_record *r = calloc(1, sizeof(*r));
        long long uid = -1;
        struct savelockrule rule;
        bool ok = r && json_get_integer(e, "uid", 0, 4294967294.0, &uid) && cJSON_IsArray(rules) &&
                  copy_string(cJSON_GetObjectItemCaseSensitive(e, "save"), r->save, sizeof(r->save)) &&
                  r->save[0] && strspn(r->save, NAME_CHARS) == strlen(r->save);

        each = ok ? rules : NULL; /* (the macro takes no expression) */
        cJSON_ArrayForEach(item, each)
                ok = ok && rule_of(item, &rule) && savelockrules_add(&r->rules, &rule) == 0;
        if (!ok) {
                log_warning("A record of %s is not one, ignoring it", SAVELOCKS_FILE);
                if (r)
                        record_free(r);
                return NULL;
        }
        r->uid = (uid_t)uid;
        return r;
}

static void load(struct savelocks *t)
{
        char *text = NULL, why[256];
        size_t len, n = 0;
        int r = storefile_read(t->dir_fd, SAVELOCKS_FILE, STORE_MAX_BYTES, &text, &len, why, sizeof(why));
        cJSON *o = r == 0 ? cJSON_ParseWithLength(text, len) : NULL, *e;
        const cJSON *boot = cJSON_GetObjectItemCaseSensitive(o, "boot_id");

        free(text);
        if (r < 0 && r != -ENOENT)
                log_error("The saves' lock rules in %s refused: %s; rules they name stay until deleted by hand",
                          SAVELOCKS_FILE, why);
        if (r == 0 && !cJSON_IsObject(o))
                log_error("The saves' lock rules in %s refused: not a JSON object; rules they name stay until "
                          "deleted by hand", SAVELOCKS_FILE);
        else if (r == 0 && (!cJSON_IsString(boot) || strcmp(boot->valuestring, t->boot) != 0))
                log_info("The saves' lock rules in %s are of an earlier boot: gone with it", SAVELOCKS_FILE);
        else
                cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(o, "records")) {
                        struct savelocks_record *rec = record_of(e);

                        if (rec) {
                                rec->next = t->records;
                                t->records = rec;
                                n += savelockrules_connections(&rec->rules);
                        }
                }
        cJSON_Delete(o);
        if (n)
                log_info("Lock rules of %zu connection(s) of saves read back from %s", n, SAVELOCKS_FILE);
}

void savelocks_init(struct savelocks *t, uv_loop_t *loop, const struct config *cfg, struct life *life,
                    const char *runtime_dir)
{
        char why[256];

        *t = (struct savelocks){ .loop = loop, .cfg = cfg, .life = life, .dir_fd = -1 };
        uv_mutex_init(&t->mu);
        storefile_boot_id(t->boot);
        if (!runtime_dir || privdir_open(runtime_dir, &t->dir_fd, why, sizeof(why)) < 0) {
                if (strcmp(cfg->save_parts_network_lock, "off") != 0)
                                log_warning("The saves' lock rules are kept in memory only (no runtime directory only root "
                                    "may write%s%s): a restart of the daemon forgets them", runtime_dir ? ": " : "",
                                    runtime_dir ? why : "");
                return;
        }
        storefile_remove_leftovers(t->dir_fd, SAVELOCKS_FILE);
        load(t);
}

void savelocks_free(struct savelocks *t)
{
        if (!t->cfg) /* never initialised */
                return;
        while (t->records) {
                struct savelocks_record *r = t->records;

                t->records = r->next;
                record_free(r);
        }
        while (t->parts)
                savelocks_let_go(t, t->parts);
        if (t->dir_fd >= 0)
                close(t->dir_fd);
        uv_mutex_destroy(&t->mu);
}

/* ---- the calls ---------------------------------------------------------- */

int savelocks_hold(struct savelocks *t, uid_t uid, int uidfd, const char *images, struct savelocks_part **ret_part,
                   uint64_t *ret_limit)
{
        uint64_t per = t->cfg->max_locked_connections_per_uid, all = t->cfg->max_locked_connections;
        uint64_t least = per < all ? per : all;
        struct savelocks_part *p = calloc(1, sizeof(*p));
        size_t n, unmatched = 0;
        int r;

        *ret_part = NULL;
        if (!p)
                return -ENOMEM;
        p->uid = uid;
        /* Only iptables' rules are read, and bounded (savelocks.h). */
        r = strcmp(t->cfg->save_parts_network_lock, "iptables") != 0 ? 0 :
            savelockrules_read(uidfd, images, 2 * least + 2, &unmatched, &p->rules);
        n = savelockrules_connections(&p->rules);
        if (unmatched)
                log_warning("A dump of uid %u in %s: %zu lock rule(s) of its log name no connection of its images, "
                            "not taken", (unsigned)uid, images, unmatched);
        uv_mutex_lock(&t->mu);
        if (r == -E2BIG)
                *ret_limit = least;
        else if (r == 0 && used(t, uid, false) + n > per)
                *ret_limit = per;
        else if (r == 0 && used(t, uid, true) + n > all)
                *ret_limit = all;
        else if (r == 0) {
                p->next = t->parts;
                t->parts = p;
                *ret_part = p;
        }
        uv_mutex_unlock(&t->mu);
        if (r == 0 && *ret_part == p)
                return 0;
        savelockrules_free(&p->rules);
        free(p);
        return r == 0 || r == -E2BIG ? -EDQUOT : r;
}

/* Takes p out of the parts counted.  Under the mutex. */
static void unlist_part(struct savelocks *t, struct savelocks_part *p)
{
        struct savelocks_part **q = &t->parts;

        while (*q && *q != p)
                q = &(*q)->next;
        if (*q)
                *q = p->next;
}

/* Deletes rules, keeping those that iptables could not delete.  Once it
 * hung (killed past its time) the rest are kept untried: the mutex is
 * held meanwhile, and the barriers' counts wait for it. */
static void delete_rules(struct savelockrules *rules, uid_t uid, const char *save)
{
        size_t kept = 0;
        bool hung = false;

        for (size_t i = 0; i < rules->n; i++) {
                int r = hung ? -ETIMEDOUT : savelockrules_delete(&rules->v[i]);

                hung = r == -ETIMEDOUT;
                if (r < 0) {
                        log_error("Failed to delete a lock rule of save %s of uid %u (%s %s:%u > %s:%u): %s", save,
                                  (unsigned)uid, rules->v[i].output ? "OUTPUT" : "INPUT", rules->v[i].src,
                                  rules->v[i].sport, rules->v[i].dst, rules->v[i].dport,
                                  r == -ECHILD ? "iptables failed" :
                                  r == -ETIMEDOUT ? "iptables hung" : strerror(-r));
                        rules->v[kept++] = rules->v[i];
                }
        }
        rules->n = kept;
}

/* rules join uid's record of save (made when missing); what cannot is
 * deleted.  Under the mutex. */
static void record_into(struct savelocks *t, uid_t uid, const char *save, struct savelockrules *rules)
{
        struct savelocks_record **r = find(t, uid, save);
        size_t i = 0;

        if (!*r && rules->n && (*r = calloc(1, sizeof(**r))) != NULL) {
                (*r)->uid = uid;
                snprintf((*r)->save, sizeof((*r)->save), "%s", save);
        }
        while (*r && i < rules->n && savelockrules_add(&(*r)->rules, &rules->v[i]) == 0)
                i++;
        if (i < rules->n) {
                log_notice("Deleting the lock rules of save %s of uid %u: out of memory to record them", save,
                           (unsigned)uid);
                memmove(rules->v, rules->v + i, (rules->n - i) * sizeof(*rules->v));
                rules->n -= i;
                delete_rules(rules, uid, save);
        }
        if (*r && (*r)->rules.n == 0) {
                struct savelocks_record *gone = *r;

                *r = gone->next;
                record_free(gone);
        }
}

void savelocks_keep(struct savelocks *t, uid_t uid, struct savelocks_part *part, const char *save)
{
        struct savelockrules none = { 0 }, *rules = part ? &part->rules : &none;
        struct savelocks_record **old;
        bool changed = rules->n > 0;

        uv_mutex_lock(&t->mu);
        if (part)
                unlist_part(t, part);
        old = save ? find(t, uid, save) : NULL;
        if (old && *old) { /* the save it replaced, or one removed on another node: restored by none */
                delete_rules(&(*old)->rules, uid, save);
                changed = true;
        }
        if (save)
                record_into(t, uid, save, rules);
        else if (rules->n) {
                log_notice("Deleting the lock rules of %zu connection(s) of uid %u: no save holds them",
                           savelockrules_connections(rules), (unsigned)uid);
                delete_rules(rules, uid, "(none)");
        }
        if (changed && save)
                store(t);
        uv_mutex_unlock(&t->mu);
        if (part) {
                savelockrules_free(&part->rules);
                free(part);
        }
}

void savelocks_let_go(struct savelocks *t, struct savelocks_part *part)
{
        if (!part)
                return;
        uv_mutex_lock(&t->mu);
        unlist_part(t, part);
        uv_mutex_unlock(&t->mu);
        savelockrules_free(&part->rules);
        free(part);
}

/* Keeps of rules those that iptables still finds, or cannot tell of (the
 * rest untried once it hung): a restore of a save of that name lifted
 * only the rules of its own images' connections, which may be another
 * save's (removed on another node, and made again there). */
static void keep_present(struct savelockrules *rules, uid_t uid, const char *save)
{
        size_t kept = 0;
        bool hung = false;

        for (size_t i = 0; i < rules->n; i++) {
                int r = hung ? -ETIMEDOUT : savelockrules_present(&rules->v[i]);

                hung = r == -ETIMEDOUT;
                if (r != 0)
                        rules->v[kept++] = rules->v[i];
        }
        if (kept)
                log_notice("Save %s of uid %u restored, %zu of its lock rules are still there (or cannot be told "
                           "of): kept recorded", save, (unsigned)uid, kept);
        rules->n = kept;
}

/* The record of uid's save goes, or keeps what is left of its rules:
 * those iptables could not delete, or (restored) those still there. */
static void drop(struct savelocks *t, uid_t uid, const char *save, bool delete)
{
        struct savelocks_record **r, *gone;

        uv_mutex_lock(&t->mu);
        r = find(t, uid, save);
        if (*r) {
                if (delete)
                        delete_rules(&(*r)->rules, uid, save);
                else
                        keep_present(&(*r)->rules, uid, save);
                if ((*r)->rules.n == 0) {
                        gone = *r;
                        *r = gone->next;
                        record_free(gone);
                }
                store(t);
        }
        uv_mutex_unlock(&t->mu);
}

void savelocks_undo(struct savelocks *t, uid_t uid, const char *save)
{
        drop(t, uid, save, true);
}

struct restored {
        uv_work_t work;
        struct savelocks *t;
        uid_t uid;
        char save[SAVESTORE_NAME_MAX + 1];
};

static void restored_work(uv_work_t *w)
{
        struct restored *x = w->data;

        drop(x->t, x->uid, x->save, false);
}

static void restored_after(uv_work_t *w, int status)
{
        struct restored *x = w->data;

        (void)status;
        life_release(x->t->life);
        free(x);
}

void savelocks_restored(struct savelocks *t, uid_t uid, const char *save, const char *lock)
{
        struct restored *x;

        if (strcmp(lock, "iptables") != 0 || !(x = calloc(1, sizeof(*x))))
                return;
        *x = (struct restored){ .t = t, .uid = uid };
        snprintf(x->save, sizeof(x->save), "%s", save);
        x->work.data = x;
        life_hold(t->life);
        if (uv_queue_work(t->loop, &x->work, restored_work, restored_after) < 0) {
                life_release(t->life);
                free(x);
        }
}
