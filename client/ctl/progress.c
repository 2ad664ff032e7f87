/* progress.c: the progress line of suspend and checkpoint of one PID (a
 * restore has none to show: the driver releases the memory at its end).
 *
 * While the operation's call waits on its own connection, a thread holds a
 * second libcudackpt client with Watch on that pid (cudackpt_call_more)
 * and writes each progress event to stderr: rewriting one line on a
 * terminal, a line each otherwise.  Once the call has returned, the
 * watching connection is shut down, which ends the thread's call.  Failing
 * to watch (an older daemon, a refused connection) only means no progress. */
#include "progress.h"

#include "json.h"

#include <cudackpt/client.h>
#include <cudackpt/protocol.h>
#include <cJSON.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* How long ctl_progress_start() waits for the Watch's first reply. */
#define CTL_PROGRESS_START_TIMEOUT_MS 2000

typedef enum ctl_progress_phase {
        CTL_PROGRESS_STARTING,  /* Watch asked, no reply yet */
        CTL_PROGRESS_WATCHING,  /* the daemon said "watching" (continues) */
        CTL_PROGRESS_ENDED,     /* the call returned: no (more) progress */
} ctl_progress_phase;

struct ctl_progress {
        pthread_t thread;
        cudackpt_client *client;        /* the watching connection, owned */
        char request[160];              /* Watch's parameters */
        pthread_mutex_t lock;           /* guards phase */
        pthread_cond_t changed;         /* signalled when phase changes */
        ctl_progress_phase phase;
        int pid;
        bool tty;
        bool shown;                     /* a line is on the terminal */
};

static double progress_gib(double bytes) {
        return bytes / (1024.0 * 1024.0 * 1024.0);
}

static void progress_show(struct ctl_progress *p, const cJSON *e) {
        const char *step = json_get_string(e, "step");
        char line[160];
        double bytes, total;
        int n;

        if (!json_get_number(e, "bytes", &bytes) || !step || strcmp(step, "checkpoint") != 0)
                return;
        n = snprintf(line, sizeof(line), "%s of %d: %.2f GiB", step, p->pid, progress_gib(bytes));
        if (json_get_number(e, "total_bytes", &total) && total > 0 && n > 0 && (size_t) n < sizeof(line))
                snprintf(line + n, sizeof(line) - (size_t) n, " of %.2f GiB (%.0f%%)", progress_gib(total),
                         100.0 * (bytes < total ? bytes : total) / total);
        if (p->tty) {
                fprintf(stderr, "\r%s\033[K", line);
                p->shown = true;
        } else {
                fprintf(stderr, "%s\n", line);
        }
        fflush(stderr);
}

static void progress_set_phase(struct ctl_progress *p, ctl_progress_phase phase) {
        pthread_mutex_lock(&p->lock);
        p->phase = phase;
        pthread_cond_broadcast(&p->changed);
        pthread_mutex_unlock(&p->lock);
}

/* Each reply that says more follow: the first ("watching") lets
 * ctl_progress_start() return, the progress events are shown. */
static int progress_event_cb(void *ctx, const char *parameters_json) {
        struct ctl_progress *p = ctx;
        cJSON *params = cJSON_Parse(parameters_json);
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(params, "event");
        const char *type = json_get_string(e, "type");

        if (p->phase == CTL_PROGRESS_STARTING)
                progress_set_phase(p, CTL_PROGRESS_WATCHING);
        else if (type && strcmp(type, "progress") == 0)
                progress_show(p, e);
        cJSON_Delete(params);
        return 0;
}

static void *progress_thread(void *arg) {
        struct ctl_progress *p = arg;
        cudackpt_reply reply;

        cudackpt_reply_init(&reply);
        (void) cudackpt_call_more(p->client, CUDACKPT_METHOD_WATCH, p->request, progress_event_cb, p, &reply);
        cudackpt_reply_clear(&reply);
        progress_set_phase(p, CTL_PROGRESS_ENDED);
        return NULL;
}

/* Waits (CTL_PROGRESS_START_TIMEOUT_MS at most) for the Watch's first
 * reply, so that the operation asked for next is watched from its start:
 * 0, or -errno (an error reply, from an older daemon, ends the call). */
static int progress_await_watching(struct ctl_progress *p) {
        struct timespec deadline;
        int r = 0;

        (void) clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += CTL_PROGRESS_START_TIMEOUT_MS / 1000;
        pthread_mutex_lock(&p->lock);
        while (p->phase == CTL_PROGRESS_STARTING && r == 0)
                r = pthread_cond_timedwait(&p->changed, &p->lock, &deadline);
        if (p->phase != CTL_PROGRESS_STARTING)
                r = p->phase == CTL_PROGRESS_WATCHING ? 0 : EPROTO;
        pthread_mutex_unlock(&p->lock);
        return -r;
}

/* Ends the thread's call (it may be blocked reading) and joins it. */
static void progress_end(struct ctl_progress *p) {
        (void) shutdown(cudackpt_client_fd(p->client), SHUT_RDWR);
        pthread_join(p->thread, NULL);
}

static void progress_free(struct ctl_progress *p) {
        cudackpt_client_free(p->client);
        pthread_cond_destroy(&p->changed);
        pthread_mutex_destroy(&p->lock);
        free(p);
}

int ctl_progress_start(const char *socket_path, int pid, bool tty, ctl_progress **ret) {
        struct ctl_progress *p;
        int r;

        *ret = NULL;
        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->pid = pid;
        p->tty = tty;
        snprintf(p->request, sizeof(p->request), "{\"selector\":{\"pids\":[{\"pid\":%d}]}}", pid);
        r = cudackpt_client_connect(socket_path, &p->client);
        if (r < 0) {
                free(p);
                return r;
        }
        pthread_mutex_init(&p->lock, NULL);
        pthread_cond_init(&p->changed, NULL);
        r = -pthread_create(&p->thread, NULL, progress_thread, p);
        if (r < 0) {
                progress_free(p);
                return r;
        }
        r = progress_await_watching(p);
        if (r < 0) {
                progress_end(p);
                progress_free(p);
                return r;
        }
        *ret = p;
        return 0;
}

void ctl_progress_stop(ctl_progress *p) {
        if (!p)
                return;
        progress_end(p);
        if (p->shown) {
                fputs("\r\033[K", stderr);
                fflush(stderr);
        }
        progress_free(p);
}
