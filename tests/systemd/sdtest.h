/* sdtest.h: helpers shared by the systemd integration tests.
 *
 * The tests start the real daemon (directly, or under
 * systemd-socket-activate) and watch what it does from outside: the sockets
 * it serves, the sd_notify datagrams it sends, how it exits.  Every wait has
 * a deadline and is a poll() on something that becomes ready (a pidfd, a
 * socket, an inotify descriptor, a CLOEXEC pipe), never a sleep.  A failed
 * check prints one line and exits 1; children and the scratch directory are
 * cleaned up at exit. */
#ifndef CUDACKPT_SDTEST_H
#define CUDACKPT_SDTEST_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/un.h>

#include <cjson/cJSON.h>

#define SDT_SKIP 77

#define SDT_CHECK(cond, ...)                                                                   \
        do {                                                                                   \
                if (!(cond))                                                                   \
                        sdt_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);                      \
        } while (0)

__attribute__((noreturn, format(printf, 4, 5))) void sdt_fail(const char *file, int line,
                                                              const char *cond, const char *fmt,
                                                              ...);
__attribute__((noreturn, format(printf, 1, 2))) void sdt_skip(const char *fmt, ...);

int64_t sdt_now_ms(void);

/* A fresh directory under $TMPDIR (or /tmp), removed with its files at exit. */
const char *sdt_tmpdir(void);

struct sdt_child {
        pid_t pid;
        int pidfd;
};

struct sdt_spawn_opts {
        const char *const *setenv;   /* "NAME=VALUE" entries added to the environment */
        const char *log_path;        /* stdout and stderr go here (appended); NULL: inherited */
        bool watchdog_pid_self;      /* set WATCHDOG_PID to the child's own pid */
};

/* Starts argv[0] (searched in PATH) and returns once exec has succeeded.
 * The child loses the systemd variables of the test's own environment
 * (NOTIFY_SOCKET, WATCHDOG_*, LISTEN_*) and dies with the test. */
void sdt_spawn(const char *const *argv, const struct sdt_spawn_opts *opts,
               struct sdt_child *ret_child);

/* Waits for the child to exit; returns its wait status, or -ETIMEDOUT. */
int sdt_wait_exit(struct sdt_child *c, int timeout_ms);

/* Sends SIGKILL and reaps the child (at exit, for any child still running). */
void sdt_kill(struct sdt_child *c);

/* Whether NUL-separated /proc/PID/environ holds the entry exactly, within
 * SDT_ENVIRON_WAIT_MS (a process just past its exec reads empty there for
 * a moment). */
#define SDT_ENVIRON_WAIT_MS 2000
bool sdt_environ_has(pid_t pid, const char *entry);

/* Waits until path exists and is a socket. */
void sdt_wait_socket_file(const char *path, int timeout_ms);

/* A new Unix socket of type (SOCK_STREAM, SOCK_DGRAM), close-on-exec, and
 * path as its address in *ret_sa, for the caller to bind or connect. */
int sdt_unix_socket(const char *path, int type, struct sockaddr_un *ret_sa);

int sdt_connect(const char *path);

/* Sends one Varlink call and returns the parsed reply (cJSON_Delete it). */
cJSON *sdt_call(int fd, const char *method, const char *parameters_json, int timeout_ms);

/* Reads the whole file into a NUL-terminated buffer (free it), or NULL. */
char *sdt_read_file(const char *path);

#endif
