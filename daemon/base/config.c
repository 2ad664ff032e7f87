/* config.c: defaults and the JSON configuration file.
 *
 * The file is one JSON object; unknown keys are refused rather than ignored,
 * because a misspelt limit that silently keeps its default is worse than a
 * daemon that does not start. */
#include "base/config.h"

#include <errno.h>
#include <grp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cudackpt/protocol.h"
#include "json.h"

void config_init(struct config *c)
{
        *c = (struct config){
                .socket_path = strdup(CUDACKPT_DEFAULT_SOCKET),
                .socket_mode = 0666,
                .driver_path = strdup("libcuda.so.1"),
                .nvml_path = strdup("libnvidia-ml.so.1"),
                .workers = 16,
                .workers_per_uid = 4,
                .workers_reserved = 4,
                .max_message_bytes = 65536,
                .max_write_queue_bytes = 1024 * 1024,
                .max_connections = 4096,
                .max_connections_per_uid = 1024,
                .max_connections_reserved = 64,
                .idle_timeout_ms = 300000,
                .accept_retry_ms = 200,
                .max_queue_per_pid = 64,
                .max_queue_total = 4096,
                .max_queue_per_uid = 1024,
                .max_queue_reserved = 256,
                .default_lock_timeout_ms = 10000,
                .exit_wait_ms = 5000,
                .max_gpu_pairs = 64,
                .restore_gpu_margin_mib = 512,
                .max_gpu_records = 4096,
                .max_gpu_records_per_uid = 512,
                .max_cached_targets = 256,
                .cached_target_idle_ms = 60000,
                .stall_warning_ms = 30000,
                .max_group_members = 256,
                .max_groups_in_flight = 16,
                .max_groups_per_uid = 4,
                .max_groups_reserved = 4,
                .max_leases = 4096, .max_leases_per_uid = 64,
                .max_leases_reserved = 256,
                .lease_claim_grace_ms = 10000,
                .max_watchers = 256, .max_watchers_per_uid = 16,
                .max_watchers_reserved = 16,
                .max_watcher_bytes = 256 * 1024,
                .max_watch_bytes = 32 * 1024 * 1024,
                .watch_scan_ms = 1000,
                .progress_interval_ms = 500,
                .process_index_max = 65536,
                .log_level = 6, /* LOG_INFO */
                .read_only_lane = true,
                .lane_spin_us = 200,
                .max_jobs = 64, .max_jobs_per_uid = 4,
                .max_job_argv = 4096,
                .job_stop_ms = 10000, .barrier_timeout_ms = 300000, .max_locked_connections = 1024,
                .save_tcp_established = true, .save_network_lock = "skip", .save_parts_network_lock = "off",
                .max_saves = 1024, .max_saves_per_uid = 16,
                .max_save_bytes_per_uid = (uint64_t)1 << 40,
                .max_save_operations = 4, .max_save_operations_per_uid = 1, .max_locked_connections_per_uid = 64,
        };
}

void config_free(struct config *c)
{
        free(c->socket_path);
        free(c->driver_path);
        free(c->nvml_path);
        free(c->saves_dir);
        free(c->ctl_path);
        c->socket_path = c->driver_path = c->nvml_path = c->saves_dir = c->ctl_path = NULL;
}

int config_set_string(char **field, const char *value)
{
        char *s = strdup(value);

        if (!s)
                return -ENOMEM;
        free(*field);
        *field = s;
        return 0;
}

/* The line of the first mention of key in text, for error messages: cJSON
 * keeps no positions, and a config file names each key once. */
static unsigned line_of_key(const char *text, const char *key)
{
        char quoted[128];
        const char *p;
        unsigned line = 1;

        snprintf(quoted, sizeof(quoted), "\"%s\"", key);
        p = strstr(text, quoted);
        if (!p)
                return 0;
        for (const char *q = text; q < p; q++)
                if (*q == '\n')
                        line++;
        return line;
}

static int get_uint(const cJSON *item, double min, double max, double *ret)
{
        if (!json_is_integer(item, min, max))
                return -EINVAL;
        *ret = item->valuedouble;
        return 0;
}

static int resolve_group(const cJSON *item, gid_t *ret)
{
        if (cJSON_IsString(item)) {
                struct group *g = getgrnam(item->valuestring);
                if (!g)
                        return -ENOENT;
                *ret = g->gr_gid;
                return 0;
        }
        double v;
        if (get_uint(item, 0, 4294967294.0, &v) < 0)
                return -EINVAL;
        *ret = (gid_t)v;
        return 0;
}

struct uint_key {
        const char *name;
        double min, max;
        size_t offset;
        size_t size;
};

#define UKEY(n, lo, hi) { #n, lo, hi, offsetof(struct config, n), sizeof(((struct config *)0)->n) }
static const struct uint_key uint_keys[] = {
        UKEY(workers, 1, 1024),
        UKEY(workers_per_uid, 1, 1024),
        UKEY(workers_reserved, 0, 1024),
        UKEY(max_message_bytes, 256, 16 * 1024 * 1024),
        UKEY(max_write_queue_bytes, 4096, 256 * 1024 * 1024),
        UKEY(max_connections, 1, 1048576),
        UKEY(max_connections_per_uid, 1, 1048576),
        UKEY(max_connections_reserved, 0, 1048576),
        UKEY(idle_timeout_ms, 0, 86400000.0 * 365),
        UKEY(accept_retry_ms, 1, 60000),
        UKEY(max_queue_per_pid, 1, 1048576),
        UKEY(max_queue_total, 1, 16777216),
        UKEY(max_queue_per_uid, 1, 16777216),
        UKEY(max_queue_reserved, 0, 16777216),
        UKEY(default_lock_timeout_ms, 0, 4294967295.0),
        UKEY(exit_wait_ms, 0, 600000),
        UKEY(max_gpu_pairs, 1, 1024),
        UKEY(restore_gpu_margin_mib, 0, 1048576),
        UKEY(max_gpu_records, 1, 1048576),
        UKEY(max_gpu_records_per_uid, 1, 1048576),
        UKEY(max_cached_targets, 0, 65536),
        UKEY(cached_target_idle_ms, 0, 86400000.0),
        UKEY(stall_warning_ms, 0, 86400000.0),
        UKEY(max_group_members, 1, 65536),
        UKEY(max_groups_in_flight, 1, 4096),
        UKEY(max_groups_per_uid, 1, 4096),
        UKEY(max_groups_reserved, 0, 4096),
        UKEY(max_leases, 1, 1048576),
        UKEY(max_leases_per_uid, 1, 1048576),
        UKEY(max_leases_reserved, 0, 1048576),
        UKEY(lease_claim_grace_ms, 0, 600000),
        UKEY(max_watchers, 1, 65536),
        UKEY(max_watchers_per_uid, 1, 65536),
        UKEY(max_watchers_reserved, 0, 65536),
        UKEY(max_watcher_bytes, 4096, 1024.0 * 1024 * 1024),
        UKEY(max_watch_bytes, 65536, 64.0 * 1024 * 1024 * 1024),
        UKEY(watch_scan_ms, 0, 3600000),
        UKEY(progress_interval_ms, 0, 3600000),
        UKEY(process_index_max, 0, 4194304),
        UKEY(lane_spin_us, 0, 100000),
        UKEY(max_jobs, 1, 65536),
        UKEY(max_jobs_per_uid, 1, 65536),
        UKEY(max_job_argv, 1, 65536),
        UKEY(job_stop_ms, 0, 3600000),
        UKEY(barrier_timeout_ms, 1, 86400000),
        UKEY(max_saves, 1, 1048576),
        UKEY(max_saves_per_uid, 1, 1048576),
        UKEY(max_save_bytes_per_uid, 1, 9007199254740992.0),
        UKEY(max_save_operations, 1, 4096),
        UKEY(max_save_operations_per_uid, 1, 4096),
        UKEY(max_locked_connections, 1, 65536), UKEY(max_locked_connections_per_uid, 1, 65536),
};

struct bool_key {
        const char *name;
        size_t offset;
};

#define BKEY(n) { #n, offsetof(struct config, n) }
static const struct bool_key bool_keys[] = {
        BKEY(operators_may_act_on_root),
        BKEY(read_only_unrestricted),
        BKEY(read_only_lane),
        BKEY(process_index_tracepoint),
        BKEY(save_tcp_established),
};

static void store_uint(struct config *c, const struct uint_key *k, double v)
{
        char *p = (char *)c + k->offset;

        switch (k->size) {
        case sizeof(uint64_t):
                *(uint64_t *)(void *)p = (uint64_t)v;
                break;
        default:
                *(uint32_t *)(void *)p = (uint32_t)v;
                break;
        }
}

/* The number and boolean keys, found in their tables: 0, -EINVAL with
 * the reason in why, or -ENOENT when key is in neither table. */
static int apply_table_key(struct config *c, const cJSON *item, char *why, size_t whylen)
{
        const char *key = item->string;

        for (size_t i = 0; i < sizeof(uint_keys) / sizeof(uint_keys[0]); i++) {
                const struct uint_key *k = &uint_keys[i];
                double v;
                if (strcmp(key, k->name) != 0)
                        continue;
                if (get_uint(item, k->min, k->max, &v) < 0) {
                        snprintf(why, whylen, "\"%s\" must be an integer from %.0f to %.0f", key,
                                 k->min, k->max);
                        return -EINVAL;
                }
                store_uint(c, k, v);
                return 0;
        }
        for (size_t i = 0; i < sizeof(bool_keys) / sizeof(bool_keys[0]); i++) {
                if (strcmp(key, bool_keys[i].name) != 0)
                        continue;
                if (!cJSON_IsBool(item)) {
                        snprintf(why, whylen, "\"%s\" must be true or false", key);
                        return -EINVAL;
                }
                *(bool *)((char *)c + bool_keys[i].offset) = cJSON_IsTrue(item);
                return 0;
        }
        return -ENOENT;
}

/* CRIU's --network-lock methods, the table's strings kept.  For a part
 * held at a barrier, "off" (none held: docs/security.md), never "skip". */
static int apply_network_lock(struct config *c, const cJSON *item, char *why, size_t whylen)
{
        static const char *const methods[] = { "iptables", "nftables", "skip", "off" };
        bool parts = strcmp(item->string, "save_parts_network_lock") == 0;

        for (size_t i = 0; cJSON_IsString(item) && i < sizeof(methods) / sizeof(methods[0]); i++)
                if (strcmp(item->valuestring, methods[i]) == 0 && (i < 2 || (i == 3) == parts)) {
                        *(parts ? &c->save_parts_network_lock : &c->save_network_lock) = methods[i];
                        return 0;
                }
        snprintf(why, whylen, "\"%s\" must be \"iptables\", \"nftables\" or %s", item->string,
                 parts ? "\"off\"" : "\"skip\"");
        return -EINVAL;
}

static int apply_socket_mode(struct config *c, const cJSON *item, char *why, size_t whylen)
{
        char *end;
        unsigned long m;

        if (!cJSON_IsString(item) || (errno = 0, m = strtoul(item->valuestring, &end, 8),
                                      errno || *end || end == item->valuestring || m > 0777)) {
                snprintf(why, whylen, "\"socket_mode\" must be an octal string such as \"0666\"");
                return -EINVAL;
        }
        c->socket_mode = (unsigned)m;
        return 0;
}

static int apply_log_level(struct config *c, const cJSON *item, char *why, size_t whylen)
{
        static const char *names[] = { "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug" };
        int lvl = -1;

        if (cJSON_IsString(item))
                for (int i = 0; i < 8; i++)
                        if (strcmp(item->valuestring, names[i]) == 0)
                                lvl = i;
        if (lvl < 3) {
                snprintf(why, whylen, "\"log_level\" must be one of \"debug\", \"info\", \"notice\", \"warning\", \"err\"");
                return -EINVAL;
        }
        c->log_level = lvl;
        return 0;
}

static int apply_operator_groups(struct config *c, const cJSON *item, char *why, size_t whylen)
{
        const cJSON *g;

        if (!cJSON_IsArray(item) || cJSON_GetArraySize(item) > CONFIG_MAX_GROUPS) {
                snprintf(why, whylen, "\"operator_groups\" must be an array of at most %d group names or ids",
                         CONFIG_MAX_GROUPS);
                return -EINVAL;
        }
        c->n_operator_gids = 0;
        cJSON_ArrayForEach(g, item) {
                gid_t gid;
                int r = resolve_group(g, &gid);
                if (r < 0) {
                        snprintf(why, whylen, "\"operator_groups\": %s%s%s",
                                 r == -ENOENT ? "no such group \"" : "entries must be group names or ids",
                                 r == -ENOENT ? g->valuestring : "", r == -ENOENT ? "\"" : "");
                        return -EINVAL;
                }
                c->operator_gids[c->n_operator_gids++] = gid;
        }
        return 0;
}

static int apply_key(struct config *c, const cJSON *item, char *why, size_t whylen)
{
        const char *key = item->string;
        int r;

        r = apply_table_key(c, item, why, whylen);
        if (r != -ENOENT)
                return r;
        if (strcmp(key, "socket") == 0 || strcmp(key, "driver") == 0) {
                if (!cJSON_IsString(item) || item->valuestring[0] == '\0') {
                        snprintf(why, whylen, "\"%s\" must be a non-empty string", key);
                        return -EINVAL;
                }
                return config_set_string(key[0] == 's' ? &c->socket_path : &c->driver_path,
                                         item->valuestring);
        }
        if (strcmp(key, "saves_dir") == 0 || strcmp(key, "ctl_path") == 0) {
                /* Both are used as root: only an absolute path says which
                 * ("": none, the default). */
                char **field = key[0] == 's' ? &c->saves_dir : &c->ctl_path;
                if (!cJSON_IsString(item) || (item->valuestring[0] && item->valuestring[0] != '/')) {
                        snprintf(why, whylen, "\"%s\" must be an absolute path, or \"\"", key);
                        return -EINVAL;
                }
                if (!item->valuestring[0]) {
                        free(*field);
                        *field = NULL;
                        return 0;
                }
                return config_set_string(field, item->valuestring);
        }
        if (strcmp(key, "nvml") == 0) {
                if (!cJSON_IsString(item)) {
                        snprintf(why, whylen, "\"nvml\" must be a string (\"\" for none)");
                        return -EINVAL;
                }
                return config_set_string(&c->nvml_path, item->valuestring);
        }
        if (strcmp(key, "socket_mode") == 0)
                return apply_socket_mode(c, item, why, whylen);
        if (strcmp(key, "save_network_lock") == 0 || strcmp(key, "save_parts_network_lock") == 0)
                return apply_network_lock(c, item, why, whylen);
        if (strcmp(key, "log_level") == 0)
                return apply_log_level(c, item, why, whylen);
        if (strcmp(key, "operator_groups") == 0)
                return apply_operator_groups(c, item, why, whylen);
        snprintf(why, whylen, "unknown key \"%s\"", key);
        return -EINVAL;
}

static char *read_file(const char *path, int *ret_errno)
{
        FILE *f = fopen(path, "re");
        char *buf = NULL;
        size_t len = 0, cap = 0;

        if (!f) {
                *ret_errno = errno;
                return NULL;
        }
        for (;;) {
                if (cap - len < 4096) {
                        if (cap > 1024 * 1024) { /* a config file is small */
                                *ret_errno = EFBIG;
                                goto fail;
                        }
                        char *n = realloc(buf, cap + 8192);
                        if (!n) {
                                *ret_errno = ENOMEM;
                                goto fail;
                        }
                        buf = n;
                        cap += 8192;
                }
                size_t got = fread(buf + len, 1, cap - len - 1, f);
                len += got;
                if (got == 0)
                        break;
        }
        if (ferror(f)) {
                *ret_errno = EIO;
                goto fail;
        }
        fclose(f);
        buf[len] = '\0';
        return buf;
fail:
        fclose(f);
        free(buf);
        return NULL;
}

int config_load_file(struct config *c, const char *path, bool required, char **ret_error)
{
        char why[512] = "";
        const char *errpos = NULL;
        cJSON *root = NULL, *item;
        char *text;
        int e = 0, r = 0;

        text = read_file(path, &e);
        if (!text) {
                if (e == ENOENT && !required)
                        return 0;
                if (asprintf(ret_error, "%s: %s", path, strerror(e)) < 0)
                        *ret_error = NULL;
                return -e;
        }
        root = cJSON_ParseWithOpts(text, &errpos, 1);
        if (!root) {
                unsigned line = 1;
                const char *end = errpos ? errpos : text + strlen(text);
                for (const char *q = text; q < end; q++)
                        if (*q == '\n')
                                line++;
                if (asprintf(ret_error, "%s:%u: malformed JSON", path, line) < 0)
                        *ret_error = NULL;
                r = -EINVAL;
                goto out;
        }
        if (!cJSON_IsObject(root)) {
                if (asprintf(ret_error, "%s:1: the configuration must be a JSON object", path) < 0)
                        *ret_error = NULL;
                r = -EINVAL;
                goto out;
        }
        cJSON_ArrayForEach(item, root) {
                /* A key given twice is a mistake whichever copy was meant. */
                for (const cJSON *prev = root->child; prev != item; prev = prev->next)
                        if (strcmp(prev->string, item->string) == 0) {
                                snprintf(why, sizeof(why), "key \"%s\" given twice", item->string);
                                r = -EINVAL;
                                break;
                        }
                if (r == 0)
                        r = apply_key(c, item, why, sizeof(why));
                if (r < 0) {
                        if (asprintf(ret_error, "%s:%u: %s", path, line_of_key(text, item->string), why) < 0)
                                *ret_error = NULL;
                        goto out;
                }
        }
out:
        cJSON_Delete(root);
        free(text);
        return r;
}

/* Where the lease store lives: systemd's $RUNTIME_DIRECTORY (its first
 * entry), else the directory of the socket the daemon binds.  NULL when
 * out of memory. */
char *config_runtime_dir(const struct config *c)
{
        const char *env = secure_getenv("RUNTIME_DIRECTORY");
        char *d, *slash;

        if (env && env[0] == '/')
                return strndup(env, strcspn(env, ":"));
        d = strdup(c->socket_path);
        slash = d ? strrchr(d, '/') : NULL;
        if (!slash) {
                free(d);
                return strdup(".");
        }
        slash[slash == d] = '\0';
        return d;
}
