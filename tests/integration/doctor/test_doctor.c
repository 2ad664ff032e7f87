/* test_doctor.c: cudackptctl doctor run as a process, on the simulated
 * driver (--driver) against the real daemon, a missing one and fake
 * servers.
 *
 * The machine's own checks (persistence mode, kernel features, cgroups,
 * CRIU, transparent huge pages) depend on where the suite runs: each must
 * print one line with a valid verdict, and where the test can see the
 * truth cheaply (no NVIDIA driver, the cgroup file system, the THP mode)
 * the verdict must match it.  The exit status must be 1 exactly when a
 * line says fail. */
#include "harness.h"

#include <errno.h>
#include <linux/magic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#define DOCTOR_TIMEOUT_MS 60000

/* Every check, in the order doctor prints them. */
static const char *const check_names[] = {
        "driver",
        "persistence",
        "daemon",
        "kernel.pidfd_open",
        "kernel.so_peerpidfd",
        "kernel.pidns_ioctl",
        "kernel.procmap_query",
        "cgroup",
        "criu",
        "thp",
};
#define N_CHECKS (sizeof(check_names) / sizeof(check_names[0]))

/* One printed line, parsed. */
struct check_line {
        char verdict[8];
        char name[64];
        const char *text;       /* found, then " -- advice" when there is one (owned by the harness) */
};

struct doctor_run {
        struct itest_proc_result proc;
        struct check_line lines[N_CHECKS];
};

/* The harness's environment for a child (PATH, the sanitizers' options),
 * plus extra ("K=V", NULL-terminated; may be NULL). */
static const char *const *child_env(const char *const *extra)
{
        static const char *const keep[] = { "PATH", "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
                                            "TSAN_OPTIONS" };
        const char **env = itest_keep(calloc(16, sizeof(*env)));
        size_t n = 0;
        ck_assert(env);
        for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
                const char *v = getenv(keep[i]);
                if (v)
                        env[n++] = itest_strdupf("%s=%s", keep[i], v);
        }
        for (size_t i = 0; extra && extra[i] && n < 15; i++)
                env[n++] = extra[i];
        return env;
}

static bool valid_verdict(const char *v)
{
        return strcmp(v, "ok") == 0 || strcmp(v, "warn") == 0 || strcmp(v, "fail") == 0 || strcmp(v, "skip") == 0;
}

/* Runs cudackptctl doctor ARGS... (NULL-terminated) with environment env
 * (NULL: the harness's) and, without --json among ARGS, parses its lines:
 * asserts one line per check, in order, each with a valid verdict, and
 * nothing on stderr. */
static struct doctor_run *doctor_env(const char *const *env, const char *first, ...)
{
        const char *argv[16];
        size_t n = 0;
        bool json = false;
        va_list ap;

        argv[n++] = itest_need_env("CUDACKPT_TEST_CTL");
        argv[n++] = "doctor";
        va_start(ap, first);
        for (const char *a = first; a && n < 15; a = va_arg(ap, const char *)) {
                json = json || strcmp(a, "--json") == 0;
                argv[n++] = a;
        }
        va_end(ap);
        argv[n] = NULL;

        struct doctor_run *r = itest_keep(calloc(1, sizeof(*r)));
        ck_assert(r);
        itest_run_proc((uid_t)-1, argv, env, DOCTOR_TIMEOUT_MS, &r->proc);
        ck_assert_msg(r->proc.status == 0 || r->proc.status == 1, "exit status %d (stdout \"%s\", stderr \"%s\")",
                      r->proc.status, r->proc.out, r->proc.err);
        ck_assert_msg(r->proc.err[0] == '\0', "stderr: \"%s\"", r->proc.err);
        if (json)
                return r;

        char *copy = itest_keep(strdup(r->proc.out)), *save = NULL;
        size_t i = 0;
        ck_assert(copy);
        for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save), i++) {
                struct check_line *l;
                int at = -1;

                ck_assert_msg(i < N_CHECKS, "more lines than checks:\n%s", r->proc.out);
                l = &r->lines[i];
                ck_assert_msg(sscanf(line, "%7s %63s %n", l->verdict, l->name, &at) == 2 && at > 0,
                              "line \"%s\" is not VERDICT NAME FOUND", line);
                l->text = line + at;
                ck_assert_msg(valid_verdict(l->verdict), "line \"%s\": no valid verdict", line);
                ck_assert_msg(strcmp(l->name, check_names[i]) == 0, "line %zu names %s, expected %s:\n%s", i + 1,
                              l->name, check_names[i], r->proc.out);
                ck_assert_msg(l->text[0] != '\0', "line \"%s\" says nothing found", line);
                /* What to do comes with every warn and fail. */
                if (strcmp(l->verdict, "warn") == 0 || strcmp(l->verdict, "fail") == 0)
                        ck_assert_msg(strstr(l->text, " -- "), "line \"%s\" gives no advice", line);
        }
        ck_assert_msg(i == N_CHECKS, "%zu lines for %zu checks:\n%s", i, N_CHECKS, r->proc.out);
        return r;
}

#define doctor(...) doctor_env(NULL, __VA_ARGS__)

static const struct check_line *line_of(const struct doctor_run *r, const char *name)
{
        for (size_t i = 0; i < N_CHECKS; i++)
                if (strcmp(r->lines[i].name, name) == 0)
                        return &r->lines[i];
        ck_abort_msg("no line for %s", name);
        return NULL;
}

static void assert_verdict(const struct doctor_run *r, const char *name, const char *verdict)
{
        const struct check_line *l = line_of(r, name);
        ck_assert_msg(strcmp(l->verdict, verdict) == 0, "%s says %s, expected %s:\n%s", name, l->verdict, verdict,
                      r->proc.out);
}

static void assert_says(const struct doctor_run *r, const char *name, const char *text)
{
        const struct check_line *l = line_of(r, name);
        ck_assert_msg(strstr(l->text, text), "%s line \"%s\" lacks \"%s\"", name, l->text, text);
}

/* Exit 1 exactly when a line says fail. */
static void assert_exit_matches(const struct doctor_run *r)
{
        bool failed = false;
        for (size_t i = 0; i < N_CHECKS; i++)
                failed = failed || strcmp(r->lines[i].verdict, "fail") == 0;
        ck_assert_msg(r->proc.status == (failed ? 1 : 0), "exit status %d with%s a failed check:\n%s",
                      r->proc.status, failed ? "" : "out", r->proc.out);
}

/* The machine's own checks against what the test can see of the machine. */
static void assert_machine_checks(const struct doctor_run *r)
{
        char text[256];
        struct statfs sfs;
        FILE *f;

        if (access("/proc/driver/nvidia", F_OK) < 0)
                assert_verdict(r, "persistence", "skip");

        if (statfs("/sys/fs/cgroup", &sfs) == 0 && sfs.f_type == CGROUP2_SUPER_MAGIC)
                assert_verdict(r, "cgroup", "ok");
        else
                assert_verdict(r, "cgroup", "warn");

        f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
        if (!f) {
                assert_verdict(r, "thp", "skip");
                return;
        }
        size_t n = fread(text, 1, sizeof(text) - 1, f);
        fclose(f);
        text[n] = '\0';
        char *open = strchr(text, '['), *close = open ? strchr(open, ']') : NULL;
        ck_assert_msg(close, "no [mode] in \"%s\"", text);
        *close = '\0';
        if (strcmp(open + 1, "always") == 0)
                assert_verdict(r, "thp", "ok");
        else {
                assert_verdict(r, "thp", "warn");
                assert_says(r, "thp", itest_strdupf(": %s -- ", open + 1));
                assert_says(r, "thp", "echo always > /sys/kernel/mm/transparent_hugepage/enabled");
        }
}

/* The driver check failed, saying what, and so did the command (1). */
static void assert_driver_fails(const struct doctor_run *r, const char *what)
{
        assert_verdict(r, "driver", "fail");
        assert_says(r, "driver", what);
        ck_assert_int_eq(r->proc.status, 1);
}

/* --driver= the simulator, as the daemon is started with it. */
static const char *sim_driver_arg(void)
{
        return itest_strdupf("--driver=%s", itest_need_env("CUDACKPT_TEST_SIM"));
}

/* --socket= d's socket. */
static const char *socket_arg(const struct itest_daemon *d)
{
        return itest_strdupf("--socket=%s", d->sock);
}

/* On the simulator with the daemon running: the driver is fine, the
 * daemon answers but warns that it runs on the simulator (its GetStatus),
 * the machine's checks say what the machine is. */
START_TEST(doctor_simulator_and_daemon)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct doctor_run *r = doctor(sim_driver_arg(), socket_arg(d), NULL);

        assert_verdict(r, "driver", "ok");
        assert_says(r, "driver", "CUDA 13.0");
        assert_says(r, "driver", "simulator");
        assert_verdict(r, "daemon", "warn");
        assert_says(r, "daemon",
                    itest_strdupf("at %s runs on the simulated driver: SIMULATED CUDA 13.0, 1 GPU, from %s", d->sock,
                                  itest_need_env("CUDACKPT_TEST_SIM")));
        assert_says(r, "daemon", "-- for development and tests only");
        assert_machine_checks(r);
        assert_exit_matches(r);

        /* The socket from the environment. */
        const char *env[] = { itest_strdupf(CUDACKPT_SOCKET_ENV "=%s", d->sock), NULL };
        r = doctor_env(child_env(env), sim_driver_arg(), NULL);
        assert_verdict(r, "daemon", "warn");
        assert_says(r, "daemon", d->sock);
}
END_TEST

/* A daemon without a usable driver (none at its path, or cuInit failed)
 * fails the daemon line, with the daemon's reason, though the driver line
 * (this program's own look at the library) is fine. */
START_TEST(doctor_daemon_without_driver)
{
        struct itest_daemon_opts none = { .driver = "/nonexistent.so" };
        struct itest_daemon *d = itest_daemon_start(&none);
        const char *driver = sim_driver_arg();
        struct doctor_run *r = doctor(driver, socket_arg(d), NULL);

        assert_verdict(r, "driver", "ok");
        assert_verdict(r, "daemon", "fail");
        assert_says(r, "daemon", "has no usable CUDA driver (/nonexistent.so): ");
        assert_says(r, "daemon", "systemctl restart cudackptd.service");
        ck_assert_int_eq(r->proc.status, 1);
        itest_daemon_stop(d);

        static const char *const env[] = { "CUDACKPT_SIM_INIT_ERROR=100", NULL };
        struct itest_daemon_opts failing = { .env = env };
        d = itest_daemon_start(&failing);
        r = doctor(driver, socket_arg(d), NULL);
        assert_verdict(r, "daemon", "fail");
        assert_says(r, "daemon", "CUDA_ERROR_NO_DEVICE");
        ck_assert_int_eq(r->proc.status, 1);
}
END_TEST

/* No daemon on the socket: the daemon line fails, says how to start it,
 * and the exit status is 1; every other check still runs. */
START_TEST(doctor_no_daemon)
{
        struct itest_daemon *d = itest_daemon_start_default();
        const char *sock = itest_strdupf("%s/nobody-listens", d->dir);
        struct doctor_run *r = doctor(sim_driver_arg(), itest_strdupf("--socket=%s", sock), NULL);

        assert_verdict(r, "daemon", "fail");
        assert_says(r, "daemon", sock);
        assert_says(r, "daemon", "systemctl start cudackptd.socket");
        assert_verdict(r, "driver", "ok");
        assert_machine_checks(r);
        ck_assert_int_eq(r->proc.status, 1);
}
END_TEST

/* A driver library that does not exist, and one that is no CUDA driver. */
START_TEST(doctor_bad_driver)
{
        struct itest_daemon *d = itest_daemon_start_default();
        const char *missing = itest_strdupf("%s/no-such-libcuda.so.1", d->dir);
        struct doctor_run *r = doctor(itest_strdupf("--driver=%s", missing), socket_arg(d),
                                      NULL);

        assert_verdict(r, "driver", "fail");
        assert_says(r, "driver", missing);
        assert_verdict(r, "daemon", "warn"); /* on the simulator */
        ck_assert_int_eq(r->proc.status, 1);

        r = doctor("--driver=libc.so.6", socket_arg(d), NULL);
        assert_driver_fails(r, "not a CUDA driver");
}
END_TEST

/* The driver's version: 12.8 has the checkpoint API but cannot restore
 * onto other GPUs (warn); older is refused by the daemon (fail). */
START_TEST(doctor_driver_versions)
{
        struct itest_daemon *d = itest_daemon_start_default();
        const char *driver = sim_driver_arg();
        const char *socket = socket_arg(d);
        const char *v128[] = { "CUDACKPT_SIM_DRIVER_VERSION=12080", NULL };
        const char *v124[] = { "CUDACKPT_SIM_DRIVER_VERSION=12040", NULL };

        struct doctor_run *r = doctor_env(child_env(v128), driver, socket, NULL);
        assert_verdict(r, "driver", "warn");
        assert_says(r, "driver", "CUDA 12.8");
        assert_says(r, "driver", "580");
        assert_exit_matches(r);

        r = doctor_env(child_env(v124), driver, socket, NULL);
        assert_driver_fails(r, "CUDA 12.4");
}
END_TEST

/* --json: one object per line with exactly check, verdict, found and
 * advice (a string for warn and fail, null for ok), the same verdicts as
 * the lines. */
START_TEST(doctor_json)
{
        struct itest_daemon *d = itest_daemon_start_default();
        const char *driver = sim_driver_arg();
        const char *socket = socket_arg(d);
        struct doctor_run *text = doctor(driver, socket, NULL);
        struct doctor_run *r = doctor("--json", driver, socket, NULL);
        char *copy = itest_keep(strdup(r->proc.out)), *save = NULL;
        size_t i = 0;

        ck_assert(copy);
        for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save), i++) {
                cJSON *o = itest_keep_json(cJSON_Parse(line));
                ck_assert_msg(cJSON_IsObject(o), "line \"%s\" is no JSON object", line);
                ck_assert_msg(cJSON_GetArraySize(o) == 4, "line \"%s\" has not 4 keys", line);
                const cJSON *check = cJSON_GetObjectItemCaseSensitive(o, "check");
                const cJSON *verdict = cJSON_GetObjectItemCaseSensitive(o, "verdict");
                const cJSON *found = cJSON_GetObjectItemCaseSensitive(o, "found");
                const cJSON *advice = cJSON_GetObjectItemCaseSensitive(o, "advice");
                ck_assert_msg(cJSON_IsString(check) && cJSON_IsString(verdict) && cJSON_IsString(found) &&
                                      (cJSON_IsString(advice) || cJSON_IsNull(advice)),
                              "line \"%s\": wrong types", line);
                ck_assert_msg(i < N_CHECKS && strcmp(check->valuestring, check_names[i]) == 0,
                              "line %zu \"%s\": expected check %s", i + 1, line,
                              i < N_CHECKS ? check_names[i] : "(none)");
                ck_assert_msg(valid_verdict(verdict->valuestring), "line \"%s\": no valid verdict", line);
                ck_assert_msg(found->valuestring[0] != '\0', "line \"%s\": nothing found", line);
                if (strcmp(verdict->valuestring, "warn") == 0 || strcmp(verdict->valuestring, "fail") == 0)
                        ck_assert_msg(cJSON_IsString(advice) && advice->valuestring[0], "line \"%s\": no advice",
                                      line);
                if (strcmp(verdict->valuestring, "ok") == 0)
                        ck_assert_msg(cJSON_IsNull(advice), "line \"%s\": advice for ok", line);
                ck_assert_msg(strcmp(verdict->valuestring, text->lines[i].verdict) == 0,
                              "%s: %s with --json, %s without", check_names[i], verdict->valuestring,
                              text->lines[i].verdict);
        }
        ck_assert_msg(i == N_CHECKS, "%zu lines for %zu checks:\n%s", i, N_CHECKS, r->proc.out);
        ck_assert_int_eq(r->proc.status, text->proc.status);

        /* Without a daemon, the failure in JSON too. */
        r = doctor("--json", driver, itest_strdupf("--socket=%s/nobody-listens", d->dir), NULL);
        ck_assert_int_eq(r->proc.status, 1);
        ck_assert_msg(strstr(r->proc.out, "{\"check\":\"daemon\",\"verdict\":\"fail\","), "stdout:\n%s",
                      r->proc.out);
}
END_TEST

/* A server on the socket that answers GetInfo (with reply, or by hanging
 * up when NULL), then goes away; the request is kept in DIR/request. */
static pid_t fake_server(struct itest_daemon *d, const char *path, const char *reply)
{
        const char *replies[] = { reply, NULL };

        return itest_fake_server(path, replies, itest_strdupf("%s/request", d->dir));
}

static void await_fake_server(struct itest_daemon *d, pid_t pid)
{
        FILE *f = fopen(itest_strdupf("%s/request", d->dir), "re");
        char buf[4096] = "";

        itest_await_fake_server(pid);
        ck_assert(f);
        (void)!fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        ck_assert_msg(strstr(buf, "\"org.varlink.service.GetInfo\""), "doctor asked %s", buf);
}

/* What the daemon check makes of servers that are not this cudackptd: one
 * of another version (warn, with its version sanitised), a Varlink
 * service without io.cudackpt.Process and one that hangs up (fail). */
START_TEST(doctor_other_servers)
{
        struct itest_daemon *d = itest_daemon_start_default();
        const char *driver = sim_driver_arg();
        const char *sock = itest_strdupf("%s/fake", d->dir);

        pid_t srv = fake_server(d, sock, "{\"parameters\":{\"vendor\":\"cudackpt\",\"product\":\"cudackptd\","
                                      "\"version\":\"0.0.1\\u001b[2J\",\"url\":\"x\",\"interfaces\":"
                                      "[\"org.varlink.service\",\"" CUDACKPT_INTERFACE "\"]}}");
        struct doctor_run *r = doctor(driver, itest_strdupf("--socket=%s", sock), NULL);
        await_fake_server(d, srv);
        assert_verdict(r, "daemon", "warn");
        assert_says(r, "daemon", "cudackptd 0.0.1?[2J at ");
        assert_says(r, "daemon", "systemctl restart cudackptd.service");
        ck_assert_msg(!strchr(r->proc.out, '\033'), "a terminal control passed through:\n%s", r->proc.out);
        assert_exit_matches(r);

        unlink(sock);
        srv = fake_server(d, sock, "{\"parameters\":{\"product\":\"userdbd\",\"version\":\"1\","
                                "\"interfaces\":[\"org.varlink.service\",\"io.systemd.UserDatabase\"]}}");
        r = doctor(driver, itest_strdupf("--socket=%s", sock), NULL);
        await_fake_server(d, srv);
        assert_verdict(r, "daemon", "fail");
        assert_says(r, "daemon", "serves userdbd");
        ck_assert_int_eq(r->proc.status, 1);

        unlink(sock);
        srv = fake_server(d, sock, NULL);
        r = doctor(driver, itest_strdupf("--socket=%s", sock), NULL);
        await_fake_server(d, srv);
        assert_verdict(r, "daemon", "fail");
        ck_assert_int_eq(r->proc.status, 1);
}
END_TEST

/* A daemon of this release on a real driver (a fake one: the tests have
 * none), its GetInfo's version is ours: ok, naming the driver.  One that
 * has no GetStatus fails; of another release, it warns of the release. */
START_TEST(doctor_daemon_driver_by_status)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        const char *version = itest_str(itest_call(c, "org.varlink.service.GetInfo", NULL), "version");
        const char *driver = sim_driver_arg();
        const char *sock = itest_strdupf("%s/fake", d->dir), *req = itest_strdupf("%s/requests", d->dir);
        const char *info = itest_strdupf("{\"parameters\":{\"vendor\":\"cudackpt\",\"product\":\"cudackptd\","
                                         "\"version\":\"%s\",\"url\":\"x\",\"interfaces\":"
                                         "[\"org.varlink.service\",\"" CUDACKPT_INTERFACE "\"]}}",
                                         version);
        const char *real[] = { info,
                               "{\"parameters\":{\"driver\":{\"available\":true,\"simulated\":false,"
                               "\"path\":\"libcuda.so.1\",\"version\":13000,\"gpus\":8}}}",
                               NULL };
        const char *none[] = { info, "{\"error\":\"" CUDACKPT_VARLINK_METHOD_NOT_FOUND "\",\"parameters\":{}}",
                               NULL };

        pid_t srv = itest_fake_server_calls(sock, real, req);
        struct doctor_run *r = doctor(driver, itest_strdupf("--socket=%s", sock), NULL);
        itest_await_fake_server(srv);
        assert_verdict(r, "daemon", "ok");
        assert_says(r, "daemon", itest_strdupf("cudackptd %s at %s, CUDA 13.0, 8 GPUs, from libcuda.so.1", version,
                                               sock));
        assert_exit_matches(r);

        unlink(sock);
        srv = itest_fake_server_calls(sock, none, req);
        r = doctor(driver, itest_strdupf("--socket=%s", sock), NULL);
        itest_await_fake_server(srv);
        assert_verdict(r, "daemon", "fail");
        assert_says(r, "daemon", "does not say its driver (GetStatus)");
        ck_assert_int_eq(r->proc.status, 1);

        unlink(sock);
        none[0] = "{\"parameters\":{\"version\":\"0.0.1\",\"interfaces\":[\"" CUDACKPT_INTERFACE "\"]}}";
        srv = itest_fake_server_calls(sock, none, req);
        r = doctor(driver, itest_strdupf("--socket=%s", sock), NULL);
        itest_await_fake_server(srv);
        assert_verdict(r, "daemon", "warn");
        assert_says(r, "daemon", "cudackptd 0.0.1 at ");
}
END_TEST

/* CUDACKPT_CRIU names the criu that dump and restore run: doctor checks
 * that one, not criu on PATH. */
START_TEST(doctor_criu_from_environment)
{
        struct itest_daemon *d = itest_daemon_start_default();
        const char *driver = sim_driver_arg();
        const char *socket = socket_arg(d);
        const char *criu = itest_strdupf("%s/my-criu", d->dir);
        FILE *f = fopen(criu, "we");
        ck_assert(f && fputs("#!/bin/sh\necho 'Version: 4.7'\n", f) >= 0 && fclose(f) == 0 && chmod(criu, 0755) == 0);

        const char *env[] = { itest_strdupf("CUDACKPT_CRIU=%s", criu), NULL };
        struct doctor_run *r = doctor_env(child_env(env), driver, socket, NULL);
        assert_verdict(r, "criu", "ok");
        assert_says(r, "criu", itest_strdupf("criu 4.7 at %s", criu));

        const char *missing[] = { itest_strdupf("CUDACKPT_CRIU=%s/no-criu", d->dir), NULL };
        r = doctor_env(child_env(missing), driver, socket, NULL);
        assert_verdict(r, "criu", "warn");
        assert_says(r, "criu", itest_strdupf("CUDACKPT_CRIU names no executable: %s/no-criu", d->dir));
}
END_TEST

int main(void)
{
        const TTest *tests[] = { doctor_simulator_and_daemon, doctor_no_daemon, doctor_bad_driver,
                doctor_driver_versions, doctor_json, doctor_other_servers, doctor_daemon_without_driver,
                doctor_daemon_driver_by_status, doctor_criu_from_environment, NULL };

        return itest_run("integration.doctor", "doctor", 120, tests);
}
