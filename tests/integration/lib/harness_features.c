/* harness_features.c: helpers of the integration tests for the daemon's
 * features that more than one test file uses: leases, the Watch stream and
 * cudackptctl (declared in harness.h, "features").  Everything here asserts
 * with Check and keeps what it returns until the test's teardown. */
#include "harness.h"

#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define ITEST_CTL_TIMEOUT_MS 20000

long long itest_lease_id(const cJSON *reply)
{
        const cJSON *l = itest_get(reply, "lease");
        const cJSON *id = cJSON_IsObject(l) ? cJSON_GetObjectItemCaseSensitive(l, "id") : NULL;

        ck_assert_msg(cJSON_IsNumber(id) && id->valuedouble >= 1, "no lease in %s", itest_dump(reply));
        return (long long)id->valuedouble;
}

int itest_count(const char *hay, const char *needle)
{
        int n = 0;

        for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
                n++;
        return n;
}

void itest_kill_wait(pid_t pid)
{
        int st;

        ck_assert(kill(pid, SIGKILL) == 0);
        ck_assert(waitpid(pid, &st, 0) == pid);
}

/* ---- Watch ----------------------------------------------------------------- */

struct itest_conn *itest_watcher(struct itest_daemon *d, const char *selector)
{
        struct itest_conn *w = itest_connect(d);
        cJSON *j;

        itest_sendf(w, "{\"method\":\"" CUDACKPT_METHOD_WATCH "\",\"parameters\":{%s%s},\"more\":true}",
                    selector ? "\"selector\":" : "", selector ? selector : "");
        j = itest_recv(w);
        ck_assert_msg(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "continues")), "%s", itest_dump(j));
        const cJSON *e = itest_get(j, "event");
        ck_assert_msg(cJSON_IsObject(e), "%s", itest_dump(j));
        ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(e, "type")->valuestring, "watching");
        return w;
}

const char *itest_event_str(const cJSON *e, const char *key)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, key);
        return cJSON_IsString(v) ? v->valuestring : "";
}

const cJSON *itest_next_event(struct itest_conn *w, int timeout_ms)
{
        cJSON *j = itest_recv_within(w, timeout_ms);
        const cJSON *e = itest_get(j, "event");

        ck_assert_msg(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "continues")) && cJSON_IsObject(e),
                      "not an event: %s", itest_dump(j));
        return e;
}

/* ---- cudackptctl ----------------------------------------------------------- */

const char *itest_ctl_path(void)
{
        return itest_need_env("CUDACKPT_TEST_CTL");
}

/* cudackptctl --socket=D's args... into argv (NULL-terminated). */
static void itest_ctl_argv(struct itest_daemon *d, const char *const *args, const char *argv[16])
{
        size_t n = 0;

        argv[n++] = itest_ctl_path();
        argv[n++] = itest_strdupf("--socket=%s", d->sock);
        for (; args[n - 2]; n++) {
                ck_assert(n < 15);
                argv[n] = args[n - 2];
        }
        argv[n] = NULL;
}

void itest_ctl_run(struct itest_daemon *d, struct itest_proc_result *ret, const char *const *args)
{
        const char *argv[16];

        itest_ctl_argv(d, args, argv);
        itest_run_proc((uid_t)-1, argv, NULL, ITEST_CTL_TIMEOUT_MS, ret);
}

pid_t itest_ctl_spawn(struct itest_daemon *d, const char *const *args, int *ret_out_fd)
{
        const char *argv[16];
        int p[2] = { -1, -1 };
        pid_t pid;

        itest_ctl_argv(d, args, argv);
        if (ret_out_fd)
                ck_assert(pipe(p) == 0);
        pid = fork();
        ck_assert(pid >= 0);
        if (pid == 0) {
                if (ret_out_fd) {
                        dup2(p[1], 1);
                        close(p[0]);
                        close(p[1]);
                }
                execv(argv[0], (char *const *)argv);
                _exit(127);
        }
        if (ret_out_fd) {
                close(p[1]);
                *ret_out_fd = p[0];
        }
        return pid;
}

struct itest_proc_result *itest_run_va(uid_t uid, const char *path, const char *pre, const char *const *env,
                                       const char *first, va_list ap)
{
        const char *argv[32];
        size_t n = 0;
        argv[n++] = path;
        if (pre)
                argv[n++] = pre;
        for (const char *a = first; a && n < 31; a = va_arg(ap, const char *))
                argv[n++] = a;
        argv[n] = NULL;
        struct itest_proc_result *r = itest_keep(calloc(1, sizeof(*r)));
        ck_assert(r);
        itest_run_proc(uid, argv, env, ITEST_CTL_TIMEOUT_MS, r);
        return r;
}

struct itest_proc_result *itest_ctl_as(uid_t uid, struct itest_daemon *d, const char *first, ...)
{
        const char *path = itest_ctl_path();
        if (uid != (uid_t)-1) {
                ck_assert_msg(d, "itest_ctl_as: another uid needs the daemon, to stage cudackptctl in its dir");
                path = itest_stage_exe(d, path, NULL);
        }
        va_list ap;
        va_start(ap, first);
        struct itest_proc_result *r =
                itest_run_va(uid, path, d ? itest_strdupf("--socket=%s", d->sock) : NULL, NULL, first, ap);
        va_end(ap);
        return r;
}

const char *itest_pidstr(pid_t pid)
{
        return itest_strdupf("%d", (int)pid);
}

void itest_assert_run(const struct itest_proc_result *r, int status, const char *out)
{
        ck_assert_msg(r->status == status, "exit status %d, expected %d (stdout \"%s\", stderr \"%s\")", r->status,
                      status, r->out, r->err);
        if (out)
                ck_assert_msg(strcmp(r->out, out) == 0, "stdout \"%s\", expected \"%s\" (stderr \"%s\")", r->out, out,
                              r->err);
        if (status == 0) {
                ck_assert_msg(r->err[0] == '\0', "stderr on success: %s", r->err);
        } else if (status < 10) {
                ck_assert_msg(r->err[0] != '\0', "nothing on stderr for exit status %d", status);
        } else {
                /* A daemon's error: one line. */
                size_t len = strlen(r->err);
                ck_assert_msg(len > 1 && r->err[len - 1] == '\n' && !memchr(r->err, '\n', len - 1),
                              "stderr on failure is not one line: \"%s\"", r->err);
        }
}

void itest_assert_op_output(const struct itest_proc_result *r, const char *state)
{
        ck_assert_msg(r->status == 0, "exit status %d (stderr \"%s\")", r->status, r->err);
        regex_t re;
        char *pat = itest_strdupf("^%s \\([0-9]+\\.[0-9]+ ms\\)\n$", state);
        ck_assert_int_eq(regcomp(&re, pat, REG_EXTENDED | REG_NOSUB), 0);
        int m = regexec(&re, r->out, 0, NULL, 0);
        regfree(&re);
        ck_assert_msg(m == 0, "stdout \"%s\" is not \"%s (D.D ms)\"", r->out, state);
}
