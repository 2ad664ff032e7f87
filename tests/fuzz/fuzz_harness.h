/* fuzz_harness.h: what the files of the request fuzz target share
 * (fuzz_request.c says what it does and the input format): the in-process
 * daemon and its targets (fuzz_harness.c), the checks of its replies
 * (fuzz_replies.c), and the connections an input is sent on
 * (fuzz_request.c). */
#ifndef CUDACKPT_FUZZ_HARNESS_H
#define CUDACKPT_FUZZ_HARNESS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "base/config.h"
#include "server.h"

#define FUZZ_MAX_CONNS 4
#define FUZZ_DEADLINE_MS 10000      /* per input; nothing legitimate takes 1 s */
#define FUZZ_MAX_REPLY_BYTES (16u << 20)
#define FUZZ_MAX_MESSAGE_BYTES 4096

enum {
        T_PLAIN,
        T_BUSY,
        T_CKPT_FAIL,
        T_LOCK_FAIL,
        T_TWO_GPUS,
        T_SELF,
        T_INIT,
        T_ZOMBIE,
        T_DEAD,
        T_DAEMON_THREAD,
        FUZZ_N_TARGETS,
        FUZZ_N_CUDA = T_SELF, /* targets below this are simulated CUDA processes */
};

struct fuzz_target {
        pid_t pid;
        pid_t tid;                     /* another thread of it, or pid */
        unsigned long long start_time; /* field 22 of /proc/PID/stat; 0 if unknown */
        bool child;                    /* ours to kill (if alive) and reap */
};

/* The harness's state: one daemon, its targets, the input being run. */
struct fuzz_state {
        bool ready;
        bool torn_down;
        bool verbose;         /* CUDACKPT_FUZZ_VERBOSE=1: print every reply */
        char dir[64];
        char sock[96];
        struct config cfg;
        uv_loop_t loop;
        struct server srv;
        pthread_t thread;
        int exit_code;
        atomic_bool server_exited;
        atomic_int server_tid;
        struct fuzz_target t[FUZZ_N_TARGETS];
        const uint8_t *input; /* the input being run, for reports */
        size_t input_size;
};

extern struct fuzz_state F;

/* One connection of an input. */
struct fconn {
        int fd;
        char *out;            /* what to send */
        size_t out_len, out_off;
        bool wr_done;         /* all sent (or the daemon closed): SHUT_WR done */
        bool eof;
        char *in;             /* what came back */
        size_t in_len, in_cap;
};

/* ------------------------------------------------------- fuzz_harness.c */

/* Where findings are reported (stderr, or libFuzzer's copy of it). */
FILE *fuzz_report(void);
/* A finding: the daemon broke one of the rules fuzz_request.c lists. */
__attribute__((noreturn, format(printf, 1, 2))) void fuzz_finding(const char *fmt, ...);
/* Not a finding: the harness itself could not work. */
__attribute__((noreturn, format(printf, 1, 2))) void fuzz_harness_fail(const char *fmt, ...);
void *fuzz_xmalloc(size_t n);
long long fuzz_now_ms(void);
void fuzz_sleep_ms(unsigned ms);
/* Spawns the targets and starts the daemon on its thread, listening. */
void fuzz_setup(void);
/* A non-blocking connection to the daemon, or -errno. */
int fuzz_connect_daemon(void);

/* ------------------------------------------------------- fuzz_replies.c */

/* Checks all replies of c; returns how many.  With keep, the parsed replies
 * (up to max_keep) are kept there for the caller, who deletes them. */
unsigned fuzz_check_replies(const struct fconn *c, cJSON **keep, unsigned max_keep);

#endif
