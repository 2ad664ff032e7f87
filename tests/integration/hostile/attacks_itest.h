/* attacks_itest.h: what the attack suites share (test_attacks.c,
 * test_floods.c, test_garbage.c, and test_permissions.c's operator and
 * read-only tests; the helpers are attacks_itest.c): assertions that the
 * daemon still serves, and clients in processes of their own (other uids,
 * floods) that report what they saw instead of asserting. */
#ifndef CUDACKPT_ATTACKS_ITEST_H
#define CUDACKPT_ATTACKS_ITEST_H

#include "harness.h"

/* A group that configures operators, and one that does not. */
#define OPERATOR_GID 4343
#define NOT_OPERATOR_GID 4344

#define GET_INFO "org.varlink.service.GetInfo"
/* A GetInfo call (sizeof counts its NUL). */
#define GET_INFO_MSG "{\"method\":\"" GET_INFO "\"}"

/* One call of a script run by another user, and what it must get. */
struct atest_step {
        const char *method;
        pid_t pid;
        const char *error;     /* the error expected; NULL: success */
        const char *state;     /* on success, the state expected; NULL: not checked */
        const char *in_flight; /* on success, in_flight expected; NULL: must be absent */
};

#define N_STEPS(a) (sizeof(a) / sizeof((a)[0]))

/* What a client process saw of the replies to its requests. */
struct atest_client_seen {
        int replies, queue_full, denied, other;
};

void atest_assert_get_info(struct itest_conn *c);
/* The daemon is alive and a fresh connection gets GetInfo answered. */
void atest_assert_serving(struct itest_daemon *d);
void atest_assert_running(struct itest_conn *c, pid_t pid);
void atest_send_pid_call(struct itest_conn *c, const char *method, pid_t pid);
/* The daemon closes c (accepted only to be refused): a request sent on it
 * gets no answer, the connection ends. */
void atest_assert_refused(struct itest_conn *c);
/* Connects until the daemon serves the connection, awaiting the close of
 * each refused attempt; asserts one is served within timeout_ms.  For
 * slots that free up when the daemon has processed other clients' hang-ups,
 * which it does asynchronously. */
struct itest_conn *atest_connect_served(struct itest_daemon *d, int timeout_ms);
/* Calls GetState until it shows `method` in flight with `state`. */
void atest_await_in_flight_state(struct itest_conn *c, pid_t pid, const char *method, const char *state,
                                  int timeout_ms);
/* A thread of process pid other than its main thread. */
pid_t atest_other_thread(pid_t pid);
bool atest_json_utf8_valid(const cJSON *j);
int atest_raw_connect(const char *path);
/* Sends msg with its NUL, reads one reply into buf.  1: a reply; 0: the
 * daemon closed the connection; <0: -errno (-ETIMEDOUT). */
int atest_raw_call(int fd, const char *msg, char *buf, size_t size, int timeout_ms);
void atest_run_script(uid_t uid, const gid_t *groups, size_t n_groups, struct itest_daemon *d,
                       const struct atest_step *steps, size_t n_steps);
/* Clients in a process of their own, as uid (unchanged for (uid_t)-1):
 * n_conns connections each send msg; once at least min_replies replies
 * have come (within 10 s), the process reports what it saw and waits to be
 * killed, its connections open.  Returns its pid. */
pid_t atest_spawn_clients(uid_t uid, const char *sock, const char *msg, int n_conns, int min_replies,
                           struct atest_client_seen *ret_seen);
void atest_kill_clients(pid_t pid);

#endif
