/* test_groups.c: the group methods (LockGroup ... ResumeGroup) and
 * ListProcesses of issue 11, on the simulator, against the real daemon.
 *
 * A group acts on every member of one selection: pinned and authorised
 * before any driver call, one phase at a time on all members (no member
 * checkpointed before every member is locked, none unlocked before every
 * member is restored), converging from wherever the members are, rolling
 * back on failure.  Every test checks the states the members are left in
 * with GetState afterwards, not only what the reply says.
 *
 * cgroup and tree selections and ListProcesses count a process as a CUDA
 * process only when it maps the daemon's driver library: their targets are
 * started with LD_PRELOAD of the simulator (itest_sim_preload()).  pids
 * selections need no mapping: the driver's GetState decides.
 *
 * The binary doubles as a target (started through itest_target_exec()):
 *   --itest-tree SPEC...  forks one child per SPEC, waits until each has
 *                         exec'd, says ready on fd 3 and waits to be
 *                         killed (its children die with it).  SPEC: "sim"
 *                         (sleep with LD_PRELOAD and CUDACKPT_SIM=1),
 *                         "preload" (LD_PRELOAD only: never initialised),
 *                         "plain" (neither), "node" (this mode again, with
 *                         one "sim" child).  The node's own environment
 *                         names the library in LD_PRELOAD.
 *
 * The other-uid tests and the cgroup test need root; without it they say
 * so and pass without checking (as test_attacks does). */
#include "harness.h"

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

#define SIM "CUDACKPT_SIM=1"
#define SMALL "CUDACKPT_SIM_MEM_MIB=8"
/* A checkpoint of about 2 s (256 MiB at 128 MiB/s). */
#define SLOW_CKPT_MEM "CUDACKPT_SIM_MEM_MIB=256"
#define SLOW_CKPT_RATE "CUDACKPT_SIM_CKPT_MIBPS=128"
/* A restore of about 2 s. */
#define SLOW_RESTORE_RATE "CUDACKPT_SIM_RESTORE_MIBPS=128"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static const char *const all_groups[] = {
        CUDACKPT_METHOD_LOCK_GROUP,    CUDACKPT_METHOD_CHECKPOINT_GROUP, CUDACKPT_METHOD_RESTORE_GROUP,
        CUDACKPT_METHOD_UNLOCK_GROUP,  CUDACKPT_METHOD_SUSPEND_GROUP,    CUDACKPT_METHOD_RESUME_GROUP,
};

/* ---- small helpers ----------------------------------------------------------- */

static const char *short_name(const char *method)
{
        const char *dot = strrchr(method, '.');
        return dot ? dot + 1 : method;
}

static const char *sel_pids(size_t n, const pid_t *pids)
{
        size_t cap = 32 + n * 40, k;
        char *s = itest_keep(malloc(cap));
        ck_assert(s);
        k = (size_t)snprintf(s, cap, "{\"pids\":[");
        for (size_t i = 0; i < n; i++)
                k += (size_t)snprintf(s + k, cap - k, "%s{\"pid\":%d}", i ? "," : "", (int)pids[i]);
        snprintf(s + k, cap - k, "]}");
        return s;
}

static const char *sel_tree(pid_t root)
{
        return itest_strdupf("{\"tree\":%d}", (int)root);
}

static const char *sel_cgroup(const char *path)
{
        return itest_strdupf("{\"cgroup\":\"%s\"}", path);
}

static const char *group_params(const char *selector, const char *extra)
{
        return itest_strdupf("{\"selector\":%s%s%s}", selector, extra ? "," : "", extra ? extra : "");
}

static void send_group(struct itest_conn *c, const char *method, const char *selector, const char *extra)
{
        itest_send_call(c, method, group_params(selector, extra));
}

/* The one reply of a call made without "more": never "continues". */
static cJSON *recv_reply(struct itest_conn *c, int timeout_ms)
{
        cJSON *j = itest_recv_within(c, timeout_ms);
        ck_assert_msg(!cJSON_GetObjectItemCaseSensitive(j, "continues"),
                      "a call without \"more\" got a reply with \"continues\": %s", itest_dump(j));
        return j;
}

static cJSON *group(struct itest_conn *c, const char *method, const char *selector, const char *extra)
{
        send_group(c, method, selector, extra);
        return recv_reply(c, ITEST_REPLY_TIMEOUT_MS);
}

static cJSON *group_pids(struct itest_conn *c, const char *method, size_t n, const pid_t *pids)
{
        return group(c, method, sel_pids(n, pids), NULL);
}

static const char *ostr(const cJSON *o, const char *key)
{
        const cJSON *v = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool onum(const cJSON *o, const char *key, double *ret)
{
        const cJSON *v = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
        if (!cJSON_IsNumber(v))
                return false;
        *ret = v->valuedouble;
        return true;
}

static bool alive(pid_t pid)
{
        return kill(pid, 0) == 0;
}

/* The element of arr (of objects with "pid") for pid; asserts there is at
 * most one.  NULL when none. */
static const cJSON *arr_find(const cJSON *arr, pid_t pid, const cJSON *reply)
{
        const cJSON *e, *found = NULL;
        cJSON_ArrayForEach(e, arr) {
                double v;
                if (onum(e, "pid", &v) && v == (double)pid) {
                        ck_assert_msg(!found, "pid %d is listed twice in %s", (int)pid, itest_dump(reply));
                        found = e;
                }
        }
        return found;
}

static bool in_set(pid_t pid, size_t n, const pid_t *pids)
{
        for (size_t i = 0; i < n; i++)
                if (pids[i] == pid)
                        return true;
        return false;
}

/* Asserts that array key of reply holds exactly the pids given (any order). */
static const cJSON *assert_pid_set(const cJSON *reply, const char *key, size_t n, const pid_t *pids)
{
        const cJSON *arr = itest_get(reply, key);
        if (n == 0 && !arr)
                return NULL;
        ck_assert_msg(cJSON_IsArray(arr), "no array %s in %s", key, itest_dump(reply));
        const cJSON *e;
        cJSON_ArrayForEach(e, arr) {
                double v;
                ck_assert_msg(onum(e, "pid", &v), "an entry of %s without pid in %s", key, itest_dump(reply));
                ck_assert_msg(in_set((pid_t)v, n, pids), "%s holds pid %d, which it should not, in %s", key,
                              (int)v, itest_dump(reply));
        }
        for (size_t i = 0; i < n; i++)
                ck_assert_msg(arr_find(arr, pids[i], reply), "%s lacks pid %d in %s", key, (int)pids[i],
                              itest_dump(reply));
        return arr;
}

/* One Member of a reply: start time, a duration and, when state is not
 * NULL, that state. */
static const cJSON *assert_member(const cJSON *reply, pid_t pid, const char *state)
{
        const cJSON *m = arr_find(itest_get(reply, "members"), pid, reply);
        ck_assert_msg(m, "no member %d in %s", (int)pid, itest_dump(reply));
        double v;
        ck_assert_msg(onum(m, "start_time", &v), "member %d has no start_time in %s", (int)pid, itest_dump(reply));
        if (alive(pid))
                ck_assert_msg(v == (double)itest_start_time(pid), "member %d: start_time %.0f, /proc says %llu",
                              (int)pid, v, (unsigned long long)itest_start_time(pid));
        ck_assert_msg(onum(m, "duration_ms", &v) && v >= 0, "member %d has no duration_ms in %s", (int)pid,
                      itest_dump(reply));
        if (state) {
                const char *s = ostr(m, "state");
                ck_assert_msg(s && strcmp(s, state) == 0, "expected member %d in state %s in %s", (int)pid, state,
                              itest_dump(reply));
        }
        return m;
}

/* A member whose state the daemon may not know (its own step failed with
 * an error that implies none): the state, when given, is this one. */
static const cJSON *assert_member_opt(const cJSON *reply, pid_t pid, const char *state)
{
        const cJSON *m = assert_member(reply, pid, NULL);
        const char *s = ostr(m, "state");
        ck_assert_msg(!s || strcmp(s, state) == 0, "expected member %d in state %s (or none) in %s", (int)pid, state,
                      itest_dump(reply));
        return m;
}

/* A successful group reply whose members are exactly pids, all in state. */
static void assert_group_ok(const cJSON *reply, size_t n, const pid_t *pids, const char *state)
{
        itest_assert_ok(reply);
        assert_pid_set(reply, "members", n, pids);
        for (size_t i = 0; i < n; i++)
                assert_member(reply, pids[i], state);
        double v;
        ck_assert_msg(onum(itest_params(reply), "duration_ms", &v) && v >= 0, "no duration_ms in %s",
                      itest_dump(reply));
        itest_assert_absent(reply, "progress");
}

/* skipped holds exactly pids, each with its start time and reason not-cuda. */
static void assert_skipped(const cJSON *reply, size_t n, const pid_t *pids)
{
        const cJSON *arr = assert_pid_set(reply, "skipped", n, pids);
        for (size_t i = 0; i < n; i++) {
                const cJSON *e = arr_find(arr, pids[i], reply);
                double v;
                ck_assert_msg(onum(e, "start_time", &v) && v == (double)itest_start_time(pids[i]),
                              "skipped %d: bad start_time in %s", (int)pids[i], itest_dump(reply));
                const char *r = ostr(e, "reason");
                ck_assert_msg(r && strcmp(r, CUDACKPT_SKIP_NOT_CUDA) == 0, "skipped %d: reason not %s in %s",
                              (int)pids[i], CUDACKPT_SKIP_NOT_CUDA, itest_dump(reply));
        }
}

/* GroupFailed naming method, phase, the failed member and its error. */
static void assert_group_failed(const cJSON *j, const char *method, const char *phase, pid_t pid, const char *error)
{
        itest_assert_error(j, CUDACKPT_ERROR_GROUP_FAILED);
        itest_assert_str(j, "method", short_name(method));
        itest_assert_str(j, "phase", phase);
        itest_assert_int(j, "pid", pid);
        itest_assert_str(j, "error", error);
        const cJSON *ep = itest_get(j, "error_parameters");
        ck_assert_msg(cJSON_IsObject(ep), "no error_parameters object in %s", itest_dump(j));
        double v;
        ck_assert_msg(onum(ep, "pid", &v) && v == (double)pid, "error_parameters do not name pid %d: %s", (int)pid,
                      itest_dump(j));
        ck_assert_msg(cJSON_IsBool(itest_get(j, "rolled_back")), "no rolled_back in %s", itest_dump(j));
        ck_assert_msg(cJSON_IsArray(itest_get(j, "members")), "no members array in %s", itest_dump(j));
        ck_assert_msg(cJSON_IsArray(itest_get(j, "skipped")), "no skipped array in %s", itest_dump(j));
        if (strcmp(phase, CUDACKPT_PHASE_SELECT) != 0) {
                /* The failed member says so itself. */
                const cJSON *m = arr_find(itest_get(j, "members"), pid, j);
                ck_assert_msg(m, "the failed member %d is not among the members of %s", (int)pid, itest_dump(j));
                const char *e = ostr(m, "error");
                ck_assert_msg(e && strcmp(e, error) == 0, "member %d does not carry error %s in %s", (int)pid, error,
                              itest_dump(j));
                ck_assert_msg(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(m, "error_parameters")),
                              "member %d has no error_parameters in %s", (int)pid, itest_dump(j));
        }
}

static const cJSON *error_params(const cJSON *j)
{
        return itest_get(j, "error_parameters");
}

/* GetState now: state, nothing in flight. */
static void assert_state_now(struct itest_conn *c, pid_t pid, const char *state)
{
        cJSON *j = itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, (int)pid);
        itest_assert_state(j, pid, state);
        itest_assert_absent(j, "in_flight");
}

static void assert_all_now(struct itest_conn *c, size_t n, const pid_t *pids, const char *state)
{
        for (size_t i = 0; i < n; i++)
                assert_state_now(c, pids[i], state);
}

/* GetState's state (in flight or not). */
static const char *state_of(struct itest_conn *c, pid_t pid, bool *in_flight)
{
        cJSON *j = itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, (int)pid);
        itest_assert_ok(j);
        const char *s = itest_str(j, "state");
        ck_assert_msg(s, "GetState without state: %s", itest_dump(j));
        if (in_flight)
                *in_flight = itest_has(j, "in_flight");
        return s;
}

static bool streq(const char *a, const char *b)
{
        return a && b && strcmp(a, b) == 0;
}

/* Waits until GetState shows an operation in flight on pid (any). */
static void await_any_in_flight(struct itest_conn *c, pid_t pid, int timeout_ms)
{
        double deadline = itest_now_ms() + timeout_ms;
        bool f = false;
        while (state_of(c, pid, &f), !f)
                ck_assert_msg(itest_now_ms() < deadline, "nothing in flight on %d within %d ms", (int)pid,
                              timeout_ms);
}

/* Waits until GetState shows pid in state with an operation in flight. */
static void op_ok(struct itest_conn *c, const char *method, pid_t pid, const char *state)
{
        itest_assert_state(itest_call_pid(c, method, (int)pid), pid, state);
}

/* The whole of /proc/PID/<name> (environ, cgroup); *len its size. */
static char *read_proc(pid_t pid, const char *name, size_t *len)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
        size_t cap = 65536, n = 0;
        char *buf = itest_keep(malloc(cap + 1));
        ck_assert(buf);
        for (;;) {
                ssize_t k = read(fd, buf + n, cap - n);
                if (k < 0 && errno == EINTR)
                        continue;
                ck_assert_msg(k >= 0, "read %s: %s", path, strerror(errno));
                if (k == 0)
                        break;
                n += (size_t)k;
                ck_assert_msg(n < cap, "%s is too long", path);
        }
        close(fd);
        buf[n] = '\0';
        *len = n;
        return buf;
}

static bool environ_has(pid_t pid, const char *entry)
{
        size_t len;
        char *env = read_proc(pid, "environ", &len);
        for (size_t i = 0; i < len; i += strlen(env + i) + 1)
                if (strcmp(env + i, entry) == 0)
                        return true;
        return false;
}

static bool environ_has_prefix(pid_t pid, const char *prefix)
{
        size_t len;
        char *env = read_proc(pid, "environ", &len);
        for (size_t i = 0; i < len; i += strlen(env + i) + 1)
                if (strncmp(env + i, prefix, strlen(prefix)) == 0)
                        return true;
        return false;
}

/* The "0::" path of /proc/PID/cgroup (harness-owned). */
static const char *cgroup_of(pid_t pid)
{
        size_t len;
        char *text = read_proc(pid, "cgroup", &len);
        for (char *line = text; line && *line;) {
                char *nl = strchr(line, '\n');
                if (nl)
                        *nl = '\0';
                if (strncmp(line, "0::", 3) == 0)
                        return itest_strdupf("%s", line + 3);
                line = nl ? nl + 1 : NULL;
        }
        ck_abort_msg("no 0:: line in /proc/%d/cgroup", (int)pid);
}

/* Field `field` (1-based) of /proc/PID/stat. */
static unsigned long long stat_field(pid_t pid, int field)
{
        size_t len;
        char *buf = read_proc(pid, "stat", &len);
        char *p = strrchr(buf, ')');
        ck_assert(p);
        p++;
        for (int f = 3; f < field; f++) {
                p = strchr(p + 1, ' ');
                ck_assert(p);
        }
        return strtoull(p + 1, NULL, 10);
}

/* Turns the CUDACKPT_SIM_FAIL of a running target into one the simulator
 * ignores ("restore:..." becomes "xestore:..."), by writing its
 * environment in place (root, our own child): the failure goes away, as a
 * transient one would, without a new process. */
static void disarm_fail(pid_t pid)
{
        static const char key[] = "CUDACKPT_SIM_FAIL=";
        size_t len;
        char *env = read_proc(pid, "environ", &len);
        size_t off = len;
        for (size_t i = 0; i < len; i += strlen(env + i) + 1)
                if (strncmp(env + i, key, strlen(key)) == 0)
                        off = i + strlen(key);
        ck_assert_msg(off < len, "pid %d has no %s", (int)pid, key);
        unsigned long long env_start = stat_field(pid, 50);
        ck_assert_msg(env_start, "no env_start for %d", (int)pid);
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
        int fd = open(path, O_RDWR | O_CLOEXEC);
        ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
        ck_assert_msg(pwrite(fd, "x", 1, (off_t)(env_start + off)) == 1, "write %s: %s", path, strerror(errno));
        close(fd);
        ck_assert_msg(!environ_has_prefix(pid, "CUDACKPT_SIM_FAIL=restore") &&
                              !environ_has_prefix(pid, "CUDACKPT_SIM_FAIL=unlock") &&
                              !environ_has_prefix(pid, "CUDACKPT_SIM_FAIL=lock") &&
                              !environ_has_prefix(pid, "CUDACKPT_SIM_FAIL=checkpoint"),
                      "the environment of %d still arms a failure", (int)pid);
}

static bool log_line_count(const struct itest_daemon *d, const char *a, const char *b, int *ret)
{
        char path[160];
        snprintf(path, sizeof(path), "%s/daemon.log", d->dir);
        FILE *f = fopen(path, "re");
        if (!f)
                return false;
        char line[2048];
        int n = 0;
        while (fgets(line, sizeof(line), f))
                n += strstr(line, a) && (!b || strstr(line, b));
        fclose(f);
        *ret = n;
        return true;
}

/* ---- ListProcesses helpers --------------------------------------------------- */

static cJSON *list(struct itest_conn *c, const char *selector)
{
        if (selector)
                itest_send_call(c, CUDACKPT_METHOD_LIST_PROCESSES, itest_strdupf("{\"selector\":%s}", selector));
        else
                itest_send_call(c, CUDACKPT_METHOD_LIST_PROCESSES, NULL);
        cJSON *j = recv_reply(c, ITEST_REPLY_TIMEOUT_MS);
        itest_assert_ok(j);
        const cJSON *arr = itest_get(j, "processes");
        ck_assert_msg(cJSON_IsArray(arr), "no processes array in %s", itest_dump(j));
        /* Sorted by pid. */
        double last = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, arr) {
                double v;
                ck_assert_msg(onum(e, "pid", &v), "an entry without pid in %s", itest_dump(j));
                ck_assert_msg(v > last, "processes are not sorted by pid (%.0f after %.0f) in %s", v, last,
                              itest_dump(j));
                last = v;
        }
        return j;
}

static const cJSON *listed(const cJSON *j, pid_t pid)
{
        return arr_find(itest_get(j, "processes"), pid, j);
}

/* The entry of pid: every field, the state (NULL: absent, with stop). */
static const cJSON *assert_listed(const cJSON *j, pid_t pid, uid_t uid, const char *state)
{
        const cJSON *e = listed(j, pid);
        ck_assert_msg(e, "pid %d is not listed in %s", (int)pid, itest_dump(j));
        double v;
        ck_assert_msg(onum(e, "uid", &v) && v == (double)uid, "pid %d: uid is not %d in %s", (int)pid, (int)uid,
                      itest_dump(j));
        ck_assert_msg(onum(e, "start_time", &v) && v == (double)itest_start_time(pid),
                      "pid %d: start_time is not %llu in %s", (int)pid, (unsigned long long)itest_start_time(pid),
                      itest_dump(j));
        size_t len;
        char *comm = read_proc(pid, "comm", &len);
        if (len && comm[len - 1] == '\n')
                comm[len - 1] = '\0';
        const char *cmd = ostr(e, "command");
        ck_assert_msg(cmd && strcmp(cmd, comm) == 0, "pid %d: command is not \"%s\" in %s", (int)pid, comm,
                      itest_dump(j));
        const char *cg = ostr(e, "cgroup");
        ck_assert_msg(cg && strcmp(cg, cgroup_of(pid)) == 0, "pid %d: cgroup is not \"%s\" in %s", (int)pid,
                      cgroup_of(pid), itest_dump(j));
        const char *s = ostr(e, "state");
        if (state)
                ck_assert_msg(s && strcmp(s, state) == 0, "pid %d: state is not %s in %s", (int)pid, state,
                              itest_dump(j));
        else
                ck_assert_msg(!s, "pid %d: a state where none was expected in %s", (int)pid, itest_dump(j));
        return e;
}

/* ---- basic cycles -------------------------------------------------------------- */

START_TEST(suspend_resume_group)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t p[3] = { itest_small_target(), itest_small_target(), itest_small_target() };
        struct itest_conn *c = itest_connect(d);

        cJSON *j = group_pids(c, CUDACKPT_METHOD_SUSPEND_GROUP, 3, p);
        assert_group_ok(j, 3, p, "checkpointed");
        assert_skipped(j, 0, NULL);
        assert_all_now(c, 3, p, "checkpointed");

        j = group_pids(c, CUDACKPT_METHOD_RESUME_GROUP, 3, p);
        assert_group_ok(j, 3, p, "running");
        assert_all_now(c, 3, p, "running");

        /* One audit line for the group, with its member count. */
        double deadline = itest_now_ms() + 3000;
        int n = 0;
        while (!log_line_count(d, "method=SuspendGroup", NULL, &n) || n == 0)
                ck_assert_msg(itest_now_ms() < deadline, "no audit line for SuspendGroup");
        ck_assert_msg(n == 1, "%d audit lines for one SuspendGroup", n);
        ck_assert_msg(log_line_count(d, "method=SuspendGroup", "3 member", &n) && n == 1,
                      "the SuspendGroup audit line does not give the member count 3");
}
END_TEST

START_TEST(phase_groups_cycle)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t p[3] = { itest_small_target(), itest_small_target(), itest_small_target() };
        struct itest_conn *c = itest_connect(d);
        /* Pinned this time, each to its start time. */
        const char *sel = itest_strdupf("{\"pids\":[{\"pid\":%d,\"start_time\":%llu},{\"pid\":%d,\"start_time\":%llu},"
                                        "{\"pid\":%d}]}",
                                        (int)p[0], (unsigned long long)itest_start_time(p[0]), (int)p[1],
                                        (unsigned long long)itest_start_time(p[1]), (int)p[2]);
        static const struct {
                const char *method;
                const char *state;
        } steps[] = {
                { CUDACKPT_METHOD_LOCK_GROUP, "locked" },
                { CUDACKPT_METHOD_CHECKPOINT_GROUP, "checkpointed" },
                { CUDACKPT_METHOD_RESTORE_GROUP, "locked" },
                { CUDACKPT_METHOD_UNLOCK_GROUP, "running" },
        };
        for (size_t i = 0; i < N_OF(steps); i++) {
                cJSON *j = group(c, steps[i].method, sel, NULL);
                assert_group_ok(j, 3, p, steps[i].state);
                assert_all_now(c, 3, p, steps[i].state);
        }
        /* LockGroup with its timeout. */
        cJSON *j = group(c, CUDACKPT_METHOD_LOCK_GROUP, sel, "\"timeout_ms\":5000");
        assert_group_ok(j, 3, p, "locked");
        assert_all_now(c, 3, p, "locked");
        assert_group_ok(group(c, CUDACKPT_METHOD_UNLOCK_GROUP, sel, NULL), 3, p, "running");
        assert_all_now(c, 3, p, "running");
}
END_TEST

/* One gpu_mapping for every member reaches the driver: refused where the
 * members' GPU is not named (driver's INVALID_VALUE), accepted where it is. */
START_TEST(group_gpu_mapping)
{
        static const char *const env[] = { "CUDACKPT_SIM_DEVICE_COUNT=2", NULL };
        struct itest_daemon_opts o = { .env = env };
        struct itest_daemon *d = itest_daemon_start(&o);
        /* Both on the second GPU. */
        pid_t p[2] = { itest_target(SIM, SMALL, "CUDACKPT_SIM_GPUS=1", NULL),
                       itest_target(SIM, SMALL, "CUDACKPT_SIM_GPUS=1", NULL) };
        struct itest_conn *c = itest_connect(d);
        const char *sel = sel_pids(2, p);
        assert_group_ok(group(c, CUDACKPT_METHOD_SUSPEND_GROUP, sel, NULL), 2, p, "checkpointed");

        /* GPU0 -> GPU1 leaves their GPU1 unnamed. */
        cJSON *j = group(c, CUDACKPT_METHOD_RESUME_GROUP, sel,
                         "\"gpu_mapping\":{\"" ITEST_GPU0 "\":\"" ITEST_GPU1 "\"}");
        itest_assert_error(j, CUDACKPT_ERROR_GROUP_FAILED);
        itest_assert_str(j, "phase", CUDACKPT_PHASE_RESTORE);
        itest_assert_str(j, "error", CUDACKPT_ERROR_INVALID_GPU_MAPPING);
        itest_assert_bool(j, "rolled_back", false);
        assert_all_now(c, 2, p, "checkpointed");

        j = group(c, CUDACKPT_METHOD_RESTORE_GROUP, sel, "\"gpu_mapping\":{\"" ITEST_GPU1 "\":\"" ITEST_GPU0 "\"}");
        assert_group_ok(j, 2, p, "locked");
        assert_all_now(c, 2, p, "locked");
        assert_group_ok(group(c, CUDACKPT_METHOD_UNLOCK_GROUP, sel, NULL), 2, p, "running");

        /* And ResumeGroup with one. */
        assert_group_ok(group(c, CUDACKPT_METHOD_SUSPEND_GROUP, sel, NULL), 2, p, "checkpointed");
        /* Now on the first GPU: back to the second. */
        j = group(c, CUDACKPT_METHOD_RESUME_GROUP, sel, "\"gpu_mapping\":{\"" ITEST_GPU0 "\":\"" ITEST_GPU1 "\"}");
        assert_group_ok(j, 2, p, "running");
        assert_all_now(c, 2, p, "running");
}
END_TEST

/* ---- barriers ------------------------------------------------------------------ */

/* One member slow to lock (a 1.5 s kernel): while its lock runs, the fast
 * members are locked, not checkpointed. */
START_TEST(barrier_lock_before_checkpoint)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t slow = itest_target(SIM, SMALL, "CUDACKPT_SIM_BUSY_MS=1500", NULL);
        pid_t p[3] = { itest_small_target(), itest_small_target(), slow };
        struct itest_conn *op = itest_connect(d);
        struct itest_conn *watch = itest_connect(d);
        send_group(op, CUDACKPT_METHOD_SUSPEND_GROUP, sel_pids(3, p), "\"timeout_ms\":10000");

        int seen = 0, samples = 0;
        double deadline = itest_now_ms() + 10000;
        while (!itest_conn_readable(op)) {
                ck_assert_msg(itest_now_ms() < deadline, "SuspendGroup did not answer within 10 s");
                const char *a = state_of(watch, p[0], NULL);
                const char *b = state_of(watch, p[1], NULL);
                /* Asked after the fast ones: if the slow one is not locked
                 * yet, it was not when they were asked either. */
                const char *s = state_of(watch, slow, NULL);
                samples++;
                if (!streq(s, "running"))
                        continue;
                ck_assert_msg(!streq(a, "checkpointed") && !streq(b, "checkpointed"),
                              "a member was checkpointed (%s, %s) while the slow member was still locking", a, b);
                seen += streq(a, "locked") && streq(b, "locked");
        }
        ck_assert_msg(seen > 0, "never saw the fast members locked while the slow one locked (%d samples)", samples);
        cJSON *j = recv_reply(op, 1000);
        assert_group_ok(j, 3, p, "checkpointed");
        assert_all_now(watch, 3, p, "checkpointed");
}
END_TEST

/* One member slow to restore (2 s): while it restores, the fast members
 * are locked, not running. */
START_TEST(barrier_restore_before_unlock)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t slow = itest_target(SIM, SLOW_CKPT_MEM, SLOW_RESTORE_RATE, NULL);
        pid_t p[3] = { itest_small_target(), itest_small_target(), slow };
        struct itest_conn *op = itest_connect(d);
        struct itest_conn *watch = itest_connect(d);
        assert_group_ok(group_pids(op, CUDACKPT_METHOD_SUSPEND_GROUP, 3, p), 3, p, "checkpointed");

        send_group(op, CUDACKPT_METHOD_RESUME_GROUP, sel_pids(3, p), NULL);
        int seen = 0, samples = 0;
        double deadline = itest_now_ms() + 10000;
        while (!itest_conn_readable(op)) {
                ck_assert_msg(itest_now_ms() < deadline, "ResumeGroup did not answer within 10 s");
                const char *a = state_of(watch, p[0], NULL);
                const char *b = state_of(watch, p[1], NULL);
                const char *s = state_of(watch, slow, NULL);
                samples++;
                if (!streq(s, "checkpointed"))
                        continue;
                ck_assert_msg(!streq(a, "running") && !streq(b, "running"),
                              "a member was unlocked (%s, %s) while the slow member was still restoring", a, b);
                seen += streq(a, "locked") && streq(b, "locked");
        }
        ck_assert_msg(seen > 0, "never saw the fast members locked while the slow one restored (%d samples)",
                      samples);
        assert_group_ok(recv_reply(op, 1000), 3, p, "running");
        assert_all_now(watch, 3, p, "running");
}
END_TEST

/* ---- failures in each phase -------------------------------------------------- */

START_TEST(fail_lock_rolls_back)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        const char *methods[] = { CUDACKPT_METHOD_SUSPEND_GROUP, CUDACKPT_METHOD_LOCK_GROUP };
        for (size_t i = 0; i < N_OF(methods); i++) {
                pid_t bad = itest_target(SIM, SMALL, "CUDACKPT_SIM_FAIL=lock:CUDA_ERROR_UNKNOWN", NULL);
                pid_t p[3] = { itest_small_target(), bad, itest_small_target() };
                cJSON *j = group_pids(c, methods[i], 3, p);
                assert_group_failed(j, methods[i], CUDACKPT_PHASE_LOCK, bad, CUDACKPT_ERROR_DRIVER_ERROR);
                const char *ce = ostr(error_params(j), "cuda_error");
                ck_assert_msg(streq(ce, "CUDA_ERROR_UNKNOWN"), "error_parameters without the CUDA error: %s",
                              itest_dump(j));
                itest_assert_bool(j, "rolled_back", true);
                for (size_t k = 0; k < 3; k++)
                        assert_member(j, p[k], "running");
                assert_all_now(c, 3, p, "running");
        }
}
END_TEST

START_TEST(fail_checkpoint_rolls_back)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        /* SuspendGroup from running ... */
        pid_t bad = itest_target(SIM, SMALL, "CUDACKPT_SIM_FAIL=checkpoint:CUDA_ERROR_UNKNOWN", NULL);
        pid_t p[3] = { itest_small_target(), bad, itest_small_target() };
        cJSON *j = group_pids(c, CUDACKPT_METHOD_SUSPEND_GROUP, 3, p);
        assert_group_failed(j, CUDACKPT_METHOD_SUSPEND_GROUP, CUDACKPT_PHASE_CHECKPOINT, bad,
                            CUDACKPT_ERROR_DRIVER_ERROR);
        itest_assert_bool(j, "rolled_back", true);
        for (size_t k = 0; k < 3; k++)
                assert_member(j, p[k], "running");
        assert_all_now(c, 3, p, "running");

        /* ... and CheckpointGroup from locked: back to running too. */
        pid_t bad2 = itest_target(SIM, SMALL, "CUDACKPT_SIM_FAIL=checkpoint:CUDA_ERROR_UNKNOWN", NULL);
        pid_t q[3] = { itest_small_target(), itest_small_target(), bad2 };
        assert_group_ok(group_pids(c, CUDACKPT_METHOD_LOCK_GROUP, 3, q), 3, q, "locked");
        j = group_pids(c, CUDACKPT_METHOD_CHECKPOINT_GROUP, 3, q);
        assert_group_failed(j, CUDACKPT_METHOD_CHECKPOINT_GROUP, CUDACKPT_PHASE_CHECKPOINT, bad2,
                            CUDACKPT_ERROR_DRIVER_ERROR);
        itest_assert_bool(j, "rolled_back", true);
        for (size_t k = 0; k < 3; k++)
                assert_member(j, q[k], "running");
        assert_all_now(c, 3, q, "running");
}
END_TEST

START_TEST(fail_managed_memory)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t bad = itest_target(SIM, SMALL, "CUDACKPT_SIM_MANAGED=1", NULL);
        pid_t p[3] = { itest_small_target(), itest_small_target(), bad };
        cJSON *j = group_pids(c, CUDACKPT_METHOD_SUSPEND_GROUP, 3, p);
        assert_group_failed(j, CUDACKPT_METHOD_SUSPEND_GROUP, CUDACKPT_PHASE_CHECKPOINT, bad,
                            CUDACKPT_ERROR_NOT_SUPPORTED);
        itest_assert_bool(j, "rolled_back", true);
        for (size_t k = 0; k < 3; k++)
                assert_member(j, p[k], "running");
        assert_all_now(c, 3, p, "running");
}
END_TEST

/* A failed restore unlocks no member: the restored stay locked, the failed
 * one checkpointed.  Once the failure is gone, a retried ResumeGroup
 * finishes the job. */
START_TEST(fail_restore_then_retry)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t bad = itest_target(SIM, SMALL, "CUDACKPT_SIM_FAIL=restore:CUDA_ERROR_UNKNOWN", NULL);
        pid_t p[3] = { itest_small_target(), bad, itest_small_target() };
        assert_group_ok(group_pids(c, CUDACKPT_METHOD_SUSPEND_GROUP, 3, p), 3, p, "checkpointed");

        cJSON *j = group_pids(c, CUDACKPT_METHOD_RESUME_GROUP, 3, p);
        assert_group_failed(j, CUDACKPT_METHOD_RESUME_GROUP, CUDACKPT_PHASE_RESTORE, bad, CUDACKPT_ERROR_DRIVER_ERROR);
        itest_assert_bool(j, "rolled_back", false);
        assert_member(j, p[0], "locked");
        assert_member_opt(j, bad, "checkpointed");
        assert_member(j, p[2], "locked");
        assert_state_now(c, p[0], "locked");
        assert_state_now(c, bad, "checkpointed");
        assert_state_now(c, p[2], "locked");

        /* The same from RestoreGroup. */
        j = group_pids(c, CUDACKPT_METHOD_RESTORE_GROUP, 3, p);
        assert_group_failed(j, CUDACKPT_METHOD_RESTORE_GROUP, CUDACKPT_PHASE_RESTORE, bad,
                            CUDACKPT_ERROR_DRIVER_ERROR);
        itest_assert_bool(j, "rolled_back", false);
        assert_state_now(c, p[0], "locked");
        assert_state_now(c, bad, "checkpointed");

        disarm_fail(bad);
        j = group_pids(c, CUDACKPT_METHOD_RESUME_GROUP, 3, p);
        assert_group_ok(j, 3, p, "running");
        assert_all_now(c, 3, p, "running");
}
END_TEST

START_TEST(fail_unlock)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t bad = itest_target(SIM, SMALL, "CUDACKPT_SIM_FAIL=unlock:CUDA_ERROR_UNKNOWN", NULL);
        pid_t p[3] = { itest_small_target(), bad, itest_small_target() };
        assert_group_ok(group_pids(c, CUDACKPT_METHOD_LOCK_GROUP, 3, p), 3, p, "locked");
        cJSON *j = group_pids(c, CUDACKPT_METHOD_UNLOCK_GROUP, 3, p);
        assert_group_failed(j, CUDACKPT_METHOD_UNLOCK_GROUP, CUDACKPT_PHASE_UNLOCK, bad, CUDACKPT_ERROR_DRIVER_ERROR);
        /* Not every member is running. */
        itest_assert_bool(j, "rolled_back", false);
        assert_member(j, p[0], "running");
        assert_member_opt(j, bad, "locked");
        assert_member(j, p[2], "running");
        assert_state_now(c, p[0], "running");
        assert_state_now(c, bad, "locked");
        assert_state_now(c, p[2], "running");

        /* ResumeGroup's unlock phase: restored, then all but one unlocked. */
        pid_t bad2 = itest_target(SIM, SMALL, "CUDACKPT_SIM_FAIL=unlock:CUDA_ERROR_UNKNOWN", NULL);
        pid_t q[2] = { itest_small_target(), bad2 };
        assert_group_ok(group_pids(c, CUDACKPT_METHOD_SUSPEND_GROUP, 2, q), 2, q, "checkpointed");
        j = group_pids(c, CUDACKPT_METHOD_RESUME_GROUP, 2, q);
        assert_group_failed(j, CUDACKPT_METHOD_RESUME_GROUP, CUDACKPT_PHASE_UNLOCK, bad2, CUDACKPT_ERROR_DRIVER_ERROR);
        assert_member(j, q[0], "running");
        assert_member_opt(j, bad2, "locked");
        assert_state_now(c, q[0], "running");
        assert_state_now(c, bad2, "locked");

        /* Once the unlock works again, a retry converges. */
        disarm_fail(bad2);
        assert_group_ok(group_pids(c, CUDACKPT_METHOD_RESUME_GROUP, 2, q), 2, q, "running");
        assert_all_now(c, 2, q, "running");
}
END_TEST

/* A checkpoint fails, and bringing another member back fails too: that
 * member says why (rollback_error), rolled_back is false. */
START_TEST(fail_rollback)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t ck = itest_target(SIM, SMALL, "CUDACKPT_SIM_FAIL=checkpoint:CUDA_ERROR_UNKNOWN", NULL);
        pid_t un = itest_target(SIM, SMALL, "CUDACKPT_SIM_FAIL=unlock:CUDA_ERROR_UNKNOWN", NULL);
        pid_t p[3] = { itest_small_target(), ck, un };
        cJSON *j = group_pids(c, CUDACKPT_METHOD_SUSPEND_GROUP, 3, p);
        assert_group_failed(j, CUDACKPT_METHOD_SUSPEND_GROUP, CUDACKPT_PHASE_CHECKPOINT, ck,
                            CUDACKPT_ERROR_DRIVER_ERROR);
        itest_assert_bool(j, "rolled_back", false);
        const cJSON *m = assert_member_opt(j, un, "locked");
        ck_assert_msg(ostr(m, "rollback_error"), "member %d, whose unlock failed, has no rollback_error: %s", (int)un,
                      itest_dump(j));
        assert_member(j, p[0], "running");
        assert_member(j, ck, "running");
        assert_state_now(c, p[0], "running");
        assert_state_now(c, ck, "running");
        assert_state_now(c, un, "locked");
}
END_TEST

/* timeout_ms bounds the whole lock phase: a member behind a 3 s kernel
 * times out, and the others are unlocked again. */
START_TEST(lock_timeout_rolls_back)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t busy = itest_target(SIM, SMALL, "CUDACKPT_SIM_BUSY_MS=3000", NULL);
        pid_t p[3] = { itest_small_target(), busy, itest_small_target() };
        double t0 = itest_now_ms();
        cJSON *j = group(c, CUDACKPT_METHOD_SUSPEND_GROUP, sel_pids(3, p), "\"timeout_ms\":200");
        double took = itest_now_ms() - t0;
        assert_group_failed(j, CUDACKPT_METHOD_SUSPEND_GROUP, CUDACKPT_PHASE_LOCK, busy, CUDACKPT_ERROR_TIMEOUT);
        itest_assert_bool(j, "rolled_back", true);
        ck_assert_msg(took < 2500, "SuspendGroup with timeout_ms 200 answered after %.0f ms", took);
        assert_all_now(c, 3, p, "running");
}
END_TEST

/* ---- convergence ------------------------------------------------------------- */

START_TEST(converge_suspend_and_resume)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t p[4] = { itest_small_target(), itest_small_target(), itest_small_target(), itest_small_target() };
        /* running, locked, checkpointed, running. */
        op_ok(c, CUDACKPT_METHOD_LOCK, p[1], "locked");
        op_ok(c, CUDACKPT_METHOD_SUSPEND, p[2], "checkpointed");
        cJSON *j = group_pids(c, CUDACKPT_METHOD_SUSPEND_GROUP, 4, p);
        assert_group_ok(j, 4, p, "checkpointed");
        assert_all_now(c, 4, p, "checkpointed");

        /* checkpointed, locked, running, checkpointed. */
        op_ok(c, CUDACKPT_METHOD_RESTORE, p[1], "locked");
        op_ok(c, CUDACKPT_METHOD_RESUME, p[2], "running");
        j = group_pids(c, CUDACKPT_METHOD_RESUME_GROUP, 4, p);
        assert_group_ok(j, 4, p, "running");
        assert_all_now(c, 4, p, "running");
}
END_TEST

/* Members already where the method leads: nothing to do, success. */
START_TEST(converge_nothing_to_do)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t p[2] = { itest_small_target(), itest_small_target() };
        assert_group_ok(group_pids(c, CUDACKPT_METHOD_UNLOCK_GROUP, 2, p), 2, p, "running");
        assert_group_ok(group_pids(c, CUDACKPT_METHOD_RESUME_GROUP, 2, p), 2, p, "running");
        assert_all_now(c, 2, p, "running");
        assert_group_ok(group_pids(c, CUDACKPT_METHOD_LOCK_GROUP, 2, p), 2, p, "locked");
        assert_group_ok(group_pids(c, CUDACKPT_METHOD_LOCK_GROUP, 2, p), 2, p, "locked");
        assert_group_ok(group_pids(c, CUDACKPT_METHOD_RESTORE_GROUP, 2, p), 2, p, "locked");
        assert_all_now(c, 2, p, "locked");
        assert_group_ok(group_pids(c, CUDACKPT_METHOD_CHECKPOINT_GROUP, 2, p), 2, p, "checkpointed");
        assert_group_ok(group_pids(c, CUDACKPT_METHOD_CHECKPOINT_GROUP, 2, p), 2, p, "checkpointed");
        assert_group_ok(group_pids(c, CUDACKPT_METHOD_SUSPEND_GROUP, 2, p), 2, p, "checkpointed");
        assert_all_now(c, 2, p, "checkpointed");
        /* One locked, one checkpointed: CheckpointGroup converges. */
        op_ok(c, CUDACKPT_METHOD_RESTORE, p[0], "locked");
        assert_group_ok(group_pids(c, CUDACKPT_METHOD_CHECKPOINT_GROUP, 2, p), 2, p, "checkpointed");
        /* And RestoreGroup from the mix the other way. */
        op_ok(c, CUDACKPT_METHOD_RESTORE, p[1], "locked");
        assert_group_ok(group_pids(c, CUDACKPT_METHOD_RESTORE_GROUP, 2, p), 2, p, "locked");
        /* UnlockGroup from locked + running. */
        op_ok(c, CUDACKPT_METHOD_UNLOCK, p[0], "running");
        assert_group_ok(group_pids(c, CUDACKPT_METHOD_UNLOCK_GROUP, 2, p), 2, p, "running");
        assert_all_now(c, 2, p, "running");
}
END_TEST

/* A member in a state the method cannot converge from: InvalidState in
 * phase state, and nothing changed. */
START_TEST(invalid_state_in_phase_state)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        static const struct {
                const char *method;
                const char *good; /* the other member's state */
                const char *bad;  /* the refused member's state */
        } rows[] = {
                { CUDACKPT_METHOD_LOCK_GROUP, "running", "checkpointed" },
                { CUDACKPT_METHOD_LOCK_GROUP, "running", "failed" },
                { CUDACKPT_METHOD_CHECKPOINT_GROUP, "locked", "running" },
                { CUDACKPT_METHOD_RESTORE_GROUP, "checkpointed", "running" },
                { CUDACKPT_METHOD_UNLOCK_GROUP, "locked", "checkpointed" },
                { CUDACKPT_METHOD_SUSPEND_GROUP, "running", "failed" },
                { CUDACKPT_METHOD_RESUME_GROUP, "checkpointed", "failed" },
        };
        for (size_t i = 0; i < N_OF(rows); i++) {
                pid_t pair[2];
                const char *states[2] = { rows[i].good, rows[i].bad };
                for (int k = 0; k < 2; k++) {
                        const char *s = states[k];
                        if (strcmp(s, "failed") == 0) {
                                /* A lock that fails and leaves the state FAILED. */
                                pair[k] = itest_target(SIM, SMALL, "CUDACKPT_SIM_FAIL=lock:CUDA_ERROR_UNKNOWN:failed",
                                                       NULL);
                                cJSON *j = itest_call_pid(c, CUDACKPT_METHOD_LOCK, (int)pair[k]);
                                itest_assert_error(j, CUDACKPT_ERROR_DRIVER_ERROR);
                        } else {
                                pair[k] = itest_small_target();
                                if (strcmp(s, "locked") == 0)
                                        op_ok(c, CUDACKPT_METHOD_LOCK, pair[k], "locked");
                                else if (strcmp(s, "checkpointed") == 0)
                                        op_ok(c, CUDACKPT_METHOD_SUSPEND, pair[k], "checkpointed");
                        }
                        assert_state_now(c, pair[k], s);
                }
                cJSON *j = group_pids(c, rows[i].method, 2, pair);
                assert_group_failed(j, rows[i].method, CUDACKPT_PHASE_STATE, pair[1], CUDACKPT_ERROR_INVALID_STATE);
                assert_state_now(c, pair[0], rows[i].good);
                assert_state_now(c, pair[1], rows[i].bad);
        }
}
END_TEST

/* ---- members that go, change, stop ---------------------------------------------- */

START_TEST(member_exits_mid_group)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t slow = itest_target(SIM, SLOW_CKPT_MEM, SLOW_CKPT_RATE, NULL);
        pid_t p[3] = { itest_small_target(), slow, itest_small_target() };
        struct itest_conn *op = itest_connect(d);
        struct itest_conn *watch = itest_connect(d);
        send_group(op, CUDACKPT_METHOD_SUSPEND_GROUP, sel_pids(3, p), NULL);
        /* The fast ones are checkpointed, the slow one's checkpoint runs. */
        itest_await_state(watch, p[0], "checkpointed", 5000);
        itest_await_state(watch, p[2], "checkpointed", 5000);
        bool f = false;
        const char *s = state_of(watch, slow, &f);
        ck_assert_msg(f && streq(s, "locked"), "the slow member is not checkpointing: %s%s", s,
                      f ? " (in flight)" : "");
        ck_assert_msg(!itest_conn_readable(op), "SuspendGroup answered before its slow checkpoint ended");
        itest_target_kill(slow);

        cJSON *j = recv_reply(op, 10000);
        assert_group_failed(j, CUDACKPT_METHOD_SUSPEND_GROUP, CUDACKPT_PHASE_CHECKPOINT, slow,
                            CUDACKPT_ERROR_PROCESS_GONE);
        assert_member(j, p[0], "running");
        assert_member(j, p[2], "running");
        assert_state_now(watch, p[0], "running");
        assert_state_now(watch, p[2], "running");
}
END_TEST

struct as_ctx {
        const char *sock;
        const char *json;       /* the call */
        const char *error;      /* expected error, NULL for success */
        const char *phase;      /* for GroupFailed */
        pid_t pid;              /* GroupFailed's pid; ListProcesses: must be listed */
        pid_t absent;           /* ListProcesses: must not be listed */
        uid_t uid;              /* ListProcesses: every entry's uid */
        bool list;              /* a ListProcesses reply, to check as above */
};

static const char *jstr_of(const cJSON *o, const char *key)
{
        const cJSON *v = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
        return cJSON_IsString(v) ? v->valuestring : "";
}

/* In a child of another uid: one call, its reply checked without ck_assert. */
static int as_call(void *p, char *msg, size_t n)
{
        const struct as_ctx *x = p;
        cJSON *j = NULL;
        if (itest_raw_call(x->sock, x->json, ITEST_REPLY_TIMEOUT_MS, &j, msg, n) < 0)
                return 1;
        const cJSON *err = cJSON_GetObjectItemCaseSensitive(j, "error");
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(j, "parameters");
        char *text = cJSON_PrintUnformatted(j);
        int ret = 0;
        if (x->error) {
                const cJSON *pid = cJSON_GetObjectItemCaseSensitive(params, "pid");
                if (!cJSON_IsString(err) || strcmp(err->valuestring, x->error) != 0)
                        snprintf(msg, n, "expected %s, got %s", x->error, text);
                else if (x->phase && strcmp(jstr_of(params, "phase"), x->phase) != 0)
                        snprintf(msg, n, "expected phase %s, got %s", x->phase, text);
                else if (x->pid && (!cJSON_IsNumber(pid) || pid->valuedouble != (double)x->pid))
                        snprintf(msg, n, "expected pid %d, got %s", (int)x->pid, text);
                else if (x->phase && strcmp(jstr_of(params, "error"), CUDACKPT_ERROR_PERMISSION_DENIED) != 0)
                        snprintf(msg, n, "expected the member's error PermissionDenied, got %s", text);
        } else if (err) {
                snprintf(msg, n, "expected success, got %s", text);
        } else if (x->list) {
                const cJSON *procs = cJSON_GetObjectItemCaseSensitive(params, "processes");
                const cJSON *e;
                bool found = false;
                cJSON_ArrayForEach(e, procs) {
                        const cJSON *pid = cJSON_GetObjectItemCaseSensitive(e, "pid");
                        const cJSON *uid = cJSON_GetObjectItemCaseSensitive(e, "uid");
                        if (!cJSON_IsNumber(pid) || !cJSON_IsNumber(uid)) {
                                snprintf(msg, n, "an entry without pid or uid: %s", text);
                                break;
                        }
                        if (x->uid != (uid_t)-1 && uid->valuedouble != (double)x->uid) {
                                snprintf(msg, n, "uid %d sees pid %.0f of uid %.0f: %s", (int)x->uid,
                                         pid->valuedouble, uid->valuedouble, text);
                                break;
                        }
                        if (pid->valuedouble == (double)x->absent) {
                                snprintf(msg, n, "pid %d is listed: %s", (int)x->absent, text);
                                break;
                        }
                        found |= pid->valuedouble == (double)x->pid;
                }
                if (!msg[0] && x->pid && !found)
                        snprintf(msg, n, "pid %d is not listed: %s", (int)x->pid, text);
                if (!msg[0] && !cJSON_IsArray(procs))
                        snprintf(msg, n, "no processes array: %s", text);
        }
        ret = msg[0] ? 1 : 0;
        free(text);
        cJSON_Delete(j);
        return ret;
}

/* A caller that is not root names a process of another user among its
 * own: the whole group is refused in phase select, nothing changes. */
START_TEST(other_user_member_refused)
{
        if (itest_need_root())
                return;
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t own = itest_target_as(ITEST_OTHER_UID, SIM, SMALL, NULL);
        pid_t own2 = itest_target_as(ITEST_OTHER_UID, SIM, SMALL, NULL);
        pid_t roots = itest_small_target();
        struct itest_conn *c = itest_connect(d);
        pid_t p[3] = { own, roots, own2 };
        char msg[1024];
        for (size_t i = 0; i < N_OF(all_groups); i++) {
                struct as_ctx x = {
                        .sock = d->sock,
                        .json = itest_strdupf("{\"method\":\"%s\",\"parameters\":{\"selector\":%s}}", all_groups[i],
                                              sel_pids(3, p)),
                        .error = CUDACKPT_ERROR_GROUP_FAILED,
                        .phase = CUDACKPT_PHASE_SELECT,
                        .pid = roots,
                };
                int r = itest_run_as(ITEST_OTHER_UID, as_call, &x, msg, sizeof(msg));
                ck_assert_msg(r == 0, "%s as uid %d: %s", short_name(all_groups[i]), ITEST_OTHER_UID, msg);
                assert_all_now(c, 3, p, "running");
        }
        /* Its own processes alone: the group goes through. */
        pid_t mine[2] = { own, own2 };
        struct as_ctx ok = {
                .sock = d->sock,
                .json = itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_SUSPEND_GROUP "\",\"parameters\":{\"selector\":%s}}",
                                      sel_pids(2, mine)),
        };
        int r = itest_run_as(ITEST_OTHER_UID, as_call, &ok, msg, sizeof(msg));
        ck_assert_msg(r == 0, "SuspendGroup of its own as uid %d: %s", ITEST_OTHER_UID, msg);
        assert_all_now(c, 2, mine, "checkpointed");
        assert_state_now(c, roots, "running");
}
END_TEST

START_TEST(not_cuda_in_pids)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t plain = itest_target(SMALL, NULL);
        pid_t p[3] = { itest_small_target(), plain, itest_small_target() };
        for (size_t i = 0; i < N_OF(all_groups); i++) {
                cJSON *j = group_pids(c, all_groups[i], 3, p);
                assert_group_failed(j, all_groups[i], CUDACKPT_PHASE_STATE, plain, CUDACKPT_ERROR_NOT_CUDA_PROCESS);
                assert_state_now(c, p[0], "running");
                assert_state_now(c, p[2], "running");
        }
}
END_TEST

START_TEST(no_such_process_in_pids)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t dead = itest_dead_pid();
        pid_t p[3] = { itest_small_target(), dead, itest_small_target() };
        for (size_t i = 0; i < N_OF(all_groups); i++) {
                cJSON *j = group_pids(c, all_groups[i], 3, p);
                assert_group_failed(j, all_groups[i], CUDACKPT_PHASE_SELECT, dead, CUDACKPT_ERROR_NO_SUCH_PROCESS);
                assert_state_now(c, p[0], "running");
                assert_state_now(c, p[2], "running");
        }
}
END_TEST

START_TEST(start_time_pins)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t a = itest_small_target(), b = itest_small_target();
        unsigned long long sa = (unsigned long long)itest_start_time(a), sb = (unsigned long long)itest_start_time(b);
        const char *wrong = itest_strdupf("{\"pids\":[{\"pid\":%d,\"start_time\":%llu},{\"pid\":%d,\"start_time\":%llu}]}",
                                          (int)a, sa, (int)b, sb + 1);
        for (size_t i = 0; i < N_OF(all_groups); i++) {
                cJSON *j = group(c, all_groups[i], wrong, NULL);
                assert_group_failed(j, all_groups[i], CUDACKPT_PHASE_SELECT, b, CUDACKPT_ERROR_PROCESS_CHANGED);
                const cJSON *ep = error_params(j);
                double v;
                ck_assert_msg(onum(ep, "start_time", &v) && v == (double)(sb + 1) && onum(ep, "actual_start_time", &v) &&
                                      v == (double)sb,
                              "ProcessChanged without the start times: %s", itest_dump(j));
                assert_state_now(c, a, "running");
                assert_state_now(c, b, "running");
        }
        const char *right = itest_strdupf("{\"pids\":[{\"pid\":%d,\"start_time\":%llu},{\"pid\":%d,\"start_time\":%llu}]}",
                                          (int)a, sa, (int)b, sb);
        pid_t p[2] = { a, b };
        assert_group_ok(group(c, CUDACKPT_METHOD_SUSPEND_GROUP, right, NULL), 2, p, "checkpointed");
        assert_all_now(c, 2, p, "checkpointed");
}
END_TEST

/* A stopped member: ProcessStopped in phase state, at once, nothing changed. */
START_TEST(stopped_member)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t st = itest_small_target();
        pid_t p[2] = { itest_small_target(), st };
        ck_assert_int_eq(kill(st, SIGSTOP), 0);
        itest_await_proc_state(st, 'T', true);
        double t0 = itest_now_ms();
        cJSON *j = group_pids(c, CUDACKPT_METHOD_SUSPEND_GROUP, 2, p);
        double took = itest_now_ms() - t0;
        assert_group_failed(j, CUDACKPT_METHOD_SUSPEND_GROUP, CUDACKPT_PHASE_STATE, st, CUDACKPT_ERROR_PROCESS_STOPPED);
        ck_assert_msg(streq(ostr(error_params(j), "stop"), "signal"), "no stop \"signal\" in %s", itest_dump(j));
        ck_assert_msg(took < 2000, "SuspendGroup with a stopped member took %.0f ms", took);
        assert_state_now(c, p[0], "running");
        ck_assert_int_eq(kill(st, SIGCONT), 0);
        itest_await_proc_state(st, 'T', false);
        assert_state_now(c, st, "running");
        assert_group_ok(group_pids(c, CUDACKPT_METHOD_SUSPEND_GROUP, 2, p), 2, p, "checkpointed");
}
END_TEST

/* ---- groups together ----------------------------------------------------------- */

/* SuspendGroup {A, B} then ResumeGroup {B, C} on another connection: the
 * second waits for the first (they share B), then both end right. */
START_TEST(overlapping_groups)
{
        struct itest_daemon *d = itest_daemon_start_default();
        /* A 4 s checkpoint: a loaded machine may take a while to see it run. */
        pid_t a = itest_target(SIM, "CUDACKPT_SIM_MEM_MIB=512", SLOW_CKPT_RATE, NULL);
        pid_t b = itest_small_target(), cc = itest_small_target();
        struct itest_conn *c1 = itest_connect(d);
        struct itest_conn *c2 = itest_connect(d);
        struct itest_conn *watch = itest_connect(d);
        op_ok(watch, CUDACKPT_METHOD_SUSPEND, cc, "checkpointed");

        pid_t g1[2] = { a, b }, g2[2] = { b, cc };
        send_group(c1, CUDACKPT_METHOD_SUSPEND_GROUP, sel_pids(2, g1), NULL);
        /* A's checkpoint runs (locked, in flight): the first group is under way.
         * Its Lock in flight, or the gap between the phases, is too early: a
         * loaded machine may show those first. */
        itest_await_in_flight(watch, a, "Checkpoint", 5000);
        send_group(c2, CUDACKPT_METHOD_RESUME_GROUP, sel_pids(2, g2), NULL);

        int seen = 0;
        double deadline = itest_now_ms() + 10000;
        for (;;) {
                ck_assert_msg(itest_now_ms() < deadline, "the first group did not end within 10 s");
                const char *sc = state_of(watch, cc, NULL);
                bool f = false;
                const char *sa = state_of(watch, a, &f);
                if (!f || !streq(sa, "locked"))
                        break;
                /* The first group still runs: the second has not begun. */
                ck_assert_msg(streq(sc, "checkpointed"), "ResumeGroup acted on %d (%s) while the SuspendGroup it "
                              "overlaps was still running", (int)cc, sc);
                ck_assert_msg(!itest_conn_readable(c2), "ResumeGroup answered while the SuspendGroup it overlaps ran: %s",
                              itest_dump(itest_recv(c2)));
                seen++;
        }
        ck_assert_msg(seen > 0, "never saw the first group running");
        cJSON *j1 = recv_reply(c1, 10000);
        cJSON *j2 = recv_reply(c2, 10000);
        assert_group_ok(j1, 2, g1, "checkpointed");
        assert_group_ok(j2, 2, g2, "running");
        assert_state_now(watch, a, "checkpointed");
        assert_state_now(watch, b, "running");
        assert_state_now(watch, cc, "running");
}
END_TEST

START_TEST(client_disconnects)
{
        struct itest_daemon *d = itest_daemon_start_default();
        /* 64 MiB at 128 MiB/s: half a second each, long past the close. */
        pid_t p[2] = { itest_target(SIM, "CUDACKPT_SIM_MEM_MIB=64", SLOW_CKPT_RATE, NULL),
                       itest_target(SIM, "CUDACKPT_SIM_MEM_MIB=64", SLOW_CKPT_RATE, NULL) };
        struct itest_conn *op = itest_connect(d);
        struct itest_conn *watch = itest_connect(d);
        send_group(op, CUDACKPT_METHOD_SUSPEND_GROUP, sel_pids(2, p), NULL);
        itest_conn_close(op);
        itest_await_state(watch, p[0], "checkpointed", 10000);
        itest_await_state(watch, p[1], "checkpointed", 10000);
        ck_assert_msg(!itest_daemon_exited(d), "the daemon died");
        assert_group_ok(group_pids(watch, CUDACKPT_METHOD_RESUME_GROUP, 2, p), 2, p, "running");

        /* The same with the sending side shut right after the call. */
        struct itest_conn *op2 = itest_connect(d);
        send_group(op2, CUDACKPT_METHOD_SUSPEND_GROUP, sel_pids(2, p), NULL);
        ck_assert_int_eq(shutdown(op2->fd, SHUT_WR), 0);
        assert_group_ok(recv_reply(op2, 10000), 2, p, "checkpointed");
        itest_assert_eof(op2, 5000);
        assert_all_now(watch, 2, p, "checkpointed");
}
END_TEST

/* ---- limits ---------------------------------------------------------------------- */

static pid_t start_tree(const char *const *specs);

START_TEST(group_too_large)
{
        struct itest_daemon_opts o = { .config_json = "{\"max_group_members\":2}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct itest_conn *c = itest_connect(d);
        pid_t p[3] = { itest_small_target(), itest_small_target(), itest_small_target() };
        for (size_t i = 0; i < N_OF(all_groups); i++) {
                cJSON *j = group_pids(c, all_groups[i], 3, p);
                itest_assert_error(j, CUDACKPT_ERROR_GROUP_TOO_LARGE);
                itest_assert_int(j, "limit", 2);
                itest_assert_int(j, "members", 3);
        }
        assert_all_now(c, 3, p, "running");
        assert_group_ok(group_pids(c, CUDACKPT_METHOD_SUSPEND_GROUP, 2, p), 2, p, "checkpointed");

        /* A tree of three CUDA processes. */
        static const char *const specs[] = { "sim", "sim", NULL };
        pid_t root = start_tree(specs);
        cJSON *j = group(c, CUDACKPT_METHOD_SUSPEND_GROUP, sel_tree(root), NULL);
        itest_assert_error(j, CUDACKPT_ERROR_GROUP_TOO_LARGE);
        itest_assert_int(j, "limit", 2);
        long long m = 0;
        ck_assert_msg(itest_int(j, "members", &m) && m > 2, "GroupTooLarge for 3 with members <= 2: %s", itest_dump(j));
        assert_state_now(c, root, "running");
}
END_TEST

START_TEST(groups_in_flight_queue_full)
{
        struct itest_daemon_opts o = { .config_json = "{\"max_groups_in_flight\":1}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        pid_t slow = itest_target(SIM, SLOW_CKPT_MEM, SLOW_CKPT_RATE, NULL);
        pid_t other = itest_small_target();
        struct itest_conn *c1 = itest_connect(d);
        struct itest_conn *c2 = itest_connect(d);
        struct itest_conn *watch = itest_connect(d);
        send_group(c1, CUDACKPT_METHOD_SUSPEND_GROUP, sel_pids(1, &slow), NULL);
        await_any_in_flight(watch, slow, 5000);
        cJSON *j = group_pids(c2, CUDACKPT_METHOD_SUSPEND_GROUP, 1, &other);
        itest_assert_error(j, CUDACKPT_ERROR_QUEUE_FULL);
        itest_assert_int(j, "limit", 1);
        itest_assert_absent(j, "pid");
        assert_state_now(watch, other, "running");
        ck_assert_msg(!itest_conn_readable(c1), "the slow group ended too soon for the test");
        assert_group_ok(recv_reply(c1, 10000), 1, &slow, "checkpointed");
        /* Room again. */
        assert_group_ok(group_pids(c2, CUDACKPT_METHOD_SUSPEND_GROUP, 1, &other), 1, &other, "checkpointed");
}
END_TEST

START_TEST(invalid_parameters)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t a = itest_small_target();
        unsigned long long sa = (unsigned long long)itest_start_time(a);
        const char *bad[] = {
                itest_strdupf("{\"selector\":{\"pids\":[{\"pid\":%d}],\"tree\":%d}}", (int)a, (int)a),
                itest_strdupf("{\"selector\":{\"cgroup\":\"/\",\"tree\":%d}}", (int)a),
                "{\"selector\":{\"pids\":[]}}",
                itest_strdupf("{\"selector\":{\"pids\":[{\"pid\":%d},{\"pid\":%d}]}}", (int)a, (int)a),
                itest_strdupf("{\"selector\":{\"pids\":[{\"pid\":%d,\"start_time\":%llu},{\"pid\":%d}]}}", (int)a, sa,
                              (int)a),
                "{\"selector\":{\"pids\":[{\"pid\":0}]}}",
                itest_strdupf("{\"selector\":{\"pids\":[{\"pid\":%d},{\"pid\":0}]}}", (int)a),
                "{\"selector\":{\"pids\":[{\"pid\":-1}]}}",
                "{\"selector\":{}}",
                "{}",
                "{\"selector\":{\"tree\":0}}",
                itest_strdupf("{\"selector\":{\"pids\":[{\"pid\":%d}]},\"bogus\":1}", (int)a),
        };
        for (size_t i = 0; i < N_OF(all_groups); i++)
                for (size_t k = 0; k < N_OF(bad); k++) {
                        cJSON *j = itest_call(c, all_groups[i], bad[k]);
                        ck_assert_msg(streq(itest_error(j), "org.varlink.service.InvalidParameter"),
                                      "%s %s: expected InvalidParameter, got %s", short_name(all_groups[i]), bad[k],
                                      itest_dump(j));
                        ck_assert_msg(itest_str(j, "parameter"), "InvalidParameter names no parameter: %s",
                                      itest_dump(j));
                }
        assert_state_now(c, a, "running");
        /* ListProcesses too, for a bad selector. */
        for (size_t k = 0; k < 9; k++) {
                cJSON *j = itest_call(c, CUDACKPT_METHOD_LIST_PROCESSES, bad[k]);
                ck_assert_msg(streq(itest_error(j), "org.varlink.service.InvalidParameter"),
                              "ListProcesses %s: expected InvalidParameter, got %s", bad[k], itest_dump(j));
        }
}
END_TEST

/* ---- tree and cgroup selectors --------------------------------------------------- */

/* The test program in --itest-tree mode with the given child specs (see the
 * top of the file); returns once every child has exec'd. */
static pid_t start_tree(const char *const *specs)
{
        const char *argv[16] = { "itest-tree", "--itest-tree" };
        size_t n = 2;
        for (size_t i = 0; specs[i] && n < 15; i++)
                argv[n++] = specs[i];
        argv[n] = NULL;
        const char *env[] = { itest_sim_preload(), SIM, SMALL, NULL };
        return itest_target_exec((uid_t)-1, itest_self_exe(), argv, env);
}

struct tree {
        pid_t root, sim, node, grandchild, preload, plain;
};

/* A tree: root (CUDA) -> sim (CUDA), node (CUDA) -> grandchild (CUDA),
 * preload (maps the driver, never initialised), plain (neither). */
static void make_tree(struct tree *t)
{
        static const char *const specs[] = { "sim", "node", "preload", "plain", NULL };
        memset(t, 0, sizeof(*t));
        t->root = start_tree(specs);
        pid_t kids[8];
        size_t n = itest_children(t->root, kids, 8);
        ck_assert_msg(n == 4, "the tree's root has %zu children, not 4", n);
        for (size_t i = 0; i < n; i++) {
                pid_t g[4];
                size_t ng = itest_children(kids[i], g, 4);
                bool sim = environ_has(kids[i], SIM), pre = environ_has_prefix(kids[i], "LD_PRELOAD=");
                if (ng == 1) {
                        t->node = kids[i];
                        t->grandchild = g[0];
                } else if (sim && pre) {
                        t->sim = kids[i];
                } else if (pre) {
                        t->preload = kids[i];
                } else {
                        t->plain = kids[i];
                }
        }
        ck_assert_msg(t->sim && t->node && t->grandchild && t->preload && t->plain, "the tree is not as built");
}

START_TEST(tree_selector)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        struct tree t;
        make_tree(&t);
        pid_t outside = itest_mapped_target();
        pid_t members[4] = { t.root, t.sim, t.node, t.grandchild };
        pid_t skipped[2] = { t.preload, t.plain };

        cJSON *j = group(c, CUDACKPT_METHOD_SUSPEND_GROUP, sel_tree(t.root), NULL);
        assert_group_ok(j, 4, members, "checkpointed");
        assert_skipped(j, 2, skipped);
        assert_all_now(c, 4, members, "checkpointed");
        assert_state_now(c, outside, "running");

        j = list(c, sel_tree(t.root));
        assert_pid_set(j, "processes", 4, members);
        for (size_t i = 0; i < 4; i++)
                assert_listed(j, members[i], 0, "checkpointed");

        /* A subtree. */
        pid_t sub[2] = { t.node, t.grandchild };
        j = group(c, CUDACKPT_METHOD_RESUME_GROUP, sel_tree(t.node), NULL);
        assert_group_ok(j, 2, sub, "running");
        assert_skipped(j, 0, NULL);
        assert_state_now(c, t.root, "checkpointed");

        j = group(c, CUDACKPT_METHOD_RESUME_GROUP, sel_tree(t.root), NULL);
        assert_group_ok(j, 4, members, "running");
        assert_skipped(j, 2, skipped);
        assert_all_now(c, 4, members, "running");

        /* A tree whose root is gone. */
        pid_t dead = itest_dead_pid();
        j = group(c, CUDACKPT_METHOD_SUSPEND_GROUP, sel_tree(dead), NULL);
        assert_group_failed(j, CUDACKPT_METHOD_SUSPEND_GROUP, CUDACKPT_PHASE_SELECT, dead,
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

static void write_pid(const char *path, pid_t pid)
{
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
        char buf[32];
        int n = snprintf(buf, sizeof(buf), "%d\n", (int)pid);
        ck_assert_msg(write(fd, buf, (size_t)n) == n, "write %d to %s: %s", (int)pid, path, strerror(errno));
        close(fd);
}

START_TEST(cgroup_selector)
{
        if (itest_need_root())
                return;
        char *mnt = itest_strdupf("/tmp/itest-cg2-%d-XXXXXX", (int)getpid());
        ck_assert(mkdtemp(mnt));
        if (mount("none", mnt, "cgroup2", 0, NULL) < 0) {
                fprintf(stderr, "%s: skipped, cannot mount cgroup2: %s\n", tcase_name(), strerror(errno));
                rmdir(mnt);
                return;
        }
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
        write_pid(itest_strdupf("%s/cgroup.procs", top), a);
        write_pid(itest_strdupf("%s/cgroup.procs", top), b);
        write_pid(itest_strdupf("%s/cgroup.procs", top), ninit);
        write_pid(itest_strdupf("%s/cgroup.procs", sub), in_sub);
        write_pid(itest_strdupf("%s/cgroup.procs", sib), in_sib);
        ck_assert_str_eq(cgroup_of(a), top_path);
        ck_assert_str_eq(cgroup_of(in_sub), sub_path);

        pid_t all[3] = { a, b, in_sub };
        cJSON *j = group(c, CUDACKPT_METHOD_SUSPEND_GROUP, sel_cgroup(top_path), NULL);
        assert_group_ok(j, 3, all, "checkpointed");
        assert_skipped(j, 1, &ninit);
        assert_all_now(c, 3, all, "checkpointed");
        assert_state_now(c, in_sib, "running");
        assert_state_now(c, at_root, "running");

        /* A trailing slash names the same group. */
        j = list(c, sel_cgroup(itest_strdupf("%s/", top_path)));
        assert_pid_set(j, "processes", 3, all);
        assert_listed(j, a, 0, "checkpointed");
        assert_listed(j, in_sub, 0, "checkpointed");

        j = list(c, sel_cgroup(sub_path));
        assert_pid_set(j, "processes", 1, &in_sub);

        j = group(c, CUDACKPT_METHOD_RESUME_GROUP, sel_cgroup(sub_path), NULL);
        assert_group_ok(j, 1, &in_sub, "running");
        assert_state_now(c, a, "checkpointed");
        j = group(c, CUDACKPT_METHOD_RESUME_GROUP, sel_cgroup(top_path), NULL);
        assert_group_ok(j, 3, all, "running");
        assert_all_now(c, 3, all, "running");

        /* An empty group selects nobody. */
        ck_assert_int_eq(mkdir(itest_strdupf("%s/empty", sub), 0755), 0);
        j = list(c, sel_cgroup(itest_strdupf("%s/empty", sub_path)));
        assert_pid_set(j, "processes", 0, NULL);
        ck_assert_int_eq(rmdir(itest_strdupf("%s/empty", sub)), 0);

        for (size_t i = 0; i < N_OF(moved); i++)
                write_pid(itest_strdupf("%s/cgroup.procs", mnt), moved[i]);
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
        op_ok(c, CUDACKPT_METHOD_SUSPEND, s2, "checkpointed");
        op_ok(c, CUDACKPT_METHOD_LOCK, locked, "locked");

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
        op_ok(c, CUDACKPT_METHOD_SUSPEND, ckpt, "checkpointed");

        cJSON *j = list(c, NULL);
        const char *want0 = ITEST_GPU0 "=8388608", *want1 = ITEST_GPU1 "=16777216";
        const char *g0 = gpus_of(assert_listed(j, on0, 0, "running"));
        const char *g1 = gpus_of(assert_listed(j, on1, 0, "running"));
        const char *gc = gpus_of(assert_listed(j, ckpt, 0, "checkpointed"));
        ck_assert_msg(g0 && streq(g0, want0), "gpus of %d: %s, want %s", (int)on0, g0 ? g0 : "(none)", want0);
        ck_assert_msg(g1 && streq(g1, want1), "gpus of %d: %s, want %s", (int)on1, g1 ? g1 : "(none)", want1);
        ck_assert_msg(gc && streq(gc, ""), "gpus of checkpointed %d: %s, want none", (int)ckpt, gc ? gc : "(no key)");
        /* A selection too. */
        j = list(c, sel_pids(1, &on1));
        g1 = gpus_of(assert_listed(j, on1, 0, "running"));
        ck_assert_msg(g1 && streq(g1, want1), "gpus of %d by pid: %s", (int)on1, g1 ? g1 : "(none)");
        /* Back from the checkpoint, on its GPU again. */
        op_ok(c, CUDACKPT_METHOD_RESUME, ckpt, "running");
        gc = gpus_of(assert_listed(list(c, NULL), ckpt, 0, "running"));
        ck_assert_msg(gc && streq(gc, ITEST_GPU0 "=8388608"), "gpus of resumed %d: %s", (int)ckpt, gc ? gc : "-");
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
        op_ok(c, CUDACKPT_METHOD_SUSPEND, s2, "checkpointed");

        cJSON *j = list(c, sel_pids(1, &s2));
        assert_pid_set(j, "processes", 1, &s2);
        assert_listed(j, s2, 0, "checkpointed");

        pid_t two[2] = { s3, s1 };
        j = list(c, sel_pids(2, two));
        assert_pid_set(j, "processes", 2, two);

        j = list(c, sel_tree(s1));
        assert_pid_set(j, "processes", 1, &s1);
        assert_listed(j, s1, 0, "running");

        j = list(c, sel_cgroup(cgroup_of(s1)));
        assert_listed(j, s1, 0, "running");
        assert_listed(j, s2, 0, "checkpointed");
        assert_listed(j, s3, 0, "running");
        const cJSON *e;
        cJSON_ArrayForEach(e, itest_get(j, "processes")) {
                const char *cg = ostr(e, "cgroup");
                ck_assert_msg(cg && strncmp(cg, cgroup_of(s1), strlen(cgroup_of(s1))) == 0,
                              "cgroup selector %s lists a process of %s", cgroup_of(s1), cg ? cg : "(none)");
        }
}
END_TEST

START_TEST(list_processes_in_flight)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t slow = itest_target(itest_sim_preload(), SIM, SLOW_CKPT_MEM, SLOW_CKPT_RATE, NULL);
        struct itest_conn *op = itest_connect(d);
        struct itest_conn *c = itest_connect(d);
        op_ok(op, CUDACKPT_METHOD_LOCK, slow, "locked");
        itest_send_call(op, CUDACKPT_METHOD_CHECKPOINT, itest_strdupf("{\"pid\":%d}", (int)slow));
        itest_await_in_flight(c, slow, "Checkpoint", 3000);
        double t0 = itest_now_ms();
        cJSON *j = list(c, sel_pids(1, &slow));
        double took = itest_now_ms() - t0;
        const cJSON *e = assert_listed(j, slow, 0, "locked");
        ck_assert_msg(streq(ostr(e, "in_flight"), "Checkpoint"), "no in_flight Checkpoint in %s", itest_dump(j));
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
        const char *sels[] = { NULL, sel_pids(1, &s), sel_tree(s) };
        for (size_t i = 0; i < N_OF(sels); i++) {
                double t0 = itest_now_ms();
                cJSON *j = list(c, sels[i]);
                double took = itest_now_ms() - t0;
                const cJSON *e = assert_listed(j, s, 0, NULL);
                ck_assert_msg(streq(ostr(e, "stop"), "signal"), "no stop \"signal\" in %s", itest_dump(j));
                ck_assert_msg(took < 2000, "ListProcesses with a stopped target took %.0f ms", took);
                if (!sels[i])
                        assert_listed(j, other, 0, "running");
        }
        ck_assert_int_eq(kill(s, SIGCONT), 0);
        itest_await_proc_state(s, 'T', false);
        cJSON *j = list(c, sel_pids(1, &s));
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
        struct as_ctx x = {
                .sock = d->sock,
                .json = "{\"method\":\"" CUDACKPT_METHOD_LIST_PROCESSES "\"}",
                .pid = own,
                .absent = roots,
                .uid = ITEST_OTHER_UID,
                .list = true,
        };
        int r = itest_run_as(ITEST_OTHER_UID, as_call, &x, msg, sizeof(msg));
        ck_assert_msg(r == 0, "ListProcesses as uid %d: %s", ITEST_OTHER_UID, msg);

        /* With a selector that holds root's process too. */
        ck_assert_str_eq(cgroup_of(own), cgroup_of(roots));
        x.json = itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_LIST_PROCESSES "\",\"parameters\":{\"selector\":%s}}",
                               sel_cgroup(cgroup_of(own)));
        r = itest_run_as(ITEST_OTHER_UID, as_call, &x, msg, sizeof(msg));
        ck_assert_msg(r == 0, "ListProcesses of cgroup %s as uid %d: %s", cgroup_of(own), ITEST_OTHER_UID, msg);
}
END_TEST

/* ---- "more": progress replies ---------------------------------------------------- */

struct progress_log {
        int n;
        char phase[64][16];
        pid_t pid[64];
        char state[64][16];
        double done[64], total[64];
};

/* Reads replies until one without "continues"; checks and logs every
 * progress reply.  Returns the final reply. */
static cJSON *recv_with_progress(struct itest_conn *c, struct progress_log *log, size_t n, const pid_t *pids)
{
        memset(log, 0, sizeof(*log));
        for (;;) {
                cJSON *j = itest_recv_within(c, ITEST_REPLY_TIMEOUT_MS);
                const cJSON *cont = cJSON_GetObjectItemCaseSensitive(j, "continues");
                if (!cont)
                        return j;
                ck_assert_msg(cJSON_IsTrue(cont), "\"continues\" that is not true: %s", itest_dump(j));
                ck_assert_msg(!itest_error(j), "an error reply with continues: %s", itest_dump(j));
                const cJSON *p = itest_get(j, "progress");
                ck_assert_msg(cJSON_IsObject(p), "a reply with continues but no progress: %s", itest_dump(j));
                ck_assert_msg(!itest_has(j, "members"), "a progress reply with members: %s", itest_dump(j));
                const char *phase = ostr(p, "phase");
                const cJSON *m = cJSON_GetObjectItemCaseSensitive(p, "member");
                double pid, done, total;
                ck_assert_msg(phase && cJSON_IsObject(m) && onum(m, "pid", &pid) && onum(p, "done", &done) &&
                                      onum(p, "total", &total),
                              "a progress reply without phase, member, done or total: %s", itest_dump(j));
                ck_assert_msg(in_set((pid_t)pid, n, pids), "progress for a non-member: %s", itest_dump(j));
                ck_assert_msg(done >= 1 && done <= total, "progress done %.0f of %.0f: %s", done, total, itest_dump(j));
                ck_assert_msg(log->n < 64, "too many progress replies");
                snprintf(log->phase[log->n], 16, "%s", phase);
                snprintf(log->state[log->n], 16, "%s", ostr(m, "state") ? ostr(m, "state") : "");
                log->pid[log->n] = (pid_t)pid;
                log->done[log->n] = done;
                log->total[log->n] = total;
                log->n++;
        }
}

/* Every member has one progress reply for phase, in the state given; all of
 * them come after every reply of the phase before (prev, may be NULL) and
 * count up. */
static void assert_phase_progress(const struct progress_log *log, const char *phase, const char *prev, size_t n,
                                  const pid_t *pids, const char *state)
{
        int first = -1, last_prev = -1;
        double last_done = 0;
        for (int i = 0; i < log->n; i++) {
                if (prev && strcmp(log->phase[i], prev) == 0)
                        last_prev = i;
                if (strcmp(log->phase[i], phase) != 0)
                        continue;
                if (first < 0)
                        first = i;
                ck_assert_msg(log->done[i] >= last_done, "progress of %s counts down (%.0f after %.0f)", phase,
                              log->done[i], last_done);
                last_done = log->done[i];
                ck_assert_msg(strcmp(log->state[i], state) == 0, "progress of %s for %d says state \"%s\", not %s",
                              phase, (int)log->pid[i], log->state[i], state);
        }
        for (size_t k = 0; k < n; k++) {
                int count = 0;
                for (int i = 0; i < log->n; i++)
                        count += strcmp(log->phase[i], phase) == 0 && log->pid[i] == pids[k];
                ck_assert_msg(count == 1, "%d progress replies of phase %s for member %d, not 1", count, phase,
                              (int)pids[k]);
        }
        if (prev)
                ck_assert_msg(first > last_prev, "progress of %s came before the end of %s", phase, prev);
}

START_TEST(more_progress)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t p[3] = { itest_small_target(), itest_small_target(), itest_small_target() };
        struct progress_log log;

        itest_sendf(c, "{\"method\":\"" CUDACKPT_METHOD_SUSPEND_GROUP "\",\"parameters\":%s,\"more\":true}",
                    group_params(sel_pids(3, p), NULL));
        cJSON *j = recv_with_progress(c, &log, 3, p);
        assert_group_ok(j, 3, p, "checkpointed");
        ck_assert_msg(log.n >= 6, "%d progress replies for 3 members locked and checkpointed", log.n);
        assert_phase_progress(&log, CUDACKPT_PHASE_LOCK, NULL, 3, p, "locked");
        assert_phase_progress(&log, CUDACKPT_PHASE_CHECKPOINT, CUDACKPT_PHASE_LOCK, 3, p, "checkpointed");

        itest_sendf(c, "{\"method\":\"" CUDACKPT_METHOD_RESUME_GROUP "\",\"parameters\":%s,\"more\":true}",
                    group_params(sel_pids(3, p), NULL));
        j = recv_with_progress(c, &log, 3, p);
        assert_group_ok(j, 3, p, "running");
        assert_phase_progress(&log, CUDACKPT_PHASE_RESTORE, NULL, 3, p, "locked");
        assert_phase_progress(&log, CUDACKPT_PHASE_UNLOCK, CUDACKPT_PHASE_RESTORE, 3, p, "running");
        assert_all_now(c, 3, p, "running");

        /* Without "more", one reply (recv_reply checks there is no "continues"). */
        assert_group_ok(group_pids(c, CUDACKPT_METHOD_LOCK_GROUP, 3, p), 3, p, "locked");
        ck_assert_msg(!itest_conn_readable(c), "a further reply after the one of a call without \"more\"");
        assert_group_ok(group_pids(c, CUDACKPT_METHOD_UNLOCK_GROUP, 3, p), 3, p, "running");
}
END_TEST

/* A failing group with "more": progress, then the error as the final reply. */
START_TEST(more_progress_failure)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t bad = itest_target(SIM, SMALL, "CUDACKPT_SIM_FAIL=checkpoint:CUDA_ERROR_UNKNOWN", NULL);
        pid_t p[3] = { itest_small_target(), itest_small_target(), bad };
        struct progress_log log;
        itest_sendf(c, "{\"method\":\"" CUDACKPT_METHOD_SUSPEND_GROUP "\",\"parameters\":%s,\"more\":true}",
                    group_params(sel_pids(3, p), NULL));
        cJSON *j = recv_with_progress(c, &log, 3, p);
        assert_group_failed(j, CUDACKPT_METHOD_SUSPEND_GROUP, CUDACKPT_PHASE_CHECKPOINT, bad,
                            CUDACKPT_ERROR_DRIVER_ERROR);
        assert_phase_progress(&log, CUDACKPT_PHASE_LOCK, NULL, 3, p, "locked");
        assert_all_now(c, 3, p, "running");
        /* The connection goes on. */
        ck_assert_msg(!itest_conn_readable(c), "a further reply after the final one");
        assert_state_now(c, bad, "running");
}
END_TEST

static Suite *groups_suite(void)
{
        Suite *s = suite_create("integration.groups");
        TCase *tc = itest_tcase(s, "groups", 60);
        tcase_add_test(tc, suspend_resume_group);
        tcase_add_test(tc, phase_groups_cycle);
        tcase_add_test(tc, group_gpu_mapping);
        tcase_add_test(tc, barrier_lock_before_checkpoint);
        tcase_add_test(tc, barrier_restore_before_unlock);
        tcase_add_test(tc, fail_lock_rolls_back);
        tcase_add_test(tc, fail_checkpoint_rolls_back);
        tcase_add_test(tc, fail_managed_memory);
        tcase_add_test(tc, fail_restore_then_retry);
        tcase_add_test(tc, fail_unlock);
        tcase_add_test(tc, fail_rollback);
        tcase_add_test(tc, lock_timeout_rolls_back);
        tcase_add_test(tc, converge_suspend_and_resume);
        tcase_add_test(tc, converge_nothing_to_do);
        tcase_add_test(tc, invalid_state_in_phase_state);
        tcase_add_test(tc, member_exits_mid_group);
        tcase_add_test(tc, other_user_member_refused);
        tcase_add_test(tc, not_cuda_in_pids);
        tcase_add_test(tc, no_such_process_in_pids);
        tcase_add_test(tc, start_time_pins);
        tcase_add_test(tc, stopped_member);
        tcase_add_test(tc, overlapping_groups);
        tcase_add_test(tc, client_disconnects);
        tcase_add_test(tc, group_too_large);
        tcase_add_test(tc, groups_in_flight_queue_full);
        tcase_add_test(tc, invalid_parameters);
        tcase_add_test(tc, tree_selector);
        tcase_add_test(tc, cgroup_selector);
        tcase_add_test(tc, list_processes);
        tcase_add_test(tc, list_processes_gpus);
        tcase_add_test(tc, list_processes_selectors);
        tcase_add_test(tc, list_processes_in_flight);
        tcase_add_test(tc, list_processes_stopped);
        tcase_add_test(tc, list_processes_non_root);
        tcase_add_test(tc, more_progress);
        tcase_add_test(tc, more_progress_failure);
        return s;
}

/* ---- --itest-tree ----------------------------------------------------------------- */

/* Forks one child for spec and returns once it has exec'd and its
 * environment is readable ("node": once it has said ready itself). */
static pid_t tree_child(const char *self, const char *spec, const char *preload)
{
        static char sim[] = SIM, small[] = SMALL;
        char *sleep_argv[] = { (char *)"sleep", (char *)"3600", NULL };
        char *node_argv[] = { (char *)"itest-tree", (char *)"--itest-tree", (char *)"sim", NULL };
        char *env_sim[] = { (char *)preload, sim, small, NULL };
        char *env_pre[] = { (char *)preload, small, NULL };
        char *env_plain[] = { small, NULL };
        char **argv = sleep_argv, **env;
        const char *path = "/bin/sleep";
        bool node = strcmp(spec, "node") == 0;

        if (strcmp(spec, "sim") == 0 || node)
                env = env_sim;
        else if (strcmp(spec, "preload") == 0)
                env = env_pre;
        else if (strcmp(spec, "plain") == 0)
                env = env_plain;
        else
                return -1;
        if (node) {
                argv = node_argv;
                path = self;
        }
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return -1;
        pid_t parent = getpid();
        pid_t pid = fork();
        if (pid < 0)
                return -1;
        if (pid == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(127);
                /* A node says ready on its fd 3; the others get none. */
                if (node) {
                        if (dup2(p[1], 3) < 0)
                                _exit(127);
                } else {
                        close(3);
                }
                execve(path, argv, env);
                _exit(127);
        }
        close(p[1]);
        char c;
        ssize_t n;
        do
                n = read(p[0], &c, 1);
        while (n < 0 && errno == EINTR);
        close(p[0]);
        /* EOF: the exec closed the pipe; a node writes a byte after its own. */
        if (node && n != 1)
                return -1;
        if (!node && !itest_await_exec(pid, (const char *const *)env))
                return -1;
        return pid;
}

static int tree_mode(int argc, char **argv)
{
        const char *preload = NULL;
        extern char **environ;
        for (char **e = environ; *e; e++)
                if (strncmp(*e, "LD_PRELOAD=", 11) == 0)
                        preload = *e;
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (!preload || n <= 0)
                return 1;
        self[n] = '\0';
        for (int i = 2; i < argc; i++)
                if (tree_child(self, argv[i], preload) < 0)
                        return 1;
        return itest_ready_and_wait();
}

int main(int argc, char **argv)
{
        if (argc >= 2 && strcmp(argv[1], "--itest-tree") == 0)
                return tree_mode(argc, argv);
        return itest_main(groups_suite());
}
