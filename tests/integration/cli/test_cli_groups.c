/* test_cli_groups.c: cudackptctl ps and its group verbs (--pids, --tree,
 * --cgroup selections, progress, failures, a hostile server) run as a
 * process against the daemon. */
#include "harness.h"

#include <errno.h>
#include <pwd.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* A simulated CUDA target that maps the simulator's library, as a real
 * one maps libcuda: the kind ListProcesses and the cgroup and tree
 * selectors find. */
static pid_t mapped_target_with(const char *extra_env)
{
        const char *sim = getenv("CUDACKPT_TEST_SIM");
        ck_assert_msg(sim && *sim, "CUDACKPT_TEST_SIM is not set: run the integration tests through ctest");
        /* Under "make check-sanitize" the simulator links the ASan runtime,
         * which /bin/sleep does not: preloaded, it must not insist on
         * coming first. */
        return itest_target(itest_strdupf("LD_PRELOAD=%s", sim), "ASAN_OPTIONS=verify_asan_link_order=0",
                            "CUDACKPT_SIM=1", extra_env, NULL);
}

static pid_t mapped_target(void)
{
        return mapped_target_with(NULL);
}

static void assert_has(const char *what, const char *text, const char *want)
{
        ck_assert_msg(strstr(text, want), "%s \"%s\" does not say \"%s\"", what, text, want);
}

/* Whether a line of text matches the extended regex pat. */
static bool has_line(const char *text, const char *pat)
{
        regex_t re;
        ck_assert_int_eq(regcomp(&re, pat, REG_EXTENDED | REG_NOSUB | REG_NEWLINE), 0);
        bool m = regexec(&re, text, 0, NULL, 0) == 0;
        regfree(&re);
        return m;
}

#define assert_line(what, text, ...) do { \
        const char *pat_ = itest_strdupf(__VA_ARGS__); \
        ck_assert_msg(has_line((text), pat_), "%s \"%s\" has no line matching /%s/", (what), (text), pat_); \
} while (0)

/* The object of pid in a JSON list of processes or members, or NULL. */
static const cJSON *find_pid(const cJSON *list, pid_t pid)
{
        const cJSON *o;
        cJSON_ArrayForEach(o, list) {
                const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "pid");
                if (cJSON_IsNumber(p) && p->valuedouble == pid)
                        return o;
        }
        return NULL;
}

static const char *obj_str(const cJSON *o, const char *key)
{
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(o, key);
        return cJSON_IsString(item) ? item->valuestring : NULL;
}

/* ctl's --json output, parsed (owned by the harness). */
static cJSON *out_json(const struct itest_proc_result *r)
{
        cJSON *j = itest_keep_json(cJSON_Parse(r->out));
        ck_assert_msg(j, "stdout is not JSON: \"%s\" (stderr \"%s\")", r->out, r->err);
        return j;
}

/* Asserts the state of each pid, one GetState each. */
static void assert_states(struct itest_daemon *d, const char *state, const pid_t *pids, size_t n)
{
        for (size_t i = 0; i < n; i++)
                itest_assert_run(itest_ctl(d, "state", itest_pidstr(pids[i]), NULL), 0, itest_strdupf("%s\n", state));
}

/* The name ps shows for our uid. */
static const char *own_user(void)
{
        const struct passwd *pw = getpwuid(geteuid());
        return pw ? itest_strdupf("%s", pw->pw_name) : itest_strdupf("%u", (unsigned)geteuid());
}

/* ps: the table a person reads, and --json, the daemon's objects. */
START_TEST(cli_ps)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t a = mapped_target(), b = mapped_target(), c = mapped_target();
        const char *sel = itest_strdupf("--pids=%d,%d,%d", (int)a, (int)b, (int)c);
        itest_assert_op_output(itest_ctl(d, "lock", itest_pidstr(b), NULL), "locked");
        ck_assert_int_eq(kill(c, SIGSTOP), 0);
        itest_await_proc_state(c, 'T', true);

        struct itest_proc_result *r = itest_ctl(d, "ps", sel, NULL);
        itest_assert_run(r, 0, NULL);
        assert_line("ps", r->out, "^ *PID +USER +STATE +CGROUP +COMMAND$");
        const char *user = own_user();
        assert_line("ps", r->out, "^ *%d +%s +running +/[^ ]* +sleep$", (int)a, user);
        assert_line("ps", r->out, "^ *%d +%s +locked +/[^ ]* +sleep$", (int)b, user);
        assert_line("ps", r->out, "^ *%d +%s +stopped\\(signal\\) +/[^ ]* +sleep$", (int)c, user);

        r = itest_ctl(d, "--json", "ps", sel, NULL);
        itest_assert_run(r, 0, NULL);
        cJSON *j = out_json(r);
        ck_assert_msg(cJSON_IsArray(j) && cJSON_GetArraySize(j) == 3, "ps --json printed \"%s\"", r->out);
        const cJSON *pa = find_pid(j, a), *pb = find_pid(j, b), *pc = find_pid(j, c);
        ck_assert_msg(pa && pb && pc, "ps --json misses a target: \"%s\"", r->out);
        ck_assert_str_eq(obj_str(pa, "state"), "running");
        ck_assert_str_eq(obj_str(pb, "state"), "locked");
        ck_assert_msg(!obj_str(pc, "state") && obj_str(pc, "stop") && strcmp(obj_str(pc, "stop"), "signal") == 0,
                      "stopped target in ps --json: \"%s\"", r->out);
        ck_assert_msg(obj_str(pa, "command") && strcmp(obj_str(pa, "command"), "sleep") == 0 &&
                              obj_str(pa, "cgroup") && obj_str(pa, "cgroup")[0] == '/',
                      "ps --json: \"%s\"", r->out);
        ck_assert_int_eq(kill(c, SIGCONT), 0);

        /* An operation in flight is named beside the state. */
        pid_t busy = mapped_target_with("CUDACKPT_SIM_BUSY_MS=3000");
        struct itest_conn *conn = itest_connect(d);
        itest_sendf(conn, "{\"method\":\"" CUDACKPT_METHOD_LOCK "\",\"parameters\":{\"pid\":%d,\"timeout_ms\":0}}",
                    (int)busy);
        struct itest_conn *probe = itest_connect(d);
        (void)itest_await_in_flight(probe, busy, "Lock", 2000);
        r = itest_ctl(d, "ps", itest_strdupf("--pids=%d", (int)busy), NULL);
        itest_assert_run(r, 0, NULL);
        assert_line("ps", r->out, "^ *%d +%s +running \\[Lock\\] +/[^ ]* +sleep$", (int)busy, user);
        r = itest_ctl(d, "--json", "ps", itest_strdupf("--pids=%d", (int)busy), NULL);
        j = out_json(r);
        ck_assert_msg(cJSON_GetArraySize(j) == 1 && obj_str(find_pid(j, busy), "in_flight") &&
                              strcmp(obj_str(find_pid(j, busy), "in_flight"), "Lock") == 0,
                      "ps --json of a process in flight: \"%s\"", r->out);
        itest_assert_state(itest_recv(conn), busy, "locked");

        /* Without a selector: the whole machine, ours among it. */
        r = itest_ctl(d, "--json", "ps", NULL);
        itest_assert_run(r, 0, NULL);
        j = out_json(r);
        ck_assert_msg(cJSON_IsArray(j) && find_pid(j, a) && find_pid(j, b), "ps --json printed \"%s\"", r->out);
        /* By tree: the target alone (sleep has no children). */
        r = itest_ctl(d, "--json", "ps", itest_strdupf("--tree=%d", (int)a), NULL);
        itest_assert_run(r, 0, NULL);
        j = out_json(r);
        ck_assert_msg(cJSON_IsArray(j) && cJSON_GetArraySize(j) == 1 && find_pid(j, a), "ps --tree printed \"%s\"",
                      r->out);
        /* By cgroup: the targets are in ours. */
        const char *cgroup = obj_str(pa, "cgroup");
        r = itest_ctl(d, "--json", "ps", itest_strdupf("--cgroup=%s", cgroup), NULL);
        itest_assert_run(r, 0, NULL);
        j = out_json(r);
        ck_assert_msg(cJSON_IsArray(j) && find_pid(j, a) && find_pid(j, b), "ps --cgroup printed \"%s\"", r->out);

        /* A process that never maps the driver is no CUDA process. */
        pid_t plain = itest_sim_target();
        itest_assert_run(itest_ctl(d, "ps", itest_strdupf("--tree=%d", (int)plain), NULL), 0, "no CUDA process matched\n");
        itest_assert_run(itest_ctl(d, "--json", "ps", itest_strdupf("--tree=%d", (int)plain), NULL), 0, "[]\n");
}
END_TEST

/* The group forms by --pids: each member's state on stdout, and the
 * processes really are there. */
START_TEST(cli_group_pids)
{
        static const char *const env[] = { "CUDACKPT_SIM_DEVICE_COUNT=1", NULL };
        struct itest_daemon_opts o = { .env = env };
        struct itest_daemon *d = itest_daemon_start(&o);
        pid_t t[3] = { itest_sim_target(), itest_sim_target(),
                       itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=64", NULL) };
        const char *sel = itest_strdupf("--pids=%d,%d:%llu,%d", (int)t[0], (int)t[1],
                                        (unsigned long long)itest_start_time(t[1]), (int)t[2]);

        struct itest_proc_result *r = itest_ctl(d, "suspend", sel, "--lock-timeout=5000", NULL);
        itest_assert_run(r, 0, NULL);
        assert_line("suspend", r->out, "^ *PID +STATE +TIME$");
        for (size_t i = 0; i < 3; i++)
                assert_line("suspend", r->out, "^ *%d +checkpointed +[0-9]+\\.[0-9] ms$", (int)t[i]);
        assert_line("suspend", r->out, "^3 processes checkpointed \\([0-9]+\\.[0-9] ms\\)$");
        assert_states(d, "checkpointed", t, 3);

        /* Onto a GPU this machine does not have: refused before any member
         * is touched, with the UUID named, as a single restore is. */
        static const char *const onto_none[] = { "resume", "restore" };
        for (size_t i = 0; i < 2; i++) {
                r = itest_ctl(d, onto_none[i], sel, "--map=" ITEST_GPU0 "=" ITEST_GPU1, NULL);
                itest_assert_run(r, 15, "");
                assert_has(onto_none[i], r->err, "no GPU with this UUID on this machine (" ITEST_GPU1 ")");
                assert_states(d, "checkpointed", t, 3);
        }

        /* Converges: a member already there is left as it is. */
        itest_assert_op_output(itest_ctl(d, "restore", itest_pidstr(t[0]), NULL), "locked");
        r = itest_ctl(d, "restore", sel, "--map=" ITEST_GPU0 "=" ITEST_GPU0, NULL);
        itest_assert_run(r, 0, NULL);
        assert_line("restore", r->out, "^3 processes locked \\([0-9]+\\.[0-9] ms\\)$");
        assert_states(d, "locked", t, 3);
        itest_assert_run(itest_ctl(d, "unlock", sel, NULL), 0, NULL);
        assert_states(d, "running", t, 3);

        /* --json: the daemon's reply. */
        r = itest_ctl(d, "--json", "lock", sel, NULL);
        itest_assert_run(r, 0, NULL);
        cJSON *j = out_json(r);
        const cJSON *members = cJSON_GetObjectItemCaseSensitive(j, "members");
        ck_assert_msg(cJSON_IsArray(members) && cJSON_GetArraySize(members) == 3, "lock --json: \"%s\"", r->out);
        for (size_t i = 0; i < 3; i++) {
                const cJSON *m = find_pid(members, t[i]);
                ck_assert_msg(m && obj_str(m, "state") && strcmp(obj_str(m, "state"), "locked") == 0,
                              "lock --json: \"%s\"", r->out);
        }
        itest_assert_run(itest_ctl(d, "checkpoint", sel, NULL), 0, NULL);
        assert_states(d, "checkpointed", t, 3);
        itest_assert_run(itest_ctl(d, "resume", sel, NULL), 0, NULL);
        assert_states(d, "running", t, 3);
}
END_TEST

/* --cgroup and --tree: the mapped targets are found, others skipped;
 * a selection without a CUDA process succeeds and says so. */
START_TEST(cli_group_tree_and_empty)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t a = mapped_target();
        const char *tree = itest_strdupf("--tree=%d", (int)a);
        struct itest_proc_result *r = itest_ctl(d, "suspend", tree, NULL);
        itest_assert_run(r, 0, NULL);
        assert_line("suspend --tree", r->out, "^ *%d +checkpointed ", (int)a);
        assert_line("suspend --tree", r->out, "^1 process checkpointed \\(");
        itest_assert_run(itest_ctl(d, "state", itest_pidstr(a), NULL), 0, "checkpointed\n");
        itest_assert_run(itest_ctl(d, "resume", tree, NULL), 0, NULL);
        itest_assert_run(itest_ctl(d, "state", itest_pidstr(a), NULL), 0, "running\n");

        /* Not a CUDA process for the daemon: skipped. */
        pid_t plain = itest_sim_target();
        r = itest_ctl(d, "suspend", itest_strdupf("--tree=%d", (int)plain), NULL);
        itest_assert_run(r, 0, NULL);
        assert_line("suspend of nothing", r->out, "^skipped, not CUDA processes: %d$", (int)plain);
        assert_line("suspend of nothing", r->out, "^no CUDA process matched");
        r = itest_ctl(d, "--json", "suspend", itest_strdupf("--tree=%d", (int)plain), NULL);
        itest_assert_run(r, 0, NULL);
        cJSON *j = out_json(r);
        const cJSON *members = cJSON_GetObjectItemCaseSensitive(j, "members");
        const cJSON *skipped = cJSON_GetObjectItemCaseSensitive(j, "skipped");
        ck_assert_msg(cJSON_IsArray(members) && cJSON_GetArraySize(members) == 0 && find_pid(skipped, plain) &&
                              strcmp(obj_str(find_pid(skipped, plain), "reason"), CUDACKPT_SKIP_NOT_CUDA) == 0,
                      "suspend --json of nothing: \"%s\"", r->out);
        itest_assert_run(itest_ctl(d, "state", itest_pidstr(plain), NULL), 0, "running\n");
}
END_TEST

/* GroupFailed: the member's error's exit status, the phase, the member,
 * the rollback and every member's state on stderr; nothing on stdout. */
START_TEST(cli_group_failure)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t t[3] = { itest_sim_target(),
                       itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MANAGED=1", NULL),
                       itest_sim_target() };
        const char *sel = itest_strdupf("--pids=%d,%d,%d", (int)t[0], (int)t[1], (int)t[2]);

        struct itest_proc_result *r = itest_ctl(d, "suspend", sel, NULL);
        ck_assert_msg(r->status == 16 && r->out[0] == '\0', "exit status %d, stdout \"%s\", stderr \"%s\"",
                      r->status, r->out, r->err);
        assert_line("stderr", r->err,
                    "^cudackptctl: suspend --pids %d,%d,%d: GroupFailed: the group failed in the checkpoint phase "
                    "at pid %d: NotSupported: .*; every member was brought back to running$",
                    (int)t[0], (int)t[1], (int)t[2], (int)t[1]);
        assert_line("stderr", r->err, "^ *PID +STATE +TIME +ERROR$");
        assert_line("stderr", r->err, "^ *%d +running +[0-9.]+ ms +-$", (int)t[0]);
        assert_line("stderr", r->err, "^ *%d +running +[0-9.]+ ms +NotSupported: ", (int)t[1]);
        assert_line("stderr", r->err, "^ *%d +running +[0-9.]+ ms +-$", (int)t[2]);
        assert_states(d, "running", t, 3);

        /* --json: the error on stdout, one line on stderr. */
        r = itest_ctl(d, "--json", "suspend", sel, NULL);
        ck_assert_msg(r->status == 19, "exit status %d (stderr \"%s\")", r->status, r->err);
        size_t len = strlen(r->err);
        ck_assert_msg(len > 1 && !memchr(r->err, '\n', len - 1), "stderr is not one line: \"%s\"", r->err);
        cJSON *j = out_json(r);
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(j, "parameters");
        const cJSON *rb = cJSON_GetObjectItemCaseSensitive(params, "rolled_back");
        ck_assert_msg(obj_str(j, "error") && strcmp(obj_str(j, "error"), CUDACKPT_ERROR_GROUP_FAILED) == 0 &&
                              obj_str(params, "error") &&
                              strcmp(obj_str(params, "error"), CUDACKPT_ERROR_DRIVER_ERROR) == 0 &&
                              cJSON_IsTrue(rb) &&
                              cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(params, "members")) == 3,
                      "--json GroupFailed: \"%s\"", r->out);
        assert_states(d, "running", t, 3);

        /* The select phase: a pid pinned to another start time. */
        r = itest_ctl(d, "lock", itest_strdupf("--pids=%d,%d:1", (int)t[0], (int)t[2]), NULL);
        ck_assert_msg(r->status == 20, "exit status %d (stderr \"%s\")", r->status, r->err);
        assert_line("stderr", r->err, "GroupFailed: the group failed in the select phase at pid %d: ProcessChanged: "
                    ".*; nothing was changed$", (int)t[2]);
        pid_t dead = itest_dead_pid();
        r = itest_ctl(d, "lock", itest_strdupf("--pids=%d,%d", (int)t[0], (int)dead), NULL);
        ck_assert_msg(r->status == 10, "exit status %d (stderr \"%s\")", r->status, r->err);
        assert_has("stderr", r->err, "NoSuchProcess");
        /* The state phase: nothing to converge from. */
        r = itest_ctl(d, "checkpoint", itest_strdupf("--pids=%d,%d", (int)t[0], (int)t[2]), NULL);
        ck_assert_msg(r->status == 13, "exit status %d (stderr \"%s\")", r->status, r->err);
        assert_line("stderr", r->err, "the group failed in the state phase at pid [0-9]+: InvalidState: "
                    ".*; nothing was changed$");
        pid_t ok[2] = { t[0], t[2] };
        assert_states(d, "running", ok, 2);
}
END_TEST

/* GroupTooLarge: exit status 25. */
START_TEST(cli_group_too_large)
{
        struct itest_daemon_opts o = { .config_json = "{\"max_group_members\": 2}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        pid_t t[3] = { itest_sim_target(), itest_sim_target(),
                       itest_sim_target() };
        struct itest_proc_result *r =
                itest_ctl(d, "suspend", itest_strdupf("--pids=%d,%d,%d", (int)t[0], (int)t[1], (int)t[2]), NULL);
        itest_assert_run(r, 25, "");
        assert_has("stderr", r->err, "GroupTooLarge: the selection holds 3 processes, more than the limit of 2");
        assert_states(d, "running", t, 3);
}
END_TEST

/* --progress off a terminal: one plain line per event on stderr. */
START_TEST(cli_group_progress)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t t[2] = { itest_sim_target(), itest_sim_target() };
        const char *sel = itest_strdupf("--pids=%d,%d", (int)t[0], (int)t[1]);
        struct itest_proc_result *r = itest_ctl(d, "--progress", "suspend", sel, NULL);
        ck_assert_msg(r->status == 0, "exit status %d (stderr \"%s\")", r->status, r->err);
        ck_assert_msg(!strchr(r->err, '\r') && !strchr(r->err, '\033'), "terminal controls off a terminal: \"%s\"",
                      r->err);
        for (size_t i = 0; i < 2; i++) {
                assert_line("progress", r->err, "^lock [12]/2: %d locked \\([0-9.]+ ms\\)$", (int)t[i]);
                assert_line("progress", r->err, "^checkpoint [12]/2: %d checkpointed \\([0-9.]+ ms\\)$", (int)t[i]);
        }
        assert_line("suspend", r->out, "^2 processes checkpointed");
        /* Not asked for, off a terminal: none. */
        itest_assert_run(itest_ctl(d, "resume", sel, NULL), 0, NULL);
        assert_states(d, "running", t, 2);
}
END_TEST

static char *read_text(const char *path)
{
        static char buf[4096];
        FILE *f = fopen(path, "re");
        ck_assert_msg(f, "%s: %s", path, strerror(errno));
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        return buf;
}

/* Against a server that is not cudackptd: the streamed call asks for
 * "more"; terminal controls in progress and results never reach the
 * terminal; an error that "continues" is no valid reply. */
START_TEST(cli_group_hostile_server)
{
        struct itest_daemon *d = itest_daemon_start_default();
        const char *sock = itest_strdupf("%s/fake", d->dir), *req = itest_strdupf("%s/request", d->dir);
        static const char *const evil[] = {
                "{\"parameters\":{\"progress\":{\"phase\":\"lock\\u001b[2J\",\"member\":{\"pid\":7,"
                "\"start_time\":1,\"state\":\"locked\\u001b]0;owned\\u0007\",\"duration_ms\":1.5},"
                "\"done\":1,\"total\":1}},\"continues\":true}",
                "{\"parameters\":{\"progress\":\"garbage\"},\"continues\":true}",
                "{\"parameters\":{\"members\":[{\"pid\":7,\"start_time\":1,\"state\":\"locked\\u009b2J\","
                "\"duration_ms\":1.5}],\"skipped\":[{\"pid\":8,\"start_time\":1,\"reason\":\"x\\u001bc\"}],"
                "\"duration_ms\":2.0}}",
                NULL,
        };
        pid_t srv = itest_fake_server(sock, evil, req);
        struct itest_proc_result *r =
                itest_ctl(NULL, itest_strdupf("--socket=%s", sock), "--progress", "lock", "--pids=7", NULL);
        itest_await_fake_server(srv);
        ck_assert_msg(r->status == 0, "exit status %d (stdout \"%s\", stderr \"%s\")", r->status, r->out, r->err);
        cJSON *j = itest_keep_json(cJSON_Parse(read_text(req)));
        const cJSON *more = cJSON_GetObjectItemCaseSensitive(j, "more");
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(j, "parameters");
        const cJSON *pids = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(params, "selector"),
                                                             "pids");
        ck_assert_msg(obj_str(j, "method") && strcmp(obj_str(j, "method"), CUDACKPT_METHOD_LOCK_GROUP) == 0 &&
                              cJSON_IsTrue(more) && cJSON_GetArraySize(pids) == 1 && find_pid(pids, 7),
                      "request \"%s\"", read_text(req));
        ck_assert_msg(!strchr(r->out, '\033') && !strchr(r->err, '\033') && !strchr(r->err, '\a') &&
                              !strstr(r->out, "\xc2\x9b"),
                      "terminal controls passed through: stdout \"%s\", stderr \"%s\"", r->out, r->err);
        assert_line("progress", r->err, "^lock\\?\\[2J 1/1: 7 locked\\?\\]0;owned\\? \\(1\\.5 ms\\)$");
        assert_line("result", r->out, "^ *7 +locked\\?\\?2J +1\\.5 ms$");
        assert_line("result", r->out, "^skipped \\(x\\?c\\): 8$");

        /* Without --progress off a terminal: no "more". */
        static const char *const plain[] = { "{\"parameters\":{\"members\":[],\"skipped\":[]}}", NULL };
        srv = itest_fake_server(itest_strdupf("%s/fake2", d->dir), plain, req);
        r = itest_ctl(NULL, itest_strdupf("--socket=%s/fake2", d->dir), "unlock", "--tree=1", NULL);
        itest_await_fake_server(srv);
        itest_assert_run(r, 0, "no CUDA process matched\n");
        j = itest_keep_json(cJSON_Parse(read_text(req)));
        ck_assert_msg(!cJSON_GetObjectItemCaseSensitive(j, "more"), "request \"%s\"", read_text(req));

        /* An error that says it continues. */
        static const char *const bad[] = {
                "{\"error\":\"" CUDACKPT_ERROR_GROUP_FAILED "\",\"parameters\":{\"error\":\""
                CUDACKPT_ERROR_NOT_SUPPORTED "\"},\"continues\":true}",
                NULL,
        };
        srv = itest_fake_server(itest_strdupf("%s/fake3", d->dir), bad, req);
        r = itest_ctl(NULL, itest_strdupf("--socket=%s/fake3", d->dir), "--progress", "suspend", "--pids=7", NULL);
        itest_await_fake_server(srv);
        itest_assert_run(r, 1, "");
        assert_has("stderr", r->err, "invalid reply from cudackptd");
}
END_TEST

/* Bad group command lines: exit 2 before the daemon is asked. */
START_TEST(cli_group_usage)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_sim_target();
        const char *p = itest_pidstr(pid), *pids = itest_strdupf("--pids=%d", (int)pid);
        static const char *const bad_pids[] = { "--pids=", "--pids=1,,2", "--pids=1,", "--pids=,1", "--pids=x",
                                                "--pids=0", "--pids=-1", "--pids=1:", "--pids=1:x", "--pids=1:2:3",
                                                "--pids=1,1", "--pids=1,1:5", "--pids=2147483648", NULL };
        for (size_t i = 0; bad_pids[i]; i++)
                itest_assert_run(itest_ctl(d, "lock", bad_pids[i], NULL), 2, "");
        /* Two selectors, or the same twice. */
        itest_assert_run(itest_ctl(d, "lock", pids, "--tree=1", NULL), 2, "");
        itest_assert_run(itest_ctl(d, "lock", pids, "--cgroup=/", NULL), 2, "");
        itest_assert_run(itest_ctl(d, "ps", "--tree=1", "--tree=2", NULL), 2, "");
        /* A pid and a selector. */
        itest_assert_run(itest_ctl(d, "suspend", p, pids, NULL), 2, "");
        itest_assert_run(itest_ctl(d, "resume", "--tree=1", p, NULL), 2, "");
        /* Not for queries, nor ps a pid. */
        itest_assert_run(itest_ctl(d, "state", pids, NULL), 2, "");
        itest_assert_run(itest_ctl(d, "restore-tid", "--tree=1", NULL), 2, "");
        itest_assert_run(itest_ctl(d, "info", "--cgroup=/", NULL), 2, "");
        itest_assert_run(itest_ctl(d, "ps", p, NULL), 2, "");
        itest_assert_run(itest_ctl(d, "ps", "--map=" ITEST_GPU0 "=" ITEST_GPU1, NULL), 2, "");
        /* Bad trees and cgroups. */
        itest_assert_run(itest_ctl(d, "lock", "--tree=0", NULL), 2, "");
        itest_assert_run(itest_ctl(d, "lock", "--tree=x", NULL), 2, "");
        itest_assert_run(itest_ctl(d, "lock", "--cgroup=kubepods", NULL), 2, "");
        itest_assert_run(itest_ctl(d, "lock", "--cgroup=/a/../b", NULL), 2, "");
        itest_assert_run(itest_ctl(d, "lock", "--cgroup=/a//b", NULL), 2, "");
        itest_assert_run(itest_ctl(d, "lock", "--cgroup=", NULL), 2, "");
        /* --progress not with lock of a PID; options where they belong. */
        itest_assert_run(itest_ctl(d, "--progress", "lock", p, NULL), 2, "");
        itest_assert_run(itest_ctl(d, "--no-progress", "ps", NULL), 2, "");
        itest_assert_run(itest_ctl(d, "checkpoint", pids, "--lock-timeout=5", NULL), 2, "");
        itest_assert_run(itest_ctl(d, "lock", pids, "--map=" ITEST_GPU0 "=" ITEST_GPU1, NULL), 2, "");
        itest_assert_run(itest_ctl(d, "state", p, NULL), 0, "running\n");
}
END_TEST

/* A selector naming what does not exist is an error, not an empty
 * selection: a scheduler must not take "no CUDA process matched" (exit 0)
 * for its job suspended, nor a watch stream nothing for ever. */
/* A cgroup2 mount of the test's own, for the daemon to look in (the
 * machine may have none); NULL, said why, when there can be none. */
static char *mount_cgroup2(void)
{
        if (itest_need_root())
                return NULL;
        char *mnt = itest_cgroup2_mount();
        if (!mnt)
                fprintf(stderr, "%s: cgroup part skipped, cannot mount cgroup2: %s\n", tcase_name(), strerror(errno));
        return mnt;
}

START_TEST(cli_selector_of_nothing)
{
        char *mnt = mount_cgroup2();
        struct itest_daemon *d = itest_daemon_start_default();
        const char *dead = itest_strdupf("--pids=%d", (int)itest_dead_pid());
        struct itest_proc_result *r = itest_ctl(d, "watch", dead, NULL);
        itest_assert_run(r, 10, "");
        assert_has("watch of a dead pid", r->err, "no such process");
        itest_assert_run(itest_ctl(d, "watch", "--pids=99999999", NULL), 10, "");
        r = itest_ctl(d, "suspend", dead, NULL);
        ck_assert_msg(r->status == 10 && r->out[0] == '\0', "suspend of a dead pid: %d \"%s\"", r->status, r->out);
        if (!mnt)
                return;

        /* The daemon tells a cgroup that does not exist where it sees a
         * cgroup2 mount, as under systemd. */
        const char *none = itest_strdupf("/itest-no-such-%d", (int)getpid());
        const char *sel = itest_strdupf("--cgroup=%s", none);
        static const char *const verbs[] = { "suspend", "lock", "resume", "ps", "watch" };
        for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
                r = itest_ctl(d, verbs[i], sel, NULL);
                itest_assert_run(r, 27, "");
                assert_has(verbs[i], r->err, itest_strdupf("no such cgroup %s", none));
        }
        /* One that exists and holds no CUDA process is an empty selection. */
        const char *empty = itest_strdupf("%s%s", mnt, none);
        ck_assert_int_eq(mkdir(empty, 0755), 0);
        r = itest_ctl(d, "suspend", sel, NULL);
        itest_assert_run(r, 0, NULL);
        assert_has("suspend of an empty cgroup", r->out, "no CUDA process matched");
        ck_assert_int_eq(rmdir(empty), 0);
        itest_daemon_stop(d);
        ck_assert_msg(umount(mnt) == 0, "umount %s: %s", mnt, strerror(errno));
        rmdir(mnt);
}
END_TEST

int main(void)
{
        const TTest *tests[] = { cli_ps, cli_group_pids, cli_group_tree_and_empty, cli_group_failure,
                cli_group_too_large, cli_group_progress, cli_group_hostile_server, cli_group_usage,
                cli_selector_of_nothing, NULL };

        return itest_run("integration.cli_groups", "cli_groups", 60, tests);
}
