/* criu_job_itest.c: the helpers of test_criu_job.c (see criu_job_itest.h). */
#include "criu_job_itest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* An executable script DIR/bin/NAME holding body (criu runs an action
 * script's path as it is given); its path. */
const char *cjob_script(struct citest_ctx *x, const char *name, const char *body)
{
        const char *path = itest_strdupf("%s/%s", x->bin, name);
        FILE *f = fopen(path, "we");
        ck_assert(f);
        fprintf(f, "#!/bin/sh\n%s\n", body);
        ck_assert_int_eq(fclose(f), 0);
        ck_assert_int_eq(chmod(path, 0755), 0);
        return path;
}

/* x's environment plus CUDACKPT_CRIU (what cudackptctl runs as criu). */
const char *const *cjob_env(struct citest_ctx *x, const char *criu)
{
        const char **env = itest_keep(calloc(24, sizeof(char *)));
        size_t n = 0;
        ck_assert(env);
        for (; x->env[n]; n++)
                env[n] = x->env[n];
        env[n++] = itest_strdupf("CUDACKPT_CRIU=%s", criu ? criu : citest_criu_path);
        env[n] = NULL;
        return env;
}

/* Runs cudackptctl ARGS... (NULL-terminated) with env; the result. */
struct citest_run *cjob_ctl(const char *const *env, ...)
{
        const char *argv[40];
        size_t n = 0;
        argv[n++] = citest_need_env("CUDACKPT_TEST_CTL");
        va_list ap;
        va_start(ap, env);
        for (const char *a = va_arg(ap, const char *); a && n < 39; a = va_arg(ap, const char *))
                argv[n++] = a;
        va_end(ap);
        argv[n] = NULL;
        struct citest_run *res = itest_keep(calloc(1, sizeof(*res)));
        ck_assert(res);
        int r = citest_run_bounded(argv, env, JOB_TIMEOUT_MS, res);
        ck_assert_msg(r == 0, "cannot run cudackptctl: %s", strerror(-r));
        assert_run(!res->timed_out, res, "cudackptctl %s did not finish within %d ms", argv[1], JOB_TIMEOUT_MS);
        return res;
}

void cjob_expect_ok(const struct citest_run *res, const char *what)
{
        assert_run(res->status == 0, res, "%s: exit status %d (its output above)", what, res->status);
}

/* The daemon's log holds no audit of a single call of method on pid (any
 * result): a group's own steps carry detail="...Group". */
void cjob_assert_no_audit(struct citest_ctx *x, const char *method, pid_t pid)
{
        char *text = citest_slurp(itest_strdupf("%s/daemon.log", x->d->dir));
        const char *bad = itest_strdupf(" method=%s target_pid=%d ", method, (int)pid);
        ck_assert(text);
        for (char *line = text, *nl; line && *line; line = nl ? nl + 1 : NULL) {
                nl = strchr(line, '\n');
                if (nl)
                        *nl = '\0';
                ck_assert_msg(!strstr(line, bad) || strstr(line, " detail="),
                              "the daemon audited a single %s of %d (the plugin did GPU work): %s", method, (int)pid,
                              line);
        }
}

/* After a dump: the pids gone, the manifest there, the plugin having left
 * every member alone. */
void cjob_check_dumped(struct citest_ctx *x, const char *img, const pid_t *pids, size_t n, size_t trees)
{
        for (size_t i = 0; i < n; i++)
                citest_await_gone(pids[i], AWAIT_MS);
        char *manifest = citest_slurp(itest_strdupf("%s/manifest.json", img));
        ck_assert_msg(manifest, "no %s/manifest.json after a good dump", img);
        cJSON *m = itest_keep_json(cJSON_Parse(manifest));
        ck_assert_msg(m, "manifest.json is not JSON: %s", manifest);
        ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(m, "trees")), (int)trees);
        ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(m, "members")), (int)n);
        for (size_t i = 0; i < n; i++) {
                itest_await_log(x->d, itest_strdupf(" method=SuspendGroup"), AWAIT_MS);
                cjob_assert_no_audit(x, "Lock", pids[i]);
                cjob_assert_no_audit(x, "Checkpoint", pids[i]);
        }
}

/* The plugin saw pid checkpointed at the dump (tree dir DIR/tree-ROOT). */
void cjob_check_plugin_skipped(const char *img, pid_t root, pid_t pid)
{
        const char *log = itest_strdupf("%s/tree-%d/dump.log", img, (int)root);
        char *text = citest_slurp(log);
        ck_assert_msg(text, "no %s", log);
        const char *want = itest_strdupf("pid %d already in a checkpointed state", (int)pid);
        if (!strstr(text, want))
                citest_print_log_tail("dump.log", log);
        ck_assert_msg(strstr(text, want), "%s does not say \"%s\": the plugin was off, or it checkpointed", log,
                      want);
}

/* After a restore: the same pids, new processes, running, memory intact
 * (the check counter as it was dumped, plus one), and the GPU state
 * restored by the group, not by the plugin. */
void cjob_check_job_restored(struct citest_ctx *x, const pid_t *pids, const uint64_t *start, size_t n,
                               unsigned long check)
{
        for (size_t i = 0; i < n; i++) {
                char st = 0;
                pid_t ppid = 0;
                ck_assert_msg(citest_proc_stat(pids[i], &st, &ppid), "pid %d did not come back", (int)pids[i]);
                ck_assert_msg(st != 'Z' && st != 'X', "restored pid %d is dead (%c)", (int)pids[i], st);
                ck_assert_msg(itest_start_time(pids[i]) != start[i], "pid %d is not a restored process",
                              (int)pids[i]);
                citest_assert_state(x, pids[i], "running");
                cjob_assert_no_audit(x, "Restore", pids[i]);
                citest_check_memory(x, pids[i], check);
        }
        itest_await_log(x->d, " method=ResumeGroup", AWAIT_MS);
}

void cjob_start_times(const pid_t *pids, uint64_t *start, size_t n)
{
        for (size_t i = 0; i < n; i++)
                start[i] = itest_start_time(pids[i]);
}


void cjob_argv(const char **argv, size_t max, const char *verb, const char *const *args)
{
        size_t n = 0;
        argv[n++] = citest_need_env("CUDACKPT_TEST_CTL");
        if (verb)
                argv[n++] = verb;
        for (; *args && n < max - 1; args++)
                argv[n++] = *args;
        ck_assert_msg(!*args, "more than %zu arguments for cudackptctl", max - 1);
        argv[n] = NULL;
}

/* In a process group of its own (not an orphaned one: stop signals stop
 * it), ended with the test. */
pid_t cjob_spawn(const char *const *env, int in_fd, int out_fd, const char *err, const char *const *args)
{
        const char *argv[16];
        cjob_argv(argv, 16, NULL, args);
        pid_t parent = getpid(), c = fork();
        ck_assert_int_ge(c, 0);
        if (c == 0) {
                setpgid(0, 0);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                int out = out_fd == CJOB_OUT_TO_ERR ? fd : out_fd >= 0 ? out_fd : null;
                if (getppid() != parent || null < 0 || fd < 0 || dup2(in_fd >= 0 ? in_fd : null, 0) < 0 ||
                    dup2(out, 1) < 0 || dup2(fd, 2) < 0)
                        _exit(127);
                execve(argv[0], (char *const *)argv, (char *const *)env);
                _exit(127);
        }
        return c;
}

pid_t cjob_start(const char *const *env, const char *out, const char *const *args)
{
        return cjob_spawn(env, -1, CJOB_OUT_TO_ERR, out, args);
}

/* Waits for cudackptctl c (cjob_start) to end; its wait status. */
int cjob_wait(pid_t c)
{
        int st = 0;
        double deadline = itest_now_ms() + JOB_TIMEOUT_MS;
        while (waitpid(c, &st, WNOHANG) == 0) {
                ck_assert_msg(itest_now_ms() < deadline, "cudackptctl did not end within %d ms", JOB_TIMEOUT_MS);
                poll(NULL, 0, 10);
        }
        return st;
}

/* Entries of a directory, . and .. aside. */
int cjob_dir_entries(const char *path)
{
        DIR *d = opendir(path);
        ck_assert_msg(d, "opendir %s: %s", path, strerror(errno));
        int n = 0;
        for (struct dirent *de; (de = readdir(d));)
                n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
        closedir(d);
        return n;
}

const char *cjob_kept_dir(const struct citest_run *res)
{
        static const char retry[] = "cudackptctl restore --images ";
        const char *at = strstr(res->out, retry);
        assert_run(at && strstr(res->out, "used up, but its checked copy is kept"), res, "no retry said");
        at += sizeof(retry) - 1;
        const char *dir = itest_strdupf("%.*s", (int)strcspn(at, "\n"), at);
        ck_assert_msg(access(itest_strdupf("%s/manifest.json", dir), F_OK) == 0, "kept: %s", dir);
        return dir;
}
