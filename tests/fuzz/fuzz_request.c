/* fuzz_request.c: a fuzz target for cudackptd's whole request path.
 *
 * The daemon runs inside this process as cudackptd runs it (a struct config,
 * a uv loop and a struct server, server_init/server_run, here on a thread of
 * its own) with the simulated driver, libcudackpt-sim.so, from the
 * environment (CUDACKPT_TEST_SIM) or the path compiled in.  Every input is
 * written to the daemon's Unix socket in small pieces and the replies are
 * read back and checked, so framing, parsing, dispatch, policy, scheduling
 * and the driver calls all see it.  libFuzzer calls LLVMFuzzerTestOneInput;
 * replay.c runs the seed corpus through it as the ctest test fuzz.corpus.
 *
 * Input format:
 *   byte 0    low nibble + 1: the size of each write (1 to 16 bytes);
 *             high nibble modulo FUZZ_N_TARGETS: the target that $PID names
 *   the rest  sent as it is, except for these tokens:
 *     $PID    the selected target's pid       $START  its start time
 *     $Pn     target n's pid (n a digit)      $Sn     target n's start time
 *     $Tn     the id of a second thread of target n (its pid if it has none)
 *     $CONN   what follows goes on another connection (FUZZ_MAX_CONNS in
 *             all); the connections are written in turn, chunk by chunk
 * Targets (the simulated CUDA ones are cudackpt-sim-target processes with
 * a second thread): 0 a simulated CUDA process; 1 one whose lock waits 5 ms (a
 * shorter timeout_ms times out); 2 one whose checkpoint fails NOT_SUPPORTED
 * (Suspend rolls back); 3 one whose lock and GetRestoreThreadId fail and
 * whose GetState says 7; 4 one on two GPUs; 5 this process (the daemon
 * itself); 6 pid 1; 7 a zombie; 8 a reaped child (no such process); 9 a
 * thread of the daemon.  The daemon's limits are small (4096-byte messages,
 * 2 operations per pid, 3 in all, 4 GPU pairs) so that they are reached.
 *
 * Checked for every input, abort() on a violation (a finding):
 *  - every connection reaches EOF within FUZZ_DEADLINE_MS (no hang);
 *  - every reply is one NUL-terminated JSON object with "parameters" (an
 *    object) and/or "error" (a documented error name) and no other key,
 *    with a well-formed pid, state, duration_ms and the like where present;
 *  - no more replies than messages (plus one for an unterminated tail), no
 *    partial reply, nothing after InvalidRequest or MessageTooLarge;
 *  - no successful reply about this process or one of its threads (the
 *    daemon must not act on itself).
 * After every input Resume then Unlock go to each simulated CUDA target and
 * GetState must then say "running": each input starts from the same states,
 * and a target left locked or checkpointed for good is a finding too.
 * CUDACKPT_FUZZ_VERBOSE=1 prints every reply.
 *
 * The other files: fuzz_harness.c (the daemon and the targets),
 * fuzz_replies.c (the checks of the replies); fuzz_harness.h joins them. */
#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cudackpt/protocol.h"
#include "fuzz.h"
#include "fuzz_harness.h"

/* ------------------------------------------------------------ the I/O */

static void conn_read(struct fconn *c)
{
        char buf[65536];
        ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);

        if (n > 0) {
                if (c->in_len + (size_t)n + 1 > c->in_cap) {
                        size_t cap = c->in_cap ? c->in_cap * 2 : 65536;
                        while (cap < c->in_len + (size_t)n + 1)
                                cap *= 2;
                        if (cap > FUZZ_MAX_REPLY_BYTES)
                                fuzz_finding("over %u bytes of replies on one connection", FUZZ_MAX_REPLY_BYTES);
                        c->in = realloc(c->in, cap);
                        if (!c->in)
                                fuzz_harness_fail("out of memory");
                        c->in_cap = cap;
                }
                memcpy(c->in + c->in_len, buf, (size_t)n);
                c->in_len += (size_t)n;
                c->in[c->in_len] = '\0'; /* for reports of a partial reply */
                return;
        }
        if (n == 0 || errno == ECONNRESET) {
                c->eof = true;
                c->wr_done = true; /* nothing more will be read */
                return;
        }
        if (errno != EAGAIN && errno != EINTR)
                fuzz_harness_fail("recv: %s", strerror(errno));
}

static void conn_write(struct fconn *c, size_t chunk)
{
        size_t n = c->out_len - c->out_off;
        ssize_t w;

        if (n > chunk)
                n = chunk;
        if (n > 0) {
                w = send(c->fd, c->out + c->out_off, n, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (w > 0) {
                        c->out_off += (size_t)w;
                } else if (errno == EPIPE || errno == ECONNRESET) {
                        c->out_off = c->out_len; /* the daemon closed; read what it said */
                } else if (errno != EAGAIN && errno != EINTR) {
                        fuzz_harness_fail("send: %s", strerror(errno));
                }
        }
        if (c->out_off == c->out_len) {
                (void)shutdown(c->fd, SHUT_WR);
                c->wr_done = true;
        }
}

/* Writes every connection's bytes in turn, chunk bytes at a time, reading
 * replies meanwhile, until the daemon has closed them all. */
static void run_conns(struct fconn *c, unsigned n, size_t chunk)
{
        long long deadline = fuzz_now_ms() + FUZZ_DEADLINE_MS;
        struct pollfd p[FUZZ_MAX_CONNS + 1];
        unsigned open = n;

        for (unsigned i = 0; i < n; i++)
                if (c[i].out_len == 0)
                        conn_write(&c[i], chunk);
        while (open > 0) {
                long long left = deadline - fuzz_now_ms();
                int r;

                for (unsigned i = 0; i < n; i++) {
                        p[i].fd = c[i].eof ? -1 : c[i].fd;
                        p[i].events = (short)(POLLIN | (c[i].wr_done ? 0 : POLLOUT));
                        p[i].revents = 0;
                }
                r = left > 0 ? poll(p, n, (int)left) : 0;
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        fuzz_harness_fail("poll: %s", strerror(errno));
                if (r == 0) {
                        for (unsigned i = 0; i < n; i++)
                                if (!c[i].eof)
                                        fprintf(fuzz_report(),
                                                "fuzz_request: connection %u: sent %zu of %zu bytes, %zu bytes of replies:\n%s\n",
                                                i, c[i].out_off, c[i].out_len, c[i].in_len, c[i].in ? c[i].in : "");
                        fuzz_finding("the daemon did not close the connection(s) within %d ms", FUZZ_DEADLINE_MS);
                }
                for (unsigned i = 0; i < n; i++) {
                        if (c[i].eof)
                                continue;
                        if (!c[i].wr_done && (p[i].revents & (POLLOUT | POLLERR | POLLHUP)))
                                conn_write(&c[i], chunk);
                        if (p[i].revents & (POLLIN | POLLERR | POLLHUP)) {
                                conn_read(&c[i]);
                                if (c[i].eof)
                                        open--;
                        }
                }
        }
}

/* With CUDACKPT_FUZZ_VERBOSE=1: what the daemon said, one reply a line. */
static void print_replies(const struct fconn *c, unsigned i)
{
        for (size_t off = 0; off < c->in_len; off += strlen(c->in + off) + 1)
                fprintf(fuzz_report(), "fuzz_request: conn %u <- %s\n", i, c->in + off);
        fprintf(fuzz_report(), "fuzz_request: conn %u: EOF after %zu of %zu bytes sent\n", i, c->out_off, c->out_len);
}

static int open_conn(struct fconn *c)
{
        c->fd = fuzz_connect_daemon();
        if (c->fd >= 0)
                return 0;
        if (atomic_load(&F.server_exited)) {
                /* Stopped by a signal (SIGTERM) from outside: nothing left to fuzz. */
                fprintf(fuzz_report(), "fuzz_request: the daemon has stopped; exiting\n");
                _exit(1);
        }
        fuzz_finding("cannot connect to the daemon: %s", strerror(-c->fd));
}

static void close_conn(struct fconn *c)
{
        if (c->fd >= 0)
                close(c->fd);
        free(c->out);
        free(c->in);
        memset(c, 0, sizeof(*c));
        c->fd = -1;
}

/* ------------------------------------------------------------ the input */

static void put_num(struct fconn *c, unsigned long long v)
{
        c->out_len += (size_t)sprintf(c->out + c->out_len, "%llu", v);
}

/* Splits and expands d into connections; returns how many. */
static unsigned expand(const uint8_t *d, size_t n, unsigned sel, struct fconn *c)
{
        size_t cap = n * 8 + 32; /* a token of 3 bytes or more gives 20 digits at most */
        unsigned nc = 1;

        c[0].out = fuzz_xmalloc(cap);
        for (size_t i = 0; i < n;) {
                struct fconn *cur = &c[nc - 1];
                size_t rest = n - i;

                if (d[i] == '$') {
                        if (rest >= 5 && memcmp(d + i, "$CONN", 5) == 0) {
                                if (nc < FUZZ_MAX_CONNS)
                                        c[nc++].out = fuzz_xmalloc(cap);
                                i += 5;
                                continue;
                        }
                        if (rest >= 4 && memcmp(d + i, "$PID", 4) == 0) {
                                put_num(cur, (unsigned long long)F.t[sel].pid);
                                i += 4;
                                continue;
                        }
                        if (rest >= 6 && memcmp(d + i, "$START", 6) == 0) {
                                put_num(cur, F.t[sel].start_time);
                                i += 6;
                                continue;
                        }
                        if (rest >= 3 && d[i + 1] && strchr("PST", d[i + 1]) && isdigit(d[i + 2])) {
                                const struct fuzz_target *t = &F.t[(d[i + 2] - '0') % FUZZ_N_TARGETS];
                                put_num(cur, d[i + 1] == 'P'   ? (unsigned long long)t->pid
                                             : d[i + 1] == 'T' ? (unsigned long long)t->tid
                                                               : t->start_time);
                                i += 3;
                                continue;
                        }
                }
                cur->out[cur->out_len++] = (char)d[i++];
        }
        return nc;
}

static void append_call(char *buf, size_t cap, size_t *len, const char *method, pid_t pid)
{
        int n = snprintf(buf + *len, cap - *len, "{\"method\":\"%s\",\"parameters\":{\"pid\":%d}}", method,
                         (int)pid);

        if (n < 0 || (size_t)n + 1 >= cap - *len)
                fuzz_harness_fail("reset message too long");
        *len += (size_t)n + 1; /* with snprintf's NUL: the Varlink terminator */
}

/* Resume then Unlock on every simulated CUDA target, then GetState, which
 * must say "running" (target 3 reports a fixed unknown state instead). */
static void reset_targets(void)
{
        enum { N_CALLS = FUZZ_N_CUDA * 3 };
        cJSON *replies[N_CALLS];
        struct fconn c;
        char buf[4096];
        size_t len = 0;
        unsigned got = 0;

        for (int i = 0; i < FUZZ_N_CUDA; i++) {
                append_call(buf, sizeof(buf), &len, CUDACKPT_METHOD_RESUME, F.t[i].pid);
                append_call(buf, sizeof(buf), &len, CUDACKPT_METHOD_UNLOCK, F.t[i].pid);
        }
        for (int i = 0; i < FUZZ_N_CUDA; i++)
                append_call(buf, sizeof(buf), &len, CUDACKPT_METHOD_GET_STATE, F.t[i].pid);

        /* A connection may be refused while the input's ones are still being
         * closed (per-uid limit): that one ends at once, without a reply. */
        for (int tries = 0; got == 0; tries++) {
                memset(&c, 0, sizeof(c));
                if (open_conn(&c) < 0)
                        return;
                c.out = fuzz_xmalloc(len);
                memcpy(c.out, buf, len);
                c.out_len = len;
                run_conns(&c, 1, len);
                memset(replies, 0, sizeof(replies));
                got = fuzz_check_replies(&c, replies, N_CALLS);
                close_conn(&c);
                if (got == 0 && tries >= 100)
                        fuzz_finding("the daemon answers nothing to the reset calls");
                if (got == 0)
                        fuzz_sleep_ms(2);
        }
        if (got != N_CALLS)
                fuzz_finding("%u replies to the %d reset calls", got, N_CALLS);
        for (int i = 0; i < FUZZ_N_CUDA; i++) {
                const cJSON *r = replies[FUZZ_N_CUDA * 2 + i];
                const cJSON *p = cJSON_GetObjectItemCaseSensitive(r, "parameters");
                const cJSON *st = cJSON_GetObjectItemCaseSensitive(p, "state");
                const char *want = i == T_LOCK_FAIL ? "unknown-7" : CUDACKPT_STATE_RUNNING;
                char *text;

                if (!cJSON_GetObjectItemCaseSensitive(r, "error") && cJSON_IsString(st) &&
                    strcmp(st->valuestring, want) == 0)
                        continue;
                text = cJSON_PrintUnformatted(r);
                fuzz_finding("target %d (pid %d) is not %s after Resume and Unlock: %s", i, (int)F.t[i].pid, want,
                        text ? text : "?");
        }
        for (unsigned i = 0; i < N_CALLS; i++)
                cJSON_Delete(replies[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct fconn c[FUZZ_MAX_CONNS];
        unsigned hdr = size > 0 ? data[0] : 0, n;

        if (!F.ready)
                fuzz_setup();
        if (F.torn_down)
                return 0;
        F.input = data;
        F.input_size = size;
        memset(c, 0, sizeof(c));
        for (unsigned i = 0; i < FUZZ_MAX_CONNS; i++)
                c[i].fd = -1;
        n = expand(size > 0 ? data + 1 : data, size > 0 ? size - 1 : 0, (hdr >> 4) % FUZZ_N_TARGETS, c);
        for (unsigned i = 0; i < n; i++)
                (void)open_conn(&c[i]);
        run_conns(c, n, (hdr & 15) + 1);
        for (unsigned i = 0; i < n; i++) {
                (void)fuzz_check_replies(&c[i], NULL, 0);
                if (F.verbose)
                        print_replies(&c[i], i);
                close_conn(&c[i]);
        }
        reset_targets();
        F.input = NULL;
        return 0;
}
