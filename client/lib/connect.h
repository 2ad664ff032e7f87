/* connect.h: how libcudackpt reaches the daemon's socket and waits on
 * it (connect.c), below the connection and its calls (client.c). */
#ifndef CUDACKPT_LIB_CONNECT_H
#define CUDACKPT_LIB_CONNECT_H

#include <cudackpt/client.h>

#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

/* Wait until fd is ready for events, or the deadline (-1: none) passes:
 * 0, -ETIMEDOUT or -errno. */
int client_wait(int fd, short events, int64_t deadline_ms);

/* The value of the environment variable name (read with secure_getenv()):
 * a plain decimal number (digits only: no sign, no spaces) from 0 to max,
 * else def (unset, empty or invalid), as the Python client reads it. */
int64_t client_env_number(const char *name, int64_t max, int64_t def);

/* The connected socket to sa (its path len bytes long), trying again
 * while a restarting daemon has no socket yet, until
 * $CUDACKPT_CONNECT_TIMEOUT_MS; else -errno (-ENOTSOCK: the path is no
 * socket). */
int client_connect_retrying(const struct sockaddr_un *sa, size_t len);

#endif
