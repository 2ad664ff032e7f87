/* test_cli.c: cudackptctl run as a process against the daemon: its output
 * (the state word alone, "STATE (D.D ms)" for operations, --json) and its
 * exit statuses, one per error; and started as cuda-checkpoint (the
 * symlink beside it), the GPU mapping CRIU cannot pass, taken from
 * CUDACKPT_DEVICE_MAP; --hold (a lease for as long as the command runs),
 * release, metrics, watch and --progress (cli_hold.c).  Its ps and group
 * verbs are test_cli_groups.c's.
 *
 * The binary doubles as a target: --itest-grow (see harness.h).
 *
 * A process of another uid execs a copy staged in the test's dir, not the
 * build tree's binary: the tree may be closed to that uid (a checkout in
 * root's 0700 home run with "make test" as root). */
#include "cli_hold.h"
#include "harness.h"

#include <errno.h>
#include <poll.h>
#include <pwd.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define CTL_TIMEOUT_MS 20000

/* The cuda-checkpoint symlink the build puts beside cudackptctl. */
static const char *compat_path(void)
{
        const char *ctl = itest_ctl_path();
        const char *slash = strrchr(ctl, '/');
        const char *p = itest_strdupf("%.*scuda-checkpoint", slash ? (int)(slash - ctl + 1) : 0, ctl);
        ck_assert_msg(access(p, X_OK) == 0, "%s: %s", p, strerror(errno));
        return p;
}

/* Runs path ARGS... (NULL-terminated) with CUDACKPT_SOCKET=sock and, when
 * map is not NULL, CUDACKPT_DEVICE_MAP=map in its environment. */
static struct itest_proc_result *run_map_env(const char *path, const char *sock, const char *map,
                                             const char *first, ...)
{
        const char *env[] = { itest_strdupf(CUDACKPT_SOCKET_ENV "=%s", sock), "PATH=/usr/bin:/bin",
                              map ? itest_strdupf("CUDACKPT_DEVICE_MAP=%s", map) : NULL, NULL };
        va_list ap;
        va_start(ap, first);
        struct itest_proc_result *r = itest_run_va((uid_t)-1, path, NULL, env, first, ap);
        va_end(ap);
        return r;
}

/* cuda-checkpoint ARGS... against d, with CUDACKPT_DEVICE_MAP=map (NULL: unset). */
#define compat(d, map, ...) run_map_env(compat_path(), (d)->sock, (map), __VA_ARGS__)
/* cudackptctl ARGS... against d, the same way. */
#define ctl_map_env(d, map, ...) run_map_env(itest_ctl_path(), (d)->sock, (map), __VA_ARGS__)

/* The compat mode's success: exit 0, stdout exactly out, stderr empty. */
static void assert_compat_ok(const struct itest_proc_result *r, const char *out)
{
        ck_assert_msg(r->status == 0 && strcmp(r->out, out) == 0 && r->err[0] == '\0',
                      "exit status %d, stdout \"%s\", stderr \"%s\"; expected 0, \"%s\", nothing", r->status,
                      r->out, r->err, out);
}

/* Its failure: exit 1, nothing on stdout, one line on stderr holding want. */
static void assert_compat_fails(const struct itest_proc_result *r, const char *want)
{
        size_t len = strlen(r->err);
        ck_assert_msg(r->status == 1 && r->out[0] == '\0', "exit status %d, stdout \"%s\" (stderr \"%s\"); "
                      "expected 1 and nothing", r->status, r->out, r->err);
        ck_assert_msg(len > 1 && r->err[len - 1] == '\n' && !memchr(r->err, '\n', len - 1),
                      "stderr on failure is not one line: \"%s\"", r->err);
        ck_assert_msg(strstr(r->err, want), "stderr \"%s\" does not say \"%s\"", r->err, want);
}

START_TEST(cli_state)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_sim_target();
        itest_assert_run(itest_ctl(d, "state", itest_pidstr(pid), NULL), 0, "running\n");
}
END_TEST

START_TEST(cli_socket_from_environment)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_sim_target();
        const char *argv[] = { itest_ctl_path(), "state", itest_pidstr(pid), NULL };
        const char *env[] = { itest_strdupf(CUDACKPT_SOCKET_ENV "=%s", d->sock), "PATH=/usr/bin:/bin", NULL };
        struct itest_proc_result r;
        itest_run_proc((uid_t)-1, argv, env, CTL_TIMEOUT_MS, &r);
        itest_assert_run(&r, 0, "running\n");
}
END_TEST

START_TEST(cli_restore_tid)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_sim_target();
        struct itest_proc_result *r = itest_ctl(d, "restore-tid", itest_pidstr(pid), NULL);
        itest_assert_run(r, 0, NULL);
        char *end = NULL;
        long tid = strtol(r->out, &end, 10);
        ck_assert_msg(tid > 0 && end && strcmp(end, "\n") == 0, "restore-tid printed \"%s\"", r->out);
}
END_TEST

START_TEST(cli_operations)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_sim_target();
        const char *p = itest_pidstr(pid);
        itest_assert_op_output(itest_ctl(d, "lock", p, "--lock-timeout=5000", NULL), "locked");
        itest_assert_run(itest_ctl(d, "state", p, NULL), 0, "locked\n");
        itest_assert_op_output(itest_ctl(d, "checkpoint", p, NULL), "checkpointed");
        itest_assert_run(itest_ctl(d, "state", p, NULL), 0, "checkpointed\n");
        itest_assert_op_output(itest_ctl(d, "restore", p, "--map=" ITEST_GPU0 "=" ITEST_GPU0_PLAIN, NULL), "locked");
        itest_assert_op_output(itest_ctl(d, "unlock", p, NULL), "running");
        itest_assert_op_output(itest_ctl(d, "suspend", p, NULL), "checkpointed");
        itest_assert_op_output(itest_ctl(d, "resume", p, NULL), "running");
        itest_assert_run(itest_ctl(d, "state", p, NULL), 0, "running\n");
}
END_TEST

START_TEST(cli_json)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_sim_target();
        struct itest_proc_result *r = itest_ctl(d, "--json", "state", itest_pidstr(pid), NULL);
        itest_assert_run(r, 0, NULL);
        cJSON *j = itest_keep_json(cJSON_Parse(r->out));
        ck_assert_msg(cJSON_IsObject(j), "--json printed \"%s\"", r->out);
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "state");
        const cJSON *pj = cJSON_GetObjectItemCaseSensitive(j, "pid");
        ck_assert_msg(cJSON_IsString(st) && strcmp(st->valuestring, "running") == 0 && cJSON_IsNumber(pj) &&
                              pj->valuedouble == pid,
                      "--json printed \"%s\"", r->out);

        pid_t dead = itest_dead_pid();
        r = itest_ctl(d, "--json", "state", itest_pidstr(dead), NULL);
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
        struct itest_proc_result *r = itest_ctl(d, "info", NULL);
        itest_assert_run(r, 0, NULL);
        ck_assert_msg(strstr(r->out, CUDACKPT_INTERFACE), "info does not name the interface: \"%s\"", r->out);
}
END_TEST

/* Each error its own exit status. */
START_TEST(cli_exit_codes)
{
        static const char *const env[] = { "CUDACKPT_SIM_DEVICE_COUNT=1", NULL };
        struct itest_daemon_opts o = { .env = env };
        struct itest_daemon *d = itest_daemon_start(&o);
        pid_t pid = itest_sim_target();
        const char *p = itest_pidstr(pid);
        itest_assert_run(itest_ctl(d, "state", itest_pidstr(itest_dead_pid()), NULL), 10, "");
        itest_assert_run(itest_ctl(d, "state", itest_pidstr(itest_target("CUDACKPT_SIM_MEM_MIB=1", NULL)), NULL), 11, "");
        itest_assert_run(itest_ctl(d, "unlock", p, NULL), 13, "");
        pid_t busy = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_BUSY_MS=2000", NULL);
        itest_assert_run(itest_ctl(d, "lock", itest_pidstr(busy), "--lock-timeout=100", NULL), 14, "");
        itest_assert_op_output(itest_ctl(d, "suspend", p, NULL), "checkpointed");
        itest_assert_run(itest_ctl(d, "restore", p, "--map=" ITEST_GPU0 "=" ITEST_GPU_NONE, NULL), 15, "");
        itest_assert_op_output(itest_ctl(d, "resume", p, NULL), "running");
        pid_t managed = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MANAGED=1", NULL);
        itest_assert_run(itest_ctl(d, "suspend", itest_pidstr(managed), NULL), 16, "");
        pid_t failing = itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_FAIL=getstate:CUDA_ERROR_UNKNOWN", NULL);
        itest_assert_run(itest_ctl(d, "state", itest_pidstr(failing), NULL), 19, "");
}
END_TEST

START_TEST(cli_driver_unavailable)
{
        struct itest_daemon_opts o = { .driver = "/nonexistent.so" };
        struct itest_daemon *d = itest_daemon_start(&o);
        pid_t pid = itest_sim_target();
        itest_assert_run(itest_ctl(d, "state", itest_pidstr(pid), NULL), 18, "");
}
END_TEST

START_TEST(cli_usage_and_unreachable)
{
        struct itest_daemon *d = itest_daemon_start_default();
        itest_assert_run(itest_ctl(d, NULL), 2, "");
        itest_assert_run(itest_ctl(d, "frobnicate", "1", NULL), 2, "");
        itest_assert_run(itest_ctl(d, "state", NULL), 2, "");
        itest_assert_run(itest_ctl(d, "state", "notapid", NULL), 2, "");
        itest_assert_run(itest_ctl(d, "state", "0", NULL), 2, "");
        itest_assert_run(itest_ctl(d, "state", "1", "2", NULL), 2, "");
        /* No daemon: where it was looked for is said at once, then what to
         * do about it. */
        const char *none = itest_strdupf("%s/nosuchsock", d->dir);
        struct itest_proc_result *r = itest_ctl(NULL, itest_strdupf("--socket=%s", none), "state", "1", NULL);
        itest_assert_run(r, 3, "");
        const char *said = strstr(r->err, itest_strdupf("no socket at %s yet: waiting", none));
        const char *advice = strstr(r->err, "; is it running? systemctl start cudackptd.socket");
        ck_assert_msg(said && advice && said < advice && strstr(advice, "doctor"), "no daemon: \"%s\"", r->err);
        /* A --socket that is not a socket: said at once, no wait for it. */
        const char *file = itest_strdupf("%s/not-a-socket", d->dir);
        FILE *f = fopen(file, "we");
        ck_assert(f && fputs("x", f) >= 0 && fclose(f) == 0);
        double t0 = itest_now_ms();
        r = itest_ctl(NULL, itest_strdupf("--socket=%s", file), "state", "1", NULL);
        itest_assert_run(r, 3, "");
        ck_assert_msg(itest_now_ms() - t0 < 1500 && strstr(r->err, ": it is not a socket;"),
                      "--socket of a file: %.0f ms, \"%s\"", itest_now_ms() - t0, r->err);
        /* --help is not an error. */
        r = itest_ctl(NULL, "--help", NULL);
        ck_assert_msg(r->status == 0 && r->out[0], "--help: status %d, stdout \"%s\"", r->status, r->out);
}
END_TEST

/* metrics --listen on a port another program holds: the reason, and the
 * port, as given. */
START_TEST(cli_exporter_port_taken)
{
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof(sa);
        ck_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(fd, 1) == 0 &&
                  getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
        const char *addr = itest_strdupf("127.0.0.1:%u", (unsigned)ntohs(sa.sin_port));
        struct itest_proc_result *r = itest_ctl(NULL, "metrics", itest_strdupf("--listen=%s", addr), NULL);
        close(fd);
        if (strstr(r->err, "without libmicrohttpd")) {
                fprintf(stderr, "%s: skipped, cudackptctl has no --listen\n", tcase_name());
                return;
        }
        ck_assert_msg(r->status == 1 && strstr(r->err, itest_strdupf("cannot listen on %s: Address already in use", addr)) &&
                              !strstr(r->err, "port 0"),
                      "metrics --listen on a taken port: %d \"%s\"", r->status, r->err);
}
END_TEST

/* --json restore --images answers with its object when its checks fail
 * (no criu, no images), not with nothing. */
START_TEST(cli_json_restore_images_check)
{
        struct itest_daemon *d = itest_daemon_start_default();
        const char *criu = itest_strdupf("%s/criu", d->dir);
        FILE *f = fopen(criu, "we");
        ck_assert(f && fputs("#!/bin/sh\necho 'Version: 4.2'\n", f) >= 0 && fclose(f) == 0 && chmod(criu, 0755) == 0);
        const char *criu_env[] = { itest_strdupf("CUDACKPT_CRIU=%s/no-criu", d->dir), itest_strdupf("CUDACKPT_CRIU=%s", criu) };
        for (size_t i = 0; i < 2; i++) {
                const char *argv[] = { itest_ctl_path(), itest_strdupf("--socket=%s", d->sock), "--json", "restore",
                                       itest_strdupf("--images=%s/no-images", d->dir), NULL };
                const char *env[] = { criu_env[i], "PATH=/usr/bin:/bin", NULL };
                struct itest_proc_result r;
                itest_run_proc((uid_t)-1, argv, env, 20000, &r);
                cJSON *j = cJSON_Parse(r.out);
                const cJSON *restored = cJSON_GetObjectItemCaseSensitive(j, "restored");
                const cJSON *step = cJSON_GetObjectItemCaseSensitive(j, "failed_step");
                ck_assert_msg(r.status == 1 && cJSON_IsFalse(restored) && cJSON_IsString(step) &&
                                      strcmp(step->valuestring, "check") == 0 && r.err[0],
                              "%s: %d, stdout \"%s\", stderr \"%s\"", criu_env[i], r.status, r.out, r.err);
                cJSON_Delete(j);
        }
}
END_TEST

START_TEST(cli_permission_denied)
{
        if (itest_need_root())
                return;
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_sim_target();
        itest_assert_run(itest_ctl_as(ITEST_OTHER_UID, d, "state", itest_pidstr(pid), NULL), 12, "");
        pid_t own = itest_target_as(ITEST_OTHER_UID, "CUDACKPT_SIM=1", NULL);
        itest_assert_run(itest_ctl_as(ITEST_OTHER_UID, d, "state", itest_pidstr(own), NULL), 0, "running\n");
}
END_TEST

/* ---- cuda-checkpoint and CUDACKPT_DEVICE_MAP ------------------------------ */

#define COMPAT_RESTORE(p) "--action", "restore", "--pid", (p)

/* A daemon with two simulated GPUs, and a target of it on GPU 0, locked
 * and checkpointed through cuda-checkpoint. */
static struct itest_daemon *start_two_gpus(void)
{
        static const char *const env[] = { "CUDACKPT_SIM_DEVICE_COUNT=2", NULL };
        struct itest_daemon_opts o = { .env = env };
        return itest_daemon_start(&o);
}

static void compat_checkpoint(struct itest_daemon *d, const char *p)
{
        assert_compat_ok(compat(d, NULL, "--action", "lock", "--pid", p, NULL), "");
        assert_compat_ok(compat(d, NULL, "--action", "checkpoint", "--pid", p, NULL), "");
        assert_compat_ok(compat(d, NULL, "--get-state", "--pid", p, NULL), "checkpointed\n");
}

/* CRIU runs "cuda-checkpoint --action restore --pid P", no --device-map:
 * the mapping comes from the environment, reaches the daemon and is
 * obeyed. */
START_TEST(cli_compat_device_map_env)
{
        struct itest_daemon *d = start_two_gpus();
        const char *p = itest_pidstr(itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_GPUS=0", NULL));
        compat_checkpoint(d, p);
        /* Sent: without it this restore would succeed in place.  The
         * daemon refuses a GPU the machine lacks; nothing changed. */
        assert_compat_fails(compat(d, ITEST_GPU0 "=" ITEST_GPU_NONE, COMPAT_RESTORE(p), NULL), "InvalidGpuMapping");
        assert_compat_ok(compat(d, NULL, "--get-state", "--pid", p, NULL), "checkpointed\n");
        assert_compat_ok(compat(d, ITEST_GPU0 "=" ITEST_GPU1, COMPAT_RESTORE(p), NULL), "");
        assert_compat_ok(compat(d, NULL, "--get-state", "--pid", p, NULL), "locked\n");
        assert_compat_ok(compat(d, NULL, "--action", "unlock", "--pid", p, NULL), "");

        /* Obeyed: the process is on GPU 1 now, and the driver wants every
         * GPU it used named, so GPU 0 alone is refused, GPU 1 accepted. */
        compat_checkpoint(d, p);
        assert_compat_fails(compat(d, ITEST_GPU0 "=" ITEST_GPU1, COMPAT_RESTORE(p), NULL), "InvalidGpuMapping");
        assert_compat_ok(compat(d, NULL, "--get-state", "--pid", p, NULL), "checkpointed\n");
        assert_compat_ok(compat(d, ITEST_GPU1 "=" ITEST_GPU0, COMPAT_RESTORE(p), NULL), "");
        assert_compat_ok(compat(d, NULL, "--get-state", "--pid", p, NULL), "locked\n");
}
END_TEST

/* --device-map on the command line wins over the variable, whole: the two
 * are not merged, and the variable is then not even read. */
START_TEST(cli_compat_device_map_option_wins)
{
        struct itest_daemon *d = start_two_gpus();
        const char *p = itest_pidstr(itest_sim_target());
        compat_checkpoint(d, p);
        /* Merged, GPU 0 would be named twice; the variable alone is refused. */
        assert_compat_ok(compat(d, ITEST_GPU0 "=" ITEST_GPU_NONE, COMPAT_RESTORE(p), "--device-map",
                                ITEST_GPU0 "=" ITEST_GPU1, NULL),
                         "");
        assert_compat_ok(compat(d, NULL, "--action", "unlock", "--pid", p, NULL), "");
        compat_checkpoint(d, p);
        /* A bad option fails even with a good variable. */
        assert_compat_fails(compat(d, ITEST_GPU1 "=" ITEST_GPU0, COMPAT_RESTORE(p), "-d",
                                   ITEST_GPU1 "=" ITEST_GPU_NONE, NULL),
                            "InvalidGpuMapping");
        assert_compat_ok(compat(d, NULL, "--get-state", "--pid", p, NULL), "checkpointed\n");
        /* A malformed variable is not read when the option is given. */
        assert_compat_ok(compat(d, "garbage", COMPAT_RESTORE(p), "-d", ITEST_GPU1 "=" ITEST_GPU0, NULL), "");
        assert_compat_ok(compat(d, NULL, "--get-state", "--pid", p, NULL), "locked\n");
}
END_TEST

/* Which commands read it: cuda-checkpoint's restore and toggle; not its
 * other actions or queries, nor cudackptctl's own commands. */
START_TEST(cli_compat_device_map_env_scope)
{
        struct itest_daemon *d = start_two_gpus();
        const char *p = itest_pidstr(itest_sim_target());
        const char *bad = "garbage";

        /* Malformed, it is no error for what does not restore. */
        assert_compat_ok(compat(d, bad, "--get-state", "--pid", p, NULL), "running\n");
        struct itest_proc_result *r = compat(d, bad, "--get-restore-tid", "--pid", p, NULL);
        ck_assert_msg(r->status == 0 && strtol(r->out, NULL, 10) > 0 && r->err[0] == '\0',
                      "--get-restore-tid: exit status %d, stdout \"%s\", stderr \"%s\"", r->status, r->out, r->err);
        assert_compat_ok(compat(d, bad, "--action", "lock", "--pid", p, NULL), "");
        assert_compat_ok(compat(d, bad, "--action", "checkpoint", "--pid", p, NULL), "");
        /* Empty: no mapping, restored in place. */
        assert_compat_ok(compat(d, "", COMPAT_RESTORE(p), NULL), "");
        assert_compat_ok(compat(d, bad, "--action", "unlock", "--pid", p, NULL), "");
        assert_compat_ok(compat(d, NULL, "--get-state", "--pid", p, NULL), "running\n");

        /* --toggle may restore, so a malformed value fails it before the
         * daemon is asked, even for a running process. */
        assert_compat_fails(compat(d, bad, "--toggle", "--pid", p, NULL), "CUDACKPT_DEVICE_MAP");
        assert_compat_ok(compat(d, NULL, "--get-state", "--pid", p, NULL), "running\n");
        /* Toggle of a running process does not restore: the map is unused. */
        assert_compat_ok(compat(d, ITEST_GPU0 "=" ITEST_GPU_NONE, "--toggle", "--pid", p, NULL), "");
        assert_compat_ok(compat(d, NULL, "--get-state", "--pid", p, NULL), "checkpointed\n");
        /* Of a checkpointed one it restores with it. */
        assert_compat_fails(compat(d, ITEST_GPU0 "=" ITEST_GPU_NONE, "--toggle", "--pid", p, NULL),
                            "InvalidGpuMapping");
        assert_compat_ok(compat(d, NULL, "--get-state", "--pid", p, NULL), "checkpointed\n");
        assert_compat_ok(compat(d, ITEST_GPU0 "=" ITEST_GPU1, "--toggle", "--pid", p, NULL), "");
        assert_compat_ok(compat(d, NULL, "--get-state", "--pid", p, NULL), "running\n");

        /* cudackptctl's restore and resume take --map only: the process is
         * on GPU 1, where a mapping from the variable would be refused. */
        const char *refused = ITEST_GPU1 "=" ITEST_GPU_NONE;
        itest_assert_op_output(ctl_map_env(d, refused, "suspend", p, NULL), "checkpointed");
        itest_assert_op_output(ctl_map_env(d, refused, "restore", p, NULL), "locked");
        itest_assert_op_output(ctl_map_env(d, refused, "unlock", p, NULL), "running");
        itest_assert_op_output(ctl_map_env(d, bad, "suspend", p, NULL), "checkpointed");
        itest_assert_op_output(ctl_map_env(d, bad, "resume", p, NULL), "running");
}
END_TEST

/* A Unix socket in the test's dir that listens and never answers: a client
 * that connects shows up as a pending connection. */
static int listen_silent(struct itest_daemon *d, const char **ret_path)
{
        const char *path = itest_strdupf("%s/silent", d->dir);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        ck_assert(strlen(path) < sizeof(sa.sun_path));
        strcpy(sa.sun_path, path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ck_assert_msg(fd >= 0, "socket: %s", strerror(errno));
        ck_assert_msg(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(fd, 16) == 0, "listen %s: %s",
                      path, strerror(errno));
        *ret_path = path;
        return fd;
}

/* A malformed value fails the restore: exit 1, one line naming the
 * variable, nothing on stdout, and the daemon is not contacted. */
START_TEST(cli_compat_device_map_env_malformed)
{
        static const char *const malformed[] = {
                "garbage",
                " ",
                ",",
                "=",
                ITEST_GPU0 "=",
                "=" ITEST_GPU1,
                ITEST_GPU0 "=" ITEST_GPU1 ",",
                ITEST_GPU0 "=" ITEST_GPU1 ",," ITEST_GPU1 "=" ITEST_GPU0,
                ITEST_GPU0 "=" ITEST_GPU1 "=" ITEST_GPU0,
                ITEST_GPU0 "=" ITEST_GPU1 "," ITEST_GPU0 "=" ITEST_GPU0, /* GPU 0 twice */
                "two\nlines",
                NULL,
        };
        struct itest_daemon *d = start_two_gpus();
        const char *silent = NULL;
        int lfd = listen_silent(d, &silent);
        const char *compat_exe = compat_path();
        const char *p = itest_pidstr(itest_sim_target());

        for (size_t i = 0; malformed[i]; i++) {
                struct itest_proc_result *r = run_map_env(compat_exe, silent, malformed[i], COMPAT_RESTORE(p), NULL);
                assert_compat_fails(r, "CUDACKPT_DEVICE_MAP");
                r = run_map_env(compat_exe, silent, malformed[i], "--toggle", "--pid", p, NULL);
                assert_compat_fails(r, "CUDACKPT_DEVICE_MAP");
                int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                ck_assert_msg(c < 0 && (errno == EAGAIN || errno == EWOULDBLOCK),
                              "with CUDACKPT_DEVICE_MAP=\"%s\" cuda-checkpoint connected to the daemon's socket",
                              malformed[i]);
        }
        close(lfd);

        /* Against the daemon: the checkpointed process stays as it is. */
        compat_checkpoint(d, p);
        assert_compat_fails(compat(d, "garbage", COMPAT_RESTORE(p), NULL), "CUDACKPT_DEVICE_MAP");
        assert_compat_ok(compat(d, NULL, "--get-state", "--pid", p, NULL), "checkpointed\n");
        assert_compat_ok(compat(d, ITEST_GPU0 "=" ITEST_GPU0, COMPAT_RESTORE(p), NULL), "");
        assert_compat_ok(compat(d, NULL, "--get-state", "--pid", p, NULL), "locked\n");
}
END_TEST

static Suite *cli_suite(void)
{
        const TTest *tests[] = { cli_state, cli_socket_from_environment, cli_restore_tid, cli_operations,
                cli_json, cli_info, cli_exit_codes, cli_driver_unavailable, cli_usage_and_unreachable,
                cli_exporter_port_taken, cli_json_restore_images_check, cli_permission_denied,
                cli_compat_device_map_env, cli_compat_device_map_option_wins, cli_compat_device_map_env_scope,
                cli_compat_device_map_env_malformed, NULL };
        TCase *tc;
        Suite *s = itest_suite("integration.cli", "cli", 60, tests, &tc);

        cli_hold_add_tests(tc);
        return s;
}

int main(int argc, char **argv)
{
        if (argc >= 3 && strcmp(argv[1], "--itest-grow") == 0)
                return itest_grow_mode(argv);
        return itest_main(cli_suite());
}
