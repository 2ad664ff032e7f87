/* args.c: strict parsing of cudackptctl's arguments.
 *
 * Numbers are digits only: no sign, no spaces, no 0x, nothing strtol would
 * quietly accept or truncate, because a pid that parses "almost" right
 * names the wrong process. */
#include "args.h"

#include "describe.h"
#include "exitcode.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int ctl_parse_uint(const char *s, unsigned long long max, unsigned long long *ret_value) {
        unsigned long long v = 0;

        if (!s || !*s)
                return -EINVAL;
        for (const char *p = s; *p; p++) {
                unsigned d;

                if (*p < '0' || *p > '9')
                        return -EINVAL;
                d = (unsigned) (*p - '0');
                if (d > max || v > (max - d) / 10)
                        return -ERANGE;
                v = v * 10 + d;
        }
        *ret_value = v;
        return 0;
}

int ctl_parse_pid(const char *s, int *ret_pid) {
        unsigned long long v;
        int r;

        r = ctl_parse_uint(s, INT_MAX, &v);
        if (r < 0)
                return r;
        if (v == 0)
                return -ERANGE;
        *ret_pid = (int) v;
        return 0;
}

/* Is key one of the old UUIDs among the first n_items strings of items? */
static int ctl_map_has(char *const *items, size_t n_items, const char *key) {
        for (size_t i = 0; i < n_items; i += 2)
                if (strcmp(items[i], key) == 0)
                        return 1;
        return 0;
}

/* Appends the pairs of copy (an argument, cut up in place) to items, n
 * strings so far. */
static int map_add_pairs(char **items, size_t *n, char *copy) {
        char *save = NULL;

        /* strtok_r would merge ",," into one separator; an empty pair must be an error. */
        for (char *pair = copy; pair; pair = save) {
                char *eq, *comma = strchr(pair, ',');

                save = comma ? comma + 1 : NULL;
                if (comma)
                        *comma = '\0';
                eq = strchr(pair, '=');
                if (!eq || eq == pair || !eq[1] || strchr(eq + 1, '='))
                        return -EINVAL;
                *eq = '\0';
                if (ctl_map_has(items, *n, pair))
                        return -EEXIST;
                items[*n] = strdup(pair);
                if (!items[*n])
                        return -ENOMEM;
                (*n)++;
                items[*n] = strdup(eq + 1);
                if (!items[*n])
                        return -ENOMEM;
                (*n)++;
        }
        return 0;
}

int ctl_map_add(ctl_map *m, const char *arg) {
        char *copy = NULL, **items;
        size_t n, n_pairs = 1;
        int r = -EINVAL;

        if (!arg || !*arg)
                return -EINVAL;
        for (const char *p = arg; *p; p++)
                n_pairs += *p == ',';

        /* Room for the old items, the new pairs and the NULL; built aside
         * so that m is untouched on failure. */
        items = calloc(m->n_items + 2 * n_pairs + 1, sizeof(char *));
        copy = strdup(arg);
        if (!items || !copy) {
                r = -ENOMEM;
                goto fail;
        }
        n = 0;
        for (size_t i = 0; i < m->n_items; i++) {
                items[n] = strdup(m->items[i]);
                if (!items[n]) {
                        r = -ENOMEM;
                        goto fail;
                }
                n++;
        }
        r = map_add_pairs(items, &n, copy);
        if (r < 0)
                goto fail;
        free(copy);
        ctl_map_free(m);
        m->items = items;
        m->n_items = n;
        return 0;

fail:
        if (items)
                for (size_t i = 0; items[i]; i++)
                        free(items[i]);
        free(items);
        free(copy);
        return r;
}

void ctl_map_free(ctl_map *m) {
        if (!m)
                return;
        for (size_t i = 0; i < m->n_items; i++)
                free(m->items[i]);
        free(m->items);
        m->items = NULL;
        m->n_items = 0;
}

const char *ctl_socket_path(const char *option) {
        const char *env;

        if (option)
                return option;
        env = secure_getenv(CUDACKPT_SOCKET_ENV);
        return env && *env ? env : CUDACKPT_DEFAULT_SOCKET;
}

/* Whether connecting waits for a daemon that is not there (the library's
 * $CUDACKPT_CONNECT_TIMEOUT_MS is not "0"). */
static bool ctl_connect_waits(void) {
        const char *v = secure_getenv(CUDACKPT_CONNECT_TIMEOUT_ENV);

        return !v || strcmp(v, "0") != 0;
}

int ctl_connect_daemon(const char *prefix, const char *path, cudackpt_client **ret_client) {
        struct stat st;
        int r;

        /* Said before the wait, not after it: a user who typed a command
         * sees at once where the daemon was looked for. */
        if (lstat(path, &st) < 0 && errno == ENOENT && ctl_connect_waits()) {
                fprintf(stderr, "%sno socket at ", prefix);
                ctl_fputs_safe(path, stderr);
                fputs(" yet: waiting for cudackptd to start ($" CUDACKPT_CONNECT_TIMEOUT_ENV ")\n", stderr);
        }
        r = cudackpt_client_connect(path, ret_client);
        if (r == 0)
                return 0;
        fprintf(stderr, "%scannot reach cudackptd at ", prefix);
        ctl_fputs_safe(path, stderr);
        if (r == -ENOTSOCK)
                fputs(": it is not a socket; name the daemon's with --socket or $" CUDACKPT_SOCKET_ENV "\n", stderr);
        else
                fprintf(stderr, ": %s; is it running? " CTL_UNREACHABLE_ADVICE "; cudackptctl doctor checks the node\n",
                        strerror(-r));
        return CUDACKPT_EXIT_UNREACHABLE;
}

int ctl_usage_fail(int status, const char *name, const char *tail, const char *fmt, ...) {
        va_list ap;

        fprintf(stderr, "%s: ", name);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputs(tail, stderr);
        return status;
}
