/* savecall.c: the saves feature's calls, parsed and handed on
 * (savecall.h); StartJob's command line and environment. */
#include "saves/savecall.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cudackpt/protocol.h"
#include "base/log.h"
#include "fdio.h"
#include "saves/saveops.h"

/* The parameters of every call of the feature; which a method takes is
 * its row's (struct method_keys). */
struct params {
        const char *name, *save, *directory, *output;
        const cJSON *argv, *environment;
        bool leave_running, replace, barrier, go;
};

enum key {
        K_NAME, K_SAVE, K_ARGV, K_ENVIRONMENT, K_DIRECTORY, K_OUTPUT, K_LEAVE_RUNNING, K_REPLACE, K_BARRIER, K_JOB,
        K_GO, K_N
};

static const char *const key_names[K_N] = { "name", "save", "argv", "environment", "directory", "output",
                                            "leave_running", "replace", "barrier", "job", "go" };

#define BIT(k) (1u << (k))

/* For each method, the keys it takes and those it must have. */
static unsigned keys_of(enum proto_method m, unsigned *ret_required)
{
        unsigned start = BIT(K_NAME) | BIT(K_ARGV) | BIT(K_ENVIRONMENT) | BIT(K_DIRECTORY);

        switch (m) {
        case PROTO_START_JOB:
                *ret_required = start;
                return start | BIT(K_OUTPUT);
        case PROTO_SAVE_JOB:
                *ret_required = BIT(K_NAME) | BIT(K_SAVE);
                return BIT(K_NAME) | BIT(K_SAVE) | BIT(K_LEAVE_RUNNING) | BIT(K_REPLACE) | BIT(K_BARRIER);
        case PROTO_RESTORE_JOB:
                *ret_required = BIT(K_SAVE);
                return BIT(K_SAVE) | BIT(K_BARRIER);
        case PROTO_PASS_BARRIER:
                *ret_required = BIT(K_JOB) | BIT(K_GO);
                return BIT(K_JOB) | BIT(K_GO);
        case PROTO_REMOVE_SAVE:
                *ret_required = BIT(K_SAVE);
                return BIT(K_SAVE);
        default:
                *ret_required = 0;
                return 0;
        }
}

bool savecall_name_ok(const char *s)
{
        size_t n = strlen(s);

        if (n < 1 || n > SAVESTORE_NAME_MAX || s[0] == '.' || s[0] == '-')
                return false;
        return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

/* One parameter into p: 0, or -EINVAL (its value is not one). */
static int take(enum key k, const cJSON *item, struct params *p)
{
        bool optional_null = cJSON_IsNull(item) && (k == K_OUTPUT || k == K_LEAVE_RUNNING || k == K_REPLACE ||
                                                    k == K_BARRIER);
        bool *flags[K_N] = { [K_LEAVE_RUNNING] = &p->leave_running, [K_REPLACE] = &p->replace,
                             [K_BARRIER] = &p->barrier, [K_GO] = &p->go };

        if (optional_null)
                return 0;
        switch (k) {
        case K_NAME:
        case K_SAVE:
        case K_JOB:
                if (!cJSON_IsString(item) || !savecall_name_ok(item->valuestring))
                        return -EINVAL;
                *(k == K_SAVE ? &p->save : &p->name) = item->valuestring; /* job: the name PassBarrier acts on */
                return 0;
        case K_DIRECTORY:
        case K_OUTPUT:
                if (!cJSON_IsString(item) || item->valuestring[0] != '/')
                        return -EINVAL;
                *(k == K_DIRECTORY ? &p->directory : &p->output) = item->valuestring;
                return 0;
        case K_ARGV:
        case K_ENVIRONMENT:
                if (!cJSON_IsArray(item))
                        return -EINVAL;
                *(k == K_ARGV ? &p->argv : &p->environment) = item;
                return 0;
        default:
                if (!cJSON_IsBool(item))
                        return -EINVAL;
                *flags[k] = cJSON_IsTrue(item);
                return 0;
        }
}

/* The call's parameters: 0, or -EINVAL with *ret_reply (InvalidParameter
 * naming the first one that is wrong, unknown, repeated or missing). */
static int parse(const struct proto_call *call, struct params *p, cJSON **ret_reply)
{
        unsigned required, allowed = keys_of(call->method, &required), seen = 0;
        const cJSON *item;
        int k;

        *p = (struct params){ 0 };
        if (call->parameters)
                cJSON_ArrayForEach(item, call->parameters) {
                        for (k = 0; k < K_N && strcmp(item->string, key_names[k]) != 0; k++)
                                ;
                        if (k == K_N || !(allowed & BIT(k)) || (seen & BIT(k)) || take(k, item, p) < 0) {
                                *ret_reply = proto_invalid_parameter(item->string);
                                return -EINVAL;
                        }
                        seen |= BIT(k);
                }
        for (k = 0; k < K_N; k++)
                if ((required & BIT(k)) && !(seen & BIT(k))) {
                        *ret_reply = proto_invalid_parameter(key_names[k]);
                        return -EINVAL;
                }
        return 0;
}

/* argv: 1 to max entries, strings, the first not empty; environment: at
 * most max, each KEY=VALUE.  NULL, or the parameter that is wrong. */
static const char *check_lists(const struct params *p, unsigned max)
{
        const cJSON *item;
        int n = cJSON_GetArraySize(p->argv);

        if (n < 1 || (unsigned)n > max || !cJSON_IsString(p->argv->child) || !p->argv->child->valuestring[0])
                return "argv";
        cJSON_ArrayForEach(item, p->argv)
                if (!cJSON_IsString(item))
                        return "argv";
        if ((unsigned)cJSON_GetArraySize(p->environment) > max)
                return "environment";
        cJSON_ArrayForEach(item, p->environment)
                if (!cJSON_IsString(item) || !strchr(item->valuestring, '=') || item->valuestring[0] == '=')
                        return "environment";
        return NULL;
}

/* A sealed memfd holding the environment, NUL after each entry, read
 * from its start: the command's fd 4.  -errno on failure. */
static int env_memfd(const cJSON *environment)
{
        const cJSON *item;
        int fd = memfd_create("cudackpt-job-env", MFD_CLOEXEC | MFD_ALLOW_SEALING), r = 0;

        if (fd < 0)
                return -errno;
        cJSON_ArrayForEach(item, environment)
                if (r == 0)
                        r = fdio_write_all(fd, item->valuestring, strlen(item->valuestring) + 1);
        if (r == 0 && (lseek(fd, 0, SEEK_SET) < 0 ||
                       fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0))
                r = -errno;
        if (r < 0) {
                close(fd);
                return r;
        }
        return fd;
}

/* `cudackptctl run` for the caller's job, as savejobs_start() runs it. */
static void start_job(struct saves *t, struct conn *c, const struct params *p)
{
        char name[80], user[48], *chdir_opt = NULL, *output_opt = NULL;
        size_t n = (size_t)cJSON_GetArraySize(p->argv), k = 0;
        const char **argv = calloc(n + 16, sizeof(char *));
        const cJSON *item;
        int envfd = env_memfd(p->environment);

        if (!argv || envfd < 0 || asprintf(&chdir_opt, "--chdir=%s", p->directory) < 0 ||
            (p->output && asprintf(&output_opt, "--output-as-user=%s", p->output) < 0)) {
                log_error("Failed to start job %s of uid %u: out of memory or descriptors", p->name,
                          (unsigned)c->caller.uid);
                conn_send(c, saves_command_failed("run", 125, "the daemon is out of memory or descriptors"));
                goto out;
        }
        snprintf(name, sizeof(name), "--name=u%u-%s", (unsigned)c->caller.uid, p->name);
        snprintf(user, sizeof(user), "--user=%u:%u", (unsigned)c->caller.uid, (unsigned)c->caller.gid);
        argv[k++] = t->ctl;
        argv[k++] = "run";
        argv[k++] = name;
        argv[k++] = user;
        argv[k++] = "--cgroups-of=3";
        argv[k++] = "--limits-of=3";
        argv[k++] = "--env-fd=4";
        argv[k++] = chdir_opt;
        if (output_opt)
                argv[k++] = output_opt;
        argv[k++] = "--ready-fd=5";
        argv[k++] = "--die-with-parent";
        argv[k++] = "--";
        cJSON_ArrayForEach(item, p->argv)
                argv[k++] = item->valuestring;
        (void)savejobs_start(t, c, &(struct savejobs_spec){ .verb = "run", .name = p->name, .argv = argv,
                                                            .envfd = envfd });
out:
        if (envfd >= 0)
                close(envfd);
        free(chdir_opt);
        free(output_opt);
        free(argv);
}

static void list_jobs(struct saves *t, struct conn *c, const struct proto_call *call)
{
        cJSON *p = cJSON_CreateObject();

        if (p)
                cJSON_AddItemToObject(p, "jobs", savejobs_list(t, c->caller.uid));
        conn_reply(c, call, proto_reply_new(p));
}

/* A part held at a barrier is the administrator's choice
 * (save_parts_network_lock): true, refused, when it is off. */
static bool parts_off(struct saves *t, struct conn *c, struct proto_call *call)
{
        cJSON *why;

        if (strcmp(t->cfg->save_parts_network_lock, "off") != 0)
                return false;
        why = cJSON_CreateObject();
        cJSON_AddStringToObject(why, "reason", "holds no part of a job at a barrier (save_parts_network_lock is off)");
        conn_reply(c, call, proto_error_new(CUDACKPT_ERROR_SAVES_DISABLED, why));
        return true;
}

void savecall_call(struct saves *t, struct conn *c, struct proto_call *call)
{
        struct params p;
        cJSON *err = NULL;
        const char *bad;
        bool job = call->method == PROTO_START_JOB || call->method == PROTO_RESTORE_JOB;

        if (parse(call, &p, &err) < 0) {
                conn_reply(c, call, err);
                return;
        }
        if (p.barrier && parts_off(t, c, call))
                return;
        if (p.barrier && call->method == PROTO_SAVE_JOB && !call->more) {
                /* Its continues reply says when the part waits at the barrier. */
                conn_reply(c, call, proto_invalid_parameter("barrier"));
                return;
        }
        if (job && call->oneway)
                return;
        if (job && !call->more) {
                conn_send(c, proto_error_new(CUDACKPT_VARLINK_EXPECTED_MORE, NULL));
                return;
        }
        if (life_stopping(t->life) && (job || call->method == PROTO_SAVE_JOB)) {
                conn_reply(c, call, proto_error_new(CUDACKPT_ERROR_SHUTTING_DOWN, NULL));
                return;
        }
        if (call->method == PROTO_LIST_JOBS) {
                list_jobs(t, c, call);
                return;
        }
        if (call->method == PROTO_PASS_BARRIER) {
                if (t->dir_fd < 0)
                        conn_reply(c, call, proto_error_new(CUDACKPT_ERROR_SAVES_DISABLED, NULL));
                else
                        savebarrier_pass(&t->barriers, c, call, p.name, p.go);
                return;
        }
        /* Running a user's command as root is the administrator's choice,
         * made with saves_dir (and, under systemd, cudackptd-jobs.conf). */
        if (call->method == PROTO_START_JOB && t->dir_fd < 0) {
                conn_send(c, proto_error_new(CUDACKPT_ERROR_SAVES_DISABLED, NULL));
                return;
        }
        if (call->method != PROTO_START_JOB) {
                saveops_call(t, c, call, &(struct saveops_request){ .method = call->method, .name = p.name,
                                                                    .save = p.save,
                                                                    .leave_running = p.leave_running,
                                                                    .replace = p.replace,
                                                                    .barrier = p.barrier });
                return;
        }
        bad = check_lists(&p, t->cfg->max_job_argv);
        if (bad) {
                conn_send(c, proto_invalid_parameter(bad));
                return;
        }
        start_job(t, c, &p);
}
