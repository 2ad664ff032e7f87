/* Unit tests: the configuration file, good and malformed. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "runner.h"

#include "base/config.h"

static char path[64];

static int load(const char *text, struct config *c, char **err)
{
        FILE *f;

        strcpy(path, "/tmp/cudackpt-config-XXXXXX");
        int fd = mkstemp(path);
        ck_assert_int_ge(fd, 0);
        f = fdopen(fd, "w");
        fputs(text, f);
        fclose(f);
        config_init(c);
        *err = NULL;
        int r = config_load_file(c, path, true, err);
        unlink(path);
        return r;
}

START_TEST(test_defaults_and_missing)
{
        struct config c;
        char *err = NULL;

        config_init(&c);
        ck_assert_str_eq(c.socket_path, "/run/cudackpt/io.cudackpt.Process");
        ck_assert_uint_ge(c.workers, 16);
        ck_assert_uint_le(c.max_message_bytes, 65536);
        /* The tracepoint way costs every process on the node: never by default. */
        ck_assert(!c.process_index_tracepoint);
        ck_assert_int_eq(config_load_file(&c, "/nonexistent/cudackptd.json", false, &err), 0);
        ck_assert_int_eq(config_load_file(&c, "/nonexistent/cudackptd.json", true, &err), -ENOENT);
        ck_assert_ptr_nonnull(strstr(err, "/nonexistent/cudackptd.json"));
        free(err);
        config_free(&c);
}
END_TEST

START_TEST(test_values)
{
        struct config c;
        char *err;

        ck_assert_int_eq(load("{\n \"workers\": 4,\n \"max_message_bytes\": 4096,\n"
                              " \"idle_timeout_ms\": 0, \"socket_mode\": \"0660\",\n"
                              " \"operator_groups\": [\"root\", 4242],\n"
                              " \"operators_may_act_on_root\": true, \"log_level\": \"debug\",\n"
                              " \"socket\": \"/tmp/x.sock\", \"default_lock_timeout_ms\": 4294967295,\n"
                              " \"max_cached_targets\": 0, \"cached_target_idle_ms\": 500, \"read_only_lane\": false,\n"
                              " \"exit_wait_ms\": 250, \"process_index_tracepoint\": true,\n"
                              " \"save_parts_network_lock\": \"nftables\", \"barrier_timeout_ms\": 2000}\n",
                              &c, &err),
                         0);
        ck_assert_uint_eq(c.workers, 4);
        ck_assert_uint_eq(c.max_message_bytes, 4096);
        ck_assert_uint_eq(c.idle_timeout_ms, 0);
        ck_assert_uint_eq(c.socket_mode, 0660);
        ck_assert_uint_eq(c.n_operator_gids, 2);
        ck_assert_uint_eq(c.operator_gids[0], 0);
        ck_assert_uint_eq(c.operator_gids[1], 4242);
        ck_assert(c.operators_may_act_on_root);
        ck_assert_int_eq(c.log_level, 7);
        ck_assert_str_eq(c.socket_path, "/tmp/x.sock");
        ck_assert_uint_eq(c.default_lock_timeout_ms, 4294967295u);
        ck_assert_uint_eq(c.max_cached_targets, 0);
        ck_assert_uint_eq(c.cached_target_idle_ms, 500);
        ck_assert(!c.read_only_lane);
        ck_assert_uint_eq(c.exit_wait_ms, 250);
        ck_assert(c.process_index_tracepoint);
        ck_assert_str_eq(c.save_parts_network_lock, "nftables");
        ck_assert_str_eq(c.save_network_lock, "skip"); /* the other key's */
        ck_assert_uint_eq(c.barrier_timeout_ms, 2000);
        config_free(&c);
}
END_TEST

static void assert_refused(const char *text, const char *where, const char *why)
{
        struct config c;
        char *err;

        ck_assert_msg(load(text, &c, &err) < 0, "accepted %s", text);
        ck_assert_ptr_nonnull(err);
        ck_assert_msg(strstr(err, where) != NULL, "'%s' lacks '%s'", err, where);
        ck_assert_msg(strstr(err, why) != NULL, "'%s' lacks '%s'", err, why);
        free(err);
        config_free(&c);
}

START_TEST(test_refused)
{
        assert_refused("{\n\"workers\": 4,\n\"workerz\": 1\n}", ":3:", "unknown key \"workerz\"");
        assert_refused("{\n\"workers\": 0\n}", ":2:", "\"workers\" must be an integer");
        assert_refused("{\n\"workers\": 2.5\n}", ":2:", "workers");
        assert_refused("{\n\"workers\": \"4\"\n}", ":2:", "workers");
        assert_refused("{\n\"workers\": 4,\n\n\"max_message_bytes\" 5\n}", ":4:", "malformed JSON");
        assert_refused("[1]", ":1:", "must be a JSON object");
        assert_refused("{\"socket_mode\": \"999\"}", ":1:", "octal");
        assert_refused("{\"operator_groups\": [\"no-such-group-xyz\"]}", ":1:", "no such group");
        assert_refused("{\"read_only_unrestricted\": 1}", ":1:", "true or false");
        assert_refused("{\"read_only_lane\": \"yes\"}", ":1:", "true or false");
        assert_refused("{\"process_index_tracepoint\": 1}", ":1:", "true or false");
        assert_refused("{\"max_cached_targets\": 65537}", ":1:", "from 0 to 65536");
        assert_refused("{\"workers\": 4, \"workers\": 5}", ":1:", "given twice");
        assert_refused("{\"socket\": \"\"}", ":1:", "non-empty");
        /* Run and written as root: a path relative to where the daemon
         * happens to start is no place for either. */
        assert_refused("{\"saves_dir\": \"saves\"}", ":1:", "absolute path");
        assert_refused("{\"ctl_path\": 1}", ":1:", "absolute path");
        assert_refused("{\"max_jobs_per_uid\": 0}", ":1:", "max_jobs_per_uid");
        /* A part held at a barrier has connections to other nodes: they need the lock. */
        assert_refused("{\"save_parts_network_lock\": \"skip\"}", ":1:",
                       "\"save_parts_network_lock\" must be \"iptables\", \"nftables\" or \"off\"");
        assert_refused("{\"save_network_lock\": \"off\"}", ":1:",
                       "\"save_network_lock\" must be \"iptables\", \"nftables\" or \"skip\"");
        assert_refused("{\"save_network_lock\": \"none\"}", ":1:", "\"iptables\", \"nftables\" or \"skip\"");
        assert_refused("{\"barrier_timeout_ms\": 0}", ":1:", "barrier_timeout_ms");
}
END_TEST

/* saves_dir and ctl_path: a path, or "" for none. */
START_TEST(test_saves_paths)
{
        struct config c;
        char *err = NULL;

        ck_assert_int_eq(load("{\"saves_dir\": \"/var/lib/cudackpt/saves\", \"ctl_path\": \"/usr/bin/cudackptctl\"}",
                              &c, &err), 0);
        ck_assert_str_eq(c.saves_dir, "/var/lib/cudackpt/saves");
        ck_assert_str_eq(c.ctl_path, "/usr/bin/cudackptctl");
        config_free(&c);
        ck_assert_int_eq(load("{\"saves_dir\": \"\", \"ctl_path\": \"\"}", &c, &err), 0);
        ck_assert(!c.saves_dir && !c.ctl_path);
        config_free(&c);
}
END_TEST

static char *slurp(const char *file)
{
        FILE *f = fopen(file, "r");
        ck_assert_msg(f, "%s: %s", file, strerror(errno));
        static char buf[1 << 16];
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        return strdup(buf);
}

/* systemd/cudackptd.json lists every key that docs/configuration.md
 * documents, no other, each at the daemon's built-in default. */
START_TEST(test_shipped_file)
{
        char *json = slurp(CUDACKPT_SHIPPED_CONFIG), *doc = slurp(CUDACKPT_CONFIG_DOC);
        cJSON *j = cJSON_Parse(json);
        ck_assert_msg(cJSON_IsObject(j), "%s is not a JSON object", CUDACKPT_SHIPPED_CONFIG);
        int documented = 0;
        for (char *line = strstr(doc, "\n| `"); line; line = strstr(line + 1, "\n| `")) {
                char key[64];
                if (sscanf(line, "\n| `%63[a-z_]`", key) != 1)
                        continue;
                documented++;
                ck_assert_msg(cJSON_GetObjectItemCaseSensitive(j, key), "%s lacks the documented key \"%s\"",
                              CUDACKPT_SHIPPED_CONFIG, key);
        }
        ck_assert_int_eq(cJSON_GetArraySize(j), documented);
        cJSON_Delete(j);

        struct config d, c;
        char *err = NULL;
        config_init(&d);
        config_init(&c);
        ck_assert_msg(config_load_file(&c, CUDACKPT_SHIPPED_CONFIG, true, &err) == 0, "%s", err ? err : "");
#define SAME(f) ck_assert_msg(c.f == d.f, "%s: " #f " is not the default", CUDACKPT_SHIPPED_CONFIG)
        SAME(socket_mode);
        SAME(workers);
        SAME(max_message_bytes);
        SAME(max_write_queue_bytes);
        SAME(max_connections);
        SAME(max_jobs);
        SAME(max_jobs_per_uid);
        SAME(max_job_argv);
        SAME(job_stop_ms);
        SAME(barrier_timeout_ms);
        SAME(max_saves);
        SAME(max_saves_per_uid);
        SAME(max_save_bytes_per_uid);
        SAME(max_save_operations);
        SAME(max_save_operations_per_uid);
        ck_assert(!c.saves_dir && !c.ctl_path);
        SAME(max_connections_per_uid);
        SAME(idle_timeout_ms);
        SAME(max_queue_per_pid);
        SAME(max_queue_total);
        SAME(default_lock_timeout_ms);
        SAME(exit_wait_ms);
        SAME(max_gpu_pairs);
        SAME(max_cached_targets);
        SAME(cached_target_idle_ms);
        SAME(stall_warning_ms);
        SAME(max_group_members);
        SAME(max_groups_in_flight);
        SAME(watch_scan_ms);
        SAME(progress_interval_ms);
        SAME(log_level);
        SAME(n_operator_gids);
        SAME(operators_may_act_on_root);
        SAME(read_only_unrestricted);
        SAME(read_only_lane);
        SAME(lane_spin_us);
        SAME(process_index_max);
        SAME(process_index_tracepoint);
#undef SAME
        ck_assert_str_eq(c.socket_path, d.socket_path);
        ck_assert_str_eq(c.driver_path, d.driver_path);
        ck_assert_str_eq(c.save_network_lock, d.save_network_lock);
        ck_assert_str_eq(c.save_parts_network_lock, d.save_parts_network_lock);
        config_free(&c);
        config_free(&d);
        free(json);
        free(doc);
}
END_TEST

const char unit_suite_name[] = "config";

void unit_tests(TCase *tc)
{
        tcase_add_test(tc, test_defaults_and_missing);
        tcase_add_test(tc, test_values);
        tcase_add_test(tc, test_refused);
        tcase_add_test(tc, test_saves_paths);
        tcase_add_test(tc, test_shipped_file);
}
