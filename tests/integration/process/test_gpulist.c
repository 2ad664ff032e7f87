/* test_gpulist.c: ListGpus, the node's GPUs for the device plan: with the
 * simulator's NVML, each GPU's UUID, model, PCI bus id and memory and the
 * driver's version as the simulator is told them, and the restore margin;
 * open to an unprivileged caller; without NVML, nvml false and no GPU;
 * every call answered once, pipelined or not (an answer made at once must
 * not be sent again); parameters refused; cudackptctl gpus; calls in
 * flight together share one NVML query, so that a slow NVML holds one
 * worker thread however many callers wait for it. */
#include "harness.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MARGIN_MIB 16
/* The simulated NVML's delay per GPU's memory query, as text for its
 * setting, and a ListGpus call's with the 2 GPUs of start_with(). */
#define SLOW_NVML_MS 1000
#define SLOW_NVML_TEXT_(ms) #ms
#define SLOW_NVML_TEXT(ms) SLOW_NVML_TEXT_(ms)
#define ROUND_MS (2 * SLOW_NVML_MS)

static struct itest_daemon *start_with(bool nvml, const char *more_config, const char *more_env)
{
        const char *const env[] = { "CUDACKPT_SIM_DEVICE_COUNT=2",
                                    "CUDACKPT_SIM_GPU_NAMES=NVIDIA H200,NVIDIA A100-SXM4-80GB",
                                    "CUDACKPT_SIM_PCI_BUS_IDS=00000000:AB:00.0",
                                    "CUDACKPT_SIM_NVML_DRIVER_VERSION=575.57.08",
                                    "CUDACKPT_SIM_GPU_MEM_MIB=1000", more_env, NULL };
        struct itest_daemon_opts o = {
                .config_json = itest_strdupf("{\"nvml\":\"%s\",\"restore_gpu_margin_mib\":%d%s}",
                                             nvml ? itest_need_env("CUDACKPT_TEST_SIM") : "", MARGIN_MIB,
                                             more_config),
                .env = env,
        };
        return itest_daemon_start(&o);
}

static struct itest_daemon *start(bool nvml)
{
        return start_with(nvml, "", NULL);
}

/* Asks c for the GPUs until NVML is open (it is opened on a worker after
 * the start); the last answer. */
static cJSON *await_nvml(struct itest_conn *c)
{
        cJSON *r = NULL;
        double deadline = itest_now_ms() + 10000;

        do {
                r = itest_call(c, CUDACKPT_METHOD_LIST_GPUS, NULL);
                itest_assert_ok(r);
        } while (!cJSON_IsTrue(cJSON_GetObjectItem(itest_params(r), "nvml")) && itest_now_ms() < deadline &&
                 usleep(10000) == 0);
        ck_assert_msg(cJSON_IsTrue(cJSON_GetObjectItem(itest_params(r), "nvml")), "no NVML: %s", itest_dump(r));
        return r;
}

static const cJSON *gpu(const cJSON *reply, int i)
{
        const cJSON *g = cJSON_GetArrayItem(cJSON_GetObjectItem(itest_params(reply), "gpus"), i);
        ck_assert_msg(g, "no GPU %d in %s", i, itest_dump(reply));
        return g;
}

START_TEST(gpulist_tells_the_gpus)
{
        struct itest_daemon *d = start(true);
        uid_t u = geteuid() == 0 ? ITEST_OTHER_UID : (uid_t)-1;
        struct itest_conn *c = itest_connect_unprivileged(d, u);
        long long v;
        cJSON *r = await_nvml(c);

        itest_assert_str(r, "driver_version", "575.57.08");
        ck_assert(itest_int(r, "restore_gpu_margin_bytes", &v) && v == MARGIN_MIB * 1024LL * 1024);
        ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(itest_params(r), "gpus")), 2);
        ck_assert_str_eq(cJSON_GetObjectItem(gpu(r, 0), "uuid")->valuestring, ITEST_GPU0);
        ck_assert_str_eq(cJSON_GetObjectItem(gpu(r, 0), "name")->valuestring, "NVIDIA H200");
        ck_assert_str_eq(cJSON_GetObjectItem(gpu(r, 0), "pci_bus_id")->valuestring, "00000000:AB:00.0");
        ck_assert_str_eq(cJSON_GetObjectItem(gpu(r, 1), "uuid")->valuestring, ITEST_GPU1);
        ck_assert_str_eq(cJSON_GetObjectItem(gpu(r, 1), "name")->valuestring, "NVIDIA A100-SXM4-80GB");
        /* The last bus id named goes for the GPUs after it. */
        ck_assert_str_eq(cJSON_GetObjectItem(gpu(r, 1), "pci_bus_id")->valuestring, "00000000:AB:00.0");
        ck_assert_int_eq((long long)cJSON_GetObjectItem(gpu(r, 1), "memory_total_bytes")->valuedouble,
                         1000LL * 1024 * 1024);
        ck_assert_int_eq(cJSON_GetObjectItem(gpu(r, 1), "index")->valueint, 1);

        /* A process holding 64 MiB on GPU 0 shows in its free memory. */
        itest_sim_target();
        r = itest_call(c, CUDACKPT_METHOD_LIST_GPUS, NULL);
        ck_assert_int_le((long long)cJSON_GetObjectItem(gpu(r, 0), "memory_free_bytes")->valuedouble,
                         (1000LL - 64) * 1024 * 1024);

        /* cudackptctl gpus, as another user: a line per GPU. */
        struct itest_proc_result *o = itest_ctl_as(u, d, "gpus", NULL);
        ck_assert_msg(o->status == 0 && strstr(o->out, "driver 575.57.08") &&
                              strstr(o->out, ITEST_GPU1 "  00000000:AB:00.0") && strstr(o->out, "NVIDIA A100-SXM4-80GB\n"),
                      "gpus: exit %d: %s%s", o->status, o->out, o->err);

        /* Parameters are refused. */
        itest_assert_error(itest_call(c, CUDACKPT_METHOD_LIST_GPUS, "{\"x\":1}"), "org.varlink.service.InvalidParameter");
}
END_TEST

START_TEST(gpulist_without_nvml_answers_once)
{
        struct itest_daemon *d = start(false);
        struct itest_conn *c = itest_connect(d);
        cJSON *r;

        /* Three calls at once, each answered once, in order, and nothing more. */
        itest_send(c, "{\"method\":\"" CUDACKPT_METHOD_LIST_GPUS "\"}");
        itest_send(c, "{\"method\":\"" CUDACKPT_METHOD_LIST_GPUS "\"}");
        itest_send(c, "{\"method\":\"org.varlink.service.GetInfo\"}");
        for (int i = 0; i < 2; i++) {
                r = itest_recv(c);
                itest_assert_ok(r);
                ck_assert_msg(cJSON_IsFalse(cJSON_GetObjectItem(itest_params(r), "nvml")) &&
                                      cJSON_GetArraySize(cJSON_GetObjectItem(itest_params(r), "gpus")) == 0 &&
                                      itest_str(r, "reason"),
                              "with no NVML: %s", itest_dump(r));
                itest_assert_str(r, "driver_version", "");
        }
        r = itest_recv(c);
        itest_assert_str(r, "product", "cudackptd");
        ck_assert_int_eq(itest_recv_raw(c, 300, &r), -ETIMEDOUT);
        /* cudackptctl gpus says it cannot tell. */
        struct itest_proc_result *o = itest_ctl(d, "gpus", NULL);
        ck_assert_msg(o->status == 1 && strstr(o->err, "no NVML"), "gpus: exit %d: %s", o->status, o->err);
}
END_TEST

/* 3 uids x 4 calls (each uid's whole share) with an NVML that takes
 * ROUND_MS, on a daemon whose pool has 1 + 4 threads: were each call
 * to hold a worker, the pool would be full and a driver call would wait
 * behind them for seconds. */
START_TEST(gpulist_slow_nvml_holds_one_worker)
{
        enum { UIDS = 3, PER_UID = 4 };
        struct itest_daemon *d = start_with(true, ",\"workers\":1",
                                            "CUDACKPT_SIM_NVML_DELAY_MS=" SLOW_NVML_TEXT(SLOW_NVML_MS));
        struct itest_conn *c[UIDS * PER_UID], *root = itest_connect(d);
        pid_t pid = itest_sim_target();
        double t0, lock_ms, all_ms;
        cJSON *r;

        await_nvml(root);
        for (int i = 0; i < UIDS * PER_UID; i++)
                c[i] = itest_connect_as(d, ITEST_OTHER_UID + (uid_t)(i % UIDS));
        t0 = itest_now_ms();
        for (int i = 0; i < UIDS * PER_UID; i++)
                itest_send(c[i], "{\"method\":\"" CUDACKPT_METHOD_LIST_GPUS "\"}");
        /* A driver call meanwhile gets a worker at once. */
        r = itest_call_pid(root, CUDACKPT_METHOD_LOCK, pid);
        lock_ms = itest_now_ms() - t0;
        itest_assert_ok(r);
        ck_assert_msg(lock_ms < ROUND_MS / 2, "Lock took %.0f ms behind slow ListGpus calls", lock_ms);
        /* Every call is answered from the one query (or the one after it). */
        for (int i = 0; i < UIDS * PER_UID; i++) {
                ck_assert_int_eq(itest_recv_raw(c[i], 3 * ROUND_MS, &r), 0);
                itest_assert_ok(r);
                ck_assert_msg(cJSON_GetObjectItem(gpu(r, 0), "memory_free_bytes"), "no free memory: %s", itest_dump(r));
        }
        all_ms = itest_now_ms() - t0;
        ck_assert_msg(all_ms > ROUND_MS / 2 && all_ms < 2.5 * ROUND_MS, "the ListGpus calls took %.0f ms",
                      all_ms);
        printf("MEASURED: Lock beside %d slow ListGpus: %.1f ms; all answered in %.0f ms\n", UIDS * PER_UID,
               lock_ms, all_ms);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("integration.gpulist");
        TCase *tc = itest_tcase(s, "gpulist", 60);
        tcase_add_test(tc, gpulist_tells_the_gpus);
        tcase_add_test(tc, gpulist_without_nvml_answers_once);
        tcase_add_test(tc, gpulist_slow_nvml_holds_one_worker);
        return itest_main(s);
}
