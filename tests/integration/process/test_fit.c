/* test_fit.c: restores that would not fit on their GPU are refused before
 * the driver is asked (issue 29, B8), on the simulator.
 *
 * The simulator's GPUs hold CUDACKPT_SIM_GPU_MEM_MIB each; a sim process
 * that is not checkpointed holds its CUDACKPT_SIM_MEM_MIB on each of its
 * GPUs (NVML lists it, nvmlDeviceGetMemoryInfo counts it), and a restore
 * that does not fit fails OUT_OF_MEMORY and breaks the process for good, as
 * the real driver does.  So a "filler" target takes memory, and each test
 * shows the restore refused untouched while it runs, then made once it has
 * gone.  The GPUs of these tests are the third and fourth of four, named by
 * UUID: other suites' sim processes (on the first two) do not count there. */
#include "fit_itest.h"
#include "harness.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GPU "GPU-00000000-5157-4000-8000-0000000f1703"
#define GPU2 "GPU-00000000-5157-4000-8000-0000000f1704"
#define DEVICES "CUDACKPT_SIM_DEVICES=GPU-00000000-5157-4000-8000-0000000f1701," \
                "GPU-00000000-5157-4000-8000-0000000f1702," GPU "," GPU2
#define MIB (1024.0 * 1024.0)
/* Each GPU's memory, the margin, and what one target holds (MiB). */
#define TOTAL 4096
#define MARGIN 256
#define HELD 1024
/* What a target's restore needs, margin included (MiB). */
#define NEED (HELD + MARGIN)

static const char *const daemon_env[] = { DEVICES, "CUDACKPT_SIM_GPU_MEM_MIB=4096", NULL };

/* nvml: the simulator's NVML, or none. */
static struct itest_daemon_opts opts_nvml(bool nvml)
{
        return (struct itest_daemon_opts){
                .config_json = itest_strdupf("{\"nvml\":\"%s\",\"restore_gpu_margin_mib\":%d}",
                                             nvml ? itest_need_env("CUDACKPT_TEST_SIM") : "", MARGIN),
                .env = daemon_env,
        };
}

static struct itest_daemon_opts opts(void)
{
        return opts_nvml(true);
}

/* The daemon, once it checks restores (NVML opens after READY=1). */
static struct itest_daemon *start(void)
{
        struct itest_daemon_opts o = opts();
        struct itest_daemon *d = itest_daemon_start(&o);

        itest_await_log(d, "Restores are checked against the GPUs' free memory", 10000);
        return d;
}

/* A CUDA process holding HELD MiB on the GPU; with a state slot, so that a
 * restarted daemon's simulator reads it as it was. */
static pid_t target(void)
{
        return itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=1024", "CUDACKPT_SIM_GPUS=" GPU,
                            "CUDACKPT_SIM_STATE=r", NULL);
}

/* Another process taking mib of gpu. */
static pid_t filler_on(const char *gpu, int mib)
{
        return itest_target("CUDACKPT_SIM=1", itest_strdupf("CUDACKPT_SIM_MEM_MIB=%d", mib),
                            itest_strdupf("CUDACKPT_SIM_GPUS=%s", gpu), NULL);
}

static pid_t filler(int mib)
{
        return filler_on(GPU, mib);
}

static void suspend(struct itest_conn *c, pid_t pid)
{
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_SUSPEND, pid), pid, "checkpointed");
}

/* An InsufficientGpuMemory reply (or a member's error parameters p) that
 * names the GPU, needs need MiB and finds free MiB. */
static void assert_refusal_on(const cJSON *reply, const char *gpu, int need, int free_mib)
{
        ck_assert_str_eq(itest_uuid_norm(itest_str(reply, "gpu")), itest_uuid_norm(gpu));
        itest_assert_int(reply, "needed_bytes", need * MIB);
        itest_assert_int(reply, "free_bytes", free_mib * MIB);
}

static void assert_refusal(const cJSON *reply, int need, int free_mib)
{
        assert_refusal_on(reply, GPU, need, free_mib);
}

/* Refused while the filler runs, the process untouched; restored once the
 * filler has gone.  Restore and Resume alike. */
START_TEST(single_refused_then_restored)
{
        struct itest_daemon *d = start();
        struct itest_conn *c = itest_connect(d);
        pid_t a = target(), f;
        cJSON *j;

        suspend(c, a);
        f = filler(3500);
        j = itest_call_pid(c, CUDACKPT_METHOD_RESUME, a);
        itest_assert_error(j, CUDACKPT_ERROR_INSUFFICIENT_GPU_MEMORY);
        assert_refusal(j, NEED, TOTAL - 3500);
        itest_assert_str_opt(j, "state", "checkpointed");
        itest_assert_str(j, "step", "restore");
        j = itest_call_pid(c, CUDACKPT_METHOD_RESTORE, a);
        itest_assert_error(j, CUDACKPT_ERROR_INSUFFICIENT_GPU_MEMORY);
        itest_assert_state_now(c, a, "checkpointed");
        itest_target_kill(f);
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_RESUME, a), a, "running");
}
END_TEST

/* force goes to the driver: here, where the process itself fits but not
 * with the margin, the restore is made. */
START_TEST(force_goes_through)
{
        struct itest_daemon *d = start();
        struct itest_conn *c = itest_connect(d);
        pid_t a = target();

        suspend(c, a);
        (void)filler(TOTAL - HELD - MARGIN / 2);
        itest_assert_error(itest_call_pid(c, CUDACKPT_METHOD_RESUME, a), CUDACKPT_ERROR_INSUFFICIENT_GPU_MEMORY);
        itest_assert_state(itest_call(c, CUDACKPT_METHOD_RESUME, itest_strdupf("{\"pid\":%d,\"force\":true}", (int)a)),
                           a, "running");
        itest_assert_error(itest_call(c, CUDACKPT_METHOD_RESUME, itest_strdupf("{\"pid\":%d,\"force\":1}", (int)a)),
                           CUDACKPT_VARLINK_INVALID_PARAMETER);
}
END_TEST

/* cudackptctl: the refusal's sentence and exit status 26; --force (a PID,
 * a group); --force only where a restore is. */
START_TEST(cli_force)
{
        struct itest_daemon *d = start();
        struct itest_conn *c = itest_connect(d);
        pid_t a = target(), b = target();
        const char *pids = itest_strdupf("--pids=%d", (int)b);
        struct itest_proc_result *r;

        suspend(c, a);
        suspend(c, b);
        (void)filler(TOTAL - HELD - MARGIN / 2);
        r = itest_ctl(d, "resume", itest_pidstr(a), NULL);
        itest_assert_run(r, CUDACKPT_EXIT_INSUFFICIENT_GPU_MEMORY, "");
        ck_assert_msg(strstr(r->err, "would not fit") && strstr(r->err, itest_uuid_norm(GPU) + 24),
                      "stderr: %s", r->err);
        r = itest_ctl(d, "resume", pids, "--no-progress", NULL);
        ck_assert_msg(r->status == CUDACKPT_EXIT_INSUFFICIENT_GPU_MEMORY && strstr(r->err, "InsufficientGpuMemory"),
                      "status %d, stderr: %s", r->status, r->err);
        itest_assert_run(itest_ctl(d, "suspend", itest_pidstr(a), "--force", NULL), CUDACKPT_EXIT_USAGE, "");
        r = itest_ctl(d, "dump", itest_strdupf("--tree=%d", (int)a), "--images=/nonexistent", "--force", NULL);
        ck_assert_msg(r->status == CUDACKPT_EXIT_USAGE && strstr(r->err, "--force are for restore"), "dump: %d %s",
                      r->status, r->err);
        itest_assert_op_output(itest_ctl(d, "resume", itest_pidstr(a), "--force", NULL), "running");
        itest_assert_state_now(c, b, "checkpointed");
        itest_assert_run(itest_ctl(d, "suspend", itest_pidstr(a), NULL), 0, NULL);
        itest_assert_run(itest_ctl(d, "resume", pids, "--force", "--no-progress", NULL), 0, NULL);
        itest_assert_state_now(c, b, "running");
}
END_TEST

/* Two members that fit one by one but not together: no member is touched;
 * once there is room, both are. */
START_TEST(group_fits_whole_or_not_at_all)
{
        struct itest_daemon *d = start();
        struct itest_conn *c = itest_connect(d);
        pid_t a = target(), b = target(), f;
        const char *sel = itest_strdupf("{\"pids\":[{\"pid\":%d},{\"pid\":%d}]}", (int)a, (int)b);
        cJSON *j;

        itest_assert_ok(itest_call(c, CUDACKPT_METHOD_SUSPEND_GROUP, itest_strdupf("{\"selector\":%s}", sel)));
        f = filler(2500);
        j = itest_call(c, CUDACKPT_METHOD_RESUME_GROUP, itest_strdupf("{\"selector\":%s}", sel));
        itest_assert_error(j, CUDACKPT_ERROR_GROUP_FAILED);
        itest_assert_str(j, "phase", "restore");
        itest_assert_str(j, "error", CUDACKPT_ERROR_INSUFFICIENT_GPU_MEMORY);
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(itest_params(j), "error_parameters");
        cJSON *wrap = cJSON_CreateObject();
        cJSON_AddItemReferenceToObject(wrap, "parameters", (cJSON *)p);
        assert_refusal(wrap, 2 * NEED, TOTAL - 2500);
        cJSON_Delete(wrap);
        itest_assert_state_now(c, a, "checkpointed");
        itest_assert_state_now(c, b, "checkpointed");
        itest_target_kill(f);
        itest_assert_ok(itest_call(c, CUDACKPT_METHOD_RESUME_GROUP, itest_strdupf("{\"selector\":%s}", sel)));
        itest_assert_state_now(c, a, "running");
        itest_assert_state_now(c, b, "running");
}
END_TEST

/* A lease's undo that would not fit is refused, the process left
 * checkpointed (not broken): a Resume brings it back once there is room. */
START_TEST(lease_undo_refused)
{
        struct itest_daemon *d = start();
        struct itest_conn *c = itest_connect(d);
        pid_t a = target(), f = filler(3500);

        /* The filler first: the undo may come at any time after the reply. */
        itest_assert_state(itest_call(c, CUDACKPT_METHOD_SUSPEND, itest_strdupf("{\"pid\":%d,\"lease_ms\":500}", (int)a)),
                           a, "checkpointed");
        itest_await_log(d, "InsufficientGpuMemory", 5000);
        itest_assert_state_now(c, a, "checkpointed");
        itest_target_kill(f);
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_RESUME, a), a, "running");
}
END_TEST

/* What a process held is kept on disk: a restarted daemon still knows it
 * (without it, on a machine of three GPUs, nothing would be checked). */
START_TEST(record_survives_restart)
{
        struct itest_daemon_opts o = opts();
        struct itest_daemon *d = start();
        struct itest_conn *c = itest_connect(d);
        const char *store = itest_strdupf("%s/gpu-records.json", d->dir);
        pid_t a = target(), f;
        struct stat st;
        cJSON *j;

        suspend(c, a);
        ck_assert_int_eq(stat(store, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0600);
        /* The log holds both daemons': the second's line, once NVML is open. */
        c = fit_restart(&d, c, &o, 2);
        itest_await_log(d, "GPU records of 1 checkpointed process(es) read back", 5000);
        f = filler(3500);
        j = itest_call_pid(c, CUDACKPT_METHOD_RESUME, a);
        itest_assert_error(j, CUDACKPT_ERROR_INSUFFICIENT_GPU_MEMORY);
        assert_refusal(j, NEED, TOTAL - 3500);
        itest_target_kill(f);
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_RESUME, a), a, "running");
}
END_TEST

/* The need goes where the mapping sends the process: a full GPU left for
 * an empty one is fine, a full one mapped to is not. */
START_TEST(mapping_counts)
{
        struct itest_daemon *d = start();
        struct itest_conn *c = itest_connect(d);
        pid_t a = target(), f;
        const char *to2 = itest_strdupf("{\"pid\":%d,\"gpu_mapping\":{\"%s\":\"%s\"}}", (int)a, GPU, GPU2);
        cJSON *j;

        suspend(c, a);
        (void)filler(3500);
        f = filler_on(GPU2, 3500);
        j = itest_call(c, CUDACKPT_METHOD_RESUME, to2);
        itest_assert_error(j, CUDACKPT_ERROR_INSUFFICIENT_GPU_MEMORY);
        assert_refusal_on(j, GPU2, NEED, TOTAL - 3500);
        itest_target_kill(f);
        itest_assert_state(itest_call(c, CUDACKPT_METHOD_RESUME, to2), a, "running");
}
END_TEST

/* Without a record (checkpointed while the daemon had no NVML), the need
 * is the process's resident memory (here a small program's: the simulator
 * keeps no GPU memory in it) and the margin, on the GPU of the mapping. */
START_TEST(estimate_without_record)
{
        struct itest_daemon_opts none = opts_nvml(false), o = opts();
        struct itest_daemon *d = itest_daemon_start(&none);
        struct itest_conn *c = itest_connect(d);
        pid_t a = target(), f;
        const char *same = itest_strdupf("{\"pid\":%d,\"gpu_mapping\":{\"%s\":\"%s\"}}", (int)a, GPU, GPU);

        suspend(c, a);
        c = fit_restart(&d, c, &o, 1);
        f = filler(TOTAL - MARGIN / 2);
        fit_assert_estimate_refused(itest_call(c, CUDACKPT_METHOD_RESUME, same), MARGIN);
        itest_target_kill(f);
        itest_assert_state(itest_call(c, CUDACKPT_METHOD_RESUME, same), a, "running");
}
END_TEST

/* A store someone else could have written, or not of the expected form,
 * is refused whole (logged); the daemon runs on without its records. */
START_TEST(tampered_store_refused)
{
        static const struct {
                const char *text;
                mode_t mode;
                const char *why;
        } cases[] = {
                { "{\"version\":1,\"boot_id\":\"x\",\"processes\":[]}", 0644, "mode 0644, not 0600" },
                { "{\"version\":1,\"boot_id\":\"x\",\"processes\":[],\"more\":1}", 0600,
                  "not a store of GPU records" },
        };
        struct itest_daemon_opts o = opts();
        struct itest_daemon *d = start();
        const char *store = itest_strdupf("%s/gpu-records.json", d->dir);

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                FILE *fp;

                itest_daemon_stop(d);
                fp = fopen(store, "w");
                ck_assert(fp && fputs(cases[i].text, fp) >= 0 && fclose(fp) == 0);
                ck_assert_int_eq(chmod(store, cases[i].mode), 0);
                d = itest_daemon_restart(d, &o);
                itest_await_log(d, itest_strdupf("GPU records in %s refused: %s", store, cases[i].why), 5000);
        }
}
END_TEST

int main(void)
{
        const TTest *tests[] = { single_refused_then_restored, force_goes_through, cli_force,
                group_fits_whole_or_not_at_all, lease_undo_refused, record_survives_restart,
                tampered_store_refused, mapping_counts, estimate_without_record, NULL };

        return itest_run("fit", "fit", 60, tests);
}
