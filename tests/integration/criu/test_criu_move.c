/* test_criu_move.c: a job moved to another node end to end, with the real
 * CRIU and the real daemon on the simulator: node A (the simulator's
 * default GPU D0), then node B, the daemon restarted with GPUs N0, N1
 * (another machine's UUIDs, as test_criu_plan.c does).  The job is
 * started on A with `cudackptctl run`, dumped with `dump --run NAME
 * --archive`, and restored on B with `restore --archive` and no
 * --device-map while every one of its original host pids is held by
 * another process; it then runs on N0 with its memory intact and its name
 * recorded again.  Once through a pipe (dump's stdout read by the test, the
 * "network", and written into restore's stdin once the job has ended and
 * its pids are taken), once as a file copied into B's directory.  Each
 * also fails a restore first (a criu that exits 1) and checks what the
 * failure says is left: the file intact, the stream used up.
 *
 * The job's processes carry CUDACKPT_SIM_GPUS=D0: the simulator, like the
 * driver, then knows the GPU they were checkpointed on whatever node it
 * simulates (it refuses to restore them onto a GPU B lacks).  Skips as
 * integration.criu does. */
#include "criu_run_itest.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cJSON.h>

#define D0 ITEST_GPU0
#define N0 "GPU-11111111-5157-4000-8000-000000000001"
#define N1 "GPU-11111111-5157-4000-8000-000000000002"
/* Bound on the archive (a few MB on the simulator). */
#define ARCHIVE_MAX (256u << 20)

struct move {
        struct citest_ctx x;
        const char *const *env;
        pid_t run, pids[JOB_PROCS], held[JOB_PROCS];
        int ns[JOB_PROCS];
};

static struct itest_daemon_opts node_opts(const char *const *env)
{
        return (struct itest_daemon_opts){
                .config_json = itest_strdupf("{\"nvml\":\"%s\"}", itest_need_env("CUDACKPT_TEST_SIM")),
                .env = env,
        };
}

/* Node A, and the job "mover" running there. */
static void move_setup(struct move *m)
{
        struct itest_daemon_opts o = node_opts(NULL);
        citest_setup_with(&m->x, &o);
        m->env = crun_env(&m->x);
        crun_start_job(&m->x, m->env, "mover", "--no-cgroup", NULL, "CUDACKPT_SIM_GPUS=" D0, &m->run, m->pids,
                       m->ns);
        for (int i = 1; i < JOB_PROCS; i++) {
                citest_assert_state(&m->x, m->pids[i], "running");
                crun_check_memory_ns(&m->x, m->pids[i], m->ns[i], 1);
        }
}

/* The result of a cudackptctl c (cjob_spawn) that wrote its stderr into
 * err: its exit status and what it said. */
static struct citest_run *ctl_result(pid_t c, const char *err)
{
        int st = cjob_wait(c);
        struct citest_run *res = itest_keep(calloc(1, sizeof(*res)));
        ck_assert(res);
        res->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        const char *text = citest_slurp(err);
        snprintf(res->out, sizeof(res->out), "%s", text ? text : "");
        return res;
}

/* fd read to its end (within JOB_TIMEOUT_MS), into *ret_len. */
static char *read_all(int fd, size_t *ret_len)
{
        size_t len = 0, cap = 1u << 20;
        char *buf = malloc(cap); /* kept by the harness once it is whole */
        double deadline = itest_now_ms() + JOB_TIMEOUT_MS;
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        ck_assert(buf);
        for (;;) {
                int left = (int)(deadline - itest_now_ms());
                ck_assert_msg(left > 0 && poll(&pf, 1, left) == 1, "the dump's stream did not end within %d ms",
                              JOB_TIMEOUT_MS);
                if (len == cap) {
                        ck_assert_msg(cap < ARCHIVE_MAX, "the archive is over %u bytes", ARCHIVE_MAX);
                        char *more = realloc(buf, cap *= 2);
                        ck_assert(more);
                        buf = more;
                }
                ssize_t k = read(fd, buf + len, cap - len);
                ck_assert_msg(k >= 0, "read: %s", strerror(errno));
                if (k == 0)
                        break;
                len += (size_t)k;
        }
        *ret_len = len;
        return itest_keep(buf);
}

/* cudackptctl restore ARGS on node B (env) fed data on its stdin (a pipe). */
static struct citest_run *restore_from(const char *const *env, const char *err, const char *data, size_t len,
                                       const char *const *args)
{
        int p[2];
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid_t c = cjob_spawn(env, p[0], -1, err, args);
        close(p[0]);
        /* A restore that gives up early closes its end: EPIPE, not SIGPIPE. */
        void (*old)(int) = signal(SIGPIPE, SIG_IGN);
        for (size_t off = 0; off < len;) {
                ssize_t k = write(p[1], data + off, len - off);
                if (k <= 0)
                        break;
                off += (size_t)k;
        }
        signal(SIGPIPE, old);
        close(p[1]);
        return ctl_result(c, err);
}

/* After the dump: the job and its run command gone; the daemon restarted
 * as node B; every host pid the job had taken by another process. */
static void to_node_b(struct move *m)
{
        static const char *const b_env[] = { "CUDACKPT_SIM_DEVICES=" N0 "," N1, NULL };
        struct itest_daemon_opts o = node_opts(b_env);
        for (int i = 0; i < JOB_PROCS; i++)
                citest_await_gone(m->pids[i], AWAIT_MS);
        int st = cjob_wait(m->run);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGKILL, "run ended with wait status %#x", st);
        itest_daemon_stop(m->x.d);
        itest_daemon_restart(m->x.d, &o);
        m->x.c = itest_client(m->x.d);
        for (int i = 0; i < JOB_PROCS; i++)
                m->held[i] = crun_hold_pid(m->pids[i]);
}

/* node B's environment with a criu that fails every restore. */
static const char *const *failing_env(struct move *m)
{
        const char *criu = cjob_script(&m->x, "criu-fails",
                                       itest_strdupf("[ \"$1\" = restore ] && exit 1\nexec %s \"$@\"", citest_criu_path));
        const char **env = itest_keep(calloc(32, sizeof(char *)));
        size_t n = 0;
        ck_assert(env);
        for (; m->env[n]; n++)
                env[n] = strncmp(m->env[n], "CUDACKPT_CRIU=", 14) == 0 ? itest_strdupf("CUDACKPT_CRIU=%s", criu)
                                                                       : m->env[n];
        env[n] = NULL;
        return env;
}

/* The job back on node B: its name recorded there for the new init, every
 * process with its pid in the namespace, a new host pid, running on N0
 * (not D0), its memory checked a second time; then ended, and the pids'
 * holders too. */
static void check_moved(struct move *m)
{
        pid_t init = crun_init_of(&m->x, "mover", NULL), now[JOB_PROCS + 1];
        ck_assert_int_eq(crun_job_pids(init, now, JOB_PROCS + 1), JOB_PROCS);
        for (int i = 0; i < JOB_PROCS; i++) {
                int v[4], k = 0;
                ck_assert_int_eq(crun_ns_pids(now[i], v, 4), 2);
                while (k < JOB_PROCS && m->ns[k] != v[1])
                        k++;
                ck_assert_msg(k < JOB_PROCS, "restored pid %d is %d in the namespace", (int)now[i], v[1]);
                for (int j = 0; j < JOB_PROCS; j++)
                        ck_assert_int_ne(now[i], m->pids[j]);
                if (k == 0)
                        continue;
                citest_assert_state(&m->x, now[i], "running");
                crun_check_memory_ns(&m->x, now[i], m->ns[k], 2);
        }
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        ck_assert_int_eq(cudackpt_call(m->x.c, CUDACKPT_METHOD_LIST_PROCESSES, NULL, &r), 0);
        ck_assert_msg(!r.error && strstr(r.parameters_json, N0) && !strstr(r.parameters_json, D0),
                      "the job is not on %s: %s", N0, r.parameters_json);
        cudackpt_reply_clear(&r);
        ck_assert_int_eq(kill(init, SIGKILL), 0);
        for (int i = 0; i < JOB_PROCS; i++)
                citest_await_gone(now[i], AWAIT_MS);
        for (int i = 0; i < JOB_PROCS; i++) {
                kill(m->held[i], SIGKILL);
                citest_await_gone(m->held[i], AWAIT_MS);
        }
}

START_TEST(move_through_a_pipe)
{
        struct move m;
        move_setup(&m);
        const char *err = itest_strdupf("%s/ctl.err", m.x.d->dir);
        int p[2];
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        static const char *const dump[] = { "dump", "--run", "mover", "--archive", "-", NULL };
        pid_t c = cjob_spawn(m.env, -1, p[1], err, dump);
        close(p[1]);
        size_t len;
        const char *archive = read_all(p[0], &len);
        close(p[0]);
        struct citest_run *res = ctl_result(c, err);
        cjob_expect_ok(res, "dump --run --archive -");
        /* The summary names the stream, not the private directory. */
        assert_run(strstr(res->out, "dumped 3 CUDA processes in 1 tree to the archive on stdout: ") &&
                           !strstr(res->out, "cudackpt-archive"),
                   res, "dump's summary names another place");
        to_node_b(&m);

        static const char *const restore[] = { "restore", "--archive", "-", NULL };
        res = restore_from(failing_env(&m), err, archive, len, restore);
        assert_run(res->status == 1 && strstr(res->out, "the archive read from stdin is used up") &&
                           !strstr(res->out, "the images are intact"),
                   res, "a failed restore from stdin: exit %d", res->status);
        /* Its checked copy is kept (the same stream is used again here). */
        ck_assert_int_eq(system(itest_strdupf("rm -rf '%s'", cjob_kept_dir(res))), 0);
        /* The same stream again (the test kept a copy): the plan's map, no
         * --device-map. */
        res = restore_from(m.env, err, archive, len, restore);
        cjob_expect_ok(res, "restore --archive - on node B, the job's pids taken");
        check_moved(&m);
}
END_TEST

START_TEST(move_as_a_file)
{
        struct move m;
        move_setup(&m);
        const char *file = itest_strdupf("%s/mover.tar.zst", m.x.d->dir);
        struct citest_run *res = cjob_ctl(m.env, "dump", "--run", "mover", "--archive", file, "--json", NULL);
        cjob_expect_ok(res, "dump --run --archive FILE --json");
        cJSON *o = itest_keep_json(cJSON_Parse(res->out));
        assert_run(o && cJSON_IsTrue(cJSON_GetObjectItem(o, "dumped")) && !cJSON_GetObjectItem(o, "images") &&
                           cJSON_IsString(cJSON_GetObjectItem(o, "archive")) &&
                           strcmp(cJSON_GetObjectItem(o, "archive")->valuestring, file) == 0,
                   res, "dump --json does not name the archive");
        to_node_b(&m);

        /* Copied elsewhere, byte for byte; the dump's file removed. */
        size_t len;
        int fd = open(file, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        const char *data = read_all(fd, &len);
        close(fd);
        ck_assert_int_eq(unlink(file), 0);
        const char *copy = itest_strdupf("%s/elsewhere", m.x.d->dir);
        ck_assert_int_eq(mkdir(copy, 0700), 0);
        copy = itest_strdupf("%s/mover.tar.zst", copy);
        FILE *f = fopen(copy, "we");
        ck_assert(f && fwrite(data, 1, len, f) == len && fclose(f) == 0);

        res = cjob_ctl(failing_env(&m), "restore", "--archive", copy, NULL);
        assert_run(res->status == 1 && strstr(res->out, "the archive file is intact") &&
                           !strstr(res->out, "the images are intact"),
                   res, "a failed restore from a file: exit %d", res->status);
        res = cjob_ctl(m.env, "restore", "--archive", copy, "--json", NULL);
        cjob_expect_ok(res, "restore --archive FILE on node B, the job's pids taken");
        o = itest_keep_json(cJSON_Parse(res->out));
        assert_run(o && cJSON_IsTrue(cJSON_GetObjectItem(o, "restored")) && !cJSON_GetObjectItem(o, "images") &&
                           cJSON_IsString(cJSON_GetObjectItem(o, "archive")) &&
                           strcmp(cJSON_GetObjectItem(o, "archive")->valuestring, copy) == 0,
                   res, "restore --json does not name the archive");
        check_moved(&m);
}
END_TEST

int main(void)
{
        const TTest *tests[] = { move_through_a_pipe, move_as_a_file, NULL };

        return citest_main("criu_move", 4.0 * JOB_TIMEOUT_MS / 1000, tests);
}
