/* test_index.c: the BPF process index (daemon/procindex.h), in the real
 * kernel, against the real daemon on the simulator.
 *
 * ListProcesses lists the same processes with or without the index, so
 * the tests read the daemon's own BPF map (found through the daemon's
 * /proc/PID/fdinfo) to see what the index holds: a process that mapped the
 * driver before the daemon started (the first scans), one that maps it
 * later (the mmap hook), the child of one that forks without exec (the
 * fork hook), one that execs away from it (the exec hook), one that dies
 * (the exit hook), and one whose first thread exits while another lives
 * (still there).  A full index and process_index_max 0 fall back to /proc.
 *
 * These daemons are given process_index_tracepoint, so that the index runs
 * on kernels without BPF trampolines too (through the sys_enter_mmap
 * tracepoint).  The index needs BPF and tracefs or BPF trampolines; without
 * them these tests skip, unless CUDACKPT_TEST_INDEX=required (CI sets it),
 * when they fail.  One more test runs a daemon with the default settings:
 * it must never attach the tracepoint (fentry or /proc scans only). */
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#define SIM "CUDACKPT_SIM=1"
#define SMALL "CUDACKPT_SIM_MEM_MIB=8"

/* This test program in one of its helper modes, preloaded with the driver. */
static pid_t helper(const char *mode)
{
        const char *argv[] = { "itest-index", mode, NULL };
        const char *env[] = { itest_sim_preload(), SIM, SMALL, NULL };
        return itest_target_exec((uid_t)-1, itest_self_exe(), argv, env);
}

/* ---- the daemon's index, read from outside -------------------------------- */

/* Waits for the daemon to say whether it has an index: true when it has;
 * false (the test should end, skipped) when it has none and none is
 * required; fails when one is required. */
static bool await_index(struct itest_daemon *d)
{
        for (double t0 = itest_now_ms(); itest_now_ms() - t0 < 20000;) {
                const char *log = itest_daemon_log(d);
                if (strstr(log, "Process index ready"))
                        return true;
                const char *no = strstr(log, "No process index");
                if (no) {
                        const char *req = getenv("CUDACKPT_TEST_INDEX");
                        const char *end = strchr(no, '\n');
                        int len = end ? (int)(end - no) : (int)strlen(no);
                        ck_assert_msg(!req || strcmp(req, "required") != 0, "the index is required: %.*s", len, no);
                        itest_skip("%.*s", len, no);
                        return false;
                }
                nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
        }
        ck_abort_msg("the daemon said nothing of its process index within 20 s");
        return false;
}

/* An fd of the daemon's index map: the hash map among the BPF maps its
 * fds name. */
static int index_map_fd(struct itest_daemon *d)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/fdinfo", (int)d->pid);
        DIR *dir = opendir(path);
        ck_assert_msg(dir, "opendir %s: %s", path, strerror(errno));
        int fd = -1;
        for (struct dirent *e; fd < 0 && (e = readdir(dir));) {
                if (e->d_name[0] == '.')
                        continue;
                char p[384], buf[1024];
                snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
                int f = open(p, O_RDONLY | O_CLOEXEC);
                if (f < 0)
                        continue;
                ssize_t n = read(f, buf, sizeof(buf) - 1);
                close(f);
                if (n <= 0)
                        continue;
                buf[n] = '\0';
                const char *type = strstr(buf, "map_type:"), *id = strstr(buf, "map_id:");
                if (type && id && atoi(type + 9) == BPF_MAP_TYPE_HASH)
                        fd = bpf_map_get_fd_by_id((unsigned)atoi(id + 7));
        }
        closedir(dir);
        ck_assert_msg(fd >= 0, "the daemon (pid %d) holds no BPF hash map", (int)d->pid);
        return fd;
}

static bool indexed(int map, pid_t pid)
{
        uint32_t key = (uint32_t)pid;
        uint8_t v;
        return bpf_map_lookup_elem(map, &key, &v) == 0;
}

static void await_indexed(int map, pid_t pid, bool want, const char *what)
{
        for (double t0 = itest_now_ms(); itest_now_ms() - t0 < 5000;) {
                if (indexed(map, pid) == want)
                        return;
                nanosleep(&(struct timespec){ 0, 2000000 }, NULL);
        }
        ck_abort_msg("%s (pid %d) is %s the index", what, (int)pid, want ? "not in" : "still in");
}

static cJSON *list_all(struct itest_conn *c)
{
        cJSON *j = itest_call(c, CUDACKPT_METHOD_LIST_PROCESSES, "{}");
        ck_assert_msg(!itest_error(j), "ListProcesses: %s", itest_dump(j));
        return j;
}

static bool listed(const cJSON *j, pid_t pid)
{
        const cJSON *e;
        cJSON_ArrayForEach(e, itest_get(j, "processes")) {
                const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "pid");
                if (cJSON_IsNumber(p) && (pid_t)p->valuedouble == pid)
                        return true;
        }
        return false;
}

/* A metric's value (a line "NAME VALUE"); asserts it is there. */
static double metric(struct itest_conn *c, const char *name)
{
        cJSON *j = itest_call(c, CUDACKPT_METHOD_GET_METRICS, NULL);
        const char *text = itest_str(j, "text");
        ck_assert_msg(text, "GetMetrics: %s", itest_dump(j));
        char *key = itest_strdupf("\n%s ", name);
        const char *p = strstr(text, key);
        ck_assert_msg(p, "no %s in the metrics", name);
        return strtod(p + strlen(key), NULL);
}

/* GetMetrics's whole text (the reply is the harness's, freed at teardown). */
static const char *metric_text(struct itest_conn *c)
{
        cJSON *j = itest_call(c, CUDACKPT_METHOD_GET_METRICS, NULL);
        const char *text = itest_str(j, "text");
        ck_assert_msg(text, "GetMetrics: %s", itest_dump(j));
        return text;
}

/* ---- tests ------------------------------------------------------------------ */

START_TEST(index_follows_processes)
{
        pid_t before = itest_mapped_target();
        /* A CUDA process and the child it forked, both before the daemon. */
        pid_t old_forker = helper("--itest-forker"), old_kids[2];
        ck_assert_msg(itest_children(old_forker, old_kids, 2) == 1, "the first forker has no child");
        struct itest_daemon_opts o = { .config_json = "{\"process_index_tracepoint\":true}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        if (!await_index(d))
                return;
        struct itest_conn *c = itest_connect(d);
        int map = index_map_fd(d);
        ck_assert_msg(metric(c, "cudackpt_process_index") == 1, "the metrics say no index is used");
        /* Fentry where the kernel has BPF trampolines, else the tracepoint;
         * the log and the metrics say which. */
        bool fentry = strstr(itest_daemon_log(d), "mmaps seen by fentry") != NULL;
        ck_assert_msg(fentry || strstr(itest_daemon_log(d), "mmaps seen by tracepoint, as process_index_tracepoint"),
                      "the log does not say how the index sees mmaps: %s", itest_daemon_log(d));
        ck_assert_msg(metric(c, fentry ? "cudackpt_process_index_info{hook=\"fentry\"}"
                                       : "cudackpt_process_index_info{hook=\"tracepoint\"}") == 1,
                      "the metrics do not say how the index sees mmaps");

        /* The first scans. */
        ck_assert_msg(indexed(map, before), "a process mapping the driver before the start is not in the index");
        ck_assert_msg(indexed(map, old_forker) && indexed(map, old_kids[0]),
                      "a forker (%d) or its child (%d) from before the start is not in the index", (int)old_forker,
                      (int)old_kids[0]);
        ck_assert_msg(!indexed(map, d->pid), "the daemon is in its own index");

        /* The mmap hook. */
        pid_t after = itest_mapped_target();
        await_indexed(map, after, true, "a process started after the index");
        pid_t plain = itest_small_target();
        ck_assert_msg(!indexed(map, plain), "a process that never mapped the driver is in the index");

        /* The fork hook: the child maps nothing itself. */
        pid_t forker = helper("--itest-forker");
        pid_t kids[2];
        ck_assert_msg(itest_children(forker, kids, 2) == 1, "the forker has no child");
        pid_t child = kids[0];
        ck_assert_msg(indexed(map, forker) && indexed(map, child), "a forked child (%d) of %d is not in the index",
                      (int)child, (int)forker);

        /* The exec hook: mapped, then exec'd into a shell without it. */
        pid_t gone_plain = helper("--itest-exec-plain");
        await_indexed(map, gone_plain, false, "a process that exec'd away from the driver");

        /* The exit hook: only the last thread. */
        pid_t leaderless = helper("--itest-leader-exits");
        ck_assert_int_eq(itest_proc_state(leaderless), 'Z');
        ck_assert_msg(indexed(map, leaderless), "a process whose first thread exited left the index");
        itest_target_kill(after);
        await_indexed(map, after, false, "a dead process");

        cJSON *j = list_all(c);
        ck_assert_msg(listed(j, before) && listed(j, child) && listed(j, forker), "not listed: %s", itest_dump(j));
        ck_assert_msg(!listed(j, after) && !listed(j, plain) && !listed(j, gone_plain), "listed: %s", itest_dump(j));
        ck_assert_msg(metric(c, "cudackpt_process_scans_total{source=\"index\"}") >= 1, "no list from the index");
        ck_assert_msg(metric(c, "cudackpt_process_scans_total{source=\"proc\"}") == 0, "a /proc scan was made");
        close(map);
}
END_TEST

START_TEST(index_full_scans_proc)
{
        struct itest_daemon_opts o = { .config_json = "{\"process_index_max\":16,\"process_index_tracepoint\":true}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        if (!await_index(d))
                return;
        struct itest_conn *c = itest_connect(d);
        pid_t p[20];
        for (size_t i = 0; i < 20; i++)
                p[i] = itest_mapped_target();
        cJSON *j = list_all(c);
        for (size_t i = 0; i < 20; i++)
                ck_assert_msg(listed(j, p[i]), "pid %d is not listed with a full index: %s", (int)p[i], itest_dump(j));
        ck_assert_msg(metric(c, "cudackpt_process_index") == 0, "a full index is still used");
        ck_assert_msg(metric(c, "cudackpt_process_scans_total{source=\"proc\"}") >= 1, "no /proc scan");
        ck_assert_msg(strstr(itest_daemon_log(d), "The process index is full"), "no warning of the full index");
}
END_TEST

START_TEST(index_off)
{
        struct itest_daemon_opts o = { .config_json = "{\"process_index_max\":0}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct itest_conn *c = itest_connect(d);
        pid_t p = itest_mapped_target();
        cJSON *j = list_all(c);
        ck_assert_msg(listed(j, p), "pid %d is not listed without an index: %s", (int)p, itest_dump(j));
        ck_assert_msg(metric(c, "cudackpt_process_index") == 0, "an index with process_index_max 0");
        ck_assert_msg(metric(c, "cudackpt_process_scans_total{source=\"proc\"}") == 1, "no /proc scan");
        ck_assert_msg(strstr(itest_daemon_log(d), "No process index (process_index_max is 0)"), "the log does not say so");
}
END_TEST

/* The default: fentry only.  Where the kernel has no BPF trampolines the
 * daemon scans /proc and leaves the tracepoint alone, and says why. */
START_TEST(index_default_never_tracepoint)
{
        struct itest_daemon *d = itest_daemon_start_default();
        for (double t0 = itest_now_ms(); itest_now_ms() - t0 < 20000;) {
                if (strstr(itest_daemon_log(d), "rocess index"))
                        break;
                nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
        }
        struct itest_conn *c = itest_connect(d);
        pid_t p = itest_mapped_target();
        cJSON *j = list_all(c);
        ck_assert_msg(listed(j, p), "pid %d is not listed: %s", (int)p, itest_dump(j));
        const char *log = itest_daemon_log(d);
        ck_assert_msg(!strstr(log, "mmaps seen by tracepoint"), "the default attached the tracepoint: %s", log);
        ck_assert_msg(!strstr(metric_text(c), "hook=\"tracepoint\""), "the metrics say the tracepoint runs");
        if (strstr(log, "mmaps seen by fentry")) {
                ck_assert_msg(metric(c, "cudackpt_process_index_info{hook=\"fentry\"}") == 1, "hook is not fentry");
                return;
        }
        /* No fentry here (or no BPF at all): /proc scans, and the log says
         * what would turn the tracepoint on when BPF itself works. */
        ck_assert_msg(strstr(log, "No process index ("), "the log says nothing of the index: %s", log);
        ck_assert_msg(!strstr(log, "Process index ready"), "an index is ready: %s", log);
        ck_assert_msg(metric(c, "cudackpt_process_index_info{hook=\"none\"}") == 1, "hook is not none");
        ck_assert_msg(metric(c, "cudackpt_process_index") == 0, "an index is said to be in use");
        ck_assert_msg(metric(c, "cudackpt_process_scans_total{source=\"proc\"}") >= 1, "no /proc scan");
        const char *req = getenv("CUDACKPT_TEST_INDEX");
        if (req && strcmp(req, "required") == 0)
                ck_assert_msg(strstr(log, "the sys_enter_mmap tracepoint, which costs every system call on the node, "
                                          "is off (process_index_tracepoint)"),
                              "the log does not say why the index is off: %s", log);
}
END_TEST

/* ---- helper modes (preloaded with the driver; ready on fd 3) ------------------ */

static int forker(void)
{
        pid_t parent = getpid(), pid = fork();
        if (pid < 0)
                return 1;
        if (pid == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(1);
                return itest_ready_and_wait();
        }
        close(3);
        for (;;)
                pause();
}

static int exec_plain(void)
{
        static char *const argv[] = { (char *)"sh", (char *)"-c", (char *)"echo 1 >&3; exec sleep 3600", NULL };
        static char *const env[] = { (char *)"PATH=/usr/bin:/bin", NULL };
        execve("/bin/sh", argv, env);
        return 1;
}

static void *leader_gone(void *arg)
{
        pid_t pid = *(pid_t *)arg;
        char path[64], buf[512];
        snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)pid);
        /* Ready once the first thread is a zombie. */
        for (;;) {
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
                if (fd >= 0)
                        close(fd);
                const char *p = n > 0 ? (buf[n] = '\0', strrchr(buf, ')')) : NULL;
                if (p && p[1] == ' ' && p[2] == 'Z')
                        break;
                nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
        }
        itest_ready_and_wait();
        return NULL;
}

static int leader_exits(void)
{
        static pid_t pid;
        pthread_t t;
        pid = getpid();
        if (pthread_create(&t, NULL, leader_gone, &pid) != 0)
                return 1;
        pthread_exit(NULL);
}

int main(int argc, char **argv)
{
        const TTest *tests[] = { index_follows_processes, index_full_scans_proc, index_off,
                index_default_never_tracepoint, NULL };

        if (argc >= 2 && strcmp(argv[1], "--itest-forker") == 0)
                return forker();
        if (argc >= 2 && strcmp(argv[1], "--itest-exec-plain") == 0)
                return exec_plain();
        if (argc >= 2 && strcmp(argv[1], "--itest-leader-exits") == 0)
                return leader_exits();
        return itest_run("integration.index", "index", 60, tests);
}
