/* test_cli.c: cudackptctl run as a process against the daemon: its output
 * (the state word alone, "STATE (D.D ms)" for operations, --json) and its
 * exit statuses, one per error. */
#include "harness.h"

#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CTL_TIMEOUT_MS 20000

static const char *ctl_path(void)
{
        const char *p = getenv("CUDACKPT_TEST_CTL");
        ck_assert_msg(p && *p, "CUDACKPT_TEST_CTL is not set: run the integration tests through ctest");
        return p;
}

/* Runs cudackptctl --socket=SOCK ARGS... (NULL-terminated) as uid. */
static struct itest_proc_result *ctl_as(uid_t uid, struct itest_daemon *d, const char *first, ...)
{
        const char *argv[32];
        size_t n = 0;
        argv[n++] = ctl_path();
        if (d)
                argv[n++] = itest_strdupf("--socket=%s", d->sock);
        va_list ap;
        va_start(ap, first);
        for (const char *a = first; a && n < 31; a = va_arg(ap, const char *))
                argv[n++] = a;
        va_end(ap);
        argv[n] = NULL;
        struct itest_proc_result *r = itest_keep(calloc(1, sizeof(*r)));
        ck_assert(r);
        itest_run_proc(uid, argv, NULL, CTL_TIMEOUT_MS, r);
        return r;
}

#define ctl(d, ...) ctl_as((uid_t)-1, (d), __VA_ARGS__)

static const char *pidstr(pid_t pid)
{
        return itest_strdupf("%d", (int)pid);
}

/* Exit status and stdout exactly; stderr empty on success, one line on error. */
static void assert_run(const struct itest_proc_result *r, int status, const char *out)
{
        ck_assert_msg(r->status == status, "exit status %d, expected %d (stdout \"%s\", stderr \"%s\")", r->status,
                      status, r->out, r->err);
        if (out)
                ck_assert_msg(strcmp(r->out, out) == 0, "stdout \"%s\", expected \"%s\" (stderr \"%s\")", r->out, out,
                              r->err);
        if (status == 0) {
                ck_assert_msg(r->err[0] == '\0', "stderr on success: %s", r->err);
        } else if (status < 10) {
                ck_assert_msg(r->err[0] != '\0', "nothing on stderr for exit status %d", status);
        } else {
                /* A daemon's error: one line. */
                size_t len = strlen(r->err);
                ck_assert_msg(len > 1 && r->err[len - 1] == '\n' && !memchr(r->err, '\n', len - 1),
                              "stderr on failure is not one line: \"%s\"", r->err);
        }
}

static void assert_op_output(const struct itest_proc_result *r, const char *state)
{
        ck_assert_msg(r->status == 0, "exit status %d (stderr \"%s\")", r->status, r->err);
        regex_t re;
        char *pat = itest_strdupf("^%s \\([0-9]+\\.[0-9]+ ms\\)\n$", state);
        ck_assert_int_eq(regcomp(&re, pat, REG_EXTENDED | REG_NOSUB), 0);
        int m = regexec(&re, r->out, 0, NULL, 0);
        regfree(&re);
        ck_assert_msg(m == 0, "stdout \"%s\" is not \"%s (D.D ms)\"", r->out, state);
}

START_TEST(cli_state)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_target("CUDACKPT_SIM=1", NULL);
        assert_run(ctl(d, "state", pidstr(pid), NULL), 0, "running\n");
}
END_TEST

START_TEST(cli_socket_from_environment)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_target("CUDACKPT_SIM=1", NULL);
        const char *argv[] = { ctl_path(), "state", pidstr(pid), NULL };
        const char *env[] = { itest_strdupf(CUDACKPT_SOCKET_ENV "=%s", d->sock), "PATH=/usr/bin:/bin", NULL };
        struct itest_proc_result r;
        itest_run_proc((uid_t)-1, argv, env, CTL_TIMEOUT_MS, &r);
        assert_run(&r, 0, "running\n");
}
END_TEST

START_TEST(cli_restore_tid)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_target("CUDACKPT_SIM=1", NULL);
        struct itest_proc_result *r = ctl(d, "restore-tid", pidstr(pid), NULL);
        assert_run(r, 0, NULL);
        char *end = NULL;
        long tid = strtol(r->out, &end, 10);
        ck_assert_msg(tid > 0 && end && strcmp(end, "\n") == 0, "restore-tid printed \"%s\"", r->out);
}
END_TEST

START_TEST(cli_operations)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_target("CUDACKPT_SIM=1", NULL);
        const char *p = pidstr(pid);
        assert_op_output(ctl(d, "lock", p, "--lock-timeout=5000", NULL), "locked");
        assert_run(ctl(d, "state", p, NULL), 0, "locked\n");
        assert_op_output(ctl(d, "checkpoint", p, NULL), "checkpointed");
        assert_run(ctl(d, "state", p, NULL), 0, "checkpointed\n");
        assert_op_output(ctl(d, "restore", p, "--map=" ITEST_GPU0 "=" ITEST_GPU0_PLAIN, NULL), "locked");
        assert_op_output(ctl(d, "unlock", p, NULL), "running");
        assert_op_output(ctl(d, "suspend", p, NULL), "checkpointed");
        assert_op_output(ctl(d, "resume", p, NULL), "running");
        assert_run(ctl(d, "state", p, NULL), 0, "running\n");
}
END_TEST

START_TEST(cli_json)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_target("CUDACKPT_SIM=1", NULL);
        struct itest_proc_result *r = ctl(d, "--json", "state", pidstr(pid), NULL);
        assert_run(r, 0, NULL);
        cJSON *j = itest_keep_json(cJSON_Parse(r->out));
        ck_assert_msg(cJSON_IsObject(j), "--json printed \"%s\"", r->out);
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "state");
        const cJSON *pj = cJSON_GetObjectItemCaseSensitive(j, "pid");
        ck_assert_msg(cJSON_IsString(st) && strcmp(st->valuestring, "running") == 0 && cJSON_IsNumber(pj) &&
                              pj->valuedouble == pid,
                      "--json printed \"%s\"", r->out);

        pid_t dead = itest_dead_pid();
        r = ctl(d, "--json", "state", pidstr(dead), NULL);
        ck_assert_msg(r->status == 10, "exit status %d for NoSuchProcess (stderr \"%s\")", r->status, r->err);
        j = itest_keep_json(cJSON_Parse(r->out));
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(j, "parameters");
        const cJSON *ep = cJSON_GetObjectItemCaseSensitive(params, "pid");
        ck_assert_msg(cJSON_IsString(e) && strcmp(e->valuestring, CUDACKPT_ERROR_NO_SUCH_PROCESS) == 0 &&
                              cJSON_IsNumber(ep) && ep->valuedouble == dead,
                      "--json error printed \"%s\"", r->out);
}
END_TEST

START_TEST(cli_info)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_proc_result *r = ctl(d, "info", NULL);
        assert_run(r, 0, NULL);
        ck_assert_msg(strstr(r->out, CUDACKPT_INTERFACE), "info does not name the interface: \"%s\"", r->out);
}
END_TEST

/* Each error its own exit status. */
START_TEST(cli_exit_codes)
{
        static const char *const env[] = { "CUDACKPT_SIM_DEVICE_COUNT=1", NULL };
        struct itest_daemon_opts o = { .env = env };
        struct itest_daemon *d = itest_daemon_start(&o);
        pid_t pid = itest_target("CUDACKPT_SIM=1", NULL);
        const char *p = pidstr(pid);
        assert_run(ctl(d, "state", pidstr(itest_dead_pid()), NULL), 10, "");
        assert_run(ctl(d, "state", pidstr(itest_target("CUDACKPT_SIM_MEM_MIB=1", NULL)), NULL), 11, "");
        assert_run(ctl(d, "unlock", p, NULL), 13, "");
        pid_t busy = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_BUSY_MS=2000", NULL);
        assert_run(ctl(d, "lock", pidstr(busy), "--lock-timeout=100", NULL), 14, "");
        assert_op_output(ctl(d, "suspend", p, NULL), "checkpointed");
        assert_run(ctl(d, "restore", p, "--map=" ITEST_GPU0 "=" ITEST_GPU_NONE, NULL), 15, "");
        assert_op_output(ctl(d, "resume", p, NULL), "running");
        pid_t managed = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MANAGED=1", NULL);
        assert_run(ctl(d, "suspend", pidstr(managed), NULL), 16, "");
        pid_t failing = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_FAIL=getstate:CUDA_ERROR_UNKNOWN", NULL);
        assert_run(ctl(d, "state", pidstr(failing), NULL), 19, "");
}
END_TEST

START_TEST(cli_driver_unavailable)
{
        struct itest_daemon_opts o = { .driver = "/nonexistent.so" };
        struct itest_daemon *d = itest_daemon_start(&o);
        pid_t pid = itest_target("CUDACKPT_SIM=1", NULL);
        assert_run(ctl(d, "state", pidstr(pid), NULL), 18, "");
}
END_TEST

START_TEST(cli_usage_and_unreachable)
{
        struct itest_daemon *d = itest_daemon_start_default();
        assert_run(ctl(d, NULL), 2, "");
        assert_run(ctl(d, "frobnicate", "1", NULL), 2, "");
        assert_run(ctl(d, "state", NULL), 2, "");
        assert_run(ctl(d, "state", "notapid", NULL), 2, "");
        assert_run(ctl(d, "state", "0", NULL), 2, "");
        assert_run(ctl(d, "state", "1", "2", NULL), 2, "");
        assert_run(ctl(NULL, itest_strdupf("--socket=%s/nosuchsock", d->dir), "state", "1", NULL), 3, "");
        /* --help is not an error. */
        struct itest_proc_result *r = ctl(NULL, "--help", NULL);
        ck_assert_msg(r->status == 0 && r->out[0], "--help: status %d, stdout \"%s\"", r->status, r->out);
}
END_TEST

START_TEST(cli_permission_denied)
{
        if (itest_need_root())
                return;
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_target("CUDACKPT_SIM=1", NULL);
        assert_run(ctl_as(ITEST_OTHER_UID, d, "state", pidstr(pid), NULL), 12, "");
        pid_t own = itest_target_as(ITEST_OTHER_UID, "CUDACKPT_SIM=1", NULL);
        assert_run(ctl_as(ITEST_OTHER_UID, d, "state", pidstr(own), NULL), 0, "running\n");
}
END_TEST

static Suite *cli_suite(void)
{
        Suite *s = suite_create("integration.cli");
        TCase *tc = itest_tcase(s, "cli", 60);
        tcase_add_test(tc, cli_state);
        tcase_add_test(tc, cli_socket_from_environment);
        tcase_add_test(tc, cli_restore_tid);
        tcase_add_test(tc, cli_operations);
        tcase_add_test(tc, cli_json);
        tcase_add_test(tc, cli_info);
        tcase_add_test(tc, cli_exit_codes);
        tcase_add_test(tc, cli_driver_unavailable);
        tcase_add_test(tc, cli_usage_and_unreachable);
        tcase_add_test(tc, cli_permission_denied);
        return s;
}

int main(void)
{
        return itest_main(cli_suite());
}
