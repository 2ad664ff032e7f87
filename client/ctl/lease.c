/* lease.c: lock and suspend with a lease (--lease-ms, --hold, which keeps
 * its lease across a daemon restart by ClaimLease), release and renew. */
#include "lease.h"

#include "describe.h"
#include "exitcode.h"
#include "failure.h"
#include "host.h"

#include <cudackpt/protocol.h>
#include <cJSON.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static volatile sig_atomic_t stop_signal;

static void hold_signal_cb(int sig)
{
        stop_signal = sig;
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

void ctl_hold_signals(void)
{
        /* Until the undo: a stop ends the hold, not the client. */
        struct sigaction sa = { .sa_handler = hold_signal_cb };

        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
}

void ctl_held_of(const char *parameters_json, ctl_held *h)
{
        cJSON *p = parameters_json ? cJSON_Parse(parameters_json) : NULL;
        const cJSON *l = p ? cJSON_GetObjectItemCaseSensitive(p, "lease") : NULL;
        const cJSON *id = cJSON_IsObject(l) ? cJSON_GetObjectItemCaseSensitive(l, "id") : NULL;
        const cJSON *sec = cJSON_IsObject(l) ? cJSON_GetObjectItemCaseSensitive(l, "secret") : NULL;

        *h = (ctl_held){ .connected = true };
        if (cJSON_IsNumber(id) && id->valuedouble >= 1 && id->valuedouble <= 9007199254740992.0)
                h->id = (long long)id->valuedouble;
        if (cJSON_IsString(sec) && strlen(sec->valuestring) < sizeof(h->secret) &&
            strspn(sec->valuestring, "0123456789abcdef") == strlen(sec->valuestring))
                strcpy(h->secret, sec->valuestring);
        cJSON_Delete(p);
}

int ctl_held_reclaim(const char *socket, int timeout_ms, const char *prefix, cudackpt_client **clientp,
                     ctl_held *h)
{
        cudackpt_client *c = NULL;
        cudackpt_reply reply;
        char text[160];
        int r;

        if (h->id == 0 || !h->secret[0]) {
                fprintf(stderr, "%sthe daemon closed the connection and the lease has no secret to claim it with\n",
                        prefix);
                h->lost = true;
                return 0;
        }
        r = cudackpt_client_connect(socket, &c);
        if (r < 0)
                return r;
        (void)cudackpt_client_set_timeout(c, timeout_ms);
        snprintf(text, sizeof(text), "{\"lease\":%lld,\"secret\":\"%s\"}", h->id, h->secret);
        cudackpt_reply_init(&reply);
        r = cudackpt_call(c, CUDACKPT_METHOD_CLAIM_LEASE, text, &reply);
        if (r < 0) {
                cudackpt_client_free(c);
                return r;
        }
        if (reply.error) {
                (void)ctl_call_failed(prefix, 0, &reply, false);
                fprintf(stderr, "%sthe daemon no longer holds lease %lld for this client\n", prefix, h->id);
                h->lost = true;
        } else {
                fprintf(stderr, "%sreconnected to the daemon: lease %lld claimed\n", prefix, h->id);
        }
        cudackpt_reply_clear(&reply);
        cudackpt_client_free(*clientp);
        *clientp = c;
        h->connected = true;
        return 0;
}

/* Whether the daemon hung up the holding connection (it sends nothing
 * unasked), waiting up to ms for it. */
static bool hung_up(cudackpt_client *client, int ms)
{
        struct pollfd p = { .fd = cudackpt_client_fd(client), .events = POLLIN };

        return poll(&p, 1, ms) > 0;
}

/* Runs command (or waits for a stop signal), passing a stop signal on to
 * it, while keeping the lease held across daemon restarts.  Returns the
 * command's status as a shell gives it (0 without one). */
static int hold(const ctl_lease_op *o, cudackpt_client **clientp, ctl_held *h)
{
        pid_t child = 0;
        int st, forwarded = 0, r;

        fflush(stdout);
        if (o->command && (r = ctl_host_spawn(&(ctl_spawn) { .path = o->command[0], .argv = o->command,
                                                             .search = true, .keep_fd = -1 },
                                              &child, NULL)) < 0) {
                fprintf(stderr, "%scannot run %s: %s\n", o->prefix, o->command[0], strerror(-r));
                return 127;
        }
        for (;;) {
                if (child && waitpid(child, &st, WNOHANG) == child)
                        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                if (stop_signal && !child)
                        return CUDACKPT_EXIT_OK;
                if (stop_signal && child && forwarded != stop_signal) {
                        forwarded = stop_signal;
                        (void)kill(child, forwarded);
                }
                if (h->connected && !h->lost && hung_up(*clientp, 100)) {
                        fprintf(stderr, "%sthe daemon closed the connection (a restart?): reconnecting to keep "
                                        "lease %lld\n", o->prefix, h->id);
                        h->connected = false;
                }
                if (!h->connected && !h->lost)
                        (void)ctl_held_reclaim(o->socket, o->timeout_ms, o->prefix, clientp, h);
                else if (h->lost)
                        (void)poll(NULL, 0, 100);
        }
}

int ctl_hold_keep(const ctl_lease_op *o, cudackpt_client **clientp, ctl_held *h)
{
        int held = hold(o, clientp, h), r;

        if (!h->lost && !h->connected && (r = ctl_held_reclaim(o->socket, o->timeout_ms, o->prefix, clientp, h)) < 0) {
                return ctl_call_failed(o->prefix, r, NULL, false);
        }
        return held;
}

/* The operation's parameters as text, to free with cJSON_free(); NULL when
 * out of memory. */
static char *lease_params(const ctl_lease_op *o)
{
        cJSON *params = cJSON_CreateObject();
        char *text = NULL;

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
        return text;
}

int ctl_lease_run(cudackpt_client **clientp, const ctl_lease_op *o)
{
        char *text = lease_params(o);
        cudackpt_reply reply;
        ctl_held h;
        int r, status, held = CUDACKPT_EXIT_OK;

        cudackpt_reply_init(&reply);
        if (!text) {
                fprintf(stderr, "%sout of memory\n", o->prefix);
                return CUDACKPT_EXIT_FAILURE;
        }
        if (o->hold)
                ctl_hold_signals();
        r = cudackpt_call(*clientp, o->method, text, &reply);
        cJSON_free(text);
        if (r < 0 || reply.error) {
                status = ctl_call_failed(o->prefix, r, &reply, o->json);
                cudackpt_reply_clear(&reply);
                return status;
        }
        print_state(&reply, o->json);
        ctl_held_of(reply.parameters_json, &h);
        cudackpt_reply_clear(&reply);
        if (!o->hold)
                return CUDACKPT_EXIT_OK;
        held = ctl_hold_keep(o, clientp, &h);
        if (h.lost) {
                fprintf(stderr, "%sthe hold was lost while the daemon restarted: it undid the %s itself\n", o->prefix,
                        strcmp(o->method, CUDACKPT_METHOD_LOCK) == 0 ? "lock" : "suspend");
                return CUDACKPT_EXIT_FAILURE;
        }
        if (!h.connected)
                return held; /* the daemon could not be reached again */
        /* The hold is over: undo it here, so the result is seen (were this
         * client killed instead, the daemon would undo it itself). */
        cudackpt_reply_init(&reply);
        text = NULL;
        if (asprintf(&text, "{\"pid\":%d}", o->pid) < 0)
                return CUDACKPT_EXIT_FAILURE;
        r = cudackpt_call(*clientp, o->undo_method, text, &reply);
        free(text);
        if (r < 0 || reply.error)
                status = ctl_call_failed(o->prefix, r, &reply, o->json);
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
                status = ctl_call_failed(prefix, r, &reply, json);
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
