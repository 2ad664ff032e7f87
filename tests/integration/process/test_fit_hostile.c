/* test_fit_hostile.c: the check that a restore fits (test_fit.c) against
 * users who try to defeat it, on the simulator.
 *
 * - Another uid's flood of GPU records does not push out a victim's: its
 *   resume is still refused on its record, not let through to break in
 *   the driver (attack H2: the records had one global bound).
 * - The records are kept only in a directory only root may change, and
 *   reached through the descriptor checked at start: a runtime directory
 *   below a user's directory gets no store, and swapping it for a link
 *   afterwards makes root write nothing there (attack M2).
 * - A process without a record nor a mapping, on a machine of several
 *   GPUs, must fit on each of them.
 *
 * The simulator's GPUs hold 4096 MiB each; a sim process holds its
 * CUDACKPT_SIM_MEM_MIB on its GPU until checkpointed, and a restore that
 * does not fit fails OUT_OF_MEMORY and breaks the process for good, as the
 * real driver does.  The GPUs are this suite's own (by UUID); the tests
 * use the third. */
#include "fit_itest.h"
#include "harness.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GPU "GPU-00000000-5157-4000-8000-0000000f1803"
#define DEVICES "CUDACKPT_SIM_DEVICES=GPU-00000000-5157-4000-8000-0000000f1801," \
                "GPU-00000000-5157-4000-8000-0000000f1802," GPU ",GPU-00000000-5157-4000-8000-0000000f1804"
#define MIB (1024.0 * 1024.0)
#define TOTAL 4096
#define MARGIN 256
#define HELD 1024
#define VICTIM ITEST_OTHER_UID
#define ATTACKER (ITEST_OTHER_UID + 1)

static const char *const daemon_env[] = { DEVICES, "CUDACKPT_SIM_GPU_MEM_MIB=4096", NULL };

static struct itest_daemon_opts opts(bool nvml, const char *more, const char *const *env)
{
        return (struct itest_daemon_opts){
                .config_json = itest_strdupf("{\"nvml\":\"%s\",\"restore_gpu_margin_mib\":%d%s}",
                                             nvml ? itest_need_env("CUDACKPT_TEST_SIM") : "", MARGIN, more),
                .env = env ? env : daemon_env,
        };
}

static struct itest_daemon *start(const struct itest_daemon_opts *o)
{
        struct itest_daemon *d = itest_daemon_start(o);

        itest_await_log(d, "Restores are checked against the GPUs' free memory", 10000);
        return d;
}

/* A CUDA process of uid holding mib on the GPU. */
static pid_t target_of(uid_t uid, int mib)
{
        return itest_target_as(uid, "CUDACKPT_SIM=1", itest_strdupf("CUDACKPT_SIM_MEM_MIB=%d", mib),
                               "CUDACKPT_SIM_GPUS=" GPU, NULL);
}

static void suspend(struct itest_conn *c, pid_t pid)
{
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_SUSPEND, pid), pid, "checkpointed");
}

/* The victim's resume is refused on GPU, needing what its record says. */
static void assert_refused_on_record(struct itest_conn *c, pid_t pid, int free_mib)
{
        cJSON *j = itest_call_pid(c, CUDACKPT_METHOD_RESUME, pid);

        itest_assert_error(j, CUDACKPT_ERROR_INSUFFICIENT_GPU_MEMORY);
        ck_assert_str_eq(itest_uuid_norm(itest_str(j, "gpu")), itest_uuid_norm(GPU));
        itest_assert_int(j, "needed_bytes", (HELD + MARGIN) * MIB);
        itest_assert_int(j, "free_bytes", free_mib * MIB);
        itest_assert_state_now(c, pid, "checkpointed");
}

/* H2: max_gpu_records 4, 3 per uid.  The attacker's records past its share
 * push out only its own; root's, once the table is full, push out the
 * attacker's (it holds the most), and then none (no owner holds more than
 * root would): logged, not kept.  The victim's record survives it all. */
START_TEST(records_flood_spares_victim)
{
        struct itest_daemon_opts o = opts(true, ",\"max_gpu_records\":4,\"max_gpu_records_per_uid\":3", NULL);
        struct itest_daemon *d;
        struct itest_conn *victim, *attacker, *root;
        pid_t v, f;

        if (itest_need_root())
                return;
        d = start(&o);
        victim = itest_connect_as(d, VICTIM);
        attacker = itest_connect_as(d, ATTACKER);
        root = itest_connect(d);
        v = target_of(VICTIM, HELD);
        suspend(victim, v);
        for (int i = 0; i < 5; i++)
                suspend(attacker, target_of(ATTACKER, 1));
        suspend(root, target_of(0, 1));
        suspend(root, target_of(0, 1));
        itest_await_log(d, "is not recorded: max_gpu_records (4) are held", 5000);
        f = target_of(0, 3500);
        assert_refused_on_record(victim, v, TOTAL - 3500);
        itest_target_kill(f);
        itest_assert_state(itest_call_pid(victim, CUDACKPT_METHOD_RESUME, v), v, "running");
}
END_TEST

/* M2: the runtime directory below a directory its user owns ($dir/u, the
 * socket's place in the attack): no store (as no lease store), said at
 * start.  The user then swaps the directory for a link to another: root
 * writes nothing through it, nor in the old one. */
START_TEST(store_dir_swap)
{
        char base[] = "/tmp/itest-fitdir.XXXXXX";
        const char *u, *run, *old, *etc, *env[4];
        struct itest_daemon_opts o;
        struct itest_daemon *d;
        struct itest_conn *c;

        if (itest_need_root())
                return;
        ck_assert_ptr_nonnull(mkdtemp(base));
        ck_assert_int_eq(chmod(base, 0755), 0);
        u = itest_strdupf("%s/u", base);
        run = itest_strdupf("%s/run", u);
        old = itest_strdupf("%s/run.old", u);
        etc = itest_strdupf("%s/etc", base);
        ck_assert(mkdir(u, 0755) == 0 && chown(u, ATTACKER, ATTACKER) == 0);
        ck_assert(mkdir(run, 0755) == 0 && mkdir(etc, 0755) == 0);
        env[0] = daemon_env[0];
        env[1] = daemon_env[1];
        env[2] = itest_strdupf("RUNTIME_DIRECTORY=%s", run);
        env[3] = NULL;
        o = opts(true, "", env);
        d = start(&o);
        itest_await_log(d, "No store of GPU records", 1);
        itest_await_log(d, "No lease store in the runtime directory", 1);
        /* What the user may do: its directory's entries are its own. */
        ck_assert_int_eq(rename(run, old), 0);
        ck_assert_int_eq(symlink(etc, run), 0);
        c = itest_connect(d);
        suspend(c, target_of(0, HELD));
        suspend(c, target_of(ATTACKER, 1));
        ck_assert_int_eq(access(itest_strdupf("%s/gpu-records.json", etc), F_OK), -1);
        ck_assert_int_eq(access(itest_strdupf("%s/gpu-records.json", old), F_OK), -1);
        ck_assert_int_eq(rmdir(etc), 0); /* empty: no temporary file either */
        (void)unlink(run);
        (void)rmdir(old);
        (void)rmdir(u);
        (void)rmdir(base);
}
END_TEST

/* A process checkpointed while the daemon had no NVML has no record; on
 * this machine of four GPUs, resumed without a mapping, its estimate (its
 * resident memory and the margin) must fit on each GPU: refused on the
 * one that has less than the margin free, not let through to break. */
START_TEST(no_record_no_mapping_checked_on_every_gpu)
{
        struct itest_daemon_opts none = opts(false, "", NULL), o = opts(true, "", NULL);
        struct itest_daemon *d = itest_daemon_start(&none);
        struct itest_conn *c = itest_connect(d);
        pid_t a = target_of((uid_t)-1, HELD), f;
        cJSON *j;

        suspend(c, a);
        c = fit_restart(&d, c, &o, 1);
        f = target_of((uid_t)-1, TOTAL - MARGIN / 2);
        j = itest_call_pid(c, CUDACKPT_METHOD_RESUME, a);
        fit_assert_estimate_refused(j, MARGIN);
        ck_assert_str_eq(itest_uuid_norm(itest_str(j, "gpu")), itest_uuid_norm(GPU));
        itest_assert_state_now(c, a, "checkpointed");
        itest_target_kill(f);
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_RESUME, a), a, "running");
}
END_TEST

int main(void)
{
        const TTest *tests[] = { records_flood_spares_victim, store_dir_swap,
                no_record_no_mapping_checked_on_every_gpu, NULL };

        return itest_run("fit_hostile", "fit_hostile", 60, tests);
}
