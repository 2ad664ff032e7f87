/* test_criu_plan.c: restore --images' device plan, with the real CRIU and
 * the real daemon on the simulator: a job dumped on one node's GPUs is
 * restored on a "node" whose GPUs have other UUIDs (the daemon restarted
 * with another simulated machine), with no --device-map: the plan maps
 * them and the job runs on with its memory.  Refused, with nothing
 * touched (no criu run, the job's pids still free): another model, too
 * little free GPU memory, an older driver.  --dry-run touches nothing and
 * says the plan (human and --json); the time the plan takes is printed.
 *
 * The job's processes carry CUDACKPT_SIM_GPUS=the dump's GPU, so that the
 * simulator (like the driver) knows which GPU they were checkpointed on
 * whatever machine it simulates.  Skips as integration.criu does. */
#include "criu_job_itest.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The dump's node: GPUs D0, D1 (the simulator's defaults); this node: N0, N1. */
#define D0 ITEST_GPU0
#define D1 ITEST_GPU1
#define N0 "GPU-11111111-5157-4000-8000-000000000001"
#define N1 "GPU-11111111-5157-4000-8000-000000000002"
#define MARGIN_MIB 16
/* Three processes of 64 MiB (the simulator's default) on D0, and the
 * margin each: 240 MiB. */
#define JOB_GPU_MIB (3 * (64 + MARGIN_MIB))

static struct itest_daemon_opts node_opts(const char *const *env)
{
        return (struct itest_daemon_opts){
                .config_json = itest_strdupf("{\"nvml\":\"%s\",\"restore_gpu_margin_mib\":%d}",
                                             itest_need_env("CUDACKPT_TEST_SIM"), MARGIN_MIB),
                .env = env,
        };
}

/* A tree of three processes on D0 dumped into x->img; its pids. */
static const char *const *dump_job(struct citest_ctx *x, pid_t *pids, uint64_t *start)
{
        static const char *const denv[] = { "CUDACKPT_SIM_DEVICE_COUNT=2", NULL };
        struct itest_daemon_opts o = node_opts(denv);
        citest_setup_with(x, &o);
        const char *const *env = cjob_env(x, NULL);
        ck_assert_int_eq(citest_start_target_env(x, "tree", "CUDACKPT_SIM_GPUS=" D0, pids, 3), 3);
        cjob_start_times(pids, start, 3);
        struct citest_run *res = cjob_ctl(env, "dump", "--tree", itest_strdupf("%d", (int)pids[0]), "--images",
                                          x->img, NULL);
        cjob_expect_ok(res, "dump --tree");
        cjob_check_dumped(x, x->img, pids, 3, 1);
        const char *manifest = citest_slurp(itest_strdupf("%s/manifest.json", x->img));
        ck_assert_msg(manifest && strstr(manifest, "\"devices\"") && strstr(manifest, "\"gpu_memory\"") &&
                              strstr(manifest, "\"NVIDIA H200\"") && strstr(manifest, "\"580.95.05\""),
                      "the manifest has no device records: %s", manifest ? manifest : "(none)");
        return env;
}

/* The daemon restarted as another node: GPUs N0, N1 and env (NULL-terminated). */
static void move_to_node(struct citest_ctx *x, const char *const *extra)
{
        static const char *env[8];
        size_t n = 0;
        env[n++] = "CUDACKPT_SIM_DEVICES=" N0 "," N1;
        for (size_t i = 0; extra && extra[i] && n < 7; i++)
                env[n++] = extra[i];
        env[n] = NULL;
        struct itest_daemon_opts o = node_opts(env);
        itest_daemon_stop(x->d);
        itest_daemon_restart(x->d, &o);
        x->c = itest_client(x->d);
}

/* No criu ran (no restore.log in the tree's directory), no pid of the job
 * is taken. */
static void assert_untouched(struct citest_ctx *x, const pid_t *pids, const struct citest_run *res)
{
        struct stat st;
        const char *log = itest_strdupf("%s/tree-%d/restore.log", x->img, (int)pids[0]);
        assert_run(stat(log, &st) < 0 && errno == ENOENT, res, "criu ran: %s is there", log);
        for (int i = 0; i < 3; i++)
                assert_run(kill(pids[i], 0) < 0 && errno == ESRCH, res, "pid %d was restored", (int)pids[i]);
}

START_TEST(plan_moves_job)
{
        struct citest_ctx x;
        pid_t pids[3];
        uint64_t start[3];
        const char *const *env = dump_job(&x, pids, start);
        move_to_node(&x, NULL);

        struct citest_run *res = cjob_ctl(env, "restore", "--images", x.img, "--dry-run", NULL);
        cjob_expect_ok(res, "restore --dry-run");
        assert_run(strstr(res->out, D0) && strstr(res->out, "-> " N0) && strstr(res->out, "chosen") &&
                           strstr(res->out, "plan: fits") && strstr(res->out, "nothing was touched"),
                   res, "--dry-run said another plan");
        assert_untouched(&x, pids, res);
        res = cjob_ctl(env, "restore", "--images", x.img, "--dry-run", "--json", NULL);
        cjob_expect_ok(res, "restore --dry-run --json");
        assert_run(strstr(res->out, "\"verdict\":\"fits\"") && strstr(res->out, "\"to\":\"" N0 "\"") &&
                           strstr(res->out, "\"memory_check\":\"ok\""),
                   res, "--dry-run --json said another plan");
        const char *ms = strstr(res->out, "\"plan_ms\":");
        fprintf(stderr, "plan_moves_job: the device plan took %.3f ms\n", ms ? atof(ms + 10) : -1.0);
        assert_untouched(&x, pids, res);

        /* No map: the plan's. */
        res = cjob_ctl(env, "restore", "--images", x.img, NULL);
        cjob_expect_ok(res, "restore onto other GPUs");
        cjob_check_job_restored(&x, pids, start, 3, 1);
        cudackpt_reply r;
        cudackpt_reply_init(&r);
        ck_assert_int_eq(cudackpt_call(x.c, CUDACKPT_METHOD_LIST_PROCESSES, NULL, &r), 0);
        ck_assert_msg(!r.error && strstr(r.parameters_json, N0) && !strstr(r.parameters_json, D0),
                      "the job is not on %s: %s", N0, r.parameters_json);
        cudackpt_reply_clear(&r);
        citest_kill_all(pids, 3);
}
END_TEST

START_TEST(plan_refusals_touch_nothing)
{
        static const char *const model[] = { "CUDACKPT_SIM_GPU_NAMES=NVIDIA A100-SXM4-80GB", NULL };
        static const char *const driver[] = { "CUDACKPT_SIM_NVML_DRIVER_VERSION=570.172.08", NULL };
        const char *small[] = { itest_strdupf("CUDACKPT_SIM_GPU_MEM_MIB=%d", JOB_GPU_MIB - 1), NULL };
        struct citest_ctx x;
        pid_t pids[3];
        uint64_t start[3];
        const char *const *env = dump_job(&x, pids, start);

        move_to_node(&x, model);
        struct citest_run *res = cjob_ctl(env, "restore", "--images", x.img, NULL);
        assert_run(res->status == 28 && strstr(res->out, "of model NVIDIA H200") &&
                           strstr(res->out, "nothing was restored"),
                   res, "another model: exit %d", res->status);
        assert_untouched(&x, pids, res);

        move_to_node(&x, small);
        res = cjob_ctl(env, "restore", "--images", x.img, NULL);
        assert_run(res->status == 26 && strstr(res->out, itest_strdupf("%.1f MiB", (double)JOB_GPU_MIB)),
                   res, "too little memory: exit %d", res->status);
        assert_untouched(&x, pids, res);
        /* --dry-run says the same, and exits as the restore would. */
        res = cjob_ctl(env, "restore", "--images", x.img, "--dry-run", NULL);
        assert_run(res->status == 26 && strstr(res->out, "plan: no-memory"), res, "dry-run: exit %d", res->status);
        assert_untouched(&x, pids, res);

        move_to_node(&x, driver);
        res = cjob_ctl(env, "restore", "--images", x.img, NULL);
        assert_run(res->status == 28 && strstr(res->out, "570.172.08 is older than the dump's 580.95.05"), res,
                   "an older driver: exit %d", res->status);
        assert_untouched(&x, pids, res);

        /* The same node with room: the job comes back. */
        move_to_node(&x, NULL);
        res = cjob_ctl(env, "restore", "--images", x.img, NULL);
        cjob_expect_ok(res, "restore after the refusals");
        cjob_check_job_restored(&x, pids, start, 3, 1);
        citest_kill_all(pids, 3);
}
END_TEST

int main(void)
{
        const TTest *tests[] = { plan_moves_job, plan_refusals_touch_nothing, NULL };

        /* Up to six cudackptctl runs, each bounded by JOB_TIMEOUT_MS. */
        return citest_main("criu_plan", 6.0 * JOB_TIMEOUT_MS / 1000, tests);
}
