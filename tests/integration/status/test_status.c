/* test_status.c: the daemon's health (GetStatus, cudackptctl status) on
 * the simulated driver, without a driver and with a driver whose cuInit
 * fails; and the calls that need a driver (ListProcesses, the groups, ps)
 * refusing at once without one, a listing by pid naming the pid that no
 * process has.
 *
 * GetStatus is open to every caller, so its reply is held to a fixed set of
 * keys, all counts or the daemon's own facts: a key added without a look
 * at what it tells of other users fails here. */
#include "harness.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SIM "CUDACKPT_SIM=1"
#define SMALL "CUDACKPT_SIM_MEM_MIB=8"

static void assert_exit(const struct itest_proc_result *r, int status)
{
        ck_assert_msg(r->status == status, "exit status %d, expected %d (stdout \"%s\", stderr \"%s\")", r->status,
                      status, r->out, r->err);
        if (status == 0)
                ck_assert_msg(r->err[0] == '\0', "stderr on success: \"%s\"", r->err);
}

static void assert_has(const char *what, const char *text, const char *want)
{
        ck_assert_msg(strstr(text, want), "%s \"%s\" does not say \"%s\"", what, text, want);
}

static const cJSON *member(const cJSON *o, const char *key)
{
        return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* Every key of o is one of keys (NULL-terminated), of the JSON type each
 * stands for ('b' bool, 'n' a count, 's' string, 'o' object). */
static void assert_keys(const cJSON *o, const char *const *keys, const char *types, const char *where)
{
        const cJSON *item;

        ck_assert_msg(cJSON_IsObject(o), "%s is not an object", where);
        cJSON_ArrayForEach(item, o) {
                size_t i;
                for (i = 0; keys[i] && strcmp(keys[i], item->string) != 0; i++)
                        ;
                ck_assert_msg(keys[i], "%s has the key %s, which is not GetStatus's", where, item->string);
                bool ok = types[i] == 'b'   ? cJSON_IsBool(item)
                          : types[i] == 'n' ? cJSON_IsNumber(item) && item->valuedouble >= 0 &&
                                                      item->valuedouble == (double)(long long)item->valuedouble
                          : types[i] == 's' ? cJSON_IsString(item)
                                            : cJSON_IsObject(item);
                ck_assert_msg(ok, "%s: %s is of the wrong type", where, item->string);
        }
}

/* GetStatus on c: the reply's parameters, held to the keys of the IDL
 * (nothing that could name a process or a user). */
static const cJSON *get_status(struct itest_conn *c)
{
        static const char *const top[] = { "version", "driver", "process_index", "lease_store", "workers",
                                           "workers_busy", "queued", "groups", "leases", "watchers",
                                           "connections", NULL };
        static const char *const drv[] = { "available", "simulated", "path", "version", "gpus", "reason", NULL };
        static const char *const ix[] = { "source", "lost", "opening", "reason", NULL };
        static const char *const store[] = { "durable", "reason", NULL };
        cJSON *j = itest_call(c, CUDACKPT_METHOD_GET_STATUS, NULL);
        const cJSON *p = itest_params(j);

        itest_assert_ok(j);
        assert_keys(p, top, "sooonnnnnnn", "GetStatus");
        assert_keys(member(p, "driver"), drv, "bbsnns", "driver");
        assert_keys(member(p, "process_index"), ix, "sbbs", "process_index");
        assert_keys(member(p, "lease_store"), store, "bs", "lease_store");
        ck_assert_msg(cJSON_IsTrue(member(member(p, "lease_store"), "durable")) || member(member(p, "lease_store"), "reason"),
                      "a lease store that will not last, without a reason: %s", itest_dump(j));
        for (size_t i = 0; top[i]; i++)
                ck_assert_msg(member(p, top[i]), "GetStatus lacks %s: %s", top[i], itest_dump(j));
        for (size_t i = 0; i < 3; i++)
                ck_assert_msg(member(member(p, "driver"), drv[i]), "driver lacks %s: %s", drv[i], itest_dump(j));
        return p;
}

static bool jbool(const cJSON *o, const char *key)
{
        return cJSON_IsTrue(member(o, key));
}

static long long jnum(const cJSON *o, const char *key)
{
        const cJSON *n = member(o, key);
        return cJSON_IsNumber(n) ? (long long)n->valuedouble : -1;
}

static const char *jstr(const cJSON *o, const char *key)
{
        return cJSON_GetStringValue(member(o, key));
}

/* ---- the simulated driver -------------------------------------------------- */

START_TEST(status_simulated)
{
        struct itest_daemon_opts o = { .config_json = "{\"workers\":3}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct itest_conn *c = itest_connect(d);
        const cJSON *p = get_status(c), *drv = member(p, "driver"), *ix = member(p, "process_index");

        ck_assert_msg(jbool(drv, "available") && jbool(drv, "simulated"), "driver: %s", itest_dump(p));
        ck_assert_str_eq(jstr(drv, "path"), itest_need_env("CUDACKPT_TEST_SIM"));
        ck_assert_int_eq(jnum(drv, "version"), 13000);
        ck_assert_int_eq(jnum(drv, "gpus"), 1);
        ck_assert_msg(!member(drv, "reason"), "a reason for a usable driver: %s", itest_dump(p));
        const char *source = jstr(ix, "source");
        ck_assert_msg(source && (strcmp(source, "fentry") == 0 || strcmp(source, "tracepoint") == 0 ||
                                 strcmp(source, "proc") == 0),
                      "process_index.source: %s", itest_dump(p));
        ck_assert_msg(!jbool(ix, "lost"), "a lost index at the start: %s", itest_dump(p));
        ck_assert_msg(strcmp(source, "proc") != 0 || jbool(ix, "opening") || jstr(ix, "reason"),
                      "scans /proc without saying why: %s", itest_dump(p));
        /* The test's directory is root's, 0755: the leases outlive a restart. */
        ck_assert_msg(jbool(member(p, "lease_store"), "durable"), "lease_store: %s", itest_dump(p));
        ck_assert_int_eq(jnum(p, "workers"), 3);
        ck_assert_int_eq(jnum(p, "workers_busy"), 0);
        ck_assert_int_eq(jnum(p, "queued"), 0);
        ck_assert_int_eq(jnum(p, "groups"), 0);
        ck_assert_int_eq(jnum(p, "leases"), 0);
        ck_assert_int_eq(jnum(p, "watchers"), 0);
        ck_assert_int_eq(jnum(p, "connections"), 1);
        ck_assert_str_eq(jstr(p, "version"), jstr(itest_params(itest_call(c, "org.varlink.service.GetInfo", NULL)),
                                                  "version"));

        /* No parameters. */
        cJSON *j = itest_call(c, CUDACKPT_METHOD_GET_STATUS, "{\"pid\":1}");
        itest_assert_error(j, CUDACKPT_VARLINK_INVALID_PARAMETER);
        itest_assert_str(j, "parameter", "pid");
        /* In the IDL the daemon serves. */
        j = itest_call(c, "org.varlink.service.GetInterfaceDescription", "{\"interface\":\"" CUDACKPT_INTERFACE "\"}");
        ck_assert_msg(strstr(itest_str(j, "description"), "method GetStatus() -> ("), "no GetStatus in the IDL");
}
END_TEST

/* Until GetStatus says busy >= 2, queued >= 1 and exactly one group, lease,
 * watcher and five connections; asserts within timeout_ms. */
static void await_counts(struct itest_conn *c, int timeout_ms)
{
        double deadline = itest_now_ms() + timeout_ms;
        const cJSON *p;

        for (;;) {
                p = get_status(c);
                if (jnum(p, "workers_busy") >= 2 && jnum(p, "queued") >= 1 && jnum(p, "groups") == 1 &&
                    jnum(p, "leases") == 1 && jnum(p, "watchers") == 1 && jnum(p, "connections") == 5)
                        return;
                ck_assert_msg(itest_now_ms() < deadline, "GetStatus never said it all: %s", itest_dump(p));
        }
}

static void await_idle(struct itest_conn *c, int timeout_ms)
{
        double deadline = itest_now_ms() + timeout_ms;
        const cJSON *p;

        for (;;) {
                p = get_status(c);
                if (jnum(p, "workers_busy") == 0 && jnum(p, "queued") == 0 && jnum(p, "groups") == 0 &&
                    jnum(p, "leases") == 0 && jnum(p, "watchers") == 0 && jnum(p, "connections") == 1)
                        return;
                ck_assert_msg(itest_now_ms() < deadline, "GetStatus never came back to idle: %s", itest_dump(p));
        }
}

struct as_status {
        const char *sock;
};

/* Another user reads the same counts, of root's work (counts only). */
static int status_as_other(void *ctx, char *msg, size_t size)
{
        const struct as_status *x = ctx;
        cJSON *j = NULL;
        int r = itest_raw_call(x->sock, "{\"method\":\"" CUDACKPT_METHOD_GET_STATUS "\"}", 10000, &j, msg, size);

        if (r < 0)
                return r;
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "parameters");
        r = cJSON_GetObjectItemCaseSensitive(j, "error") || jnum(p, "leases") != 1 || jnum(p, "groups") != 1 ? -1 : 0;
        if (r < 0) {
                char *text = cJSON_PrintUnformatted(j);
                snprintf(msg, size, "GetStatus as another user: %s", text ? text : "?");
                free(text);
        }
        cJSON_Delete(j);
        return r;
}

/* Each count follows what runs: a driver call busy on a worker, another
 * queued behind it, a group, a lease, a watcher, the connections; another
 * user reads the same counts. */
START_TEST(status_counts)
{
        struct itest_daemon_opts o = { .config_json = "{\"workers\":3}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct itest_conn *c = itest_connect(d);
        pid_t leased = itest_small_target();
        pid_t busy = itest_target(SIM, SMALL, "CUDACKPT_SIM_BUSY_MS=8000", NULL);
        /* A checkpoint of about 8 s (1 GiB at 128 MiB/s). */
        pid_t slow = itest_target(SIM, "CUDACKPT_SIM_MEM_MIB=1024", "CUDACKPT_SIM_CKPT_MIBPS=128", NULL);
        struct itest_conn *w = itest_connect(d), *o1 = itest_connect(d), *o2 = itest_connect(d),
                          *o3 = itest_connect(d);

        cJSON *j = itest_callf(c, "{\"method\":\"" CUDACKPT_METHOD_LOCK "\",\"parameters\":{\"pid\":%d,"
                                  "\"lease_ms\":600000}}", (int)leased);
        itest_assert_state(j, leased, "locked");
        long long lease = jnum(member(itest_params(j), "lease"), "id");
        ck_assert_msg(lease > 0, "no lease in %s", itest_dump(j));
        itest_send(w, "{\"method\":\"" CUDACKPT_METHOD_WATCH "\",\"more\":true}");
        j = itest_recv(w);
        ck_assert_msg(jstr(member(itest_params(j), "event"), "type") &&
                              strcmp(jstr(member(itest_params(j), "event"), "type"), "watching") == 0,
                      "the first Watch reply: %s", itest_dump(j));
        itest_sendf(o1, "{\"method\":\"" CUDACKPT_METHOD_LOCK "\",\"parameters\":{\"pid\":%d,\"timeout_ms\":0}}",
                    (int)busy);
        (void)itest_await_in_flight(c, busy, "Lock", 5000);
        itest_sendf(o2, "{\"method\":\"" CUDACKPT_METHOD_UNLOCK "\",\"parameters\":{\"pid\":%d}}", (int)busy);
        itest_sendf(o3, "{\"method\":\"" CUDACKPT_METHOD_SUSPEND_GROUP "\",\"parameters\":{\"selector\":"
                        "{\"pids\":[{\"pid\":%d}]}}}", (int)slow);
        await_counts(c, 6000);

        if (geteuid() == 0) {
                struct as_status x = { .sock = d->sock };
                char msg[1024];
                ck_assert_msg(itest_run_as(ITEST_OTHER_UID, status_as_other, &x, msg, sizeof(msg)) == 0, "%s", msg);
        }

        itest_assert_state(itest_recv(o1), busy, "locked");
        itest_assert_state(itest_recv(o2), busy, "running");
        j = itest_recv(o3);
        itest_assert_ok(j);
        itest_assert_ok(itest_callf(c, "{\"method\":\"" CUDACKPT_METHOD_RELEASE_LEASE "\",\"parameters\":"
                                       "{\"lease\":%lld}}", lease));
        itest_conn_close(w);
        itest_conn_close(o1);
        itest_conn_close(o2);
        itest_conn_close(o3);
        await_idle(c, 5000);
}
END_TEST

/* cudackptctl status: lines for a person, --json the reply itself. */
START_TEST(status_cli_simulated)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_proc_result *r = itest_ctl(d, "status", NULL);

        assert_exit(r, 0);
        assert_has("status", r->out, "daemon: cudackptd ");
        assert_has("status", r->out, itest_strdupf("driver: SIMULATED CUDA 13.0, 1 GPU, from %s (no GPU is involved)\n",
                                                   itest_need_env("CUDACKPT_TEST_SIM")));
        assert_has("status", r->out, "\nprocess index: ");
        assert_has("status", r->out, "\nworkers: ");
        assert_has("status", r->out, "\nqueued operations: 0\n");
        assert_has("status", r->out, "\nlease store: leases outlive a restart of the daemon\n");
        assert_has("status", r->out, "\nconnections: 1\n");

        r = itest_ctl(d, "--json", "status", NULL);
        assert_exit(r, 0);
        cJSON *j = itest_keep_json(cJSON_Parse(r->out));
        ck_assert_msg(cJSON_IsObject(j), "status --json: \"%s\"", r->out);
        const cJSON *drv = member(j, "driver");
        ck_assert_msg(jbool(drv, "available") && jbool(drv, "simulated") && jnum(drv, "version") == 13000 &&
                              member(j, "process_index") && jnum(j, "connections") == 1,
                      "status --json: \"%s\"", r->out);
}
END_TEST

/* ---- no driver ------------------------------------------------------------- */

/* GetStatus and status of a daemon without a usable driver; path is the
 * library it was given, why a word of the reason. */
static void assert_unavailable_status(struct itest_daemon *d, const char *path, const char *why)
{
        struct itest_conn *c = itest_connect(d);
        const cJSON *p = get_status(c), *drv = member(p, "driver");

        ck_assert_msg(!jbool(drv, "available"), "a usable driver: %s", itest_dump(p));
        ck_assert_str_eq(jstr(drv, "path"), path);
        ck_assert_int_eq(jnum(drv, "gpus"), 0);
        ck_assert_msg(jstr(drv, "reason") && strstr(jstr(drv, "reason"), why), "reason without \"%s\": %s", why,
                      itest_dump(p));
        ck_assert_int_eq(jnum(p, "connections"), 1);

        struct itest_proc_result *r = itest_ctl(d, "status", NULL);
        assert_exit(r, CUDACKPT_EXIT_DRIVER_UNAVAILABLE);
        assert_has("status", r->out, itest_strdupf("driver: no usable CUDA driver (%s): ", path));
        assert_has("status", r->out, why);
        assert_has("status stderr", r->err, "cudackptctl: status: the daemon has no usable CUDA driver: ");
        r = itest_ctl(d, "--json", "status", NULL);
        assert_exit(r, CUDACKPT_EXIT_DRIVER_UNAVAILABLE);
        cJSON *j = itest_keep_json(cJSON_Parse(r->out));
        ck_assert_msg(member(j, "driver") && !jbool(member(j, "driver"), "available"), "status --json: \"%s\"",
                      r->out);
        /* info answers: the loop turns, whatever the driver. */
        assert_exit(itest_ctl(d, "info", NULL), 0);
}

/* What needs the driver says so at once: ListProcesses, the groups, ps. */
static void assert_driver_needed(struct itest_daemon *d)
{
        struct itest_conn *c = itest_connect(d);
        pid_t pid = itest_mapped_target();
        const char *pids = itest_strdupf("{\"selector\":{\"pids\":[{\"pid\":%d}]}}", (int)pid);

        cJSON *j = itest_call(c, CUDACKPT_METHOD_LIST_PROCESSES, NULL);
        itest_assert_error(j, CUDACKPT_ERROR_DRIVER_UNAVAILABLE);
        ck_assert_msg(itest_str(j, "reason") && *itest_str(j, "reason"), "no reason: %s", itest_dump(j));
        itest_assert_error(itest_call(c, CUDACKPT_METHOD_LIST_PROCESSES, pids), CUDACKPT_ERROR_DRIVER_UNAVAILABLE);
        itest_assert_error(itest_call(c, CUDACKPT_METHOD_SUSPEND_GROUP, pids), CUDACKPT_ERROR_DRIVER_UNAVAILABLE);
        itest_assert_error(itest_call(c, CUDACKPT_METHOD_UNLOCK_GROUP, "{\"selector\":{\"tree\":1}}"),
                           CUDACKPT_ERROR_DRIVER_UNAVAILABLE);

        struct itest_proc_result *r = itest_ctl(d, "ps", NULL);
        assert_exit(r, CUDACKPT_EXIT_DRIVER_UNAVAILABLE);
        ck_assert_msg(r->out[0] == '\0', "ps printed \"%s\"", r->out);
        assert_has("ps stderr", r->err, "cudackptctl: ps: DriverUnavailable: no usable CUDA driver");
        r = itest_ctl(d, "--json", "ps", itest_strdupf("--pids=%d", (int)pid), NULL);
        assert_exit(r, CUDACKPT_EXIT_DRIVER_UNAVAILABLE);
        assert_has("ps --json", r->out, "\"error\":\"" CUDACKPT_ERROR_DRIVER_UNAVAILABLE "\"");
        assert_exit(itest_ctl(d, "suspend", itest_strdupf("--pids=%d", (int)pid), NULL), CUDACKPT_EXIT_DRIVER_UNAVAILABLE);
        /* Nothing happened to the process (its state from its own slot). */
        ck_assert_msg(kill(pid, 0) == 0, "the target died");
}

START_TEST(status_no_driver)
{
        struct itest_daemon_opts o = { .driver = "/nonexistent.so" };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct itest_conn *c = itest_connect(d);
        const cJSON *p = get_status(c);

        ck_assert_msg(!jbool(member(p, "driver"), "simulated") && !member(member(p, "driver"), "version"),
                      "driver: %s", itest_dump(p));
        ck_assert_str_eq(jstr(member(p, "process_index"), "source"), "proc");
        ck_assert_msg(jstr(member(p, "process_index"), "reason"), "no reason for no index: %s", itest_dump(p));
        itest_conn_close(c);
        assert_unavailable_status(d, "/nonexistent.so", "/nonexistent.so");
        assert_driver_needed(d);
}
END_TEST

START_TEST(status_init_fails)
{
        /* 100: CUDA_ERROR_NO_DEVICE. */
        static const char *const env[] = { "CUDACKPT_SIM_INIT_ERROR=100", NULL };
        struct itest_daemon_opts o = { .env = env };
        struct itest_daemon *d = itest_daemon_start(&o);

        assert_unavailable_status(d, itest_need_env("CUDACKPT_TEST_SIM"), "CUDA_ERROR_NO_DEVICE");
        assert_driver_needed(d);
}
END_TEST

/* ---- ps of pids no process has --------------------------------------------- */

START_TEST(ps_no_such_pid)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t mapped = itest_mapped_target();
        pid_t plain = itest_target(SMALL, NULL);
        pid_t dead = itest_dead_pid();

        cJSON *j = itest_call(c, CUDACKPT_METHOD_LIST_PROCESSES,
                              itest_strdupf("{\"selector\":{\"pids\":[{\"pid\":%d},{\"pid\":%d}]}}", (int)mapped,
                                            (int)dead));
        itest_assert_error(j, CUDACKPT_ERROR_NO_SUCH_PROCESS);
        itest_assert_int(j, "pid", dead);
        j = itest_call(c, CUDACKPT_METHOD_LIST_PROCESSES, itest_strdupf("{\"selector\":{\"tree\":%d}}", (int)dead));
        itest_assert_error(j, CUDACKPT_ERROR_NO_SUCH_PROCESS);
        itest_assert_int(j, "pid", dead);

        struct itest_proc_result *r = itest_ctl(d, "ps", itest_strdupf("--pids=%d", (int)dead), NULL);
        assert_exit(r, CUDACKPT_EXIT_NO_SUCH_PROCESS);
        ck_assert_msg(r->out[0] == '\0', "ps printed \"%s\"", r->out);
        assert_has("ps stderr", r->err, "NoSuchProcess");
        r = itest_ctl(d, "ps", itest_strdupf("--pids=%d,%d", (int)mapped, (int)dead), NULL);
        assert_exit(r, CUDACKPT_EXIT_NO_SUCH_PROCESS);
        assert_has("ps stderr", r->err, itest_strdupf("pid %d: NoSuchProcess", (int)dead));
        assert_exit(itest_ctl(d, "ps", itest_strdupf("--tree=%d", (int)dead), NULL), CUDACKPT_EXIT_NO_SUCH_PROCESS);

        /* A process that is there but no CUDA process: matched by nothing. */
        r = itest_ctl(d, "ps", itest_strdupf("--pids=%d", (int)plain), NULL);
        assert_exit(r, 0);
        ck_assert_str_eq(r->out, "no CUDA process matched\n");
        r = itest_ctl(d, "ps", itest_strdupf("--pids=%d", (int)mapped), NULL);
        assert_exit(r, 0);
        assert_has("ps", r->out, itest_strdupf("%d", (int)mapped));
}
END_TEST

/* ---- a real driver, and a hostile daemon, by a fake server ----------------- */

static const char *fake_status(struct itest_daemon *d, const char *driver)
{
        const char *sock = itest_strdupf("%s/fake", d->dir);
        const char *replies[] = {
                itest_strdupf("{\"parameters\":{\"version\":\"0.1.0\",\"driver\":%s,\"process_index\":"
                              "{\"source\":\"fentry\",\"lost\":false,\"opening\":false},\"workers\":16,"
                              "\"workers_busy\":2,\"queued\":5,\"groups\":1,\"leases\":3,\"watchers\":4,"
                              "\"connections\":7}}",
                              driver),
                NULL,
        };
        unlink(sock);
        pid_t srv = itest_fake_server_calls(sock, replies, itest_strdupf("%s/request", d->dir));
        struct itest_proc_result *r = itest_ctl(NULL, itest_strdupf("--socket=%s", sock), "status", NULL);
        itest_await_fake_server(srv);
        return itest_strdupf("%d|%s|%s", r->status, r->out, r->err);
}

START_TEST(status_of_other_drivers)
{
        struct itest_daemon *d = itest_daemon_start_default();
        const char *r = fake_status(d, "{\"available\":true,\"simulated\":false,\"path\":\"libcuda.so.1\","
                                       "\"version\":12080,\"gpus\":8}");
        ck_assert_msg(strncmp(r, "0|", 2) == 0, "status of a real driver: %s", r);
        assert_has("status", r, "driver: CUDA 12.8, 8 GPUs, from libcuda.so.1\n");
        assert_has("status", r, "process index: fentry\n");
        assert_has("status", r, "workers: 2 busy of 16\n");
        assert_has("status", r, "queued operations: 5\n");
        assert_has("status", r, "leases: 3\n");

        /* What the daemon says is sanitised. */
        r = fake_status(d, "{\"available\":false,\"simulated\":false,\"path\":\"x\\u001b[2J\","
                           "\"gpus\":0,\"reason\":\"gone\\u001b]0;owned\\u0007\"}");
        ck_assert_msg(strncmp(r, "18|", 3) == 0, "status of no driver: %s", r);
        ck_assert_msg(!strchr(r, '\033') && !strchr(r, '\a'), "a terminal control passed through: %s", r);
        assert_has("status", r, "driver: no usable CUDA driver (x?[2J): gone?]0;owned?\n");

        /* A reply without a driver is no status. */
        r = fake_status(d, "17");
        ck_assert_msg(strncmp(r, "1|", 2) == 0, "status of a malformed reply: %s", r);
        assert_has("status", r, "invalid reply");
}
END_TEST

int main(void)
{
        const TTest *tests[] = { status_simulated, status_counts, status_cli_simulated, status_no_driver,
                status_init_fails, ps_no_such_pid, status_of_other_drivers, NULL };

        return itest_run("integration.status", "status", 60, tests);
}
