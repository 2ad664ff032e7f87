/* test_selection.c: selections by process tree and by cgroup for the group
 * methods, and ListProcesses on every kind of selection, on the simulator,
 * against the real daemon (helpers: groups_itest.h).
 *
 * The binary doubles as a target: --itest-tree (see groups_itest.h).  The
 * cgroup test and the other-uid ListProcesses need root; without it they
 * say so and pass without checking (as test_floods does). */
#include "groups_itest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- ListProcesses helpers --------------------------------------------------- */

static cJSON *list(struct itest_conn *c, const char *selector)
{
        if (selector)
                itest_send_call(c, CUDACKPT_METHOD_LIST_PROCESSES, itest_strdupf("{\"selector\":%s}", selector));
        else
                itest_send_call(c, CUDACKPT_METHOD_LIST_PROCESSES, NULL);
        cJSON *j = gitest_recv_reply(c, ITEST_REPLY_TIMEOUT_MS);
        itest_assert_ok(j);
        const cJSON *arr = itest_get(j, "processes");
        ck_assert_msg(cJSON_IsArray(arr), "no processes array in %s", itest_dump(j));
        /* Sorted by pid. */
        double last = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, arr) {
                double v;
                ck_assert_msg(gitest_onum(e, "pid", &v), "an entry without pid in %s", itest_dump(j));
                ck_assert_msg(v > last, "processes are not sorted by pid (%.0f after %.0f) in %s", v, last,
                              itest_dump(j));
                last = v;
        }
        return j;
}

static const cJSON *listed(const cJSON *j, pid_t pid)
{
        return gitest_arr_find(itest_get(j, "processes"), pid, j);
}

/* The entry of pid: every field, the state (NULL: absent, with stop). */
static const cJSON *assert_listed(const cJSON *j, pid_t pid, uid_t uid, const char *state)
{
        const cJSON *e = listed(j, pid);
        ck_assert_msg(e, "pid %d is not listed in %s", (int)pid, itest_dump(j));
        double v;
        ck_assert_msg(gitest_onum(e, "uid", &v) && v == (double)uid, "pid %d: uid is not %d in %s", (int)pid, (int)uid,
                      itest_dump(j));
        ck_assert_msg(gitest_onum(e, "start_time", &v) && v == (double)itest_start_time(pid),
                      "pid %d: start_time is not %llu in %s", (int)pid, (unsigned long long)itest_start_time(pid),
                      itest_dump(j));
        size_t len;
        char *comm = gitest_read_proc(pid, "comm", &len);
        if (len && comm[len - 1] == '\n')
                comm[len - 1] = '\0';
        const char *cmd = gitest_ostr(e, "command");
        ck_assert_msg(cmd && strcmp(cmd, comm) == 0, "pid %d: command is not \"%s\" in %s", (int)pid, comm,
                      itest_dump(j));
        const char *cg = gitest_ostr(e, "cgroup");
        ck_assert_msg(cg && strcmp(cg, gitest_cgroup_of(pid)) == 0, "pid %d: cgroup is not \"%s\" in %s", (int)pid,
                      gitest_cgroup_of(pid), itest_dump(j));
        const char *s = gitest_ostr(e, "state");
        if (state)
                ck_assert_msg(s && strcmp(s, state) == 0, "pid %d: state is not %s in %s", (int)pid, state,
                              itest_dump(j));
        else
                ck_assert_msg(!s, "pid %d: a state where none was expected in %s", (int)pid, itest_dump(j));
        return e;
}

/* ---- tree and cgroup selectors --------------------------------------------------- */

START_TEST(tree_selector)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        struct gitest_tree t;
        gitest_make_tree(&t);
        pid_t outside = itest_mapped_target();
        pid_t members[4] = { t.root, t.sim, t.node, t.grandchild };
        pid_t skipped[2] = { t.preload, t.plain };

        cJSON *j = gitest_group(c, CUDACKPT_METHOD_SUSPEND_GROUP, gitest_sel_tree(t.root), NULL);
        gitest_assert_group_ok(j, 4, members, "checkpointed");
        gitest_assert_skipped(j, 2, skipped);
        gitest_assert_all_now(c, 4, members, "checkpointed");
        itest_assert_state_now(c, outside, "running");

        j = list(c, gitest_sel_tree(t.root));
        gitest_assert_pid_set(j, "processes", 4, members);
        for (size_t i = 0; i < 4; i++)
                assert_listed(j, members[i], 0, "checkpointed");

        /* A subtree. */
        pid_t sub[2] = { t.node, t.grandchild };
        j = gitest_group(c, CUDACKPT_METHOD_RESUME_GROUP, gitest_sel_tree(t.node), NULL);
        gitest_assert_group_ok(j, 2, sub, "running");
        gitest_assert_skipped(j, 0, NULL);
        itest_assert_state_now(c, t.root, "checkpointed");

        j = gitest_group(c, CUDACKPT_METHOD_RESUME_GROUP, gitest_sel_tree(t.root), NULL);
        gitest_assert_group_ok(j, 4, members, "running");
        gitest_assert_skipped(j, 2, skipped);
        gitest_assert_all_now(c, 4, members, "running");

        /* A tree whose root is gone. */
        pid_t dead = itest_dead_pid();
        j = gitest_group(c, CUDACKPT_METHOD_SUSPEND_GROUP, gitest_sel_tree(dead), NULL);
        gitest_assert_group_failed(j, CUDACKPT_METHOD_SUSPEND_GROUP, CUDACKPT_PHASE_SELECT, dead,
                            CUDACKPT_ERROR_NO_SUCH_PROCESS);
}
END_TEST

/* Whether a name made as PREFIX<pid>... belongs to a test process that is
 * gone (another run of this suite may be live at the same time). */
static bool stale_name(const char *name, const char *prefix)
{
        size_t n = strlen(prefix);
        if (strncmp(name, prefix, n) != 0)
                return false;
        long pid = strtol(name + n, NULL, 10);
        return pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

/* Leftovers of an earlier run that failed half way (its test process
 * gone): its groups (empty once Check killed its targets), its mounts. */
static void cgroup_sweep(const char *mnt)
{
        DIR *dir = opendir(mnt);
        struct dirent *e;
        while (dir && (e = readdir(dir))) {
                if (!stale_name(e->d_name, "itest-groups-"))
                        continue;
                char sub[512];
                snprintf(sub, sizeof(sub), "%s/%s/sub", mnt, e->d_name);
                rmdir(sub);
                snprintf(sub, sizeof(sub), "%s/%s", mnt, e->d_name);
                rmdir(sub);
        }
        if (dir)
                closedir(dir);
        FILE *f = fopen("/proc/self/mountinfo", "re");
        char line[4096];
        while (f && fgets(line, sizeof(line), f)) {
                char point[1024];
                if (sscanf(line, "%*s %*s %*s %*s %1023s", point) == 1 && stale_name(point, "/tmp/itest-cg2-") &&
                    strcmp(point, mnt) != 0 && strstr(line, " - cgroup2 ") && umount2(point, MNT_DETACH) == 0)
                        rmdir(point);
        }
        if (f)
                fclose(f);
}

START_TEST(cgroup_selector)
{
        char *mnt = itest_cgroup2_or_skip();
        if (!mnt)
                return;
        cgroup_sweep(mnt);
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);

        const char *name = itest_strdupf("itest-groups-%d", (int)getpid());
        const char *top = itest_strdupf("%s/%s", mnt, name);
        const char *sub = itest_strdupf("%s/sub", top);
        /* A sibling whose name starts with the group's: not within it. */
        const char *sib = itest_strdupf("%sx", top);
        ck_assert_msg(mkdir(top, 0755) == 0 && mkdir(sub, 0755) == 0 && mkdir(sib, 0755) == 0, "mkdir in %s: %s", mnt,
                      strerror(errno));
        const char *top_path = itest_strdupf("/%s", name);
        const char *sub_path = itest_strdupf("/%s/sub", name);

        pid_t a = itest_mapped_target(), b = itest_mapped_target(), in_sub = itest_mapped_target();
        pid_t ninit = itest_target(itest_sim_preload(), SMALL, NULL);
        pid_t in_sib = itest_mapped_target(), at_root = itest_mapped_target();
        pid_t moved[5] = { a, b, in_sub, ninit, in_sib };
        itest_cgroup_move(top, a);
        itest_cgroup_move(top, b);
        itest_cgroup_move(top, ninit);
        itest_cgroup_move(sub, in_sub);
        itest_cgroup_move(sib, in_sib);
        ck_assert_str_eq(gitest_cgroup_of(a), top_path);
        ck_assert_str_eq(gitest_cgroup_of(in_sub), sub_path);

        pid_t all[3] = { a, b, in_sub };
        cJSON *j = gitest_group(c, CUDACKPT_METHOD_SUSPEND_GROUP, gitest_sel_cgroup(top_path), NULL);
        gitest_assert_group_ok(j, 3, all, "checkpointed");
        gitest_assert_skipped(j, 1, &ninit);
        gitest_assert_all_now(c, 3, all, "checkpointed");
        itest_assert_state_now(c, in_sib, "running");
        itest_assert_state_now(c, at_root, "running");

        /* A trailing slash names the same group. */
        j = list(c, gitest_sel_cgroup(itest_strdupf("%s/", top_path)));
        gitest_assert_pid_set(j, "processes", 3, all);
        assert_listed(j, a, 0, "checkpointed");
        assert_listed(j, in_sub, 0, "checkpointed");

        j = list(c, gitest_sel_cgroup(sub_path));
        gitest_assert_pid_set(j, "processes", 1, &in_sub);

        j = gitest_group(c, CUDACKPT_METHOD_RESUME_GROUP, gitest_sel_cgroup(sub_path), NULL);
        gitest_assert_group_ok(j, 1, &in_sub, "running");
        itest_assert_state_now(c, a, "checkpointed");
        j = gitest_group(c, CUDACKPT_METHOD_RESUME_GROUP, gitest_sel_cgroup(top_path), NULL);
        gitest_assert_group_ok(j, 3, all, "running");
        gitest_assert_all_now(c, 3, all, "running");

        /* An empty group selects nobody. */
        ck_assert_int_eq(mkdir(itest_strdupf("%s/empty", sub), 0755), 0);
        j = list(c, gitest_sel_cgroup(itest_strdupf("%s/empty", sub_path)));
        gitest_assert_pid_set(j, "processes", 0, NULL);
        ck_assert_int_eq(rmdir(itest_strdupf("%s/empty", sub)), 0);

        for (size_t i = 0; i < N_OF(moved); i++)
                itest_cgroup_move(mnt, moved[i]);
        ck_assert_msg(rmdir(sub) == 0 && rmdir(top) == 0 && rmdir(sib) == 0, "rmdir in %s: %s", mnt, strerror(errno));
        ck_assert_msg(umount(mnt) == 0, "umount %s: %s", mnt, strerror(errno));
        rmdir(mnt);
}
END_TEST

/* ---- ListProcesses --------------------------------------------------------------- */

START_TEST(list_processes)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t s1 = itest_mapped_target(), s2 = itest_mapped_target(), locked = itest_mapped_target();
        pid_t plain = itest_target(SMALL, NULL);
        pid_t ninit = itest_target(itest_sim_preload(), SMALL, NULL);
        pid_t unmapped = itest_small_target();
        gitest_op_ok(c, CUDACKPT_METHOD_SUSPEND, s2, "checkpointed");
        gitest_op_ok(c, CUDACKPT_METHOD_LOCK, locked, "locked");

        cJSON *j = list(c, NULL);
        const cJSON *e = assert_listed(j, s1, 0, "running");
        ck_assert_msg(!cJSON_GetObjectItemCaseSensitive(e, "stop") && !cJSON_GetObjectItemCaseSensitive(e, "in_flight"),
                      "stop or in_flight for an idle running process: %s", itest_dump(j));
        assert_listed(j, s2, 0, "checkpointed");
        assert_listed(j, locked, 0, "locked");
        ck_assert_msg(!listed(j, plain), "a plain process is listed: %s", itest_dump(j));
        ck_assert_msg(!listed(j, ninit), "a process that never initialised CUDA is listed: %s", itest_dump(j));
        ck_assert_msg(!listed(j, unmapped), "a process that does not map the driver is listed: %s", itest_dump(j));
        ck_assert_msg(!listed(j, d->pid), "the daemon lists itself: %s", itest_dump(j));

        /* A null selector is no selector. */
        j = list(c, "null");
        assert_listed(j, s1, 0, "running");
        assert_listed(j, s2, 0, "checkpointed");
}
END_TEST

/* The GPUs of entry e as "UUID=BYTES,..." ("" for none; NULL: no "gpus"). */
static const char *gpus_of(const cJSON *e)
{
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(e, "gpus"), *g;
        if (!arr)
                return NULL;
        ck_assert_msg(cJSON_IsArray(arr), "gpus is not an array");
        char *s = itest_strdupf("%s", "");
        cJSON_ArrayForEach(g, arr) {
                const cJSON *u = cJSON_GetObjectItemCaseSensitive(g, "uuid");
                const cJSON *b = cJSON_GetObjectItemCaseSensitive(g, "memory_bytes");
                ck_assert_msg(cJSON_IsString(u) && cJSON_IsNumber(b), "a gpus entry without uuid or memory_bytes");
                s = itest_strdupf("%s%s%s=%.0f", s, *s ? "," : "", u->valuestring, b->valuedouble);
        }
        return s;
}

/* With NVML (the simulator's), each entry has the GPUs its process holds
 * memory on; a checkpointed one holds none.  Without NVML, no "gpus". */
START_TEST(list_processes_gpus)
{
        static const char *const env[] = { "CUDACKPT_SIM_DEVICE_COUNT=2", NULL };
        struct itest_daemon_opts o = {
                .config_json = itest_strdupf("{\"nvml\":\"%s\"}", itest_need_env("CUDACKPT_TEST_SIM")),
                .env = env,
        };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct itest_conn *c = itest_connect(d);
        itest_await_log(d, "NVML from", 10000);
        pid_t on0 = itest_mapped_target(), ckpt = itest_mapped_target();
        pid_t on1 = itest_target(itest_sim_preload(), SIM, "CUDACKPT_SIM_MEM_MIB=16", "CUDACKPT_SIM_GPUS=1", NULL);
        gitest_op_ok(c, CUDACKPT_METHOD_SUSPEND, ckpt, "checkpointed");

        cJSON *j = list(c, NULL);
        const char *want0 = ITEST_GPU0 "=8388608", *want1 = ITEST_GPU1 "=16777216";
        const char *g0 = gpus_of(assert_listed(j, on0, 0, "running"));
        const char *g1 = gpus_of(assert_listed(j, on1, 0, "running"));
        const char *gc = gpus_of(assert_listed(j, ckpt, 0, "checkpointed"));
        ck_assert_msg(g0 && gitest_streq(g0, want0), "gpus of %d: %s, want %s", (int)on0, g0 ? g0 : "(none)", want0);
        ck_assert_msg(g1 && gitest_streq(g1, want1), "gpus of %d: %s, want %s", (int)on1, g1 ? g1 : "(none)", want1);
        ck_assert_msg(gc && gitest_streq(gc, ""), "gpus of checkpointed %d: %s, want none", (int)ckpt, gc ? gc : "(no key)");
        /* A selection too. */
        j = list(c, gitest_sel_pids(1, &on1));
        g1 = gpus_of(assert_listed(j, on1, 0, "running"));
        ck_assert_msg(g1 && gitest_streq(g1, want1), "gpus of %d by pid: %s", (int)on1, g1 ? g1 : "(none)");
        /* Back from the checkpoint, on its GPU again. */
        gitest_op_ok(c, CUDACKPT_METHOD_RESUME, ckpt, "running");
        gc = gpus_of(assert_listed(list(c, NULL), ckpt, 0, "running"));
        ck_assert_msg(gc && gitest_streq(gc, ITEST_GPU0 "=8388608"), "gpus of resumed %d: %s", (int)ckpt, gc ? gc : "-");
        itest_daemon_stop(d);

        struct itest_daemon_opts none = { .config_json = "{\"nvml\":\"\"}" };
        d = itest_daemon_start(&none);
        c = itest_connect(d);
        itest_await_log(d, "No NVML", 10000);
        ck_assert_msg(!gpus_of(assert_listed(list(c, NULL), on0, 0, "running")), "gpus without NVML");
}
END_TEST

START_TEST(list_processes_selectors)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t s1 = itest_mapped_target(), s2 = itest_mapped_target(), s3 = itest_mapped_target();
        gitest_op_ok(c, CUDACKPT_METHOD_SUSPEND, s2, "checkpointed");

        cJSON *j = list(c, gitest_sel_pids(1, &s2));
        gitest_assert_pid_set(j, "processes", 1, &s2);
        assert_listed(j, s2, 0, "checkpointed");

        pid_t two[2] = { s3, s1 };
        j = list(c, gitest_sel_pids(2, two));
        gitest_assert_pid_set(j, "processes", 2, two);

        j = list(c, gitest_sel_tree(s1));
        gitest_assert_pid_set(j, "processes", 1, &s1);
        assert_listed(j, s1, 0, "running");

        j = list(c, gitest_sel_cgroup(gitest_cgroup_of(s1)));
        assert_listed(j, s1, 0, "running");
        assert_listed(j, s2, 0, "checkpointed");
        assert_listed(j, s3, 0, "running");
        const cJSON *e;
        cJSON_ArrayForEach(e, itest_get(j, "processes")) {
                const char *cg = gitest_ostr(e, "cgroup");
                ck_assert_msg(cg && strncmp(cg, gitest_cgroup_of(s1), strlen(gitest_cgroup_of(s1))) == 0,
                              "cgroup selector %s lists a process of %s", gitest_cgroup_of(s1), cg ? cg : "(none)");
        }
}
END_TEST

START_TEST(list_processes_in_flight)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t slow = itest_target(itest_sim_preload(), SIM, SLOW_CKPT_MEM, SLOW_CKPT_RATE, NULL);
        struct itest_conn *op = itest_connect(d);
        struct itest_conn *c = itest_connect(d);
        gitest_op_ok(op, CUDACKPT_METHOD_LOCK, slow, "locked");
        itest_send_call(op, CUDACKPT_METHOD_CHECKPOINT, itest_strdupf("{\"pid\":%d}", (int)slow));
        itest_await_in_flight(c, slow, "Checkpoint", 3000);
        double t0 = itest_now_ms();
        cJSON *j = list(c, gitest_sel_pids(1, &slow));
        double took = itest_now_ms() - t0;
        const cJSON *e = assert_listed(j, slow, 0, "locked");
        ck_assert_msg(gitest_streq(gitest_ostr(e, "in_flight"), "Checkpoint"), "no in_flight Checkpoint in %s", itest_dump(j));
        ck_assert_msg(took < 1000, "ListProcesses waited %.0f ms for the checkpoint", took);
        ck_assert_msg(!itest_conn_readable(op), "the checkpoint ended too soon for the test");
        itest_assert_state(itest_recv(op), slow, "checkpointed");
}
END_TEST

START_TEST(list_processes_stopped)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t s = itest_mapped_target(), other = itest_mapped_target();
        ck_assert_int_eq(kill(s, SIGSTOP), 0);
        itest_await_proc_state(s, 'T', true);
        const char *sels[] = { NULL, gitest_sel_pids(1, &s), gitest_sel_tree(s) };
        for (size_t i = 0; i < N_OF(sels); i++) {
                double t0 = itest_now_ms();
                cJSON *j = list(c, sels[i]);
                double took = itest_now_ms() - t0;
                const cJSON *e = assert_listed(j, s, 0, NULL);
                ck_assert_msg(gitest_streq(gitest_ostr(e, "stop"), "signal"), "no stop \"signal\" in %s", itest_dump(j));
                ck_assert_msg(took < 2000, "ListProcesses with a stopped target took %.0f ms", took);
                if (!sels[i])
                        assert_listed(j, other, 0, "running");
        }
        ck_assert_int_eq(kill(s, SIGCONT), 0);
        itest_await_proc_state(s, 'T', false);
        cJSON *j = list(c, gitest_sel_pids(1, &s));
        const cJSON *e = assert_listed(j, s, 0, "running");
        ck_assert_msg(!cJSON_GetObjectItemCaseSensitive(e, "stop"), "stop after SIGCONT: %s", itest_dump(j));
}
END_TEST

START_TEST(list_processes_non_root)
{
        if (itest_need_root())
                return;
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t own = itest_target_as(ITEST_OTHER_UID, itest_sim_preload_for_others(d), SIM, SMALL, NULL);
        pid_t roots = itest_mapped_target();
        struct itest_conn *c = itest_connect(d);
        /* Root sees both. */
        cJSON *j = list(c, NULL);
        assert_listed(j, own, ITEST_OTHER_UID, "running");
        assert_listed(j, roots, 0, "running");

        char msg[1024];
        struct gitest_as_ctx x = {
                .sock = d->sock,
                .json = "{\"method\":\"" CUDACKPT_METHOD_LIST_PROCESSES "\"}",
                .pid = own,
                .absent = roots,
                .uid = ITEST_OTHER_UID,
                .list = true,
        };
        int r = itest_run_as(ITEST_OTHER_UID, gitest_as_call, &x, msg, sizeof(msg));
        ck_assert_msg(r == 0, "ListProcesses as uid %d: %s", ITEST_OTHER_UID, msg);

        /* With a selector that holds root's process too. */
        ck_assert_str_eq(gitest_cgroup_of(own), gitest_cgroup_of(roots));
        x.json = itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_LIST_PROCESSES "\",\"parameters\":{\"selector\":%s}}",
                               gitest_sel_cgroup(gitest_cgroup_of(own)));
        r = itest_run_as(ITEST_OTHER_UID, gitest_as_call, &x, msg, sizeof(msg));
        ck_assert_msg(r == 0, "ListProcesses of cgroup %s as uid %d: %s", gitest_cgroup_of(own), ITEST_OTHER_UID, msg);
}
END_TEST

int main(int argc, char **argv)
{
        const TTest *tests[] = { tree_selector, cgroup_selector, list_processes, list_processes_gpus,
                list_processes_selectors, list_processes_in_flight, list_processes_stopped,
                list_processes_non_root, NULL };

        if (argc >= 2 && strcmp(argv[1], "--itest-tree") == 0)
                return gitest_tree_mode(argc, argv);
        return itest_run("integration.selection", "selection", 60, tests);
}
