/* test_criu_run.c: cudackptctl run, a job in a pid namespace of its own
 * (our init as its pid 1), dumped with dump --run NAME and restored with
 * restore --images while every one of its original host pids is held by
 * another process; its init forwarding signals; names refused (unknown,
 * stale: the pid another process's); the real CRIU and the real daemon on
 * the simulator, as test_criu_job.c.
 *
 * The job is criu_target tree (three simulated CUDA processes) started by
 * `cudackptctl run -- env CUDACKPT_SIM=1 ... criu_target tree 1 ...`: it
 * watches pid 1 of its namespace (our init), reports its pids inside the
 * namespace on fd 3, and answers SIGUSR1 with "ok NSPID N".
 *
 * Skips as integration.criu does (citest_probe). */
#include "criu_job_itest.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define JOB_PROCS 4 /* the init and three targets */

/* cudackptctl's environment for x with the names kept in x's directory. */
static const char *const *run_env(struct citest_ctx *x)
{
        const char *const *base = cjob_env(x, NULL);
        const char **env = itest_keep(calloc(32, sizeof(char *)));
        size_t n = 0;
        ck_assert(env);
        for (; base[n]; n++)
                env[n] = base[n];
        env[n++] = itest_strdupf("CUDACKPT_RUN_DIR=%s/runs", x->d->dir);
        env[n] = NULL;
        return env;
}

/* `cudackptctl run ARGS` started with env, fd 3 the write end of pipe_w,
 * its output into out; its pid. */
static pid_t run_start(const char *const *env, const char *out, int pipe_w, const char *const *args)
{
        const char *argv[24];
        size_t n = 0;
        argv[n++] = citest_need_env("CUDACKPT_TEST_CTL");
        argv[n++] = "run";
        for (; args[n - 2] && n < 23; n++)
                argv[n] = args[n - 2];
        argv[n] = NULL;
        pid_t c = fork();
        ck_assert_int_ge(c, 0);
        if (c == 0) {
                int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
                int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                if (setsid() < 0 || devnull < 0 || fd < 0 || dup2(devnull, 0) < 0 || dup2(fd, 1) < 0 ||
                    dup2(fd, 2) < 0 || chdir("/") < 0 || (pipe_w >= 0 && dup2(pipe_w, 3) < 0))
                        _exit(127);
                close_range(pipe_w >= 0 ? 4 : 3, ~0u, 0);
                execve(argv[0], (char *const *)argv, (char *const *)env);
                _exit(127);
        }
        return c;
}

/* Every init this test saw (a pidfd), ended when it exits (a failed
 * check too): a job's processes watch its init, not the test. */
static int seen_inits[16];
static size_t n_seen_inits;

static void end_inits(void)
{
        for (size_t i = 0; i < n_seen_inits; i++)
                syscall(SYS_pidfd_send_signal, seen_inits[i], SIGKILL, NULL, 0);
}

static void note_init(pid_t pid)
{
        int fd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (n_seen_inits == 0)
                atexit(end_inits);
        if (fd >= 0 && n_seen_inits < sizeof(seen_inits) / sizeof(seen_inits[0]))
                seen_inits[n_seen_inits++] = fd;
        else if (fd >= 0)
                close(fd);
}

/* The job's init as its name's record says (pid and start time). */
static pid_t run_init_of(struct citest_ctx *x, const char *name, uint64_t *ret_start)
{
        const char *path = itest_strdupf("%s/runs/%s", x->d->dir, name);
        double deadline = itest_now_ms() + AWAIT_MS;
        char *text;
        while (!(text = citest_slurp(path))) {
                ck_assert_msg(itest_now_ms() < deadline, "no record %s within %d ms", path, AWAIT_MS);
                poll(NULL, 0, 5);
        }
        cJSON *o = itest_keep_json(cJSON_Parse(text));
        ck_assert_msg(o, "the record is not JSON: %s", text);
        const cJSON *pid = cJSON_GetObjectItem(o, "init_pid"), *st = cJSON_GetObjectItem(o, "init_start_time");
        ck_assert(cJSON_IsNumber(pid) && cJSON_IsNumber(st));
        if (ret_start)
                *ret_start = (uint64_t)st->valuedouble;
        note_init((pid_t)pid->valueint);
        return (pid_t)pid->valueint;
}

/* pid's pids from our namespace down (NSpid); how many. */
static int ns_pids(pid_t pid, int *v, int max)
{
        char *text = citest_slurp(itest_strdupf("/proc/%d/status", (int)pid));
        ck_assert_msg(text, "pid %d is gone", (int)pid);
        char *p = strstr(text, "\nNSpid:");
        ck_assert(p);
        p += 7;
        int n = 0;
        for (char *end; n < max; p = end) {
                long x = strtol(p, &end, 10);
                if (end == p)
                        break;
                v[n++] = (int)x;
        }
        return n;
}

/* The host pids of init and every descendant (init first), by parent. */
static size_t job_pids(pid_t init, pid_t *out, size_t max)
{
        size_t n = 0;
        out[n++] = init;
        for (size_t i = 0; i < n; i++) {
                char *text = citest_slurp(itest_strdupf("/proc/%d/task/%d/children", (int)out[i], (int)out[i]));
                for (char *p = text, *end; p && n < max; p = end) {
                        long x = strtol(p, &end, 10);
                        if (end == p)
                                break;
                        out[n++] = (pid_t)x;
                }
        }
        return n;
}

/* The target whose pid in the namespace is ns: SIGUSR1 to host, and its
 * "ok NS N" awaited. */
static void check_memory_ns(struct citest_ctx *x, pid_t host, int ns, unsigned long n)
{
        ck_assert_int_eq(kill(host, SIGUSR1), 0);
        const char *want = itest_strdupf("ok %d %lu", ns, n);
        double deadline = itest_now_ms() + AWAIT_MS;
        for (;;) {
                char *text = citest_slurp_raw(x->result);
                bool found = text && citest_has_line(text, want);
                free(text);
                if (found)
                        return;
                ck_assert_msg(itest_now_ms() < deadline, "no \"%s\" in %s within %d ms", want, x->result,
                              AWAIT_MS);
                poll(NULL, 0, 5);
        }
}

/* A process that holds pid (clone3 with set_tid) and waits to be killed. */
static pid_t hold_pid(pid_t pid)
{
        struct clone_args ca = { .exit_signal = SIGCHLD, .set_tid = (uint64_t)(uintptr_t)&pid, .set_tid_size = 1 };
        long c = syscall(SYS_clone3, &ca, sizeof(ca));
        ck_assert_msg(c >= 0, "clone3 with pid %d: %s", (int)pid, strerror(errno));
        if (c == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                for (;;)
                        pause();
        }
        ck_assert_int_eq(c, pid);
        return (pid_t)c;
}

/* Starts the job NAME (criu_target tree) with cgroup (run's --no-cgroup
 * or --cgroup-parent=DIR) and user (--user=..., or NULL: root, the target
 * and the simulator run from the build tree); its run command in *ret_run,
 * the host pids (init first) in pids, each one's pid in the namespace in
 * ns. */
static void start_job(struct citest_ctx *x, const char *const *env, const char *name, const char *cgroup,
                      const char *user, pid_t *ret_run, pid_t *pids, int *ns)
{
        int p[2];
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        /* Copies another uid may run: the build tree may be closed to it. */
        const char *target = citest_need_env("CUDACKPT_TEST_CRIU_TARGET"), *sim = citest_need_env("CUDACKPT_TEST_SIM");
        if (user) {
                target = itest_stage_exe(x->d, target, NULL);
                sim = itest_stage_exe(x->d, sim, NULL);
        }
        const char *const args[] = { "--name", name, cgroup, user ? user : cgroup, "--", "/usr/bin/env",
                                     "CUDACKPT_SIM=1", SIM_STATE_SLOT, target, "tree", "1", x->result, TARGET_MIB,
                                     sim, NULL };
        *ret_run = run_start(env, itest_strdupf("%s/run-%s.out", x->d->dir, name), p[1], args);
        close(p[1]);
        /* Every target writes its pid and closes fd 3 (which the run
         * command holds too: three lines, not EOF). */
        char buf[128];
        size_t len = 0, lines = 0;
        struct pollfd pf = { .fd = p[0], .events = POLLIN };
        for (ssize_t k = 1; k > 0 && lines < JOB_PROCS - 1 && len < sizeof(buf) - 1;) {
                ck_assert_msg(poll(&pf, 1, AWAIT_MS) == 1, "the job did not report ready within %d ms", AWAIT_MS);
                k = read(p[0], buf + len, sizeof(buf) - 1 - len);
                for (ssize_t i = 0; i < k; i++)
                        lines += buf[len + (size_t)i] == '\n';
                len += k > 0 ? (size_t)k : 0;
        }
        close(p[0]);
        buf[len] = '\0';
        pid_t init = run_init_of(x, name, NULL);
        ck_assert_int_eq(job_pids(init, pids, JOB_PROCS + 1), JOB_PROCS);
        for (int i = 0; i < JOB_PROCS; i++) {
                int v[4];
                ck_assert_int_eq(ns_pids(pids[i], v, 4), 2);
                ns[i] = v[1];
                /* Each target's own report names it as the namespace knows it. */
                ck_assert_msg(i == 0 ? ns[i] == 1 : strstr(buf, itest_strdupf("%d\n", ns[i])) != NULL,
                              "pid %d is %d in the namespace; the job said \"%s\"", (int)pids[i], ns[i], buf);
        }
}

START_TEST(run_dump_restore_pids_taken)
{
        struct citest_ctx x;
        citest_setup(&x);
        const char *const *env = run_env(&x);
        pid_t run, pids[JOB_PROCS], held[JOB_PROCS];
        int ns[JOB_PROCS];
        start_job(&x, env, "train", "--no-cgroup", NULL, &run, pids, ns);
        for (int i = 1; i < JOB_PROCS; i++) {
                citest_assert_state(&x, pids[i], "running");
                check_memory_ns(&x, pids[i], ns[i], 1);
        }

        struct citest_run *res = cjob_ctl(env, "dump", "--run", "train", "--images", x.img, NULL);
        cjob_expect_ok(res, "dump --run");
        assert_run(strstr(res->out, "dumped 3 CUDA processes in 1 tree"), res, "dump said something else");
        for (int i = 0; i < JOB_PROCS; i++)
                citest_await_gone(pids[i], AWAIT_MS);
        /* The run command ends with its init, SIGKILLed by the dump. */
        int st = cjob_wait(run);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGKILL, "run ended with wait status %#x", st);
        cJSON *m = itest_keep_json(cJSON_Parse(citest_slurp(itest_strdupf("%s/manifest.json", x.img))));
        ck_assert(m);
        ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(m, "trees"), 0),
                                                   "pid_namespace")));

        /* Every host pid the job had is another process's now. */
        for (int i = 0; i < JOB_PROCS; i++)
                held[i] = hold_pid(pids[i]);
        res = cjob_ctl(env, "restore", "--images", x.img, "--json", NULL);
        cjob_expect_ok(res, "restore --images of a namespace's job, its host pids held");
        cJSON *o = itest_keep_json(cJSON_Parse(res->out));
        ck_assert_msg(o, "restore --json printed: %s", res->out);
        const cJSON *root = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "trees"), 0), "root");
        ck_assert(cJSON_IsNumber(root));
        pid_t now[JOB_PROCS + 1];
        ck_assert_int_eq(job_pids((pid_t)root->valueint, now, JOB_PROCS + 1), JOB_PROCS);
        for (int i = 0; i < JOB_PROCS; i++) {
                int v[4];
                ck_assert_int_eq(ns_pids(now[i], v, 4), 2);
                ck_assert_int_ne(now[i], pids[i]);
                /* Each process back with its pid in the namespace, running, memory intact. */
                int k = 0;
                while (k < JOB_PROCS && ns[k] != v[1])
                        k++;
                ck_assert_msg(k < JOB_PROCS, "restored pid %d is %d in the namespace, not one of the job's",
                              (int)now[i], v[1]);
                if (k == 0)
                        continue;
                citest_assert_state(&x, now[i], "running");
                cjob_assert_no_audit(&x, "Restore", now[i]);
                check_memory_ns(&x, now[i], ns[k], 2);
        }
        itest_await_log(x.d, " method=ResumeGroup", AWAIT_MS);
        /* The name came back with the job, for its new init. */
        uint64_t start = 0;
        ck_assert_int_eq(run_init_of(&x, "train", &start), (pid_t)root->valueint);
        ck_assert_uint_eq(start, itest_start_time((pid_t)root->valueint));
        ck_assert_int_eq(kill((pid_t)root->valueint, SIGKILL), 0);
        citest_await_gone((pid_t)root->valueint, AWAIT_MS);
        for (int i = 0; i < JOB_PROCS; i++) {
                kill(held[i], SIGKILL);
                citest_await_gone(held[i], AWAIT_MS);
        }
}
END_TEST

/* The processes in cgroup dir (its cgroup.procs): whether each of pids is. */
static bool in_cgroup(const char *dir, const pid_t *pids, int n)
{
        char *text = citest_slurp(itest_strdupf("%s/cgroup.procs", dir));
        for (int i = 0; text && i < n; i++) {
                const char *line = itest_strdupf("%d", (int)pids[i]);
                if (!citest_has_line(text, line))
                        return false;
        }
        return text != NULL;
}

/* With a cgroup v2 hierarchy (mounted here: this machine may have none at
 * /sys/fs/cgroup): the job in DIR/NAME, dumped, the cgroup gone with the
 * run command, and the restored job back in it. */
START_TEST(run_cgroup_dump_restore)
{
        struct citest_ctx x;
        citest_setup(&x);
        char *mnt = itest_strdupf("%s/cg2", x.d->dir);
        ck_assert_int_eq(mkdir(mnt, 0755), 0);
        if (mount("none", mnt, "cgroup2", 0, NULL) < 0) {
                itest_skip("cannot mount cgroup2: %s", strerror(errno));
                return;
        }
        const char *const *env = run_env(&x);
        const char *cg = itest_strdupf("%s/jobs/infer", mnt);
        pid_t run, pids[JOB_PROCS];
        int ns[JOB_PROCS];
        start_job(&x, env, "infer", itest_strdupf("--cgroup-parent=%s/jobs", mnt), NULL, &run, pids, ns);
        ck_assert_msg(in_cgroup(cg, pids, JOB_PROCS), "the job is not in %s", cg);
        ck_assert_msg(strstr(citest_slurp(itest_strdupf("%s/runs/infer", x.d->dir)), cg), "the record has no cgroup");

        cjob_expect_ok(cjob_ctl(env, "dump", "--run", "infer", "--images", x.img, NULL), "dump --run (cgroup)");
        int st = cjob_wait(run);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGKILL, "run ended with wait status %#x", st);
        ck_assert_int_ne(access(cg, F_OK), 0);

        struct citest_run *res = cjob_ctl(env, "restore", "--images", x.img, "--json", NULL);
        cjob_expect_ok(res, "restore --images (cgroup)");
        pid_t init = run_init_of(&x, "infer", NULL), now[JOB_PROCS + 1];
        ck_assert_int_eq(job_pids(init, now, JOB_PROCS + 1), JOB_PROCS);
        ck_assert_msg(in_cgroup(cg, now, JOB_PROCS), "the restored job is not in %s", cg);
        for (int i = 1; i < JOB_PROCS; i++)
                citest_assert_state(&x, now[i], "running");
        ck_assert_int_eq(kill(init, SIGKILL), 0);
        for (int i = 0; i < JOB_PROCS; i++)
                citest_await_gone(now[i], AWAIT_MS);
        /* Empty now: CRIU made it, nobody else removes it. */
        rmdir(cg);
        rmdir(itest_strdupf("%s/jobs", mnt));
        umount2(mnt, MNT_DETACH);
}
END_TEST

/* Whether pid's real and effective uid are uid and it has no capability. */
static bool runs_as(pid_t pid, uid_t uid)
{
        char *text = citest_slurp(itest_strdupf("/proc/%d/status", (int)pid));
        const char *want = itest_strdupf("\nUid:\t%u\t%u\t%u\t%u\n", uid, uid, uid, uid);
        return text && strstr(text, want) && strstr(text, "\nCapEff:\t0000000000000000\n");
}

/* run --user: the job (its init aside) runs as that user with no
 * capability, and comes back as it after a dump and restore (CRIU, as
 * root, restores the credentials; where root lacks CAP_SYS_RESOURCE, as
 * in some containers, criu cannot dump another uid's process at all, and
 * that part is skipped, said on stderr). */
START_TEST(run_user_dump_restore)
{
        struct citest_ctx x;
        citest_setup(&x);
        const char *const *env = run_env(&x);
        pid_t run, pids[JOB_PROCS], now[JOB_PROCS + 1];
        int ns[JOB_PROCS];
        /* The targets write their reports as that user. */
        int fd = open(x.result, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(fchmod(fd, 0666), 0);
        close(fd);
        start_job(&x, env, "user", "--no-cgroup", "--user=65534:65534", &run, pids, ns);
        /* The init stays root (CRIU has it mount its namespace's /proc). */
        ck_assert(strstr(citest_slurp(itest_strdupf("/proc/%d/status", (int)pids[0])), "\nUid:\t0\t0\t0\t0\n"));
        for (int i = 1; i < JOB_PROCS; i++)
                ck_assert_msg(runs_as(pids[i], 65534), "pid %d does not run as 65534 without capabilities",
                              (int)pids[i]);
        check_memory_ns(&x, pids[1], ns[1], 1);
        /* criu reads every task's rlimits (prlimit), which for another
         * uid's takes CAP_SYS_RESOURCE: a container may not grant it. */
        char *status = citest_slurp("/proc/self/status"), *eff = status ? strstr(status, "\nCapEff:\t") : NULL;
        if (!eff || !(strtoull(eff + 9, NULL, 16) & (1ull << 24))) {
                fprintf(stderr, "%s: dump and restore part skipped: no CAP_SYS_RESOURCE here (criu cannot read "
                        "another uid's rlimits)\n", tcase_name());
                ck_assert_int_eq(kill(pids[0], SIGKILL), 0);
                cjob_wait(run);
                return;
        }
        cjob_expect_ok(cjob_ctl(env, "dump", "--run", "user", "--images", x.img, NULL), "dump --run (--user)");
        cjob_wait(run);
        cjob_expect_ok(cjob_ctl(env, "restore", "--images", x.img, NULL), "restore --images (--user)");
        pid_t init = run_init_of(&x, "user", NULL);
        ck_assert_int_eq(job_pids(init, now, JOB_PROCS + 1), JOB_PROCS);
        for (int i = 1; i < JOB_PROCS; i++)
                ck_assert_msg(runs_as(now[i], 65534), "restored pid %d does not run as 65534", (int)now[i]);
        check_memory_ns(&x, now[1], ns[1], 2);
        ck_assert_int_eq(kill(init, SIGKILL), 0);
        for (int i = 0; i < JOB_PROCS; i++)
                citest_await_gone(now[i], AWAIT_MS);
}
END_TEST

START_TEST(run_init_forwards_signals)
{
        struct citest_ctx x;
        citest_setup(&x);
        const char *const *env = run_env(&x);
        const char *mark = itest_strdupf("%s/got-term", x.d->dir);
        const char *script = itest_strdupf("trap 'echo term > %s; exit 7' TERM; echo up > %s.up; "
                                           "while :; do sleep 0.05; done", mark, mark);
        const char *const args[] = { "--name", "sig", "--no-cgroup", "--", "/bin/sh", "-c", script, NULL };
        pid_t run = run_start(env, itest_strdupf("%s/run-sig.out", x.d->dir), -1, args);
        uint64_t start = 0;
        pid_t init = run_init_of(&x, "sig", &start);
        const char *up = itest_strdupf("%s.up", mark);
        double deadline = itest_now_ms() + AWAIT_MS;
        while (access(up, F_OK) != 0) {
                ck_assert_msg(itest_now_ms() < deadline, "the job did not start within %d ms", AWAIT_MS);
                poll(NULL, 0, 5);
        }
        /* The init is pid 1 of its namespace. */
        int v[4];
        ck_assert_int_eq(ns_pids(init, v, 4), 2);
        ck_assert_int_eq(v[1], 1);
        ck_assert_int_eq(kill(init, SIGTERM), 0);
        int st = cjob_wait(run);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 7, "run ended with wait status %#x, not the job's 7", st);
        ck_assert_str_eq(citest_slurp(mark), "term\n");
        /* The name went with the job. */
        ck_assert_int_ne(access(itest_strdupf("%s/runs/sig", x.d->dir), F_OK), 0);
}
END_TEST

START_TEST(run_names_refused)
{
        struct citest_ctx x;
        citest_setup(&x);
        const char *const *env = run_env(&x);

        struct citest_run *res = cjob_ctl(env, "dump", "--run", "nosuch", "--images", x.img, NULL);
        assert_run(res->status == 1 && strstr(res->out, "no job named nosuch") && strstr(res->out, "nothing was "
                   "suspended"), res, "dump --run of an unknown name: %d", res->status);
        res = cjob_ctl(env, "dump", "--run", "../etc", "--images", x.img, NULL);
        assert_run(res->status == 1 && strstr(res->out, "not a job name"), res, "dump --run ../etc: %d",
                   res->status);

        /* A record whose init pid is now another process's (its start time differs). */
        const char *dir = itest_strdupf("%s/runs", x.d->dir);
        ck_assert_int_eq(mkdir(dir, 0700), 0);
        FILE *f = fopen(itest_strdupf("%s/old", dir), "we");
        ck_assert(f);
        fprintf(f, "{\"name\":\"old\",\"uid\":0,\"gid\":0,\"init_pid\":%d,\"init_start_time\":%llu,\"cgroup\":\"\"}",
                (int)getpid(), (unsigned long long)itest_start_time(getpid()) + 1);
        ck_assert_int_eq(fclose(f), 0);
        res = cjob_ctl(env, "dump", "--run", "old", "--images", x.img, NULL);
        assert_run(res->status == 1 && strstr(res->out, "job old has ended"), res, "dump --run of a stale name: %d",
                   res->status);
        ck_assert_msg(!strstr(citest_slurp(itest_strdupf("%s/daemon.log", x.d->dir)), "method=SuspendGroup"),
                      "a job was suspended for a name that names none");

        /* A name a running job holds. */
        const char *const args[] = { "--name", "busy", "--no-cgroup", "--", "/bin/sleep", "60", NULL };
        pid_t run = run_start(env, itest_strdupf("%s/run-busy.out", x.d->dir), -1, args);
        pid_t init = run_init_of(&x, "busy", NULL);
        res = cjob_ctl(env, "run", "--name", "busy", "--no-cgroup", "--", "/bin/true", NULL);
        assert_run(res->status == 125 && strstr(res->out, "is a running job's"), res, "run of a taken name: %d",
                   res->status);
        res = cjob_ctl(env, "run", "--list", "--json", NULL);
        assert_run(res->status == 0 && strstr(res->out, "\"name\":\"busy\"") && !strstr(res->out, "\"old\""), res,
                   "run --list: %d", res->status);
        kill(init, SIGTERM); /* forwarded to sleep, which ends */
        int st = cjob_wait(run);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGTERM, "run ended with wait status %#x", st);
}
END_TEST

int main(void)
{
        int skip = citest_probe("integration.criu_run");
        if (skip)
                return skip;
        Suite *s = suite_create("integration.criu_run");
        TCase *tc = itest_tcase(s, "criu_run", 6.0 * JOB_TIMEOUT_MS / 1000);
        tcase_add_test(tc, run_dump_restore_pids_taken);
        tcase_add_test(tc, run_cgroup_dump_restore);
        tcase_add_test(tc, run_user_dump_restore);
        tcase_add_test(tc, run_init_forwards_signals);
        tcase_add_test(tc, run_names_refused);
        return itest_main(s);
}
