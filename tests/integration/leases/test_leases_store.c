/* test_leases_store.c: where and how the lease store is written (issue
 * 29: A3, B7e), on the simulator, against the real daemon.
 *
 * The store is kept only in a directory nobody but root may change; in
 * any other the daemon says, at its start, in GetStatus, in cudackptctl
 * status and in a metric, that leases will not outlive a restart.  Its
 * temporary file has a name nobody can take in advance, and a write that
 * fails, even on its last byte, leaves the store as it was. */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define SLOT "CUDACKPT_SIM_STATE=r"

static pid_t slot_target(void)
{
        return itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=8", SLOT, NULL);
}

static const char *store_path(const struct itest_daemon *d)
{
        return itest_strdupf("%s/leases.json", d->dir);
}

/* The store's text, "" when there is none. */
static const char *store_text(const struct itest_daemon *d)
{
        return itest_read_text(store_path(d));
}

static const cJSON *lease_store_status(struct itest_conn *c)
{
        cJSON *j = itest_call(c, CUDACKPT_METHOD_GET_STATUS, NULL);
        const cJSON *o = itest_get(j, "lease_store");

        ck_assert_msg(cJSON_IsObject(o) && cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(o, "durable")),
                      "GetStatus: %s", itest_dump(j));
        return o;
}

static bool durable(struct itest_conn *c, const char **ret_reason)
{
        const cJSON *o = lease_store_status(c);

        *ret_reason = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "reason"));
        return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "durable"));
}

static const char *metrics(struct itest_conn *c)
{
        const char *text = itest_str(itest_call(c, CUDACKPT_METHOD_GET_METRICS, NULL), "text");

        ck_assert(text);
        return text;
}

struct squat {
        const char *path;
};

static int squat_fn(void *ctx, char *msg, size_t msg_size)
{
        const struct squat *s = ctx;

        if (mkdir(s->path, 0755) < 0) {
                snprintf(msg, msg_size, "mkdir %s: %s", s->path, strerror(errno));
                return -1;
        }
        return 0;
}

/* A3: the socket in a sticky directory everyone may write (/tmp, say),
 * no $RUNTIME_DIRECTORY.  Another user takes the old temporary name (a
 * directory leases.json.tmp) and any name beside: the daemon keeps no
 * store there, and says so at its start, in GetStatus, in cudackptctl
 * status and in cudackpt_lease_store_durable. */
START_TEST(shared_dir_no_store)
{
        struct itest_daemon *d;
        struct itest_conn *c;
        struct squat s;
        char msg[256] = "";
        const char *reason = NULL;
        pid_t pid = slot_target();

        if (itest_need_root())
                return;
        d = itest_daemon_start_default();
        itest_daemon_stop(d);
        ck_assert_int_eq(unlink(store_path(d)), 0);
        ck_assert_int_eq(chmod(d->dir, 01777), 0);
        s.path = itest_strdupf("%s/leases.json.tmp", d->dir);
        ck_assert_msg(itest_run_as(ITEST_OTHER_UID, squat_fn, &s, msg, sizeof(msg)) == 0, "%s", msg);
        d = itest_daemon_restart(d, NULL);
        itest_await_log(d, "No lease store in the runtime directory", 1000);
        itest_await_log(d, "may be written by others than its owner (mode 1777); leases will not outlive a restart", 1);
        c = itest_connect(d);
        ck_assert_msg(!durable(c, &reason) && reason && strstr(reason, "may be written by others"), "reason: %s",
                      reason ? reason : "(none)");
        ck_assert_msg(strstr(metrics(c), "\ncudackpt_lease_store_durable 0\n"), "metrics: %s", metrics(c));
        struct itest_proc_result *r = itest_ctl(d, "status", NULL);
        ck_assert_msg(r->status == 0 && strstr(r->out, "\nlease store: NONE, leases will not outlive a restart of "
                                                       "the daemon (no lease store in "),
                      "status %d out %s", r->status, r->out);
        /* A lease is still granted, and written nowhere. */
        (void)itest_lease_id(itest_call(c, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"lease_ms\":600000}", (int)pid)));
        ck_assert_str_eq(store_text(d), "");
        itest_daemon_stop(d);
        ck_assert_msg(strstr(itest_daemon_log(d), "not honoured: the daemon is stopping without a lease store"), "log: %s",
                      itest_daemon_log(d));
}
END_TEST

/* A3: the temporary file's name cannot be taken in advance: with the old
 * fixed name squatted (here by root, in root's directory), the store is
 * still written, and a lease outlives a restart. */
START_TEST(temp_name_unforeseeable)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        pid_t pid = slot_target();
        const char *reason = NULL;

        ck_assert_int_eq(mkdir(itest_strdupf("%s/leases.json.tmp", d->dir), 0700), 0);
        (void)itest_lease_id(itest_call(c, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"lease_ms\":1000}", (int)pid)));
        ck_assert_msg(strstr(store_text(d), "\"members\""), "store: %s", store_text(d));
        ck_assert_msg(durable(c, &reason) && !reason, "not durable: %s", reason ? reason : "");
        ck_assert_msg(strstr(metrics(c), "\ncudackpt_lease_store_durable 1\n"), "metrics: %s", metrics(c));
        itest_daemon_kill(d);
        /* A temporary file of a daemon killed while writing is removed at
         * the next start; other names beside the store are left alone. */
        const char *left = itest_strdupf("%s/leases.json.0123456789abcdef.tmp", d->dir);
        const char *other = itest_strdupf("%s/leases.json.keep", d->dir);
        int fd = open(left, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        close(fd);
        fd = open(other, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        close(fd);
        usleep(1100 * 1000); /* its deadline passes */
        d = itest_daemon_restart(d, NULL);
        c = itest_connect(d);
        itest_await_state(c, pid, "running", 1000);
        ck_assert_msg(access(left, F_OK) < 0 && errno == ENOENT, "%s was left", left);
        ck_assert_msg(access(other, F_OK) == 0, "%s was removed", other);
}
END_TEST

/* B7e: a write that fails on its very last byte (the file size limit,
 * RLIMIT_FSIZE, one byte short) is not renamed into place: the store
 * stays as it was, the log and GetStatus say the leases will not outlive
 * a restart, and the next write that works says they will again. */
START_TEST(failed_write_not_renamed)
{
        struct itest_daemon *d;
        struct itest_conn *c;
        pid_t pid = slot_target();
        const char *reason = NULL, *before, *after;
        struct rlimit none = { RLIM_INFINITY, RLIM_INFINITY };
        long long id;

        /* Kept by the daemon across its exec: a write past the limit then
         * fails with EFBIG instead of killing it. */
        signal(SIGXFSZ, SIG_IGN);
        d = itest_daemon_start_default();
        c = itest_connect(d);
        id = itest_lease_id(itest_call(c, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"lease_ms\":600000}", (int)pid)));
        itest_assert_ok(itest_call(c, CUDACKPT_METHOD_RENEW_LEASE, itest_strdupf("{\"lease\":%lld,\"lease_ms\":600000}", id)));
        before = store_text(d);
        size_t len = strlen(before);
        ck_assert_msg(len > 2 && before[len - 1] == '\n', "store: %s", before);
        /* The next renewal writes as many bytes (its deadline has as many
         * digits): all but the last fit. */
        struct rlimit lim = { len - 1, RLIM_INFINITY };
        ck_assert_int_eq(prlimit(d->pid, RLIMIT_FSIZE, &lim, NULL), 0);
        cJSON *j = itest_call(c, CUDACKPT_METHOD_RENEW_LEASE, itest_strdupf("{\"lease\":%lld,\"lease_ms\":600000}", id));
        ck_assert_int_eq(prlimit(d->pid, RLIMIT_FSIZE, &none, NULL), 0);
        itest_assert_ok(j);
        after = store_text(d);
        ck_assert_msg(strcmp(after, before) == 0, "the failed write replaced the store:\nbefore %safter  %s", before,
                      after);
        ck_assert_msg(!durable(c, &reason) && reason && strstr(reason, "File too large"), "reason: %s",
                      reason ? reason : "(none)");
        /* (Its log line is lost: the log file, longer than the limit, failed too.) */
        /* The next write works: the store holds the renewal again. */
        itest_assert_ok(itest_call(c, CUDACKPT_METHOD_RENEW_LEASE, itest_strdupf("{\"lease\":%lld,\"lease_ms\":600000}", id)));
        after = store_text(d);
        ck_assert_msg(strcmp(after, before) != 0 && after[strlen(after) - 1] == '\n', "store: %s", after);
        ck_assert_msg(durable(c, &reason), "still not durable: %s", reason ? reason : "");
        itest_await_log(d, "is written again", 1000);
}
END_TEST

int main(void)
{
        const TTest *tests[] = { shared_dir_no_store, temp_name_unforeseeable, failed_write_not_renamed,
                NULL };

        return itest_run("leases_store", "store", 60, tests);
}
