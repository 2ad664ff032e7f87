/* leasestore.c: writing and reading back the leases (leasestore.h). */
#include "jobs/leasestore.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "json.h"
#include "base/storefile.h"
#include "host/target.h"

#define MAX_ID 9007199254740992.0 /* 2^53: exact in a JSON number */
#define MAX_UID 4294967294.0
#define MAX_PID 2147483647.0
#define MAX_MEMBERS 65536

/* The methods that take a lease, as the file names them. */
static const enum proto_method lease_methods[] = { PROTO_LOCK, PROTO_SUSPEND, PROTO_LOCK_GROUP,
                                                   PROTO_SUSPEND_GROUP, PROTO_RESTORE_GROUP };

uint64_t leasestore_boottime_ms(void)
{
        struct timespec ts;

        (void)clock_gettime(CLOCK_BOOTTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t leasestore_start_time(pid_t pid)
{
        uint64_t st = 0;
        char state = 0;

        if (target_read_stat(pid, &st, &state) < 0 || state == 'Z' || state == 'X')
                return 0;
        return st;
}

void leasestore_hex(const uint8_t *b, size_t n, char *out)
{
        static const char digits[] = "0123456789abcdef";

        for (size_t i = 0; i < n; i++) {
                out[2 * i] = digits[b[i] >> 4];
                out[2 * i + 1] = digits[b[i] & 15];
        }
        out[2 * n] = '\0';
}

static int hexval(char c)
{
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int leasestore_unhex(const char *s, uint8_t *out, size_t n)
{
        if (!s || strlen(s) != 2 * n)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
                if (hi < 0 || lo < 0)
                        return -EINVAL;
                out[i] = (uint8_t)(hi << 4 | lo);
        }
        return 0;
}

/* ---- writing ---------------------------------------------------------------- */

static cJSON *encode_lease(const struct lease *l)
{
        cJSON *o = cJSON_CreateObject(), *ms = cJSON_AddArrayToObject(o, "members");
        char hex[2 * LEASE_SECRET_BYTES + 1];

        if (!o || !ms) {
                cJSON_Delete(o);
                return NULL;
        }
        cJSON_AddNumberToObject(o, "id", (double)l->id);
        cJSON_AddNumberToObject(o, "uid", (double)l->uid);
        cJSON_AddNumberToObject(o, "pid", (double)l->caller_pid);
        cJSON_AddBoolToObject(o, "privileged", l->privileged);
        cJSON_AddStringToObject(o, "method", proto_method_name(l->method));
        cJSON_AddBoolToObject(o, "on_close", l->on_close);
        cJSON_AddNumberToObject(o, "lease_ms", l->ms);
        cJSON_AddNumberToObject(o, "deadline_boottime_ms", (double)l->deadline);
        if (l->pending)
                cJSON_AddBoolToObject(o, "pending", true);
        if (l->undoing)
                cJSON_AddStringToObject(o, "undo", l->why == METRICS_LEASES_EXPIRED ? "expired" : "closed");
        if (l->has_secret) {
                leasestore_hex(l->secret, sizeof(l->secret), hex);
                cJSON_AddStringToObject(o, "secret", hex);
        }
        for (size_t i = 0; i < l->n; i++) {
                const struct lease_member *mb = &l->m[i];
                cJSON *m = cJSON_CreateObject();
                if (!m || !cJSON_AddItemToArray(ms, m)) {
                        cJSON_Delete(m);
                        cJSON_Delete(o);
                        return NULL;
                }
                cJSON_AddNumberToObject(m, "pid", mb->pid);
                cJSON_AddNumberToObject(m, "vpid", mb->vpid);
                cJSON_AddNumberToObject(m, "start_time", (double)mb->start_time);
                cJSON_AddNumberToObject(m, "ruid", (double)mb->owner.ruid);
                cJSON_AddNumberToObject(m, "euid", (double)mb->owner.euid);
                cJSON_AddNumberToObject(m, "suid", (double)mb->owner.suid);
        }
        return o;
}

static char *encode(const struct lease *head, uint64_t next_id)
{
        cJSON *root = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(root, "leases");
        char boot[40], *text = NULL;

        if (!root || !arr)
                goto out;
        storefile_boot_id(boot);
        cJSON_AddNumberToObject(root, "version", LEASESTORE_VERSION);
        cJSON_AddStringToObject(root, "boot_id", boot);
        cJSON_AddNumberToObject(root, "next_id", (double)next_id);
        for (const struct lease *l = head; l; l = l->next)
                if (!json_add_to_array(arr, encode_lease(l)))
                        goto out;
        text = json_print_line(root);
out:
        cJSON_Delete(root);
        return text;
}

int leasestore_encode(const struct lease *head, uint64_t next_id, char **ret_text, size_t *ret_len, char *why,
                      size_t whylen)
{
        char *text = encode(head, next_id);
        size_t len = text ? strlen(text) : 0;

        *ret_text = NULL;
        if (!text) {
                snprintf(why, whylen, "out of memory");
                return -ENOMEM;
        }
        if (len > LEASESTORE_MAX_BYTES) {
                free(text);
                snprintf(why, whylen, "the leases take %zu bytes, more than the %u a store may hold", len,
                         LEASESTORE_MAX_BYTES);
                return -EFBIG;
        }
        *ret_text = text;
        *ret_len = len;
        return 0;
}

int leasestore_write(int dirfd, const char *text, size_t len, char *why, size_t whylen)
{
        return storefile_write(dirfd, LEASESTORE_FILE, text, len, why, whylen);
}

/* ---- reading ---------------------------------------------------------------- */

static bool get_num(const cJSON *o, const char *key, double max, double *ret)
{
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);

        if (!json_is_integer(it, 0, max))
                return false;
        *ret = it->valuedouble;
        return true;
}

/* Whether every key of o is one of keys (each once). */
static bool only_keys(const cJSON *o, const char *const *keys, size_t n)
{
        for (const cJSON *it = o->child; it; it = it->next) {
                size_t k = 0;
                while (k < n && strcmp(it->string, keys[k]) != 0)
                        k++;
                if (k == n || cJSON_GetObjectItemCaseSensitive(o, it->string) != it)
                        return false;
        }
        return true;
}

static int decode_member(const cJSON *o, struct lease_member *mb)
{
        static const char *const keys[] = { "pid", "vpid", "start_time", "ruid", "euid", "suid" };
        double pid, vpid, st, r, e, s;

        if (!cJSON_IsObject(o) || !only_keys(o, keys, 6) || !get_num(o, "pid", MAX_PID, &pid) || pid < 1 ||
            !get_num(o, "vpid", MAX_PID, &vpid) || !get_num(o, "start_time", MAX_ID, &st) || st < 1 ||
            !get_num(o, "ruid", MAX_UID, &r) || !get_num(o, "euid", MAX_UID, &e) || !get_num(o, "suid", MAX_UID, &s))
                return -EINVAL;
        *mb = (struct lease_member){ .pid = (pid_t)pid, .vpid = (pid_t)vpid, .start_time = (uint64_t)st,
                                     .owner = { .ruid = (uid_t)r, .euid = (uid_t)e, .suid = (uid_t)s } };
        return 0;
}

static int decode_method(const cJSON *it, enum proto_method *ret)
{
        for (size_t i = 0; cJSON_IsString(it) && i < sizeof(lease_methods) / sizeof(lease_methods[0]); i++)
                if (strcmp(it->valuestring, proto_method_name(lease_methods[i])) == 0) {
                        *ret = lease_methods[i];
                        return 0;
                }
        return -EINVAL;
}

/* A lease's "undo", "pending" and "secret" into l (its on_close read). */
static int decode_state(const cJSON *o, struct lease *l, char *why, size_t whylen)
{
        const cJSON *undo = cJSON_GetObjectItemCaseSensitive(o, "undo"),
                    *secret = cJSON_GetObjectItemCaseSensitive(o, "secret"),
                    *pending = cJSON_GetObjectItemCaseSensitive(o, "pending");

        if (undo && !(cJSON_IsString(undo) && (strcmp(undo->valuestring, "expired") == 0 ||
                                               strcmp(undo->valuestring, "closed") == 0))) {
                snprintf(why, whylen, "lease %" PRIu64 ": \"undo\" is malformed", l->id);
                return -EINVAL;
        }
        if (pending && (!cJSON_IsTrue(pending) || undo)) {
                snprintf(why, whylen, "lease %" PRIu64 ": \"pending\" is malformed", l->id);
                return -EINVAL;
        }
        l->pending = pending != NULL;
        l->undoing = undo != NULL;
        l->why = undo && undo->valuestring[0] == 'e' ? METRICS_LEASES_EXPIRED : METRICS_LEASES_CLOSED;
        if (secret && (!l->on_close || !cJSON_IsString(secret) ||
                       leasestore_unhex(secret->valuestring, l->secret, sizeof(l->secret)) < 0)) {
                snprintf(why, whylen, "lease %" PRIu64 ": \"secret\" is malformed", l->id);
                return -EINVAL;
        }
        l->has_secret = secret != NULL;
        return 0;
}

static int decode_lease(const cJSON *o, struct lease *l, char *why, size_t whylen)
{
        static const char *const keys[] = { "id",       "uid",     "pid",  "privileged",           "method",
                                            "on_close", "lease_ms", "undo", "deadline_boottime_ms", "secret",
                                            "members",  "pending" };
        const cJSON *on_close = cJSON_GetObjectItemCaseSensitive(o, "on_close"),
                    *priv = cJSON_GetObjectItemCaseSensitive(o, "privileged"),
                    *members = cJSON_GetObjectItemCaseSensitive(o, "members"), *m;
        double id, uid, pid, ms, deadline;
        int n, r;

        if (!cJSON_IsObject(o) || !only_keys(o, keys, sizeof(keys) / sizeof(keys[0])) || !get_num(o, "id", MAX_ID, &id) ||
            id < 1 || !get_num(o, "uid", MAX_UID, &uid) || !get_num(o, "pid", MAX_PID, &pid) ||
            !get_num(o, "lease_ms", 4294967295.0, &ms) || !get_num(o, "deadline_boottime_ms", MAX_ID, &deadline) ||
            !cJSON_IsBool(on_close) || !cJSON_IsBool(priv) || decode_method(cJSON_GetObjectItemCaseSensitive(o, "method"), &l->method) < 0 ||
            !cJSON_IsArray(members) || (n = cJSON_GetArraySize(members)) < 1 || n > MAX_MEMBERS) {
                snprintf(why, whylen, "a lease's keys or values are malformed");
                return -EINVAL;
        }
        l->id = (uint64_t)id;
        l->uid = (uid_t)uid;
        l->caller_pid = (pid_t)pid;
        l->ms = (uint32_t)ms;
        l->deadline = (uint64_t)deadline;
        l->on_close = cJSON_IsTrue(on_close);
        l->privileged = cJSON_IsTrue(priv);
        if ((!l->on_close && !l->ms) || (l->ms && !l->deadline) || (!l->ms && l->deadline)) {
                snprintf(why, whylen, "lease %" PRIu64 " has neither a deadline nor a holder, or half a deadline", l->id);
                return -EINVAL;
        }
        r = decode_state(o, l, why, whylen);
        if (r < 0)
                return r;
        l->m = calloc((size_t)n, sizeof(*l->m));
        if (!l->m) {
                snprintf(why, whylen, "out of memory");
                return -ENOMEM;
        }
        cJSON_ArrayForEach(m, members) {
                if (decode_member(m, &l->m[l->n]) < 0) {
                        snprintf(why, whylen, "lease %" PRIu64 ": a member is malformed", l->id);
                        return -EINVAL;
                }
                l->n++;
        }
        return 0;
}

/* A pid in two leases granted, or an id twice, makes the whole file
 * suspect (a pending lease's call may have come for a process leased). */
static int check_unique(const struct lease *head, char *why, size_t whylen)
{
        for (const struct lease *a = head; a; a = a->next)
                for (const struct lease *b = a; b; b = b->next) {
                        if (a != b && a->id == b->id) {
                                snprintf(why, whylen, "lease id %" PRIu64 " appears twice", a->id);
                                return -EINVAL;
                        }
                        if (a->pending || b->pending)
                                continue;
                        for (size_t i = 0; i < a->n; i++)
                                for (size_t k = a == b ? i + 1 : 0; k < b->n; k++)
                                        if (a->m[i].pid == b->m[k].pid) {
                                                snprintf(why, whylen, "pid %d is in two leases", (int)a->m[i].pid);
                                                return -EINVAL;
                                        }
                }
        return 0;
}

static int decode(const char *text, size_t len, struct lease **ret_head, uint64_t *ret_next_id, bool *ret_same_boot,
                  char *why, size_t whylen)
{
        static const char *const keys[] = { "version", "boot_id", "next_id", "leases" };
        cJSON *root = cJSON_ParseWithLength(text, len), *arr, *it;
        const cJSON *boot = root ? cJSON_GetObjectItemCaseSensitive(root, "boot_id") : NULL;
        struct lease *head = NULL, *last = NULL;
        double version, next_id;
        char now[40];
        int r = -EINVAL;

        arr = root ? cJSON_GetObjectItemCaseSensitive(root, "leases") : NULL;
        if (!cJSON_IsObject(root) || !only_keys(root, keys, 4) || !get_num(root, "version", 1e9, &version) ||
            !get_num(root, "next_id", MAX_ID, &next_id) || !cJSON_IsString(boot) || !cJSON_IsArray(arr)) {
                snprintf(why, whylen, "not a lease store (malformed JSON or keys)");
                goto out;
        }
        if (version != LEASESTORE_VERSION) {
                snprintf(why, whylen, "version %.0f, this daemon reads %d", version, LEASESTORE_VERSION);
                goto out;
        }
        storefile_boot_id(now);
        *ret_same_boot = now[0] && strcmp(now, boot->valuestring) == 0;
        *ret_next_id = next_id >= 1 ? (uint64_t)next_id : 1;
        cJSON_ArrayForEach(it, arr) {
                struct lease *l = calloc(1, sizeof(*l));
                if (!l) {
                        snprintf(why, whylen, "out of memory");
                        r = -ENOMEM;
                        goto out;
                }
                l->prev = last;
                if (last)
                        last->next = l;
                else
                        head = l;
                last = l;
                r = decode_lease(it, l, why, whylen);
                if (r < 0)
                        goto out;
                if (l->id >= *ret_next_id)
                        *ret_next_id = l->id + 1;
        }
        r = check_unique(head, why, whylen);
out:
        cJSON_Delete(root);
        if (r < 0)
                leasestore_free(head);
        else
                *ret_head = head;
        return r;
}

int leasestore_load(int dirfd, struct lease **ret_head, uint64_t *ret_next_id, bool *ret_same_boot,
                    char *why, size_t whylen)
{
        char *text = NULL;
        size_t len = 0;
        int r;

        /* Temporary files left by a daemon that died while writing. */
        storefile_remove_leftovers(dirfd, LEASESTORE_FILE);
        r = storefile_read(dirfd, LEASESTORE_FILE, LEASESTORE_MAX_BYTES, &text, &len, why, whylen);
        if (r < 0)
                return r;
        r = decode(text, len, ret_head, ret_next_id, ret_same_boot, why, whylen);
        free(text);
        return r;
}

void leasestore_free(struct lease *head)
{
        while (head) {
                struct lease *next = head->next;
                free(head->m);
                free(head);
                head = next;
        }
}
