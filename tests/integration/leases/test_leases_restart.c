/* test_leases_restart.c: leases that outlive the daemon (issue 22), on the
 * simulator, against the real daemon killed (SIGKILL) and started again on
 * the same socket and runtime directory (its lease store).
 *
 * The simulator keeps each process's state in the daemon's memory, which a
 * restart loses; the targets here carry CUDACKPT_SIM_STATE=r, the state
 * slot in their own memory, so that the next daemon reads them as they
 * were (locked, checkpointed). */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIM "CUDACKPT_SIM=1"
#define SMALL "CUDACKPT_SIM_MEM_MIB=8"
#define SLOT "CUDACKPT_SIM_STATE=r"

static pid_t slot_target(void)
{
        return itest_target(SIM, SMALL, SLOT, NULL);
}

static cJSON *state_of(struct itest_conn *c, pid_t pid)
{
        return itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, pid);
}

static const cJSON *lease_of(const cJSON *reply)
{
        const cJSON *l = itest_get(reply, "lease");

        ck_assert_msg(cJSON_IsObject(l), "no lease in %s", itest_dump(reply));
        return l;
}

static long long lease_id(const cJSON *reply)
{
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(lease_of(reply), "id");

        ck_assert_msg(cJSON_IsNumber(id) && id->valuedouble >= 1, "no lease id in %s", itest_dump(reply));
        return (long long)id->valuedouble;
}

static const char *lease_secret(const cJSON *reply)
{
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(lease_of(reply), "secret");

        ck_assert_msg(cJSON_IsString(s) && strlen(s->valuestring) == 32, "no secret in %s", itest_dump(reply));
        return s->valuestring;
}

static int count(const char *hay, const char *needle)
{
        int n = 0;

        for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
                n++;
        return n;
}

static const char *store_path(const struct itest_daemon *d)
{
        return itest_strdupf("%s/leases.json", d->dir);
}

/* (a) Leases whose deadline passes while the daemon is down: the next
 * start undoes them at once. */
START_TEST(expired_while_down)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t a = slot_target(), b = slot_target();

        (void)lease_id(itest_call(c, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"lease_ms\":1500}", (int)a)));
        (void)lease_id(itest_call(c, CUDACKPT_METHOD_SUSPEND, itest_strdupf("{\"pid\":%d,\"lease_ms\":1500}", (int)b)));
        itest_daemon_kill(d);
        usleep(2000 * 1000); /* past the deadline, with no daemon */
        d = itest_daemon_restart(d, NULL);
        c = itest_connect(d);
        itest_await_state(c, a, "running", 1000);
        itest_await_state(c, b, "running", 1000);
        itest_await_log(d, "it expired while the daemon was not running", 1000);
}
END_TEST

/* (b) The holder reconnects and claims its on-close lease within the
 * grace period: the lease holds past it, and is undone when the claiming
 * connection closes.  A wrong secret claims nothing. */
START_TEST(claimed_after_restart)
{
        struct itest_daemon_opts o = { .config_json = "{\"lease_claim_grace_ms\":500}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct itest_conn *c = itest_connect(d), *q;
        pid_t a = slot_target(), b = slot_target();
        cJSON *j = itest_call(c, CUDACKPT_METHOD_SUSPEND, itest_strdupf("{\"pid\":%d,\"lease_on_close\":true}", (int)a));
        long long id = lease_id(j);
        const char *secret = lease_secret(j);
        char wrong[33];

        (void)lease_id(itest_call(c, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"lease_on_close\":true}", (int)b)));
        itest_daemon_kill(d);
        d = itest_daemon_restart(d, NULL);
        c = itest_connect(d);
        q = itest_connect(d);
        snprintf(wrong, sizeof(wrong), "%s", secret);
        wrong[0] = wrong[0] == '0' ? '1' : '0';
        itest_assert_error(itest_call(c, CUDACKPT_METHOD_CLAIM_LEASE,
                                      itest_strdupf("{\"lease\":%lld,\"secret\":\"%s\"}", id, wrong)),
                           CUDACKPT_ERROR_NO_SUCH_LEASE);
        j = itest_call(c, CUDACKPT_METHOD_CLAIM_LEASE, itest_strdupf("{\"lease\":%lld,\"secret\":\"%s\"}", id, secret));
        itest_assert_int(j, "lease", id);
        itest_assert_bool(j, "on_close", true);
        /* b's lease, unclaimed, is undone after the grace period; a's holds. */
        itest_await_state(q, b, "running", 500 + 2000);
        itest_assert_state(state_of(q, a), a, "checkpointed");
        itest_conn_close(c);
        itest_await_state(q, a, "running", 1000);
}
END_TEST

/* (c) An on-close lease nobody claims is undone once the grace period
 * has passed, not before; the next lease id follows the ones read back. */
START_TEST(unclaimed_after_restart)
{
        struct itest_daemon_opts o = { .config_json = "{\"lease_claim_grace_ms\":1500}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct itest_conn *c = itest_connect(d);
        pid_t a = slot_target(), b = slot_target();
        long long id = lease_id(
                itest_call(c, CUDACKPT_METHOD_SUSPEND, itest_strdupf("{\"pid\":%d,\"lease_on_close\":true}", (int)a)));

        itest_daemon_kill(d);
        d = itest_daemon_restart(d, NULL);
        double t0 = itest_now_ms();
        c = itest_connect(d);
        itest_assert_state(state_of(c, a), a, "checkpointed");
        itest_await_state(c, a, "running", 1500 + 1000);
        double took = itest_now_ms() - t0;
        ck_assert_msg(took >= 1500 - 300, "undone %.0f ms after the restart, before the grace period", took);
        ck_assert_int_gt(lease_id(itest_call(c, CUDACKPT_METHOD_LOCK,
                                             itest_strdupf("{\"pid\":%d,\"lease_ms\":600000}", (int)b))),
                         id);
        itest_await_log(d, "did not claim it within lease_claim_grace_ms", 1000);
}
END_TEST

/* A RestoreGroup's on-close lease is kept across a restart as any other
 * (the store names its method) and, unclaimed, undone after the grace
 * period by checkpointing its members again, not by running them. */
START_TEST(restore_group_unclaimed_after_restart)
{
        struct itest_daemon_opts o = { .config_json = "{\"lease_claim_grace_ms\":800}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct itest_conn *c = itest_connect(d);
        pid_t a = slot_target(), b = slot_target();
        char *sel = itest_strdupf("{\"pids\":[{\"pid\":%d},{\"pid\":%d}]}", (int)a, (int)b);

        itest_assert_ok(itest_call(c, CUDACKPT_METHOD_SUSPEND_GROUP, itest_strdupf("{\"selector\":%s}", sel)));
        (void)lease_id(itest_call(c, CUDACKPT_METHOD_RESTORE_GROUP,
                                  itest_strdupf("{\"selector\":%s,\"lease_on_close\":true}", sel)));
        itest_daemon_kill(d);
        d = itest_daemon_restart(d, NULL);
        c = itest_connect(d);
        itest_assert_state(state_of(c, a), a, "locked");
        itest_await_state(c, a, "checkpointed", 800 + 2000);
        itest_await_state(c, b, "checkpointed", 1000);
        /* Read back (a store naming a method it does not know is refused
         * whole, and nothing is undone). */
        itest_await_log(d, "did not claim it within lease_claim_grace_ms", 1000);
}
END_TEST

/* A stopping daemon (SIGTERM) undoes no lease and keeps them: the next
 * start honours them (here: an on-close lease whose holder is gone, undone
 * after the grace period). */
START_TEST(kept_at_stop)
{
        struct itest_daemon_opts o = { .config_json = "{\"lease_claim_grace_ms\":300}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct itest_conn *c = itest_connect(d);
        pid_t pid = slot_target();
        struct stat st;

        (void)lease_id(itest_call(c, CUDACKPT_METHOD_SUSPEND,
                                  itest_strdupf("{\"pid\":%d,\"lease_ms\":600000,\"lease_on_close\":true}", (int)pid)));
        itest_daemon_stop(d);
        const char *log = itest_daemon_log(d);
        ck_assert_msg(strstr(log, "kept in the lease store for the next start"), "log: %.3000s", log);
        ck_assert_msg(!strstr(log, "undoing") && !strstr(log, "method=Restore"), "log: %.3000s", log);
        ck_assert_msg(lstat(store_path(d), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0600 &&
                              st.st_uid == geteuid(),
                      "the store: %s", strerror(errno));
        d = itest_daemon_restart(d, NULL);
        c = itest_connect(d);
        itest_await_state(c, pid, "running", 300 + 1000);
}
END_TEST

/* Until cudackptctl h runs its command: it has the lease's reply (the lock
 * itself is seen before the reply, which waits for the store). */
static void await_command(pid_t h, int timeout_ms)
{
        const char *path = itest_strdupf("/proc/%d/task/%d/children", (int)h, (int)h);
        double deadline = itest_now_ms() + timeout_ms;
        char buf[64];

        do {
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : 0;
                if (fd >= 0)
                        close(fd);
                if (n > 0)
                        return;
                usleep(5 * 1000);
        } while (itest_now_ms() < deadline);
        ck_abort_msg("cudackptctl %d ran no command within %d ms", (int)h, timeout_ms);
}

/* (d) cudackptctl --hold keeps its lease across a daemon restart in the
 * middle of its command: with a grace period shorter than the rest of the
 * command, only its claim keeps the process locked; it runs again once
 * the command ends. */
static void hold_survives_restart(bool group)
{
        struct itest_daemon_opts o = { .config_json = "{\"lease_claim_grace_ms\":700}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct itest_conn *c = itest_connect(d);
        pid_t pid = slot_target();
        const char *target = group ? itest_strdupf("--pids=%d", (int)pid) : itest_strdupf("%d", (int)pid);
        const char *argv[] = { itest_need_env("CUDACKPT_TEST_CTL"), itest_strdupf("--socket=%s", d->sock),
                               "lock", "--hold", target, "--", "sleep", "3", NULL };
        int st;
        pid_t h = fork();

        ck_assert(h >= 0);
        if (h == 0) {
                execv(argv[0], (char *const *)argv);
                _exit(127);
        }
        itest_await_state(c, pid, "locked", 5000);
        await_command(h, 5000);
        double t0 = itest_now_ms();
        itest_daemon_kill(d);
        d = itest_daemon_restart(d, NULL);
        c = itest_connect(d);
        itest_await_log(d, "method=ClaimLease", 5000);
        /* Past the grace period, still before the command ends. */
        usleep(900 * 1000);
        ck_assert_msg(itest_now_ms() - t0 < 2800, "too slow to check the hold before the command ends");
        itest_assert_state(state_of(c, pid), pid, "locked");
        pid_t w = 0;
        for (int i = 0; i < 100 && (w = waitpid(h, &st, WNOHANG)) == 0; i++)
                usleep(100 * 1000);
        ck_assert_msg(w == h, "cudackptctl still runs 10 s on");
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "cudackptctl: %s", itest_describe_status(st));
        itest_assert_state(state_of(c, pid), pid, "running");
}

START_TEST(cli_hold_survives_restart)
{
        hold_survives_restart(false);
}
END_TEST

/* The same for a group's --hold (LockGroup): its lease claimed again. */
START_TEST(cli_group_hold_survives_restart)
{
        hold_survives_restart(true);
}
END_TEST

/* (e) A client started while the daemon is down waits for it. */
START_TEST(client_waits_for_daemon)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = slot_target();
        const char *argv[] = { itest_need_env("CUDACKPT_TEST_CTL"), itest_strdupf("--socket=%s", d->sock), "state",
                               itest_strdupf("%d", (int)pid), NULL };
        const char *env[] = { "CUDACKPT_CONNECT_TIMEOUT_MS=15000", NULL };
        int p[2], st;
        char out[256] = "";
        ssize_t n;

        itest_daemon_kill(d); /* its socket file stays, refusing */
        ck_assert(pipe(p) == 0);
        pid_t h = fork();
        ck_assert(h >= 0);
        if (h == 0) {
                dup2(p[1], 1);
                close(p[0]);
                close(p[1]);
                execve(argv[0], (char *const *)argv, (char *const *)env);
                _exit(127);
        }
        close(p[1]);
        usleep(700 * 1000);
        ck_assert_msg(waitpid(h, &st, WNOHANG) == 0, "cudackptctl did not wait: %s", itest_describe_status(st));
        unlink(d->sock); /* and without a socket file at all */
        usleep(300 * 1000);
        d = itest_daemon_restart(d, NULL);
        n = read(p[0], out, sizeof(out) - 1);
        close(p[0]);
        out[n > 0 ? n : 0] = '\0';
        ck_assert(waitpid(h, &st, 0) == h);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(out, "running"), "%s, out %s",
                      itest_describe_status(st), out);
}
END_TEST

/* Writes text as the store, then the tampering: 'o' owned by another uid,
 * 'm' mode 0644, 'l' a symbolic link to a good copy, 'n' a second link
 * (DIR/second-link.json), 0 none. */
static void write_store(const struct itest_daemon *d, const char *text, char how)
{
        const char *path = store_path(d), *copy = itest_strdupf("%s/good-copy.json", d->dir);
        const char *second = itest_strdupf("%s/second-link.json", d->dir);
        int fd;

        unlink(path);
        unlink(second);
        fd = open(how == 'l' ? copy : path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ck_assert(fd >= 0);
        ck_assert(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
        close(fd);
        if (how == 'o')
                ck_assert(chown(path, ITEST_OTHER_UID, ITEST_OTHER_UID) == 0);
        if (how == 'm')
                ck_assert(chmod(path, 0644) == 0);
        if (how == 'l')
                ck_assert(symlink(copy, path) == 0);
        if (how == 'n')
                ck_assert(link(path, second) == 0);
}

static char *read_text(const char *path)
{
        static char buf[65536];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

        if (fd >= 0)
                close(fd);
        ck_assert_msg(n > 0, "read %s", path);
        buf[n] = '\0';
        return itest_strdupf("%s", buf);
}

/* The store's size limit (security.md): 16 MiB. */
#define STORE_MAX_BYTES (16 * 1024 * 1024)

/* text padded with blanks after its JSON to size bytes (kept). */
static const char *padded(const char *text, size_t size)
{
        size_t len = strlen(text);
        char *p = itest_keep(malloc(size + 1));

        ck_assert(p && len < size);
        memcpy(p, text, len);
        memset(p + len, ' ', size - len);
        p[size] = '\0';
        return p;
}

/* Restarts d on a store that must be refused for why: the log says so
 * (the nth refusal), and the lease in it, past its deadline, is not
 * undone.  Kills the daemon again. */
static struct itest_daemon *restart_refused(struct itest_daemon *d, pid_t pid, int nth, const char *why)
{
        d = itest_daemon_restart(d, NULL);
        const char *log = itest_daemon_log(d);
        ck_assert_msg(count(log, "Refusing the lease store") == nth && strstr(log, why), "%s: log %s", why, log);
        struct itest_conn *c = itest_connect(d);
        itest_assert_state(state_of(c, pid), pid, "locked");
        itest_conn_close(c);
        itest_daemon_kill(d);
        return d;
}

/* (f) A store that is foreign-owned, open to others, a symbolic link or
 * malformed is refused: its leases are not honoured (the process stays
 * locked past their deadline).  The same store, untampered, is. */
START_TEST(tampered_store_refused)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t pid = slot_target();
        static const struct {
                char how;
                const char *why;
        } bad[] = { { 'o', "owned by uid 4242" }, { 'm', "mode 0644" }, { 'l', "symbolic link" }, { 'x', "malformed" } };

        (void)lease_id(itest_call(c, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"lease_ms\":1000}", (int)pid)));
        itest_daemon_kill(d);
        const char *good = read_text(store_path(d));
        ck_assert_msg(strstr(good, "\"members\""), "store: %s", good);
        usleep(1100 * 1000); /* its deadline passes */
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                const char *text = good;
                if (bad[i].how == 'x') {
                        char *t = itest_strdupf("%s", good);
                        memcpy(strstr(t, "\"members\""), "\"memberz\"", 9);
                        text = t;
                }
                write_store(d, text, bad[i].how);
                d = restart_refused(d, pid, (int)i + 1, bad[i].why);
        }
        write_store(d, good, 0);
        d = itest_daemon_restart(d, NULL);
        c = itest_connect(d);
        itest_await_state(c, pid, "running", 1000);
}
END_TEST

/* (g) A store of two links, or longer than 16 MiB, is refused; the same
 * store of one link and exactly 16 MiB is read, and its expired lease
 * undone. */
START_TEST(store_links_and_size_refused)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t pid = slot_target();

        (void)lease_id(itest_call(c, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"lease_ms\":1000}", (int)pid)));
        itest_daemon_kill(d);
        const char *good = read_text(store_path(d));
        usleep(1100 * 1000); /* its deadline passes */
        write_store(d, good, 'n');
        d = restart_refused(d, pid, 1, "2 links, not 1");
        write_store(d, padded(good, STORE_MAX_BYTES + 1), 0);
        d = restart_refused(d, pid, 2, itest_strdupf("%d bytes, more than %d", STORE_MAX_BYTES + 1, STORE_MAX_BYTES));
        write_store(d, padded(good, STORE_MAX_BYTES), 0);
        d = itest_daemon_restart(d, NULL);
        c = itest_connect(d);
        itest_await_state(c, pid, "running", 1000);
}
END_TEST

/* B7b: a daemon that stops (SIGTERM) is not a holder that leaves.  An
 * on-close lease claimed after an earlier restart (its claim's grace long
 * over) stays claimable after the next one, even when the lease table
 * changes during the drain (a leased Lock granted while a slow Checkpoint
 * keeps the daemon draining): no timer runs then. */
START_TEST(claimable_after_sigterm)
{
        struct itest_daemon_opts o = { .config_json = "{\"lease_claim_grace_ms\":300}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        struct itest_conn *c = itest_connect(d), *e_conn, *f_conn;
        pid_t a = slot_target();
        pid_t e = itest_target(SIM, SMALL, SLOT, "CUDACKPT_SIM_BUSY_MS=1000", NULL);
        pid_t f = itest_target(SIM, "CUDACKPT_SIM_MEM_MIB=3", "CUDACKPT_SIM_CKPT_MIBPS=1", SLOT, NULL);
        cJSON *j = itest_call(c, CUDACKPT_METHOD_SUSPEND, itest_strdupf("{\"pid\":%d,\"lease_on_close\":true}", (int)a));
        long long id = lease_id(j);
        const char *secret = itest_strdupf("%s", lease_secret(j));
        const char *claim = itest_strdupf("{\"lease\":%lld,\"secret\":\"%s\"}", id, secret);

        itest_daemon_kill(d);
        d = itest_daemon_restart(d, NULL);
        c = itest_connect(d);
        j = itest_call(c, CUDACKPT_METHOD_CLAIM_LEASE, claim);
        itest_assert_ok(j);
        itest_assert_int(j, "lease", id);
        usleep(500 * 1000); /* past the grace of that claim */
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_LOCK, f), f, "locked");
        f_conn = itest_connect(d);
        itest_send_call(f_conn, CUDACKPT_METHOD_CHECKPOINT, itest_strdupf("{\"pid\":%d}", (int)f));
        e_conn = itest_connect(d);
        itest_send_call(e_conn, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"lease_ms\":600000}", (int)e));
        (void)itest_await_in_flight(c, f, "Checkpoint", 2000);
        (void)itest_await_in_flight(c, e, "Lock", 2000);
        ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
        (void)lease_id(itest_recv_within(e_conn, 3000)); /* granted in the drain */
        int st = itest_daemon_await_exit(d, 10000);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the daemon: %s", itest_describe_status(st));
        d = itest_daemon_restart(d, NULL);
        c = itest_connect(d);
        j = itest_call(c, CUDACKPT_METHOD_CLAIM_LEASE, claim);
        itest_assert_ok(j);
        itest_assert_int(j, "lease", id);
        itest_assert_state(state_of(c, a), a, "checkpointed");
        const char *log = itest_daemon_log(d);
        ck_assert_msg(!strstr(log, "did not claim it") && !strstr(log, "before its undo ran"), "log: %.3000s", log);
        usleep(500 * 1000); /* past the new grace: the claim holds it */
        itest_assert_state(state_of(c, a), a, "checkpointed");
        itest_conn_close(c);
        c = itest_connect(d);
        itest_await_state(c, a, "running", 2000);
}
END_TEST

/* Until GetState says pid is locked with method in flight (a Suspend's
 * checkpoint under way), within timeout_ms. */
static void await_locked_in_flight(struct itest_conn *c, pid_t pid, const char *method, int timeout_ms)
{
        double deadline = itest_now_ms() + timeout_ms;
        const char *st, *f;
        cJSON *j;

        do {
                j = state_of(c, pid);
                st = itest_str(j, "state");
                f = itest_str(j, "in_flight");
                if (st && f && strcmp(st, "locked") == 0 && strcmp(f, method) == 0)
                        return;
                usleep(10 * 1000);
        } while (itest_now_ms() < deadline);
        ck_abort_msg("pid %d not locked with %s in flight within %d ms: %s", (int)pid, method, timeout_ms,
                     itest_dump(j));
}

/* B7c: a daemon killed during a leased Suspend (an 8 s checkpoint) left
 * the lease on disk before the first driver step: the next start undoes
 * what the call did (the call was never answered), at once. */
static void killed_during_leased_call(bool group)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d), *q = itest_connect(d);
        pid_t pid = itest_target(SIM, "CUDACKPT_SIM_MEM_MIB=8", "CUDACKPT_SIM_CKPT_MIBPS=1", SLOT, NULL);

        if (group)
                itest_send_call(c, CUDACKPT_METHOD_SUSPEND_GROUP,
                                itest_strdupf("{\"selector\":{\"pids\":[{\"pid\":%d}]},\"lease_ms\":600000}", (int)pid));
        else
                itest_send_call(c, CUDACKPT_METHOD_SUSPEND, itest_strdupf("{\"pid\":%d,\"lease_ms\":600000}", (int)pid));
        await_locked_in_flight(q, pid, group ? "Checkpoint" : "Suspend", 3000);
        itest_daemon_kill(d);
        d = itest_daemon_restart(d, NULL);
        c = itest_connect(d);
        itest_await_state(c, pid, "running", 2000);
        itest_await_log(d, "never answered; undoing it", 1000);
}

START_TEST(killed_during_leased_suspend)
{
        killed_during_leased_call(false);
}
END_TEST

START_TEST(killed_during_leased_suspend_group)
{
        killed_during_leased_call(true);
}
END_TEST

int main(void)
{
        const TTest *tests[] = { expired_while_down, claimed_after_restart, unclaimed_after_restart,
                restore_group_unclaimed_after_restart, kept_at_stop, cli_hold_survives_restart, cli_group_hold_survives_restart,
                client_waits_for_daemon, tampered_store_refused, store_links_and_size_refused,
                claimable_after_sigterm, killed_during_leased_suspend, killed_during_leased_suspend_group,
                NULL };

        return itest_run("leases_restart", "restart", 60, tests);
}
