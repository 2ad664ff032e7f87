/* jobcoord.c: the coordinator's table of its nodes, its lines and waits
 * (jobcoord.h). */
#include "jobcoord.h"

#include "describe.h"
#include "exitcode.h"
#include "json.h"
#include "monotime.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

void jobcoord_copy(char *dst, size_t size, const char *src) {
        snprintf(dst, size, "%s", src ? src : "");
        ctl_sanitize(dst);
}

int jobcoord_find(const jobcoord *j, const char *name) {
        for (unsigned i = 0; name && i < j->known; i++)
                if (strcmp(j->v[i].name, name) == 0)
                        return (int)i;
        return -1;
}

void jobcoord_say(const jobcoord *j, const char *node, const char *text) {
        fprintf(stderr, "%s%s%s%s\n", j->prefix, node ? node : "", node ? ": " : "", text);
}

/* The next line (0, *ret_json the caller's), a signal taken (1, j->sig),
 * the deadline passed (-ETIMEDOUT; deadline < 0: none) or the link ended
 * (-EPIPE, j->gone). */
int jobcoord_recv(jobcoord *j, long long deadline, cJSON **ret_json) {
        const struct timespec zero = { 0, 0 };

        for (;;) {
                long long left = deadline < 0 ? JOBCOORD_SIGNAL_POLL_MS : deadline - monotime_ms();
                nodes_msg m;
                int r, sig;

                if ((sig = sigtimedwait(&j->sigs, NULL, &zero)) > 0) {
                        j->sig = sig;
                        return 1;
                }
                if (left <= 0)
                        return -ETIMEDOUT;
                r = nodes_link_recv(j->link, left > JOBCOORD_SIGNAL_POLL_MS ? JOBCOORD_SIGNAL_POLL_MS : (int)left,
                                    &m);
                if (r == -ETIMEDOUT)
                        continue;
                if (r < 0 || m.ended) {
                        j->gone = true;
                        return -EPIPE;
                }
                *ret_json = m.json;
                return 0;
        }
}

void jobcoord_fail(jobcoord *j, const char *node, const char *error, const char *what) {
        if (j->failed)
                return;
        j->failed = true;
        jobcoord_copy(j->node, sizeof(j->node), node);
        jobcoord_copy(j->error, sizeof(j->error), error);
        jobcoord_copy(j->what, sizeof(j->what), what);
}

/* What any node says at any time: its job ended, a call of its failed. */
void jobcoord_note(jobcoord *j, int i, const cJSON *m) {
        const char *event = json_get_string(m, "event");
        char text[320];
        long long status = -1;

        if (!event || i < 0)
                return;
        if (strcmp(event, "saved") == 0 || (strcmp(event, "failed") == 0 && json_get_string(m, "of") &&
                                               strcmp(json_get_string(m, "of"), "SaveJob") == 0))
                j->v[i].saving = false;
        /* The job's call of a save of this command's: the save's own
         * "saved" says it. */
        if (strcmp(event, "ended") == 0 && json_get_string(m, "saved") && j->v[i].saving)
                return;
        if (strcmp(event, "ended") == 0 && !j->v[i].ended) {
                (void)json_get_integer(m, "status", -1, 255, &status);
                j->v[i].ended = true;
                j->v[i].status = status < 0 ? CUDACKPT_EXIT_FAILURE : (int)status;
                snprintf(text, sizeof(text), "job ended with status %d", j->v[i].status);
                jobcoord_say(j, j->v[i].name, text);
        } else if (strcmp(event, "failed") == 0) {
                const char *of = json_get_string(m, "of"), *error = json_get_string(m, "error");
                char what[200];

                /* The job's own call gone (its daemon stopped or died): the
                 * node's job is gone with it, and says no "ended". */
                if (of && (strcmp(of, "StartJob") == 0 || strcmp(of, "RestoreJob") == 0 || strcmp(of, "Job") == 0) &&
                    !j->v[i].ended) {
                        j->v[i].ended = true;
                        j->v[i].status = error ? ctl_error_exit_code(error) : CUDACKPT_EXIT_FAILURE;
                        j->v[i].status = j->v[i].status ? j->v[i].status : CUDACKPT_EXIT_FAILURE;
                }
                jobcoord_copy(what, sizeof(what), json_get_string(m, "what"));
                snprintf(text, sizeof(text), "%.40s failed: %s", of ? of : "call", what);
                ctl_sanitize(text);
                jobcoord_say(j, j->v[i].name, text);
                jobcoord_fail(j, j->v[i].name, error, what);
        }
}

/* Waits until every node said event ("failed" from one: -EIO; a signal:
 * 1 when signals_end, else it is set aside; the link ended: -EPIPE). */
int jobcoord_await(jobcoord *j, const char *event, int timeout_ms, bool signals_end) {
        long long deadline = monotime_ms() + timeout_ms;
        unsigned said = 0;
        cJSON *m;
        int r;

        for (unsigned i = 0; i < j->n; i++)
                j->v[i].said = false;
        j->failed = false;
        while (said < j->n) {
                r = jobcoord_recv(j, deadline, &m);
                if (r == 1 && !signals_end) {
                        /* A save goes on; another signal ends the command
                         * once it is over. */
                        if (!sigismember(j->save_on, j->sig))
                                j->pending = j->sig;
                        else
                                j->again = j->sig;
                        j->sig = 0;
                        continue;
                }
                if (r != 0)
                        return r;
                int i = jobcoord_find(j, json_get_string(m, "node"));
                const char *e = json_get_string(m, "event");

                if (i >= 0 && e && strcmp(e, event) == 0 && !j->v[i].said) {
                        j->v[i].said = true;
                        said++;
                } else
                        jobcoord_note(j, i, m);
                cJSON_Delete(m);
                if (j->failed)
                        return -EIO;
        }
        return 0;
}

/* A line to every node; -EPIPE (j->gone) when they are gone. */
int jobcoord_send(jobcoord *j, const char *what, const char *key, uint32_t value) {
        char line[96];

        if (key)
                snprintf(line, sizeof(line), "{\"do\":\"%s\",\"%s\":%u}", what, key, (unsigned)value);
        else
                snprintf(line, sizeof(line), "{\"do\":\"%s\"}", what);
        if (nodes_link_send(j->link, line, JOBCOORD_CLOSE_TIMEOUT_MS) == 0)
                return 0;
        j->gone = true;
        return -EPIPE;
}

/* A phase's failure, said; the exit status it earns. */
int jobcoord_failure(jobcoord *j, int r, const char *phase) {
        char text[400];

        if (r == 1)
                return 128 + j->sig;
        if (r == -ETIMEDOUT) {
                snprintf(text, sizeof(text), "%s: a node did not answer in time", phase);
                jobcoord_say(j, NULL, text);
                return CUDACKPT_EXIT_TIMEOUT;
        }
        if (r == -EPIPE || !j->failed) {
                snprintf(text, sizeof(text), "%s: the nodes' step ended (a node unreachable, or its part gone)", phase);
                jobcoord_say(j, NULL, text);
                return CUDACKPT_EXIT_UNREACHABLE;
        }
        snprintf(text, sizeof(text), "%s failed on %s: %s", phase, j->node, j->what);
        jobcoord_say(j, NULL, text);
        return j->error[0] ? ctl_error_exit_code(j->error) : CUDACKPT_EXIT_FAILURE;
}

/* Whether the job ended on every node (true, *ret_status 0) or with a
 * status on one (true: the others are stopped as the link closes). */
bool jobcoord_over(const jobcoord *j, int *ret_status) {
        unsigned ended = 0;

        for (unsigned i = 0; i < j->n; i++) {
                if (j->v[i].ended && j->v[i].status != 0) {
                        *ret_status = j->v[i].status;
                        return true;
                }
                ended += j->v[i].ended;
        }
        *ret_status = 0;
        return ended == j->n;
}
