/* test_garbage.c: garbage and parser edge cases thrown at the daemon
 * (docs/security.md, "Threat model"): every kind of malformed message
 * gets its error or the connection closed, replies stay valid UTF-8, NUL
 * escapes cannot split a message; the daemon goes on serving (helpers:
 * attacks_itest.h). */
#include "attacks_itest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>


/* ---- 5: garbage ---------------------------------------------------------- */

enum garbage_expect {
        GARBAGE_CLOSE, /* InvalidRequest, then the connection is closed */
        GARBAGE_ERROR, /* the given error; the connection stays usable */
        GARBAGE_ANY,   /* some error; closed after InvalidRequest, else usable */
};

struct garbage {
        const char *what;
        const char *bytes;
        size_t len; /* the NUL terminator(s) included */
        enum garbage_expect expect;
        const char *error;     /* GARBAGE_ERROR */
        const char *parameter; /* InvalidParameter: the name expected */
};

static void throw_garbage(struct itest_daemon *d, pid_t pid, const struct garbage *g)
{
        struct itest_conn *c = itest_connect(d);
        int rc = itest_send_bytes(c, g->bytes, g->len, false);
        ck_assert_msg(rc == 0 || rc == -EPIPE || rc == -ECONNRESET, "%s: send: %s", g->what, strerror(-rc));
        cJSON *j = NULL;
        rc = itest_recv_raw(c, ITEST_REPLY_TIMEOUT_MS, &j);
        ck_assert_msg(!itest_daemon_exited(d), "%s: the daemon died", g->what);
        ck_assert_msg(rc == 0, "%s: no error reply: %s", g->what, rc == -ENODATA ? "closed" : strerror(-rc));
        const char *e = itest_error(j);
        ck_assert_msg(e, "%s: expected an error, got %s", g->what, itest_dump(j));
        bool close = g->expect == GARBAGE_CLOSE ||
                     (g->expect == GARBAGE_ANY && strcmp(e, CUDACKPT_ERROR_INVALID_REQUEST) == 0);
        if (g->expect == GARBAGE_CLOSE)
                ck_assert_msg(strcmp(e, CUDACKPT_ERROR_INVALID_REQUEST) == 0, "%s: expected InvalidRequest, got %s",
                              g->what, itest_dump(j));
        if (g->expect == GARBAGE_ERROR)
                ck_assert_msg(strcmp(e, g->error) == 0, "%s: expected %s, got %s", g->what, g->error, itest_dump(j));
        if (g->parameter) {
                const char *p = itest_str(j, "parameter");
                ck_assert_msg(p && strcmp(p, g->parameter) == 0, "%s: expected parameter %s in %s", g->what,
                              g->parameter, itest_dump(j));
        }
        if (close) {
                /* One reply only, however many messages followed. */
                rc = itest_recv_raw(c, 5000, &j);
                ck_assert_msg(rc == -ENODATA, "%s: after InvalidRequest expected the connection closed, got %s",
                              g->what, rc == 0 ? itest_dump(j) : strerror(-rc));
        } else {
                atest_assert_running(c, pid);
        }
        itest_conn_close(c);
        atest_assert_serving(d);
}

static uint32_t xorshift(uint32_t *s)
{
        uint32_t x = *s;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        return *s = x;
}

/* n copies of s, then tail, NUL-terminated (owned by the harness). */
static char *repeat(const char *head, const char *s, size_t n, const char *tail)
{
        size_t hl = strlen(head), sl = strlen(s), tl = strlen(tail);
        char *b = itest_keep(malloc(hl + sl * n + tl + 1));
        ck_assert(b);
        memcpy(b, head, hl);
        for (size_t i = 0; i < n; i++)
                memcpy(b + hl + sl * i, s, sl);
        memcpy(b + hl + sl * n, tail, tl + 1);
        return b;
}

#define MAX_GARBAGE 128

struct garbage_list {
        struct garbage g[MAX_GARBAGE];
        size_t n;
};

static void add(struct garbage_list *l, const char *what, const char *bytes, size_t len, enum garbage_expect expect,
                const char *error, const char *parameter)
{
        ck_assert(l->n < MAX_GARBAGE);
        l->g[l->n++] = (struct garbage){ what, bytes, len, expect, error, parameter };
}

/* A text message (its NUL counted). */
static void add_text(struct garbage_list *l, const char *what, const char *text, enum garbage_expect expect,
                     const char *error, const char *parameter)
{
        add(l, what, text, strlen(text) + 1, expect, error, parameter);
}

/* A call of method with parameters params (a JSON text), expected to fail
 * with InvalidParameter naming `parameter`. */
static void add_bad_param(struct garbage_list *l, const char *method, const char *params, const char *parameter)
{
        add_text(l, itest_strdupf("%s %.200s", method, params),
                 itest_strdupf("{\"method\":\"%s\",\"parameters\":%s}", method, params), GARBAGE_ERROR,
                 CUDACKPT_VARLINK_INVALID_PARAMETER, parameter);
}

/* Random bytes with NULs, a lone NUL, invalid UTF-8, deep nesting, extreme
 * numbers, duplicated keys, 10 KiB names: each gets an error reply (and
 * the connection closed where protocol.md says so), never a crash; after
 * each, a fresh connection is served. */
/* Random bytes and text, NULs, white space, trailing garbage, comments. */
static void garbage_bytes(struct garbage_list *l)
{
        /* Random binary, NULs in it: the first message is refused, the
         * connection closed, the rest never read. */
        for (uint32_t seed = 1; seed <= 8; seed++) {
                uint32_t s = seed * 2654435761u;
                size_t len = 4096;
                char *b = itest_keep(malloc(len));
                ck_assert(b);
                for (size_t i = 0; i < len; i++)
                        b[i] = (char)(xorshift(&s) >> 24);
                b[len - 1] = '\0';
                add(l, itest_strdupf("random bytes, seed %u", seed), b, len, GARBAGE_CLOSE, NULL, NULL);
        }
        /* Random text over the JSON alphabet. */
        static const char alphabet[] = "{}[]\":,0123456789.eE+-tfnrul \\/uabc";
        for (uint32_t seed = 1; seed <= 24; seed++) {
                uint32_t s = seed * 40503u + 7;
                size_t len = 1 + xorshift(&s) % 200;
                char *b = itest_keep(malloc(len + 1));
                ck_assert(b);
                for (size_t i = 0; i < len; i++)
                        b[i] = alphabet[xorshift(&s) % (sizeof(alphabet) - 1)];
                b[len] = '\0';
                add(l, itest_strdupf("JSON-alphabet soup, seed %u: %s", seed, b), b, len + 1, GARBAGE_ANY, NULL, NULL);
        }
        add(l, "a lone NUL", "", 1, GARBAGE_CLOSE, NULL, NULL);
        char *nuls = itest_keep(calloc(1, 1000));
        ck_assert(nuls);
        add(l, "1000 NULs", nuls, 1000, GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "white space only", " \t\r\n ", GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "garbage after the object", "{\"method\":\"" GET_INFO "\"}}", GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "a comment", "/**/{\"method\":\"" GET_INFO "\"}", GARBAGE_CLOSE, NULL, NULL);
}

/* Invalid UTF-8 and lone surrogates wherever a string goes. */
static void garbage_utf8(struct garbage_list *l, pid_t pid)
{
        const char *gs = CUDACKPT_METHOD_GET_STATE;

        /* Invalid UTF-8 in every place a string goes: not a Varlink message. */
        add_text(l, "invalid UTF-8 in the method name",
                 itest_strdupf("{\"method\":\"%s\xff\",\"parameters\":{\"pid\":%d}}", gs, (int)pid), GARBAGE_CLOSE,
                 NULL, NULL);
        add_text(l, "a UTF-8 sequence cut at the end of the method name",
                 itest_strdupf("{\"method\":\"%s\xe2\x82\",\"parameters\":{\"pid\":%d}}", gs, (int)pid),
                 GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "invalid UTF-8 in the interface name",
                 "{\"method\":\"io.cudackpt.Proc\xc3\x28ss.GetState\",\"parameters\":{\"pid\":1}}", GARBAGE_CLOSE,
                 NULL, NULL);
        add_text(l, "an overlong encoding in a parameter name",
                 itest_strdupf("{\"method\":\"%s\",\"parameters\":{\"pid\":%d,\"\xc0\xaf\":1}}", gs, (int)pid),
                 GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "a UTF-8-encoded surrogate as a key of the call",
                 "{\"method\":\"" GET_INFO "\",\"\xed\xa0\x80\":1}", GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "invalid UTF-8 as the pid",
                 itest_strdupf("{\"method\":\"%s\",\"parameters\":{\"pid\":\"\xff\"}}", gs), GARBAGE_CLOSE,
                 NULL, NULL);
        add_text(l, "invalid UTF-8 in a GPU UUID",
                 itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_RESTORE "\",\"parameters\":{\"pid\":%d,\"gpu_mapping\":"
                               "{\"GPU-\xff\xfe\":\"" ITEST_GPU0 "\"}}}",
                               (int)pid),
                 GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "a lone surrogate escape",
                 itest_strdupf("{\"method\":\"%s\\ud800\",\"parameters\":{\"pid\":%d}}", gs, (int)pid),
                 GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "a lone low surrogate escape",
                 itest_strdupf("{\"method\":\"%s\",\"parameters\":{\"pid\":%d,\"\\udfff\":1}}", gs, (int)pid),
                 GARBAGE_CLOSE, NULL, NULL);
}

/* Nesting past any parser limit, and deep but allowed. */
static void garbage_nesting(struct garbage_list *l, pid_t pid)
{
        const char *gs = CUDACKPT_METHOD_GET_STATE;

        /* Nesting far deeper than any parser allows, and deep but allowed. */
        add_text(l, "100000 [", repeat("", "[", 100000, ""), GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "100000 [ closed again", repeat(repeat("", "[", 100000, ""), "]", 100000, ""), GARBAGE_CLOSE,
                 NULL, NULL);
        add_text(l, "100000 nested objects", repeat("", "{\"a\":", 100000, "1"), GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "100000 [ as the parameters",
                 repeat("{\"method\":\"" CUDACKPT_METHOD_GET_STATE "\",\"parameters\":", "[", 100000, ""),
                 GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "100000 [ as the method", repeat("{\"method\":", "[", 100000, ""), GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "the pid nested 500 deep",
                 repeat(repeat("{\"method\":\"" CUDACKPT_METHOD_GET_STATE "\",\"parameters\":{\"pid\":", "[", 500, "1"),
                        "]", 500, "}}"),
                 GARBAGE_ERROR, CUDACKPT_VARLINK_INVALID_PARAMETER, "pid");
        add_text(l, "an unknown parameter nested 900 deep",
                 repeat(repeat(itest_strdupf("{\"method\":\"%s\",\"parameters\":{\"pid\":%d,\"x\":", gs, (int)pid),
                               "{\"x\":", 900, "1"),
                        "}", 900, "}}"),
                 GARBAGE_ERROR, CUDACKPT_VARLINK_INVALID_PARAMETER, "x");
}

/* Numbers at and past every edge. */
static void garbage_numbers(struct garbage_list *l, pid_t pid)
{
        const char *gs = CUDACKPT_METHOD_GET_STATE;

        /* Numbers at and past every edge. */
        static const char *const bad_pids[] = {
                "1e309", "-1e309", "-0", "-0.0", "0.5", "1.5", "2147483648", "2147483647.5", "1e-400", "4.9e-324",
                "99999999999999999999999999", "-2147483649", "1E400", NULL,
        };
        for (size_t i = 0; bad_pids[i]; i++)
                add_bad_param(l, gs, itest_strdupf("{\"pid\":%s}", bad_pids[i]), "pid");
        add_bad_param(l, gs, repeat("{\"pid\":1", "0", 5000, "}"), "pid");
        add_bad_param(l, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"timeout_ms\":1e309}", (int)pid),
                      "timeout_ms");
        add_bad_param(l, CUDACKPT_METHOD_LOCK, itest_strdupf("{\"pid\":%d,\"timeout_ms\":-1e309}", (int)pid),
                      "timeout_ms");
        add_bad_param(l, gs, itest_strdupf("{\"pid\":%d,\"start_time\":1e309}", (int)pid), "start_time");
        add_bad_param(l, gs, itest_strdupf("{\"pid\":%d,\"start_time\":18446744073709551616}", (int)pid), "start_time");
}

/* Duplicated and miscased keys. */
static void garbage_duplicates(struct garbage_list *l, pid_t pid)
{
        const char *gs = CUDACKPT_METHOD_GET_STATE;

        /* Duplicated keys: in the call object the connection closes, in
         * the parameters it is an InvalidParameter. */
        add_text(l, "method twice", "{\"method\":\"" GET_INFO "\",\"method\":\"" GET_INFO "\"}", GARBAGE_CLOSE,
                 NULL, NULL);
        add_text(l, "method twice, the second one different",
                 itest_strdupf("{\"method\":\"%s\",\"method\":\"" CUDACKPT_METHOD_LOCK
                               "\",\"parameters\":{\"pid\":%d}}",
                               gs, (int)pid),
                 GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "parameters twice",
                 itest_strdupf("{\"method\":\"%s\",\"parameters\":{\"pid\":%d},\"parameters\":{\"pid\":1}}", gs,
                               (int)pid),
                 GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "oneway twice", "{\"method\":\"" GET_INFO "\",\"oneway\":false,\"oneway\":true}", GARBAGE_CLOSE,
                 NULL, NULL);
        add_text(l, "Method in another case", "{\"Method\":\"" GET_INFO "\"}", GARBAGE_CLOSE, NULL, NULL);
        add_bad_param(l, gs, itest_strdupf("{\"pid\":%d,\"pid\":1}", (int)pid), "pid");
        add_bad_param(l, gs, itest_strdupf("{\"pid\":%d,\"pid\":null}", (int)pid), "pid");
        add_bad_param(l, CUDACKPT_METHOD_LOCK,
                      itest_strdupf("{\"pid\":%d,\"timeout_ms\":1,\"timeout_ms\":2}", (int)pid), "timeout_ms");
}

/* Names of 10 KiB, and empty ones. */
static void garbage_long_names(struct garbage_list *l, pid_t pid)
{
        const char *gs = CUDACKPT_METHOD_GET_STATE;

        /* Names of 10 KiB. */
        add_text(l, "a method name of 10 KiB", repeat("{\"method\":\"io.cudackpt.Process.", "A", 10240, "\"}"),
                 GARBAGE_ERROR, CUDACKPT_VARLINK_METHOD_NOT_FOUND, NULL);
        add_text(l, "an interface name of 10 KiB", repeat("{\"method\":\"", "x", 10240, ".GetState\"}"), GARBAGE_ERROR,
                 CUDACKPT_VARLINK_INTERFACE_NOT_FOUND, NULL);
        add_text(l, "a method name of 10 KiB of dots", repeat("{\"method\":\"", ".", 10240, "\"}"), GARBAGE_CLOSE, NULL,
                 NULL);
        add_text(l, "a method name of 10 KiB of multibyte characters",
                 repeat("{\"method\":\"io.cudackpt.Process.", "\xc3\xa9", 5120, "\"}"), GARBAGE_ERROR,
                 CUDACKPT_VARLINK_METHOD_NOT_FOUND, NULL);
        add_text(l, "a parameter name of 10 KiB",
                 repeat(itest_strdupf("{\"method\":\"%s\",\"parameters\":{\"pid\":%d,\"", gs, (int)pid), "k", 10240,
                        "\":1}}"),
                 GARBAGE_ERROR, CUDACKPT_VARLINK_INVALID_PARAMETER, NULL);
        add_text(l, "an empty method name", "{\"method\":\"io.cudackpt.Process.\"}", GARBAGE_CLOSE, NULL, NULL);
        add_text(l, "an empty interface name", "{\"method\":\".GetState\"}", GARBAGE_CLOSE, NULL, NULL);
}

START_TEST(garbage)
{
        /* Room for nesting deeper than any parser limit. */
        struct itest_daemon_opts o = { .config_json = "{\"max_message_bytes\":1048576}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        pid_t pid = itest_sim_target();
        struct garbage_list *l = itest_keep(calloc(1, sizeof(*l)));
        ck_assert(l);

        garbage_bytes(l);
        garbage_utf8(l, pid);
        garbage_nesting(l, pid);
        garbage_numbers(l, pid);
        garbage_duplicates(l, pid);
        garbage_long_names(l, pid);

        for (size_t i = 0; i < l->n; i++)
                throw_garbage(d, pid, &l->g[i]);
        /* None of it acted on the process. */
        atest_assert_running(itest_connect(d), pid);
}
END_TEST

/* Error replies that name what the client sent (MethodNotFound,
 * InterfaceNotFound, InvalidParameter, InvalidGpuMapping) are valid UTF-8
 * even when the client's names were not.  Refusing such a message
 * (InvalidRequest) or escaping the echo both pass.  (Until proto_parse_call()
 * refused messages that are not UTF-8, the client's bytes were copied into
 * the reply: no JSON (RFC 8259 8.1), and a strict client such as varlinkctl
 * could not read it.) */
START_TEST(replies_are_utf8)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_sim_target();
        const char *const msgs[] = {
                itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_GET_STATE "\xff\",\"parameters\":{\"pid\":%d}}",
                              (int)pid),
                "{\"method\":\"io.cudackpt.Proc\xc3\x28ss.GetState\",\"parameters\":{\"pid\":1}}",
                itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_GET_STATE
                              "\",\"parameters\":{\"pid\":%d,\"\xc0\xaf\":1}}",
                              (int)pid),
                itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_RESTORE "\",\"parameters\":{\"pid\":%d,\"gpu_mapping\":"
                              "{\"GPU-\xff\xfe\":\"" ITEST_GPU0 "\"}}}",
                              (int)pid),
                "{\"method\":\"org.varlink.service.GetInterfaceDescription\","
                "\"parameters\":{\"interface\":\"a.\xf8\"}}",
                NULL,
        };
        for (size_t i = 0; msgs[i]; i++) {
                struct itest_conn *c = itest_connect(d);
                itest_send(c, msgs[i]);
                cJSON *j = NULL;
                int rc = itest_recv_raw(c, ITEST_REPLY_TIMEOUT_MS, &j);
                ck_assert_msg(rc == 0 || rc == -ENODATA, "message %zu: %s", i, strerror(-rc));
                if (rc == 0) {
                        ck_assert_msg(itest_error(j), "message %zu: expected an error, got %s", i, itest_dump(j));
                        ck_assert_msg(atest_json_utf8_valid(j), "message %zu: the %s reply is not valid UTF-8: %s", i,
                                      itest_error(j), itest_dump(j));
                }
                itest_conn_close(c);
        }
        atest_assert_serving(d);
}
END_TEST

/* "\u0000" in any string of a message is InvalidRequest and closes the
 * connection (protocol.md): cJSON's C strings would end at the NUL, so
 * "io.cudackpt.Process.Lock\u0000.GetState" (which ends in .GetState for
 * anyone who filters or logs calls by name) would lock the process, a
 * parameter name "pid\u0000x" would be "pid".  An escaped backslash
 * followed by the text u0000 is no NUL and is not refused.  (Once a bug:
 * proto_parse_call() now refuses such messages.) */
START_TEST(nul_escape)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_sim_target();
        const char *const msgs[] = {
                itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_LOCK "\\u0000.GetState\",\"parameters\":{\"pid\":%d}}",
                              (int)pid),
                itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_LOCK "\",\"parameters\":{\"pid\":%d,\"pid\\u0000x\":1}}",
                              (int)pid),
                itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_RESUME "\",\"parameters\":{\"pid\":%d,\"gpu_mapping\":"
                              "{\"" ITEST_GPU0 "\\u0000\":\"" ITEST_GPU0 "\"}}}",
                              (int)pid),
                "{\"method\":\"org.varlink.service.GetInterfaceDescription\","
                "\"parameters\":{\"interface\":\"" CUDACKPT_INTERFACE "\\u0000x\"}}",
                "{\"method\":\"" GET_INFO "\\u0000\"}",
                NULL,
        };
        for (size_t i = 0; msgs[i]; i++) {
                struct itest_conn *c = itest_connect(d);
                itest_send(c, msgs[i]);
                cJSON *j = itest_recv(c);
                ck_assert_msg(itest_error(j) && strcmp(itest_error(j), CUDACKPT_ERROR_INVALID_REQUEST) == 0,
                              "%s: expected InvalidRequest, got %s", msgs[i], itest_dump(j));
                itest_assert_eof(c, 5000);
        }
        /* Not a NUL: a backslash, then the text u0000. */
        struct itest_conn *c = itest_connect(d);
        cJSON *j = itest_call(c, CUDACKPT_METHOD_GET_STATE,
                              itest_strdupf("{\"pid\":%d,\"x\\\\u0000\":1}", (int)pid));
        itest_assert_error(j, CUDACKPT_VARLINK_INVALID_PARAMETER);
        itest_assert_str(j, "parameter", "x\\u0000");
        atest_assert_running(c, pid);
}
END_TEST

int main(void)
{
        const TTest *tests[] = { garbage, replies_are_utf8, nul_escape, NULL };

        return itest_run("integration.garbage", "garbage", 30, tests);
}
