/* test_namespaces.c: callers in other pid namespaces (containers), against
 * the real daemon on the simulator.
 *
 * Each test makes real namespaces with unshare(2): a child of the test
 * unshares a pid namespace (and, for the rootless test, a user namespace
 * first, as an unprivileged uid) and forks the namespace's pid 1, which
 * starts its own simulated CUDA processes, talks Varlink to the daemon
 * and reports what it saw through a pipe (no ck_assert there: a forked
 * child's failure is its message).  The test then checks, from the host,
 * that the right processes were acted on and the others were not.
 *
 * Rules checked (docs/protocol.md, "Pid namespaces"): pids in requests and
 * replies are the caller's; a process the caller's namespace cannot see is
 * NoSuchProcess, exactly as a pid that does not exist; thread ids, group
 * members and ListProcesses are translated the same way.  Needs root (to
 * make pid namespaces); skips otherwise. */
#include "ns_itest.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---- what the namespace's pid 1 does --------------------------------------- */

/* Ends a step on a reply, freeing it: 0 where ok, else -1 with why (fmt:
 * its arguments, rep's dump among them, are taken before rep goes) in msg. */
__attribute__((format(printf, 5, 6))) static int ns_reply_check(cJSON *rep, bool ok, char *msg, size_t size,
                                                                const char *fmt, ...)
{
        if (!ok) {
                va_list ap;

                va_start(ap, fmt);
                vsnprintf(msg, size, fmt, ap);
                va_end(ap);
        }
        cJSON_Delete(rep);
        return ok ? 0 : -1;
}

/* Its own target by its namespace pid, a whole cycle; the host's target,
 * the host's pid 1 and the daemon refused as if they did not exist. */
static int own_cycle_host_hidden(struct ns_ctx *x, char *msg, size_t size)
{
        pid_t t = ns_target(x);

        if (t <= 1)
                return ns_fail(msg, size, "cannot start a target in the namespace (%d)", (int)t);
        if (ns_expect(x, "GetState", t, NULL, "running", msg, size) < 0 ||
            ns_expect(x, "Suspend", t, NULL, "checkpointed", msg, size) < 0 ||
            ns_expect(x, "GetState", t, NULL, "checkpointed", msg, size) < 0 ||
            ns_expect(x, "Resume", t, NULL, "running", msg, size) < 0)
                return -1;
        /* The host's process, by its host pid: no such process here. */
        if (ns_expect(x, "GetState", x->host_target, CUDACKPT_ERROR_NO_SUCH_PROCESS, NULL, msg, size) < 0 ||
            ns_expect(x, "Suspend", x->host_target, CUDACKPT_ERROR_NO_SUCH_PROCESS, NULL, msg, size) < 0 ||
            ns_expect(x, "Lock", x->host_target, CUDACKPT_ERROR_NO_SUCH_PROCESS, NULL, msg, size) < 0)
                return -1;
        /* Pid 1 is this namespace's (this process: no CUDA), not the host's init. */
        if (ns_expect(x, "GetState", 1, CUDACKPT_ERROR_NOT_CUDA_PROCESS, NULL, msg, size) < 0)
                return -1;
        /* The thread id comes back in the namespace's pids: a one-thread
         * sleep's restore thread is itself. */
        {
                cJSON *rep = NULL;
                char params[64];
                long long tid = 0;
                snprintf(params, sizeof(params), "{\"pid\":%d}", (int)t);
                if (ns_call(x, "GetRestoreThreadId", params, &rep, msg, size) < 0)
                        return -1;
                bool ok = !itest_error(rep) && itest_int(rep, "restore_thread_id", &tid) && tid == t;
                if (ns_reply_check(rep, ok, msg, size, "GetRestoreThreadId(%d): %s", (int)t, itest_dump(rep)) < 0)
                        return -1;
        }
        x->seen[x->n_seen++] = t;
        return 0;
}

/* A reply without error whose array key lists exactly a and b, by pid. */
static bool lists_just(const cJSON *rep, const char *key, pid_t a, pid_t b)
{
        const cJSON *arr = itest_get(rep, key), *e;
        int seen = 0;

        cJSON_ArrayForEach(e, arr) {
                const cJSON *pid = cJSON_GetObjectItemCaseSensitive(e, "pid");
                seen |= (cJSON_IsNumber(pid) && pid->valuedouble == a) ? 1 : 0;
                seen |= (cJSON_IsNumber(pid) && pid->valuedouble == b) ? 2 : 0;
        }
        return !itest_error(rep) && seen == 3 && cJSON_GetArraySize(arr) == 2;
}

/* Members and ListProcesses in the namespace's pids; the host's process
 * is neither listed nor reachable through a group. */
static int groups_and_list(struct ns_ctx *x, char *msg, size_t size)
{
        pid_t a = ns_target(x), b = ns_target(x);
        char params[256];
        cJSON *rep = NULL;

        if (a <= 1 || b <= 1)
                return ns_fail(msg, size, "cannot start targets in the namespace");
        /* A pids group with a pid from outside: NoSuchProcess for that member. */
        snprintf(params, sizeof(params), "{\"selector\":{\"pids\":[{\"pid\":%d},{\"pid\":%d}]}}", (int)a,
                 (int)x->host_target);
        if (ns_call(x, "SuspendGroup", params, &rep, msg, size) < 0)
                return -1;
        bool ok = itest_error(rep) && strcmp(itest_error(rep), CUDACKPT_ERROR_GROUP_FAILED) == 0 &&
                  strstr(itest_dump(rep), "NoSuchProcess");
        if (ns_reply_check(rep, ok, msg, size, "SuspendGroup %s with a host pid: %s", params, itest_dump(rep)) < 0)
                return -1;
        /* The tree of this namespace's pid 1: both targets, by their pids here. */
        if (ns_call(x, "SuspendGroup", "{\"selector\":{\"tree\":1}}", &rep, msg, size) < 0 ||
            ns_reply_check(rep, lists_just(rep, "members", a, b), msg, size,
                           "SuspendGroup {tree: 1} (targets %d, %d): %s", (int)a, (int)b, itest_dump(rep)) < 0)
                return -1;
        if (ns_expect(x, "GetState", a, NULL, "checkpointed", msg, size) < 0 ||
            ns_expect(x, "GetState", b, NULL, "checkpointed", msg, size) < 0)
                return -1;
        snprintf(params, sizeof(params), "{\"selector\":{\"pids\":[{\"pid\":%d},{\"pid\":%d}]}}", (int)a, (int)b);
        if (ns_call(x, "ResumeGroup", params, &rep, msg, size) < 0 ||
            ns_reply_check(rep, !itest_error(rep), msg, size, "ResumeGroup: %s", itest_dump(rep)) < 0)
                return -1;
        /* ListProcesses: exactly the two targets, by their pids here. */
        if (ns_call(x, "ListProcesses", "{}", &rep, msg, size) < 0 ||
            ns_reply_check(rep, lists_just(rep, "processes", a, b), msg, size,
                           "ListProcesses in the namespace (targets %d, %d): %s", (int)a, (int)b, itest_dump(rep)) < 0)
                return -1;
        x->seen[x->n_seen++] = a;
        x->seen[x->n_seen++] = b;
        return 0;
}

/* The next event on a Watch connection fd within 5 s: its type and pid, or
 * -1 with why in msg.  buf/len keep what was read past it. */
static int next_ns_event(int fd, char *buf, size_t *len, size_t cap, char *type, size_t type_size, long *pid,
                         char *msg, size_t size)
{
        char *nul;

        while (!(nul = memchr(buf, '\0', *len))) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                ssize_t k;
                if (*len == cap || poll(&p, 1, 5000) != 1)
                        return ns_fail(msg, size, "no event within 5 s");
                k = read(fd, buf + *len, cap - *len);
                if (k <= 0)
                        return ns_fail(msg, size, "the watch ended");
                *len += (size_t)k;
        }
        cJSON *j = cJSON_Parse(buf);
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "parameters"), "event");
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "type"), *p = cJSON_GetObjectItemCaseSensitive(e, "pid");
        snprintf(type, type_size, "%s", cJSON_IsString(t) ? t->valuestring : "?");
        *pid = cJSON_IsNumber(p) ? (long)p->valuedouble : -1;
        cJSON_Delete(j);
        *len -= (size_t)(nul + 1 - buf);
        memmove(buf, nul + 1, *len);
        return 0;
}

/* A Watch with more, sent on a new connection to x's socket: the
 * connection, or -1 with why in msg. */
static int ns_watch(const struct ns_ctx *x, char *msg, size_t size)
{
        static const char req[] = "{\"method\":\"" CUDACKPT_METHOD_WATCH "\",\"parameters\":{},\"more\":true}";
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", x->sock);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
            send(fd, req, sizeof(req), MSG_NOSIGNAL) < 0) {
                ns_fail(msg, size, "cannot watch: %s", strerror(errno));
                if (fd >= 0)
                        close(fd);
                return -1;
        }
        return fd;
}

/* A watcher in the namespace sees its own processes appear, act and exit
 * by their pids there (an exited one too, though the kernel no longer
 * translates its pid), and nothing of the host's. */
static int watch_in_namespace(struct ns_ctx *x, char *msg, size_t size)
{
        static char buf[65536];
        size_t len = 0;
        char type[32];
        long pid;
        bool appeared = false, started = false, exited = false;
        int fd = ns_watch(x, msg, size);

        if (fd < 0)
                return -1;
        if (next_ns_event(fd, buf, &len, sizeof(buf), type, sizeof(type), &pid, msg, size) < 0)
                return -1;
        if (strcmp(type, "watching") != 0)
                return ns_fail(msg, size, "first event %s", type);
        /* After the first scan (its baseline): every 100 ms here. */
        usleep(300 * 1000);
        pid_t a = ns_target(x);
        if (a <= 1)
                return ns_fail(msg, size, "cannot start a target in the namespace");
        while (!appeared) {
                if (next_ns_event(fd, buf, &len, sizeof(buf), type, sizeof(type), &pid, msg, size) < 0)
                        return -1;
                if (pid != a)
                        return ns_fail(msg, size, "an event of pid %ld, not %d: %s", pid, (int)a, type);
                appeared = strcmp(type, "appeared") == 0;
        }
        if (ns_expect(x, "Lock", a, NULL, "locked", msg, size) < 0 || ns_expect(x, "Unlock", a, NULL, "running", msg, size) < 0)
                return -1;
        kill(a, SIGKILL);
        waitpid(a, NULL, 0);
        while (!exited) {
                if (next_ns_event(fd, buf, &len, sizeof(buf), type, sizeof(type), &pid, msg, size) < 0)
                        return -1;
                if (pid != a)
                        return ns_fail(msg, size, "an event of pid %ld, not %d: %s", pid, (int)a, type);
                started = started || strcmp(type, "started") == 0;
                exited = strcmp(type, "exited") == 0;
        }
        close(fd);
        if (!started)
                return ns_fail(msg, size, "no started event of pid %d", (int)a);
        return 0;
}

/* ---- a host process's exit and its pid reused in the namespace ---------------- */

/* The host side: a CUDA process the namespace cannot see, started and
 * reaped by this helper (a zombie would keep its pid).  Its pid goes to the
 * namespace through done; each "g" the namespace writes to go kills it (the
 * first time) and offers its pid to the next fork on the node (ns_last_pid),
 * answered by a byte on done. */
static void reuse_helper_main(const char *preload, int go, int done)
{
        char *argv[] = { "sleep", "1000", NULL };
        char *env[] = { "CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=8", (char *)preload, NULL };
        const char *await_env[] = { preload, NULL };
        char c, last[32];
        pid_t h = fork(), x = h;

        if (h == 0) {
                execve("/bin/sleep", argv, env);
                _exit(127);
        }
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (h < 0 || !itest_await_exec(h, await_env) || write(done, &x, sizeof(x)) != sizeof(x))
                _exit(1);
        snprintf(last, sizeof(last), "%d", (int)x - 1);
        while (read(go, &c, 1) == 1) {
                int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
                if (h > 0) {
                        kill(h, SIGKILL);
                        waitpid(h, NULL, 0);
                        h = 0;
                }
                if (fd < 0 || write(fd, last, strlen(last)) < 0)
                        _exit(2);
                close(fd);
                if (write(done, &c, 1) != 1)
                        _exit(3);
        }
        _exit(0);
}

/* The namespace's watcher, after the scans know the host's process: that
 * process is killed and its pid taken by a process of the namespace; the
 * watcher must not hear of the host process's exit (under its pid in the
 * namespace), up to the appearance of a new CUDA process of its own. */
static int reused_pid_exit_unseen(struct ns_ctx *x, char *msg, size_t size)
{
        static char buf[65536];
        size_t len = 0;
        char type[32], g = 'g';
        long pid;
        pid_t host, mine = -1;
        int fd;

        if (read(x->reuse_done, &host, sizeof(host)) != sizeof(host))
                return ns_fail(msg, size, "the host's helper did not start");
        fd = ns_watch(x, msg, size);
        if (fd < 0)
                return -1;
        if (next_ns_event(fd, buf, &len, sizeof(buf), type, sizeof(type), &pid, msg, size) < 0)
                return -1;
        usleep(400 * 1000); /* two scans (every 150 ms): the host's process is known */
        for (int tries = 0; tries < 50 && mine < 0; tries++) {
                pid_t child;
                if (write(x->reuse_go, &g, 1) != 1 || read(x->reuse_done, &g, 1) != 1)
                        return ns_fail(msg, size, "the host's helper failed");
                child = fork();
                if (child == 0) {
                        pause();
                        _exit(0);
                }
                if (child > 0 && ns_host_pid_of(child) == host) {
                        mine = child;
                        break;
                }
                kill(child, SIGKILL);
                waitpid(child, NULL, 0);
        }
        if (mine < 0)
                return ns_fail(msg, size, "no process of the namespace got pid %d in 50 tries", (int)host);
        pid_t a = ns_target(x);
        if (a <= 1)
                return ns_fail(msg, size, "cannot start a target in the namespace");
        for (;;) {
                if (next_ns_event(fd, buf, &len, sizeof(buf), type, sizeof(type), &pid, msg, size) < 0)
                        return -1;
                if (strcmp(type, "exited") == 0)
                        return ns_fail(msg, size, "told of an exit as pid %ld (host pid %d reused by %d)", pid,
                                       (int)host, (int)mine);
                if (pid == a && strcmp(type, "appeared") == 0)
                        break;
        }
        kill(mine, SIGKILL);
        close(fd);
        return 0;
}

/* A lease on a host process the namespace cannot see: neither renewed nor
 * released, whoever the namespace's caller is. */
static int foreign_lease_untouchable(struct ns_ctx *x, char *msg, size_t size)
{
        const char *calls[][2] = { { "RenewLease", ",\"lease_ms\":4294967295" }, { "ReleaseLease", "" } };

        for (size_t i = 0; i < N_OF(calls); i++) {
                char *params = itest_strdupf("{\"lease\":%lld%s}", x->lease, calls[i][1]);
                cJSON *rep = NULL;
                int r = ns_call(x, calls[i][0], params, &rep, msg, size);
                free(params);
                if (r < 0)
                        return -1;
                const char *got = itest_error(rep);
                if (ns_reply_check(rep, got && strcmp(got, CUDACKPT_ERROR_NO_SUCH_LEASE) == 0, msg, size,
                                   "%s of a host lease from the namespace: %s", calls[i][0], itest_dump(rep)) < 0)
                        return -1;
        }
        return 0;
}

/* ---- the tests -------------------------------------------------------------- */

/* The host's view after the namespace is done: its target untouched. */
static void host_untouched(struct itest_daemon *d, pid_t host)
{
        struct itest_conn *c = itest_connect(d);
        cJSON *r = itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, host);
        ck_assert_msg(!itest_error(r) && strcmp(itest_str(r, "state"), "running") == 0, "host target: %s",
                      itest_dump(r));
        itest_conn_close(c);
}

/* The context of a namespace's steps on d, beside the host's target. */
static struct ns_ctx ns_ctx_beside(struct itest_daemon *d, pid_t host_target)
{
        return (struct ns_ctx){ .sock = d->sock, .preload = itest_sim_preload_for_others(d),
                                .host_target = host_target };
}

/* Runs fn in the namespace that how makes, on a daemon with a mapped host
 * target, which the host then finds untouched. */
static void run_beside_host_target(const struct ns_run *how, ns_fn fn)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct ns_ctx x = ns_ctx_beside(d, itest_mapped_target());

        ns_run_in(how, fn, &x);
        host_untouched(d, x.host_target);
}

START_TEST(own_process_by_namespace_pid)
{
        const struct ns_run how = { .depth = 1 };

        run_beside_host_target(&how, own_cycle_host_hidden);
}
END_TEST

START_TEST(watch_by_namespace_pid)
{
        struct itest_daemon_opts o = { .config_json = "{\"watch_scan_ms\":100}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct ns_ctx x = ns_ctx_beside(d, itest_mapped_target());
        const struct ns_run how = { .depth = 1 };
        struct itest_conn *c = itest_connect(d);

        /* The host's process acts meanwhile: the namespace must not hear of it. */
        itest_assert_ok(itest_call_pid(c, CUDACKPT_METHOD_LOCK, x.host_target));
        ns_run_in(&how, watch_in_namespace, &x);
        itest_assert_ok(itest_call_pid(c, CUDACKPT_METHOD_UNLOCK, x.host_target));
        host_untouched(d, x.host_target);
}
END_TEST

START_TEST(nested_namespace)
{
        const struct ns_run how = { .depth = 2 };

        run_beside_host_target(&how, own_cycle_host_hidden);
}
END_TEST

START_TEST(groups_and_list_in_namespace)
{
        const struct ns_run how = { .depth = 1 };

        run_beside_host_target(&how, groups_and_list);
}
END_TEST

/* An unprivileged uid that makes its own user and pid namespace (rootless
 * containers): root in there, ITEST_OTHER_UID to the daemon. */
START_TEST(rootless_user_namespace)
{
        const struct ns_run how = { .depth = 1, .userns = true, .uid = ITEST_OTHER_UID };

        run_beside_host_target(&how, own_cycle_host_hidden);
}
END_TEST

/* The host sees what the namespace did by host pids, and a caller in the
 * daemon's own namespace is served by host pids as before. */
START_TEST(host_caller_unchanged)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t t = itest_mapped_target();
        struct itest_conn *c = itest_connect(d);
        cJSON *r = itest_call_pid(c, CUDACKPT_METHOD_SUSPEND, t);
        long long pid = 0;

        ck_assert_msg(!itest_error(r) && itest_int(r, "pid", &pid) && pid == t, "%s", itest_dump(r));
        r = itest_call_pid(c, CUDACKPT_METHOD_RESUME, t);
        ck_assert_msg(!itest_error(r), "%s", itest_dump(r));
        itest_conn_close(c);
}
END_TEST

static long long lease_of(cJSON *reply)
{
        const cJSON *l = itest_get(reply, "lease");
        const cJSON *id = cJSON_IsObject(l) ? cJSON_GetObjectItemCaseSensitive(l, "id") : NULL;
        ck_assert_msg(cJSON_IsNumber(id), "no lease in %s", itest_dump(reply));
        return (long long)id->valuedouble;
}

/* A host CUDA process exits and a process of a container takes its pid
 * before the next scan: the container's watcher is not told of the exit
 * (as the pid it now knows its own process by). */
START_TEST(reused_pid_exit_not_sent_to_container)
{
        struct itest_daemon_opts o = { .config_json = "{\"watch_scan_ms\":150}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct ns_ctx x = ns_ctx_beside(d, itest_mapped_target());
        const struct ns_run how = { .depth = 1 };
        int go[2], done[2];

        ck_assert_int_eq(pipe2(go, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(done, O_CLOEXEC), 0);
        pid_t helper = fork();
        ck_assert_int_ge(helper, 0);
        if (helper == 0) {
                close(go[1]);
                close(done[0]);
                reuse_helper_main(itest_sim_preload(), go[0], done[1]);
        }
        close(go[0]);
        close(done[1]);
        x.reuse_go = go[1];
        x.reuse_done = done[0];
        ns_run_in(&how, reused_pid_exit_unseen, &x);
        close(go[1]);
        close(done[0]);
        waitpid(helper, NULL, 0);
        host_untouched(d, x.host_target);
}
END_TEST

/* holder takes a lease on the host target t; in the namespace that how
 * makes, foreign_lease_untouchable finds it out of reach; holder then
 * releases it and unlocks t. */
static void host_lease_untouchable(struct itest_daemon *d, pid_t t, struct itest_conn *holder, const struct ns_run *how)
{
        struct ns_ctx x = ns_ctx_beside(d, t);

        x.lease = lease_of(itest_callf(holder, "{\"method\":\"%s\",\"parameters\":{\"pid\":%d,\"lease_ms\":60000}}",
                                       CUDACKPT_METHOD_LOCK, (int)t));
        ns_run_in(how, foreign_lease_untouchable, &x);
        itest_assert_ok(itest_call(holder, CUDACKPT_METHOD_RELEASE_LEASE, itest_strdupf("{\"lease\":%lld}", x.lease)));
        itest_assert_ok(itest_call_pid(holder, CUDACKPT_METHOD_UNLOCK, t));
}

/* Root in a container's pid namespace cannot manage a host user's lease on
 * a process it cannot see; the lease still holds. */
START_TEST(container_root_cannot_manage_host_lease)
{
        if (itest_need_root())
                return;
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t t = itest_target_as(ITEST_OTHER_UID, "CUDACKPT_SIM=1", NULL);
        struct itest_conn *user = itest_connect_as(d, ITEST_OTHER_UID);
        const struct ns_run how = { .depth = 1 };

        host_lease_untouchable(d, t, user, &how);
}
END_TEST

/* A rootless container (a user namespace of the same uid) cannot manage
 * root's lease on a host process of that uid, which it cannot see. */
START_TEST(rootless_container_cannot_manage_host_lease)
{
        if (itest_need_root())
                return;
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t t = itest_target_as(ITEST_OTHER_UID, "CUDACKPT_SIM=1", NULL);
        struct itest_conn *root = itest_connect(d);
        const struct ns_run how = { .depth = 1, .userns = true, .uid = ITEST_OTHER_UID };

        host_lease_untouchable(d, t, root, &how);
}
END_TEST

int main(void)
{
        const TTest *tests[] = { own_process_by_namespace_pid, nested_namespace, watch_by_namespace_pid,
                groups_and_list_in_namespace, rootless_user_namespace, reused_pid_exit_not_sent_to_container,
                container_root_cannot_manage_host_lease, rootless_container_cannot_manage_host_lease,
                host_caller_unchanged, NULL };

        if (geteuid() != 0) {
                fprintf(stderr, "integration.namespaces: skipped, needs root to make pid namespaces\n");
                return 77;
        }
        return itest_run("integration.namespaces", "namespaces", 60, tests);
}
