/* test_criu_saves.c: the daemon's jobs and saves (StartJob, SaveJob,
 * RestoreJob, ListSaves, RemoveSave, ListJobs): the real daemon, which
 * runs the real cudackptctl run, dump and restore as root (and the real
 * CRIU) for a caller of another uid (ITEST_OTHER_UID), on the simulator.
 *
 * The daemon is given saves_dir (made by it), ctl_path (the built
 * cudackptctl), a short job_stop_ms, and in its environment what its
 * commands need: CUDACKPT_CRIU, a run directory of the test's, and PATH
 * with the cuda-checkpoint drop-in first.
 *
 * Skips as integration.criu does (citest_probe); the dump and restore of
 * another uid's job also where root lacks CAP_SYS_RESOURCE (criu reads
 * its rlimits), as integration.criu_run does. */
#include "criu_run_itest.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define JOB_STOP_MS 1500
#define USER ITEST_OTHER_UID

struct sv {
        struct citest_ctx x;
        const char *dir;                /* the daemon's: runs, saves, shared */
        const char *saves;              /* the daemon's saves_dir */
        const char *shared;             /* a directory the user may write */
        struct itest_daemon_opts opts;  /* the daemon's, for a restart */
};

/* The daemon with saves (saves: false: without saves_dir) and more
 * configuration (a JSON object's members, or ""): started once to have
 * its directory, then again with what it needs in there. */
static void sv_setup(struct sv *s, bool saves, const char *more)
{
        citest_setup(&s->x);
        s->dir = s->x.d->dir;
        s->saves = itest_strdupf("%s/saves", s->dir);
        s->shared = itest_strdupf("%s/shared", s->dir);
        const char *ctl = citest_need_env("CUDACKPT_TEST_CTL");
        ck_assert_int_eq(mkdir(itest_strdupf("%s/runs", s->dir), 0755), 0);
        ck_assert_int_eq(mkdir(s->shared, 0777), 0);
        ck_assert_int_eq(chmod(s->shared, 01777), 0);
        /* The daemon's PATH is the test's (itest_base_env): the drop-in first. */
        const char *path = getenv("PATH");
        ck_assert_int_eq(setenv("PATH", itest_strdupf("%s:%s", s->x.bin, path ? path : "/usr/bin:/bin"), 1), 0);
        const char **env = itest_keep(calloc(8, sizeof(char *)));
        ck_assert(env);
        env[0] = itest_strdupf("CUDACKPT_CRIU=%s", citest_criu_path);
        env[1] = itest_strdupf("CUDACKPT_RUN_DIR=%s/runs", s->dir);
        env[2] = "CRIU_FAULT=138";
        const char *cfg = itest_strdupf("{%s%s%s\"ctl_path\": \"%s\", \"job_stop_ms\": %d%s%s}",
                                        saves ? "\"saves_dir\": \"" : "", saves ? s->saves : "", saves ? "\", " : "",
                                        ctl, JOB_STOP_MS, more[0] ? ", " : "", more);
        itest_daemon_stop(s->x.d);
        s->opts = (struct itest_daemon_opts){ .config_json = cfg, .env = env };
        itest_daemon_restart(s->x.d, &s->opts);
        s->x.c = itest_client(s->x.d);
}

static void write_file(const char *path)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        close(fd);
}

/* Waits until the user has no job left (its last one's slot free). */
static void await_no_jobs(struct itest_conn *c)
{
        double deadline = itest_now_ms() + AWAIT_MS;
        for (;;) {
                cJSON *r = itest_call(c, CUDACKPT_METHOD_LIST_JOBS, NULL);
                if (cJSON_GetArraySize(cJSON_GetObjectItem(itest_params(r), "jobs")) == 0)
                        return;
                ck_assert_msg(itest_now_ms() < deadline, "jobs left after %d ms: %s", AWAIT_MS, itest_dump(r));
                poll(NULL, 0, 10);
        }
}

/* Sends StartJob NAME: argv (NULL-ended), environment (NULL-ended),
 * directory, output (NULL: none), more: true. */
static void send_start(struct itest_conn *c, const char *name, const char *const *argv, const char *const *env,
                       const char *dir, const char *output)
{
        cJSON *m = cJSON_CreateObject(), *p = cJSON_AddObjectToObject(m, "parameters");
        cJSON *a = cJSON_AddArrayToObject(p, "argv"), *e = cJSON_AddArrayToObject(p, "environment");
        cJSON_AddStringToObject(m, "method", CUDACKPT_METHOD_START_JOB);
        cJSON_AddBoolToObject(m, "more", true);
        cJSON_AddStringToObject(p, "name", name);
        cJSON_AddStringToObject(p, "directory", dir);
        if (output)
                cJSON_AddStringToObject(p, "output", output);
        for (size_t i = 0; argv[i]; i++)
                cJSON_AddItemToArray(a, cJSON_CreateString(argv[i]));
        for (size_t i = 0; env && env[i]; i++)
                cJSON_AddItemToArray(e, cJSON_CreateString(env[i]));
        char *text = cJSON_PrintUnformatted(m);
        itest_send(c, text);
        free(text);
        cJSON_Delete(m);
}

/* The job parameter of a JobEvent reply, asserting its event. */
static const cJSON *job_event(const cJSON *reply, const char *event, bool continues)
{
        const cJSON *job = cJSON_GetObjectItem(itest_params(reply), "job");
        const cJSON *ev = cJSON_GetObjectItem(job, "event");
        ck_assert_msg(cJSON_IsString(ev) && strcmp(ev->valuestring, event) == 0, "expected a \"%s\" event, got %s",
                      event, itest_dump(reply));
        ck_assert_msg(cJSON_IsTrue(cJSON_GetObjectItem(reply, "continues")) == continues,
                      "\"%s\" should %scontinue: %s", event, continues ? "" : "not ", itest_dump(reply));
        return job;
}

/* Whether o's member key is the string value. */
static void assert_member(const cJSON *o, const char *key, const char *value)
{
        const cJSON *v = cJSON_GetObjectItem(o, key);
        ck_assert_msg(cJSON_IsString(v) && strcmp(v->valuestring, value) == 0, "expected %s = \"%s\" in %s", key,
                      value, itest_dump(o));
}

/* The client goes: its end of the socket (the connecting process of
 * another uid holds a copy of the descriptor, which close() would leave
 * open). */
static void hang_up(struct itest_conn *c)
{
        ck_assert_int_eq(shutdown(c->fd, SHUT_RDWR), 0);
}

static long long num(const cJSON *o, const char *key)
{
        const cJSON *v = cJSON_GetObjectItem(o, key);
        ck_assert_msg(cJSON_IsNumber(v), "no number %s in %s", key, itest_dump(o));
        return (long long)v->valuedouble;
}

static bool runs_as(pid_t pid, uid_t uid)
{
        char *text = citest_slurp(itest_strdupf("/proc/%d/status", (int)pid));
        return text && strstr(text, itest_strdupf("\nUid:\t%u\t%u\t%u\t%u\n", uid, uid, uid, uid));
}

static bool alive(pid_t pid)
{
        return kill(pid, 0) == 0;
}

/* Waits until a file exists. */
static void await_file(const char *path)
{
        double deadline = itest_now_ms() + AWAIT_MS;
        while (access(path, F_OK) != 0) {
                ck_assert_msg(itest_now_ms() < deadline, "no %s within %d ms", path, AWAIT_MS);
                poll(NULL, 0, 5);
        }
}

/* StartJob as a user: "started" names a pid namespace's init whose
 * command runs as the user, with exactly the environment given, in the
 * directory given; ListJobs shows it to the user and to no one else, nor
 * may another uid save it; "ended" brings the command's exit status. */
START_TEST(start_job_as_user)
{
        struct sv s;
        sv_setup(&s, true, "");
        struct itest_conn *c = itest_connect_as(s.x.d, USER), *root = itest_connect(s.x.d);
        const char *go = itest_strdupf("%s/go", s.shared), *up = itest_strdupf("%s/up", s.shared);
        const char *script = itest_strdupf("pwd > %s.tmp; mv %s.tmp %s; while [ ! -e %s ]; do sleep 0.02; done; "
                                           "exit 7", up, up, up, go);
        const char *const argv[] = { "/bin/sh", "-c", script, NULL }, *const env[] = { "FOO=bar", "PATH=/usr/bin:/bin",
                                                                                      NULL };
        send_start(c, "work", argv, env, s.shared, NULL);
        const cJSON *job = job_event(itest_recv_within(c, AWAIT_MS), "started", true);
        assert_member(job, "name", "work");
        pid_t init = (pid_t)num(job, "pid");
        ck_assert_int_eq((long long)itest_start_time(init), num(job, "start_time"));
        int v[4];
        ck_assert_msg(crun_ns_pids(init, v, 4) == 2 && v[1] == 1, "pid %d is no pid namespace's init", (int)init);
        await_file(up);
        ck_assert_str_eq(citest_slurp(up), itest_strdupf("%s\n", s.shared));
        pid_t pids[4];
        ck_assert_int_ge(crun_job_pids(init, pids, 4), 2);
        ck_assert_msg(runs_as(pids[1], USER), "the job's command %d does not run as uid %d", (int)pids[1], USER);
        char *environ_text = citest_slurp(itest_strdupf("/proc/%d/environ", (int)pids[1]));
        ck_assert_msg(environ_text && memcmp(environ_text, "FOO=bar\0PATH=/usr/bin:/bin\0", 27) == 0,
                      "the command's environment is not the one given");

        const cJSON *jobs = cJSON_GetObjectItem(itest_params(itest_call(itest_connect_as(s.x.d, USER),
                                                                        CUDACKPT_METHOD_LIST_JOBS, NULL)), "jobs");
        ck_assert_int_eq(cJSON_GetArraySize(jobs), 1);
        assert_member(cJSON_GetArrayItem(jobs, 0), "event", "running");
        ck_assert_int_eq(num(cJSON_GetArrayItem(jobs, 0), "pid"), init);
        jobs = cJSON_GetObjectItem(itest_params(itest_call(root, CUDACKPT_METHOD_LIST_JOBS, NULL)), "jobs");
        ck_assert_int_eq(cJSON_GetArraySize(jobs), 0);
        cJSON *r = itest_call(root, CUDACKPT_METHOD_SAVE_JOB, "{\"name\": \"work\", \"save\": \"theirs\"}");
        itest_assert_error(r, CUDACKPT_ERROR_NO_SUCH_JOB);
        assert_member(itest_params(r), "name", "work");

        write_file(go);
        job = job_event(itest_recv_within(c, AWAIT_MS), "ended", false);
        ck_assert_int_eq(num(job, "exit_status"), 7);
        citest_await_gone(init, AWAIT_MS);
        /* The connection serves calls again. */
        itest_assert_ok(itest_call(c, CUDACKPT_METHOD_LIST_JOBS, NULL));
        const char *text = itest_str(itest_call(root, CUDACKPT_METHOD_GET_METRICS, NULL), "text");
        ck_assert_msg(text && strstr(text, "\ncudackpt_jobs_started_total 1\n") &&
                      strstr(text, "\ncudackpt_jobs_ended_total{how=\"ended\"} 1\n"),
                      "the metrics do not count the job: %s", text ? text : "(none)");
}
END_TEST

/* The jobs end with the daemon: stopped with it (its stop waits for
 * them), or, when it is killed, by their commands (--die-with-parent). */
START_TEST(jobs_end_with_daemon)
{
        struct sv s;
        sv_setup(&s, true, "");
        const char *const argv[] = { "/bin/sh", "-c", "while :; do sleep 0.02; done", NULL };
        const char *const env[] = { "PATH=/usr/bin:/bin", NULL };
        for (int k = 0; k < 2; k++) {
                struct itest_conn *c = itest_connect_as(s.x.d, USER);
                send_start(c, "bound", argv, env, "/", NULL);
                pid_t init = (pid_t)num(job_event(itest_recv_within(c, AWAIT_MS), "started", true), "pid");
                if (k == 0)
                        itest_daemon_stop(s.x.d); /* asserts a clean exit within 10 s */
                else
                        itest_daemon_kill(s.x.d);
                double deadline = itest_now_ms() + AWAIT_MS;
                while (alive(init) && itest_now_ms() < deadline)
                        poll(NULL, 0, 5);
                ck_assert_msg(!alive(init), "the job outlived the daemon (%s)", k ? "killed" : "stopped");
                if (k == 0)
                        itest_daemon_restart(s.x.d, &s.opts);
        }
}
END_TEST

/* The job lives no longer than its call: a job that ends on SIGTERM is
 * gone well before job_stop_ms; one that ignores it is killed, not before
 * job_stop_ms and not long after. */
START_TEST(start_job_call_closed)
{
        struct sv s;
        sv_setup(&s, true, "");
        /* Each says when its trap is set: a SIGTERM before would end it. */
        const char *trapped = itest_strdupf("%s/trapped", s.shared);
        const char *const polite[] = { "/bin/sh", "-c", itest_strdupf("touch %s; while :; do sleep 0.02; done",
                                                                      trapped), NULL };
        const char *const stubborn[] = { "/bin/sh", "-c", itest_strdupf("trap '' TERM; touch %s; while :; do "
                                                                        "sleep 0.02; done", trapped), NULL };
        const char *const env[] = { "PATH=/usr/bin:/bin", NULL };
        for (int k = 0; k < 2; k++) {
                struct itest_conn *c = itest_connect_as(s.x.d, USER);
                unlink(trapped);
                send_start(c, k ? "stubborn" : "polite", k ? stubborn : polite, env, "/", NULL);
                pid_t init = (pid_t)num(job_event(itest_recv_within(c, AWAIT_MS), "started", true), "pid");
                await_file(trapped);
                double t0 = itest_now_ms();
                hang_up(c);
                if (k == 1) {
                        while (itest_now_ms() < t0 + JOB_STOP_MS / 2)
                                poll(NULL, 0, 10);
                        ck_assert_msg(alive(init), "a job ignoring SIGTERM ended before job_stop_ms (%.0f ms): %s", itest_now_ms() - t0, strerror(errno));
                }
                while (alive(init) && itest_now_ms() < t0 + 2 * JOB_STOP_MS + AWAIT_MS)
                        poll(NULL, 0, 5);
                double took = itest_now_ms() - t0;
                ck_assert_msg(!alive(init), "the job outlived its call by %.0f ms", took);
                ck_assert_msg(k ? took >= JOB_STOP_MS : took < JOB_STOP_MS, "job %d ended %.0f ms after its call",
                              k, took);
        }
}
END_TEST

/* Without saves_dir: the jobs and the saves' calls are refused (the
 * administrator turns them on with saves_dir); ListJobs answers, empty. */
START_TEST(saves_disabled)
{
        struct sv s;
        sv_setup(&s, false, "");
        struct itest_conn *c = itest_connect_as(s.x.d, USER);
        itest_assert_error(itest_call(c, CUDACKPT_METHOD_LIST_SAVES, NULL), CUDACKPT_ERROR_SAVES_DISABLED);
        itest_assert_error(itest_call(c, CUDACKPT_METHOD_REMOVE_SAVE, "{\"save\": \"s\"}"),
                           CUDACKPT_ERROR_SAVES_DISABLED);
        itest_assert_error(itest_call(c, CUDACKPT_METHOD_SAVE_JOB, "{\"name\": \"j\", \"save\": \"s\"}"),
                           CUDACKPT_ERROR_SAVES_DISABLED);
        const char *const argv[] = { "/bin/sh", "-c", "exit 3", NULL };
        send_start(c, "quick", argv, NULL, "/", NULL);
        itest_assert_error(itest_recv_within(c, AWAIT_MS), CUDACKPT_ERROR_SAVES_DISABLED);
}
END_TEST

/* Names that are no names are refused before the disk is touched; the
 * jobs' bound per uid; a name taken; a start that fails says why. */
START_TEST(refusals)
{
        struct sv s;
        sv_setup(&s, true, "\"max_jobs_per_uid\": 1");
        struct itest_conn *c = itest_connect_as(s.x.d, USER), *c2 = itest_connect_as(s.x.d, USER);
        static const char *const bad[] = { "../x", "a/b", "..", ".hidden", "-x", "", "a b",
                                           "0123456789012345678901234567890123456789012345678" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                cJSON *r = itest_callf(c, "{\"method\": \"%s\", \"parameters\": {\"name\": \"j\", \"save\": \"%s\"}}",
                                       CUDACKPT_METHOD_SAVE_JOB, bad[i]);
                itest_assert_error(r, CUDACKPT_VARLINK_INVALID_PARAMETER);
                assert_member(itest_params(r), "parameter", "save");
                r = itest_callf(c, "{\"method\": \"%s\", \"parameters\": {\"save\": \"%s\"}}",
                                CUDACKPT_METHOD_REMOVE_SAVE, bad[i]);
                itest_assert_error(r, CUDACKPT_VARLINK_INVALID_PARAMETER);
        }
        ck_assert_int_eq(cjob_dir_entries(s.saves), 0);
        itest_assert_error(itest_call(c, CUDACKPT_METHOD_REMOVE_SAVE, "{\"save\": \"none\"}"),
                           CUDACKPT_ERROR_NO_SUCH_SAVE);
        /* RestoreJob and StartJob answer with a stream only. */
        itest_assert_error(itest_call(c, CUDACKPT_METHOD_RESTORE_JOB, "{\"save\": \"none\"}"),
                           CUDACKPT_VARLINK_EXPECTED_MORE);

        const char *const sleeper[] = { "/bin/sh", "-c", "while :; do sleep 0.02; done", NULL };
        send_start(c, "one", sleeper, NULL, "/", NULL);
        job_event(itest_recv_within(c, AWAIT_MS), "started", true);
        send_start(c2, "one", sleeper, NULL, "/", NULL);
        itest_assert_error(itest_recv_within(c2, AWAIT_MS), CUDACKPT_ERROR_JOB_EXISTS);
        send_start(c2, "two", sleeper, NULL, "/", NULL);
        cJSON *r = itest_recv_within(c2, AWAIT_MS);
        itest_assert_error(r, CUDACKPT_ERROR_QUEUE_FULL);
        assert_member(itest_params(r), "resource", "jobs");
        ck_assert_int_eq(num(itest_params(r), "limit"), 1);
        /* Root's job is root's: the bound is per uid. */
        struct itest_conn *rc = itest_connect(s.x.d);
        send_start(rc, "one", sleeper, NULL, "/", NULL);
        job_event(itest_recv_within(rc, AWAIT_MS), "started", true);
        hang_up(c);
        await_no_jobs(c2);
        /* A directory the user may not enter: the start fails, saying so. */
        send_start(c2, "three", sleeper, NULL, "/root", NULL);
        r = itest_recv_within(c2, AWAIT_MS);
        itest_assert_error(r, CUDACKPT_ERROR_COMMAND_FAILED);
        assert_member(itest_params(r), "command", "run");
        ck_assert_msg(num(itest_params(r), "exit_status") != 0 && itest_str(r, "message")[0],
                      "CommandFailed says nothing: %s", itest_dump(r));
}
END_TEST

/* The uid whose job is saved: another uid's where root may dump another
 * uid's processes, else root's own (see the file's comment; the calls
 * are scoped by the caller's uid all the same). */
static uid_t saving_uid(void)
{
        char *status = citest_slurp("/proc/self/status"), *eff = status ? strstr(status, "\nCapEff:\t") : NULL;
        if (eff && (strtoull(eff + 9, NULL, 16) & (1ull << 24)))
                return USER;
        fprintf(stderr, "%s: root saves its own job: no CAP_SYS_RESOURCE here (criu cannot read another uid's "
                "rlimits)\n", tcase_name());
        return 0;
}

/* Whether cudackptctl dump and restore take --owner, which the daemon
 * passes them (a cudackptctl before them cannot save a caller's job:
 * skipped, said on stderr). */
static bool ctl_has_owner(void)
{
        const char *const argv[] = { citest_need_env("CUDACKPT_TEST_CTL"), "dump", "--help", NULL };
        struct citest_run res;
        const char *const env[] = { NULL };
        ck_assert_int_eq(citest_run_bounded(argv, env, AWAIT_MS, &res), 0);
        if (strstr(res.out, "--owner"))
                return true;
        fprintf(stderr, "%s: skipped: cudackptctl dump has no --owner\n", tcase_name());
        return false;
}

static struct itest_conn *connect_uid(struct itest_daemon *d, uid_t uid)
{
        return uid == 0 ? itest_connect(d) : itest_connect_as(d, uid);
}

/* The user's job of three simulated CUDA processes (criu_target tree),
 * its output in the shared directory: the host pids (init first) and
 * their pids in the namespace. */
static void start_target_job(struct sv *s, struct itest_conn *c, uid_t uid, const char *name, pid_t *pids, int *ns)
{
        const char *target = citest_need_env("CUDACKPT_TEST_CRIU_TARGET"), *sim = citest_need_env("CUDACKPT_TEST_SIM");
        if (uid != 0) {
                /* Copies another uid may run (the build tree may be closed
                 * to it); the simulator's named as a driver, so that the
                 * daemon, which did not load this copy, knows its mappers
                 * as CUDA processes. */
                target = itest_stage_exe(s->x.d, target, NULL);
                sim = itest_stage_exe(s->x.d, sim, "libcuda.so.1");
        }
        const char *log = itest_strdupf("%s/%s.log", s->shared, name);
        const char *const argv[] = { "/bin/sh", "-c", "exec \"$@\" 3>&1", "sh", "/usr/bin/env", "CUDACKPT_SIM=1",
                                     SIM_STATE_SLOT, target, "tree", "1", s->x.result, TARGET_MIB, sim, NULL };
        int fd = open(s->x.result, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(fchmod(fd, 0666), 0);
        close(fd);
        send_start(c, name, argv, NULL, "/", log);
        pid_t init = (pid_t)num(job_event(itest_recv_within(c, AWAIT_MS), "started", true), "pid");
        double deadline = itest_now_ms() + AWAIT_MS;
        for (;;) {
                char *text = citest_slurp_raw(log);
                size_t lines = 0;
                for (char *p = text; p && *p; p++)
                        lines += *p == '\n';
                free(text);
                if (lines >= JOB_PROCS - 1)
                        break;
                ck_assert_msg(itest_now_ms() < deadline, "the job did not report in %s", log);
                poll(NULL, 0, 5);
        }
        ck_assert_int_eq(crun_job_pids(init, pids, JOB_PROCS + 1), JOB_PROCS);
        for (int i = 0; i < JOB_PROCS; i++) {
                int v[4];
                ck_assert_int_eq(crun_ns_pids(pids[i], v, 4), 2);
                ns[i] = v[1];
        }
}

static cJSON *save_job(struct itest_conn *c, const char *name, const char *save, const char *more)
{
        return itest_callf(c, "{\"method\": \"%s\", \"parameters\": {\"name\": \"%s\", \"save\": \"%s\"%s}}",
                           CUDACKPT_METHOD_SAVE_JOB, name, save, more);
}

/* SaveJob and RestoreJob: a save left running, the bound of saves per
 * uid, SaveExists, the save replaced (the job ends: "saved" on its call),
 * root's 0700 directories, the save listed to its user only, and the job
 * restored from it, its simulated CUDA memory intact, ending with its
 * status. */
START_TEST(save_and_restore)
{
        struct sv s;
        sv_setup(&s, true, "\"max_saves_per_uid\": 1");
        if (!ctl_has_owner())
                return;
        uid_t owner = saving_uid(), stranger = owner == 0 ? USER : 0;
        struct itest_conn *c = connect_uid(s.x.d, owner), *u = connect_uid(s.x.d, owner);
        struct itest_conn *other = connect_uid(s.x.d, stranger);
        pid_t pids[JOB_PROCS + 1], now[JOB_PROCS + 1];
        int ns[JOB_PROCS];
        start_target_job(&s, c, owner, "train", pids, ns);
        crun_check_memory_ns(&s.x, pids[1], ns[1], 1);

        cJSON *r = save_job(u, "train", "s1", ", \"leave_running\": true");
        itest_assert_ok(r);
        const cJSON *info = cJSON_GetObjectItem(itest_params(r), "save");
        assert_member(info, "save", "s1");
        assert_member(info, "job", "train");
        ck_assert_int_gt(num(info, "bytes"), 0);
        ck_assert(alive(pids[1]));
        r = save_job(u, "train", "s2", "");
        itest_assert_error(r, CUDACKPT_ERROR_QUEUE_FULL);
        assert_member(itest_params(r), "resource", "saves");
        itest_assert_error(save_job(u, "train", "s1", ""), CUDACKPT_ERROR_SAVE_EXISTS);
        itest_assert_error(save_job(other, "train", "s1", ", \"replace\": true"), CUDACKPT_ERROR_NO_SUCH_JOB);

        itest_assert_ok(save_job(u, "train", "s1", ", \"replace\": true"));
        assert_member(job_event(itest_recv_within(c, AWAIT_MS), "saved", false), "save", "s1");
        for (int i = 0; i < JOB_PROCS; i++)
                citest_await_gone(pids[i], AWAIT_MS);
        struct stat st;
        const char *dirs[] = { itest_strdupf("%s/%u", s.saves, owner), itest_strdupf("%s/%u/s1", s.saves, owner) };
        for (int i = 0; i < 2; i++) {
                ck_assert_int_eq(stat(dirs[i], &st), 0);
                ck_assert_msg(st.st_uid == 0 && (st.st_mode & 07777) == 0700, "%s is not root's 0700", dirs[i]);
        }
        ck_assert_int_eq(cjob_dir_entries(dirs[0]), 1); /* the replaced save is gone */
        cJSON *m = itest_keep_json(cJSON_Parse(citest_slurp(itest_strdupf("%s/manifest.json", dirs[1]))));
        ck_assert_msg(cJSON_GetArraySize(cJSON_GetObjectItem(m, "members")) == JOB_PROCS - 1,
                      "the save holds not the job's %d CUDA processes", JOB_PROCS - 1);
        const cJSON *saves = cJSON_GetObjectItem(itest_params(itest_call(u, CUDACKPT_METHOD_LIST_SAVES, NULL)),
                                                 "saves");
        ck_assert_int_eq(cJSON_GetArraySize(saves), 1);
        assert_member(cJSON_GetArrayItem(saves, 0), "save", "s1");
        ck_assert_int_gt(num(cJSON_GetArrayItem(saves, 0), "bytes"), 0);
        saves = cJSON_GetObjectItem(itest_params(itest_call(other, CUDACKPT_METHOD_LIST_SAVES, NULL)), "saves");
        ck_assert_int_eq(cJSON_GetArraySize(saves), 0);
        itest_assert_error(itest_call(other, CUDACKPT_METHOD_REMOVE_SAVE, "{\"save\": \"s1\"}"),
                           CUDACKPT_ERROR_NO_SUCH_SAVE);
        itest_sendf(other, "{\"method\": \"%s\", \"more\": true, \"parameters\": {\"save\": \"s1\"}}",
                    CUDACKPT_METHOD_RESTORE_JOB);
        itest_assert_error(itest_recv_within(other, AWAIT_MS), CUDACKPT_ERROR_NO_SUCH_SAVE);

        itest_sendf(c, "{\"method\": \"%s\", \"more\": true, \"parameters\": {\"save\": \"s1\"}}",
                    CUDACKPT_METHOD_RESTORE_JOB);
        const cJSON *job = job_event(itest_recv_within(c, JOB_TIMEOUT_MS), "started", true);
        assert_member(job, "name", "train");
        pid_t init = (pid_t)num(job, "pid");
        ck_assert_int_eq(crun_job_pids(init, now, JOB_PROCS + 1), JOB_PROCS);
        ck_assert_msg(runs_as(now[1], owner), "the restored job does not run as uid %u", owner);
        /* The simulated CUDA state came back: the memory checks out. */
        citest_assert_state(&s.x, now[1], "running");
        crun_check_memory_ns(&s.x, now[1], ns[1], 2);
        ck_assert_int_eq(kill(init, SIGKILL), 0);
        ck_assert_int_eq(num(job_event(itest_recv_within(c, AWAIT_MS), "ended", false), "exit_status"), 128 + SIGKILL);
        itest_assert_ok(itest_call(u, CUDACKPT_METHOD_REMOVE_SAVE, "{\"save\": \"s1\"}"));
        ck_assert_int_eq(cjob_dir_entries(dirs[0]), 0);
}
END_TEST

int main(void)
{
        const TTest *tests[] = { start_job_as_user, start_job_call_closed, jobs_end_with_daemon, saves_disabled,
                                 refusals, save_and_restore, NULL };

        return citest_main("criu_saves", 4.0 * JOB_TIMEOUT_MS / 1000, tests);
}
