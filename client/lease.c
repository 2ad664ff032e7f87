/* lease.c: lock and suspend with a lease (--lease-ms, --hold), release
 * and renew. */
#include "ctl.h"

#include <cudackpt/protocol.h>

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
        stop_signal = sig;
}

/* Prints a failed call or error reply; returns its exit status. */
static int report_failure(const char *prefix, int r, const cudackpt_reply *reply, bool json)
{
        if (r < 0) {
                fprintf(stderr, "%s%s\n", prefix, ctl_describe_call_failure(r));
                return ctl_call_failure_exit_code(r);
        }
        char *d = ctl_describe_error(reply);
        fprintf(stderr, "%s%s\n", prefix, d ? d : reply->error);
        free(d);
        if (json) {
                d = ctl_error_json(reply);
                if (d)
                        puts(d);
                free(d);
        }
        return cudackpt_reply_exit_code(reply);
}

/* "checkpointed (812.3 ms), lease 7" */
static void print_state(const cudackpt_reply *reply, bool json)
{
        cJSON *p;
        const cJSON *l, *id;

        if (json) {
                puts(reply->parameters_json);
                return;
        }
        ctl_fputs_safe(reply->state ? reply->state : "?", stdout);
        if (reply->duration_ms >= 0)
                printf(" (%.1f ms)", reply->duration_ms);
        p = cJSON_Parse(reply->parameters_json);
        l = p ? cJSON_GetObjectItemCaseSensitive(p, "lease") : NULL;
        id = cJSON_IsObject(l) ? cJSON_GetObjectItemCaseSensitive(l, "id") : NULL;
        if (cJSON_IsNumber(id))
                printf(", lease %.0f", id->valuedouble);
        cJSON_Delete(p);
        putchar('\n');
}

/* Runs command and waits for it; a stop signal meanwhile is passed on to
 * it.  Returns its exit status as a shell gives it. */
static int run_command(const char *prefix, char **command)
{
        pid_t pid;
        int st, r = posix_spawnp(&pid, command[0], NULL, NULL, command, environ);

        if (r != 0) {
                fprintf(stderr, "%scannot run %s: %s\n", prefix, command[0], strerror(r));
                return 127;
        }
        fflush(stdout);
        for (;;) {
                if (waitpid(pid, &st, 0) == pid)
                        break;
                if (errno != EINTR)
                        return CUDACKPT_EXIT_FAILURE;
                if (stop_signal)
                        (void)kill(pid, (int)stop_signal);
        }
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void ctl_hold_signals(void)
{
        /* Until the undo: a stop ends the hold, not the client. */
        struct sigaction sa = { .sa_handler = on_stop };

        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
}

int ctl_hold_wait(const char *prefix, char **command)
{
        sigset_t none;

        fflush(stdout);
        if (command)
                return run_command(prefix, command);
        sigemptyset(&none);
        while (!stop_signal)
                sigsuspend(&none);
        return CUDACKPT_EXIT_OK;
}

int ctl_lease_run(cudackpt_client *client, const ctl_lease_op *o)
{
        cJSON *params = cJSON_CreateObject();
        char *text = NULL;
        cudackpt_reply reply;
        int r, status, held = CUDACKPT_EXIT_OK;

        cudackpt_reply_init(&reply);
        if (params) {
                cJSON_AddNumberToObject(params, "pid", o->pid);
                if (o->lock_timeout >= 0)
                        cJSON_AddNumberToObject(params, "timeout_ms", (double)o->lock_timeout);
                if (o->lease_ms > 0)
                        cJSON_AddNumberToObject(params, "lease_ms", (double)o->lease_ms);
                if (o->hold)
                        cJSON_AddTrueToObject(params, "lease_on_close");
                text = cJSON_PrintUnformatted(params);
        }
        cJSON_Delete(params);
        if (!text) {
                fprintf(stderr, "%sout of memory\n", o->prefix);
                return CUDACKPT_EXIT_FAILURE;
        }
        if (o->hold)
                ctl_hold_signals();
        r = cudackpt_call(client, o->method, text, &reply);
        cJSON_free(text);
        if (r < 0 || reply.error) {
                status = report_failure(o->prefix, r, &reply, o->json);
                cudackpt_reply_clear(&reply);
                return status;
        }
        print_state(&reply, o->json);
        cudackpt_reply_clear(&reply);
        if (!o->hold)
                return CUDACKPT_EXIT_OK;
        held = ctl_hold_wait(o->prefix, o->command);
        /* The hold is over: undo it here, so the result is seen (were this
         * client killed instead, the daemon would undo it itself). */
        cudackpt_reply_init(&reply);
        text = NULL;
        if (asprintf(&text, "{\"pid\":%d}", o->pid) < 0)
                return CUDACKPT_EXIT_FAILURE;
        r = cudackpt_call(client, o->undo_method, text, &reply);
        free(text);
        if (r < 0 || reply.error)
                status = report_failure(o->prefix, r, &reply, o->json);
        else {
                print_state(&reply, o->json);
                status = held;
        }
        cudackpt_reply_clear(&reply);
        return status;
}

int ctl_lease_manage(cudackpt_client *client, const char *prefix, long long lease, long long renew_ms, bool json)
{
        cudackpt_reply reply;
        char *text = NULL;
        int r, status;

        cudackpt_reply_init(&reply);
        r = renew_ms > 0 ? asprintf(&text, "{\"lease\":%lld,\"lease_ms\":%lld}", lease, renew_ms)
                         : asprintf(&text, "{\"lease\":%lld}", lease);
        if (r < 0)
                return CUDACKPT_EXIT_FAILURE;
        r = cudackpt_call(client, renew_ms > 0 ? CUDACKPT_METHOD_RENEW_LEASE : CUDACKPT_METHOD_RELEASE_LEASE, text,
                          &reply);
        free(text);
        if (r < 0 || reply.error) {
                status = report_failure(prefix, r, &reply, json);
        } else {
                if (json)
                        puts(reply.parameters_json);
                else if (renew_ms > 0)
                        printf("lease %lld renewed: %lld ms\n", lease, renew_ms);
                else
                        printf("lease %lld released\n", lease);
                status = CUDACKPT_EXIT_OK;
        }
        cudackpt_reply_clear(&reply);
        return status;
}
