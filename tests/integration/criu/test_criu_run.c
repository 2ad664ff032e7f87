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
 * namespace on fd 3, and answers SIGUSR1 with "ok NSPID N" and whether it
 * sees itself as /proc/NSPID (run gives the job a /proc of its pid
 * namespace, as the CUDA driver needs; the simulator fails a target that
 * has not, as the driver's cuInit does), before the dump and after the
 * restore.
 *
 * Skips as integration.criu does (citest_probe). */
#include "criu_run_itest.h"

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

START_TEST(run_dump_restore_pids_taken)
{
        struct citest_ctx x;
        citest_setup(&x);
        const char *const *env = crun_env(&x);
        pid_t run, pids[JOB_PROCS], held[JOB_PROCS];
        int ns[JOB_PROCS];
        crun_start_job(&x, env, "train", "--no-cgroup", NULL, NULL, &run, pids, ns);
        for (int i = 1; i < JOB_PROCS; i++) {
                /* /proc its pid namespace's first: the driver needs it. */
                crun_check_memory_ns(&x, pids[i], ns[i], 1);
                crun_check_proc_ns(&x, ns[i], 1);
                citest_assert_state(&x, pids[i], "running");
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
                held[i] = crun_hold_pid(pids[i]);
        res = cjob_ctl(env, "restore", "--images", x.img, "--json", NULL);
        cjob_expect_ok(res, "restore --images of a namespace's job, its host pids held");
        cJSON *o = itest_keep_json(cJSON_Parse(res->out));
        ck_assert_msg(o, "restore --json printed: %s", res->out);
        const cJSON *root = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "trees"), 0), "root");
        ck_assert(cJSON_IsNumber(root));
        pid_t now[JOB_PROCS + 1];
        ck_assert_int_eq(crun_job_pids((pid_t)root->valueint, now, JOB_PROCS + 1), JOB_PROCS);
        for (int i = 0; i < JOB_PROCS; i++) {
                int v[4];
                ck_assert_int_eq(crun_ns_pids(now[i], v, 4), 2);
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
                crun_check_memory_ns(&x, now[i], ns[k], 2);
                crun_check_proc_ns(&x, ns[k], 2);
        }
        itest_await_log(x.d, " method=ResumeGroup", AWAIT_MS);
        /* The name came back with the job, for its new init. */
        uint64_t start = 0;
        ck_assert_int_eq(crun_init_of(&x, "train", &start), (pid_t)root->valueint);
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
        const char *const *env = crun_env(&x);
        const char *cg = itest_strdupf("%s/jobs/infer", mnt);
        pid_t run, pids[JOB_PROCS];
        int ns[JOB_PROCS];
        crun_start_job(&x, env, "infer", itest_strdupf("--cgroup-parent=%s/jobs", mnt), NULL, NULL, &run, pids, ns);
        ck_assert_msg(in_cgroup(cg, pids, JOB_PROCS), "the job is not in %s", cg);
        ck_assert_msg(strstr(citest_slurp(itest_strdupf("%s/runs/infer", x.d->dir)), cg), "the record has no cgroup");

        cjob_expect_ok(cjob_ctl(env, "dump", "--run", "infer", "--images", x.img, NULL), "dump --run (cgroup)");
        int st = cjob_wait(run);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGKILL, "run ended with wait status %#x", st);
        ck_assert_int_ne(access(cg, F_OK), 0);

        struct citest_run *res = cjob_ctl(env, "restore", "--images", x.img, "--json", NULL);
        cjob_expect_ok(res, "restore --images (cgroup)");
        pid_t init = crun_init_of(&x, "infer", NULL), now[JOB_PROCS + 1];
        ck_assert_int_eq(crun_job_pids(init, now, JOB_PROCS + 1), JOB_PROCS);
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
 * capability, its output in its --output log (the user's, 0600), and
 * comes back as it after a dump and restore, writing to that log (CRIU, as
 * root, restores the credentials; where root lacks CAP_SYS_RESOURCE, as
 * in some containers, criu cannot dump another uid's process at all, and
 * that part is skipped, said on stderr). */
START_TEST(run_user_dump_restore)
{
        struct citest_ctx x;
        citest_setup(&x);
        const char *const *env = crun_env(&x);
        pid_t run, pids[JOB_PROCS], now[JOB_PROCS + 1];
        int ns[JOB_PROCS];
        /* The targets write their reports as that user. */
        int fd = open(x.result, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(fchmod(fd, 0666), 0);
        close(fd);
        crun_start_job(&x, env, "user", "--no-cgroup", "--user=65534:65534", NULL, &run, pids, ns);
        /* The init stays root (CRIU has it mount its namespace's /proc). */
        ck_assert(strstr(citest_slurp(itest_strdupf("/proc/%d/status", (int)pids[0])), "\nUid:\t0\t0\t0\t0\n"));
        for (int i = 1; i < JOB_PROCS; i++)
                ck_assert_msg(runs_as(pids[i], 65534), "pid %d does not run as 65534 without capabilities",
                              (int)pids[i]);
        crun_check_memory_ns(&x, pids[1], ns[1], 1);
        struct stat st;
        ck_assert_int_eq(stat(crun_log(&x, "user"), &st), 0);
        ck_assert(st.st_uid == 65534 && (st.st_mode & 07777) == 0600);
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
        pid_t init = crun_init_of(&x, "user", NULL);
        ck_assert_int_eq(crun_job_pids(init, now, JOB_PROCS + 1), JOB_PROCS);
        for (int i = 1; i < JOB_PROCS; i++)
                ck_assert_msg(runs_as(now[i], 65534), "restored pid %d does not run as 65534", (int)now[i]);
        crun_check_memory_ns(&x, now[1], ns[1], 2);
        /* Its output, the log run --output gave it, reopened by CRIU. */
        const char *log = crun_log(&x, "user");
        ck_assert_msg(strstr(citest_slurp(log), itest_strdupf("\nok %d 2\n", ns[1])), "no check 2 in %s", log);
        ck_assert_int_eq(kill(init, SIGKILL), 0);
        for (int i = 0; i < JOB_PROCS; i++)
                citest_await_gone(now[i], AWAIT_MS);
}
END_TEST

START_TEST(run_init_forwards_signals)
{
        struct citest_ctx x;
        citest_setup(&x);
        const char *const *env = crun_env(&x);
        const char *mark = itest_strdupf("%s/got-term", x.d->dir);
        const char *script = itest_strdupf("trap 'echo term > %s; exit 7' TERM; echo up > %s.up; "
                                           "while :; do sleep 0.05; done", mark, mark);
        const char *const args[] = { "--name", "sig", "--no-cgroup", "--", "/bin/sh", "-c", script, NULL };
        pid_t run = crun_start(env, itest_strdupf("%s/run-sig.out", x.d->dir), -1, args);
        uint64_t start = 0;
        pid_t init = crun_init_of(&x, "sig", &start);
        const char *up = itest_strdupf("%s.up", mark);
        double deadline = itest_now_ms() + AWAIT_MS;
        while (access(up, F_OK) != 0) {
                ck_assert_msg(itest_now_ms() < deadline, "the job did not start within %d ms", AWAIT_MS);
                poll(NULL, 0, 5);
        }
        /* The init is pid 1 of its namespace. */
        int v[4];
        ck_assert_int_eq(crun_ns_pids(init, v, 4), 2);
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
        const char *const *env = crun_env(&x);

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
        pid_t run = crun_start(env, itest_strdupf("%s/run-busy.out", x.d->dir), -1, args);
        pid_t init = crun_init_of(&x, "busy", NULL);
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
        const TTest *tests[] = { run_dump_restore_pids_taken, run_cgroup_dump_restore, run_user_dump_restore,
                run_init_forwards_signals, run_names_refused, NULL };

        return citest_main("criu_run", 6.0 * JOB_TIMEOUT_MS / 1000, tests);
}
