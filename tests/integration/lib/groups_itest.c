/* groups_itest.c: the helpers of the group and selection tests (see
 * groups_itest.h). */
#include "groups_itest.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

const char *const gitest_all_groups[6] = {
        CUDACKPT_METHOD_LOCK_GROUP,    CUDACKPT_METHOD_CHECKPOINT_GROUP, CUDACKPT_METHOD_RESTORE_GROUP,
        CUDACKPT_METHOD_UNLOCK_GROUP,  CUDACKPT_METHOD_SUSPEND_GROUP,    CUDACKPT_METHOD_RESUME_GROUP,
};

/* ---- small helpers ----------------------------------------------------------- */

const char *gitest_short_name(const char *method)
{
        const char *dot = strrchr(method, '.');
        return dot ? dot + 1 : method;
}

const char *gitest_sel_pids(size_t n, const pid_t *pids)
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

const char *gitest_sel_tree(pid_t root)
{
        return itest_strdupf("{\"tree\":%d}", (int)root);
}

const char *gitest_sel_cgroup(const char *path)
{
        return itest_strdupf("{\"cgroup\":\"%s\"}", path);
}

const char *gitest_group_params(const char *selector, const char *extra)
{
        return itest_strdupf("{\"selector\":%s%s%s}", selector, extra ? "," : "", extra ? extra : "");
}

void gitest_send_group(struct itest_conn *c, const char *method, const char *selector, const char *extra)
{
        itest_send_call(c, method, gitest_group_params(selector, extra));
}

/* The one reply of a call made without "more": never "continues". */
cJSON *gitest_recv_reply(struct itest_conn *c, int timeout_ms)
{
        cJSON *j = itest_recv_within(c, timeout_ms);
        ck_assert_msg(!cJSON_GetObjectItemCaseSensitive(j, "continues"),
                      "a call without \"more\" got a reply with \"continues\": %s", itest_dump(j));
        return j;
}

cJSON *gitest_group(struct itest_conn *c, const char *method, const char *selector, const char *extra)
{
        gitest_send_group(c, method, selector, extra);
        return gitest_recv_reply(c, ITEST_REPLY_TIMEOUT_MS);
}

cJSON *gitest_group_pids(struct itest_conn *c, const char *method, size_t n, const pid_t *pids)
{
        return gitest_group(c, method, gitest_sel_pids(n, pids), NULL);
}

const char *gitest_ostr(const cJSON *o, const char *key)
{
        const cJSON *v = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

bool gitest_onum(const cJSON *o, const char *key, double *ret)
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
const cJSON *gitest_arr_find(const cJSON *arr, pid_t pid, const cJSON *reply)
{
        const cJSON *e, *found = NULL;
        cJSON_ArrayForEach(e, arr) {
                double v;
                if (gitest_onum(e, "pid", &v) && v == (double)pid) {
                        ck_assert_msg(!found, "pid %d is listed twice in %s", (int)pid, itest_dump(reply));
                        found = e;
                }
        }
        return found;
}

bool gitest_in_set(pid_t pid, size_t n, const pid_t *pids)
{
        for (size_t i = 0; i < n; i++)
                if (pids[i] == pid)
                        return true;
        return false;
}

/* Asserts that array key of reply holds exactly the pids given (any order). */
const cJSON *gitest_assert_pid_set(const cJSON *reply, const char *key, size_t n, const pid_t *pids)
{
        const cJSON *arr = itest_get(reply, key);
        if (n == 0 && !arr)
                return NULL;
        ck_assert_msg(cJSON_IsArray(arr), "no array %s in %s", key, itest_dump(reply));
        const cJSON *e;
        cJSON_ArrayForEach(e, arr) {
                double v;
                ck_assert_msg(gitest_onum(e, "pid", &v), "an entry of %s without pid in %s", key, itest_dump(reply));
                ck_assert_msg(gitest_in_set((pid_t)v, n, pids), "%s holds pid %d, which it should not, in %s", key,
                              (int)v, itest_dump(reply));
        }
        for (size_t i = 0; i < n; i++)
                ck_assert_msg(gitest_arr_find(arr, pids[i], reply), "%s lacks pid %d in %s", key, (int)pids[i],
                              itest_dump(reply));
        return arr;
}

/* One Member of a reply: start time, a duration and, when state is not
 * NULL, that state. */
const cJSON *gitest_assert_member(const cJSON *reply, pid_t pid, const char *state)
{
        const cJSON *m = gitest_arr_find(itest_get(reply, "members"), pid, reply);
        ck_assert_msg(m, "no member %d in %s", (int)pid, itest_dump(reply));
        double v;
        ck_assert_msg(gitest_onum(m, "start_time", &v), "member %d has no start_time in %s", (int)pid, itest_dump(reply));
        if (alive(pid))
                ck_assert_msg(v == (double)itest_start_time(pid), "member %d: start_time %.0f, /proc says %llu",
                              (int)pid, v, (unsigned long long)itest_start_time(pid));
        ck_assert_msg(gitest_onum(m, "duration_ms", &v) && v >= 0, "member %d has no duration_ms in %s", (int)pid,
                      itest_dump(reply));
        if (state) {
                const char *s = gitest_ostr(m, "state");
                ck_assert_msg(s && strcmp(s, state) == 0, "expected member %d in state %s in %s", (int)pid, state,
                              itest_dump(reply));
        }
        return m;
}

/* A member whose state the daemon may not know (its own step failed with
 * an error that implies none): the state, when given, is this one. */
const cJSON *gitest_assert_member_opt(const cJSON *reply, pid_t pid, const char *state)
{
        const cJSON *m = gitest_assert_member(reply, pid, NULL);
        const char *s = gitest_ostr(m, "state");
        ck_assert_msg(!s || strcmp(s, state) == 0, "expected member %d in state %s (or none) in %s", (int)pid, state,
                      itest_dump(reply));
        return m;
}

/* A successful group reply whose members are exactly pids, all in state. */
void gitest_assert_group_ok(const cJSON *reply, size_t n, const pid_t *pids, const char *state)
{
        itest_assert_ok(reply);
        gitest_assert_pid_set(reply, "members", n, pids);
        for (size_t i = 0; i < n; i++)
                gitest_assert_member(reply, pids[i], state);
        double v;
        ck_assert_msg(gitest_onum(itest_params(reply), "duration_ms", &v) && v >= 0, "no duration_ms in %s",
                      itest_dump(reply));
        itest_assert_absent(reply, "progress");
}

/* skipped holds exactly pids, each with its start time and reason not-cuda. */
void gitest_assert_skipped(const cJSON *reply, size_t n, const pid_t *pids)
{
        const cJSON *arr = gitest_assert_pid_set(reply, "skipped", n, pids);
        for (size_t i = 0; i < n; i++) {
                const cJSON *e = gitest_arr_find(arr, pids[i], reply);
                double v;
                ck_assert_msg(gitest_onum(e, "start_time", &v) && v == (double)itest_start_time(pids[i]),
                              "skipped %d: bad start_time in %s", (int)pids[i], itest_dump(reply));
                const char *r = gitest_ostr(e, "reason");
                ck_assert_msg(r && strcmp(r, CUDACKPT_SKIP_NOT_CUDA) == 0, "skipped %d: reason not %s in %s",
                              (int)pids[i], CUDACKPT_SKIP_NOT_CUDA, itest_dump(reply));
        }
}

/* GroupFailed naming method, phase, the failed member and its error. */
void gitest_assert_group_failed(const cJSON *j, const char *method, const char *phase, pid_t pid, const char *error)
{
        itest_assert_error(j, CUDACKPT_ERROR_GROUP_FAILED);
        itest_assert_str(j, "method", gitest_short_name(method));
        itest_assert_str(j, "phase", phase);
        itest_assert_int(j, "pid", pid);
        itest_assert_str(j, "error", error);
        const cJSON *ep = itest_get(j, "error_parameters");
        ck_assert_msg(cJSON_IsObject(ep), "no error_parameters object in %s", itest_dump(j));
        double v;
        ck_assert_msg(gitest_onum(ep, "pid", &v) && v == (double)pid, "error_parameters do not name pid %d: %s", (int)pid,
                      itest_dump(j));
        ck_assert_msg(cJSON_IsBool(itest_get(j, "rolled_back")), "no rolled_back in %s", itest_dump(j));
        ck_assert_msg(cJSON_IsArray(itest_get(j, "members")), "no members array in %s", itest_dump(j));
        ck_assert_msg(cJSON_IsArray(itest_get(j, "skipped")), "no skipped array in %s", itest_dump(j));
        if (strcmp(phase, CUDACKPT_PHASE_SELECT) != 0) {
                /* The failed member says so itself. */
                const cJSON *m = gitest_arr_find(itest_get(j, "members"), pid, j);
                ck_assert_msg(m, "the failed member %d is not among the members of %s", (int)pid, itest_dump(j));
                const char *e = gitest_ostr(m, "error");
                ck_assert_msg(e && strcmp(e, error) == 0, "member %d does not carry error %s in %s", (int)pid, error,
                              itest_dump(j));
                ck_assert_msg(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(m, "error_parameters")),
                              "member %d has no error_parameters in %s", (int)pid, itest_dump(j));
        }
}

const cJSON *gitest_error_params(const cJSON *j)
{
        return itest_get(j, "error_parameters");
}

void gitest_assert_all_now(struct itest_conn *c, size_t n, const pid_t *pids, const char *state)
{
        for (size_t i = 0; i < n; i++)
                itest_assert_state_now(c, pids[i], state);
}

/* GetState's state (in flight or not). */
const char *gitest_state_of(struct itest_conn *c, pid_t pid, bool *in_flight)
{
        cJSON *j = itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, (int)pid);
        itest_assert_ok(j);
        const char *s = itest_str(j, "state");
        ck_assert_msg(s, "GetState without state: %s", itest_dump(j));
        if (in_flight)
                *in_flight = itest_has(j, "in_flight");
        return s;
}

bool gitest_streq(const char *a, const char *b)
{
        return a && b && strcmp(a, b) == 0;
}

/* Waits until GetState shows an operation in flight on pid (any). */
void gitest_await_any_in_flight(struct itest_conn *c, pid_t pid, int timeout_ms)
{
        double deadline = itest_now_ms() + timeout_ms;
        bool f = false;
        while (gitest_state_of(c, pid, &f), !f)
                ck_assert_msg(itest_now_ms() < deadline, "nothing in flight on %d within %d ms", (int)pid,
                              timeout_ms);
}

/* Waits until GetState shows pid in state, with an operation in flight or
 * not: a group's member between its steps reports the group. */
void gitest_await_state_any(struct itest_conn *c, pid_t pid, const char *state, int timeout_ms)
{
        double deadline = itest_now_ms() + timeout_ms;
        const char *s;
        while (!gitest_streq(s = gitest_state_of(c, pid, NULL), state))
                ck_assert_msg(itest_now_ms() < deadline, "%d not %s within %d ms (%s)", (int)pid, state, timeout_ms,
                              s);
}

/* Waits until GetState shows pid in state with an operation in flight. */
void gitest_op_ok(struct itest_conn *c, const char *method, pid_t pid, const char *state)
{
        itest_assert_state(itest_call_pid(c, method, (int)pid), pid, state);
}

/* The whole of /proc/PID/<name> (environ, cgroup); *len its size. */
char *gitest_read_proc(pid_t pid, const char *name, size_t *len)
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

bool gitest_environ_has(pid_t pid, const char *entry)
{
        size_t len;
        char *env = gitest_read_proc(pid, "environ", &len);
        for (size_t i = 0; i < len; i += strlen(env + i) + 1)
                if (strcmp(env + i, entry) == 0)
                        return true;
        return false;
}

static bool environ_has_prefix(pid_t pid, const char *prefix)
{
        size_t len;
        char *env = gitest_read_proc(pid, "environ", &len);
        for (size_t i = 0; i < len; i += strlen(env + i) + 1)
                if (strncmp(env + i, prefix, strlen(prefix)) == 0)
                        return true;
        return false;
}

/* The "0::" path of /proc/PID/cgroup (harness-owned). */
const char *gitest_cgroup_of(pid_t pid)
{
        size_t len;
        char *text = gitest_read_proc(pid, "cgroup", &len);
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
        char *buf = gitest_read_proc(pid, "stat", &len);
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
void gitest_disarm_fail(pid_t pid)
{
        static const char key[] = "CUDACKPT_SIM_FAIL=";
        size_t len;
        char *env = gitest_read_proc(pid, "environ", &len);
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

bool gitest_log_line_count(const struct itest_daemon *d, const char *a, const char *b, int *ret)
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

/* ---- other uids, trees ---------------------------------------------------------- */

static const char *jstr_of(const cJSON *o, const char *key)
{
        const cJSON *v = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
        return cJSON_IsString(v) ? v->valuestring : "";
}

/* In a child of another uid: one call, its reply checked without ck_assert. */
int gitest_as_call(void *p, char *msg, size_t n)
{
        const struct gitest_as_ctx *x = p;
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

/* The test program in --itest-tree mode with the given child specs (see the
 * top of the file); returns once every child has exec'd. */
pid_t gitest_start_tree(const char *const *specs)
{
        const char *argv[16] = { "itest-tree", "--itest-tree" };
        size_t n = 2;
        for (size_t i = 0; specs[i] && n < 15; i++)
                argv[n++] = specs[i];
        argv[n] = NULL;
        const char *env[] = { itest_sim_preload(), SIM, SMALL, NULL };
        return itest_target_exec((uid_t)-1, itest_self_exe(), argv, env);
}

/* A tree: root (CUDA) -> sim (CUDA), node (CUDA) -> grandchild (CUDA),
 * preload (maps the driver, never initialised), plain (neither). */
void gitest_make_tree(struct gitest_tree *t)
{
        static const char *const specs[] = { "sim", "node", "preload", "plain", NULL };
        memset(t, 0, sizeof(*t));
        t->root = gitest_start_tree(specs);
        pid_t kids[8];
        size_t n = itest_children(t->root, kids, 8);
        ck_assert_msg(n == 4, "the tree's root has %zu children, not 4", n);
        for (size_t i = 0; i < n; i++) {
                pid_t g[4];
                size_t ng = itest_children(kids[i], g, 4);
                bool sim = gitest_environ_has(kids[i], SIM), pre = environ_has_prefix(kids[i], "LD_PRELOAD=");
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

/* ---- --itest-tree --------------------------------------------------------------- */

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

int gitest_tree_mode(int argc, char **argv)
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

