/* test_input.c: hostile and unusual bytes on the socket.  Protocol-level
 * garbage gets InvalidRequest and the connection closed; a valid call with
 * a bad parameter gets InvalidParameter and the connection stays usable;
 * size limits, split and pipelined writes, oneway and "more" calls, and the
 * org.varlink.service interface. */
#include "harness.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The connection still works: a GetState on pid answers "running". */
static void assert_usable(struct itest_conn *c, pid_t pid)
{
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, pid), pid, "running");
}

static void assert_invalid_request_closes(struct itest_daemon *d, const char *msg, size_t len)
{
        struct itest_conn *c = itest_connect(d);
        ck_assert_int_eq(itest_send_bytes(c, msg, len, false), 0);
        cJSON *j = NULL;
        int rc = itest_recv_raw(c, ITEST_REPLY_TIMEOUT_MS, &j);
        ck_assert_msg(rc == 0, "no InvalidRequest for %.*s: %s", (int)len, msg, strerror(-rc));
        itest_assert_error(j, CUDACKPT_ERROR_INVALID_REQUEST);
        const char *reason = itest_str(j, "reason");
        ck_assert_msg(reason && *reason, "no reason in %s", itest_dump(j));
        itest_assert_eof(c, 5000);
}

START_TEST(invalid_requests)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_sim_target();
        static const char *const bad[] = {
                "{\"method\":",                                                  /* malformed */
                "{\"method\":\"" CUDACKPT_METHOD_GET_STATE "\",\"parameters\":{\"pid\":1}",
                "not json at all",
                "[1,2,3]",                                                       /* not an object */
                "\"io.cudackpt.Process.GetState\"",
                "42",
                "null",
                "{}",                                                            /* no method */
                "{\"parameters\":{\"pid\":1}}",
                "{\"method\":42,\"parameters\":{\"pid\":1}}",                    /* method not a string */
                "{\"method\":\"" CUDACKPT_METHOD_GET_STATE "\",\"parameters\":[1]}", /* parameters not an object */
                "{\"method\":\"" CUDACKPT_METHOD_GET_STATE "\",\"parameters\":\"pid=1\"}",
                "{\"method\":\"" CUDACKPT_METHOD_GET_STATE "\",\"parameters\":7}",
                "",                                                              /* an empty message */
                /* An escaped NUL would cut a name short: GetState\u0000x is no GetState. */
                "{\"method\":\"" CUDACKPT_METHOD_GET_STATE "\\u0000x\",\"parameters\":{\"pid\":1}}",
                "{\"method\":\"" CUDACKPT_METHOD_GET_STATE "\",\"parameters\":{\"pid\\u0000\":1}}",
                NULL,
        };
        for (size_t i = 0; bad[i]; i++)
                assert_invalid_request_closes(d, bad[i], strlen(bad[i]) + 1);
        /* Others are not disturbed. */
        assert_usable(itest_connect(d), pid);
}
END_TEST

/* A call with one bad parameter: InvalidParameter naming it; the
 * connection stays open for the next call. */
static void assert_invalid_parameter(struct itest_conn *c, pid_t good_pid, const char *method, const char *params,
                                     const char *parameter)
{
        cJSON *j = itest_call(c, method, params);
        ck_assert_msg(itest_error(j) && strcmp(itest_error(j), CUDACKPT_VARLINK_INVALID_PARAMETER) == 0,
                      "%s %s: expected InvalidParameter %s, got %s", method, params, parameter, itest_dump(j));
        itest_assert_str(j, "parameter", parameter);
        assert_usable(c, good_pid);
}

START_TEST(invalid_pid)
{
        struct itest_conn *c;
        pid_t pid = itest_sim_conn(NULL, &c);
        static const char *const bad[] = {
                "{\"pid\":\"1\"}", "{\"pid\":1.5}", "{\"pid\":0}", "{\"pid\":-1}", "{\"pid\":2147483648}",
                "{\"pid\":1e100}", "{\"pid\":null}", "{\"pid\":true}", "{\"pid\":[1]}", "{\"pid\":{}}", "{}",
                NULL,
        };
        static const char *const methods[] = { CUDACKPT_METHOD_GET_STATE, CUDACKPT_METHOD_LOCK,
                                               CUDACKPT_METHOD_RESUME, NULL };
        for (size_t m = 0; methods[m]; m++)
                for (size_t i = 0; bad[i]; i++)
                        assert_invalid_parameter(c, pid, methods[m], bad[i], "pid");
        /* No parameters at all is a missing pid too. */
        cJSON *j = itest_call(c, CUDACKPT_METHOD_GET_STATE, NULL);
        itest_assert_error(j, CUDACKPT_VARLINK_INVALID_PARAMETER);
        itest_assert_str(j, "parameter", "pid");
        assert_usable(c, pid);
}
END_TEST

START_TEST(invalid_timeout_and_start_time)
{
        struct itest_daemon *d;
        struct itest_conn *c;
        pid_t pid = itest_sim_conn(&d, &c);
        static const char *const bad[] = { "-1", "4294967296", "1.5", "\"100\"", "true", "1e20", NULL };
        for (size_t i = 0; bad[i]; i++) {
                char *p = itest_strdupf("{\"pid\":%d,\"timeout_ms\":%s}", (int)pid, bad[i]);
                assert_invalid_parameter(c, pid, CUDACKPT_METHOD_LOCK, p, "timeout_ms");
                assert_invalid_parameter(c, pid, CUDACKPT_METHOD_SUSPEND, p, "timeout_ms");
        }
        static const char *const bad_st[] = { "\"1\"", "-1", "1.5", "[]", NULL };
        for (size_t i = 0; bad_st[i]; i++)
                assert_invalid_parameter(c, pid, CUDACKPT_METHOD_GET_STATE,
                                         itest_strdupf("{\"pid\":%d,\"start_time\":%s}", (int)pid, bad_st[i]),
                                         "start_time");
        /* None of them locked the process. */
        assert_usable(c, pid);
}
END_TEST

START_TEST(unknown_parameter)
{
        struct itest_daemon *d;
        struct itest_conn *c;
        pid_t pid = itest_sim_conn(&d, &c);
        assert_invalid_parameter(c, pid, CUDACKPT_METHOD_GET_STATE, itest_strdupf("{\"pid\":%d,\"bogus\":1}", (int)pid),
                                 "bogus");
        /* timeout_ms is a parameter of Lock, not of Checkpoint. */
        assert_invalid_parameter(c, pid, CUDACKPT_METHOD_CHECKPOINT,
                                 itest_strdupf("{\"pid\":%d,\"timeout_ms\":5}", (int)pid), "timeout_ms");
        assert_invalid_parameter(c, pid, CUDACKPT_METHOD_LOCK,
                                 itest_strdupf("{\"pid\":%d,\"gpu_mapping\":{}}", (int)pid), "gpu_mapping");
}
END_TEST

START_TEST(invalid_gpu_mapping_parameter)
{
        struct itest_daemon *d;
        struct itest_conn *c;
        pid_t pid = itest_sim_conn(&d, &c);
        static const char *const bad[] = {
                "[]", "\"" ITEST_GPU0 "\"", "5", "true",
                "{\"" ITEST_GPU0 "\":5}", "{\"" ITEST_GPU0 "\":null}", "{\"" ITEST_GPU0 "\":[\"" ITEST_GPU0 "\"]}",
                "{\"" ITEST_GPU0 "\":{}}", NULL,
        };
        for (size_t i = 0; bad[i]; i++) {
                char *p = itest_strdupf("{\"pid\":%d,\"gpu_mapping\":%s}", (int)pid, bad[i]);
                assert_invalid_parameter(c, pid, CUDACKPT_METHOD_RESTORE, p, "gpu_mapping");
                assert_invalid_parameter(c, pid, CUDACKPT_METHOD_RESUME, p, "gpu_mapping");
        }
}
END_TEST

START_TEST(unknown_method_and_interface)
{
        struct itest_daemon *d;
        struct itest_conn *c;
        pid_t pid = itest_sim_conn(&d, &c);
        cJSON *j = itest_call(c, "io.cudackpt.Process.Frobnicate", itest_strdupf("{\"pid\":%d}", (int)pid));
        itest_assert_error(j, CUDACKPT_VARLINK_METHOD_NOT_FOUND);
        const char *m = itest_str(j, "method");
        ck_assert_msg(m && (strcmp(m, "io.cudackpt.Process.Frobnicate") == 0 || strcmp(m, "Frobnicate") == 0),
                      "method in %s", itest_dump(j));

        c = itest_connect(d);
        j = itest_call(c, "com.example.Other.Method", "{}");
        itest_assert_error(j, CUDACKPT_VARLINK_INTERFACE_NOT_FOUND);
        itest_assert_str(j, "interface", "com.example.Other");

        c = itest_connect(d);
        j = itest_call(c, "org.varlink.service.GetInterfaceDescription", "{\"interface\":\"com.example.Other\"}");
        itest_assert_error(j, CUDACKPT_VARLINK_INTERFACE_NOT_FOUND);
        itest_assert_str(j, "interface", "com.example.Other");
}
END_TEST

START_TEST(message_too_large)
{
        struct itest_daemon_opts o = { .config_json = "{\"max_message_bytes\":4096}" };
        struct itest_daemon *d = itest_daemon_start(&o);
        pid_t pid = itest_sim_target();

        /* Below the limit (JSON whitespace as padding): served. */
        struct itest_conn *c = itest_connect(d);
        char *small = itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_GET_STATE "\",\"parameters\":{\"pid\":%d}%3000s}",
                                    (int)pid, "");
        itest_send(c, small);
        itest_assert_state(itest_recv(c), pid, "running");

        /* Above it, with no NUL in sight: MessageTooLarge, then closed. */
        size_t len = 8192;
        char *big = itest_keep(malloc(len));
        ck_assert(big);
        int n = snprintf(big, len, "{\"method\":\"" CUDACKPT_METHOD_GET_STATE "\",\"parameters\":{\"pid\":%d}",
                         (int)pid);
        memset(big + n, ' ', len - (size_t)n - 2);
        big[len - 2] = '}';
        big[len - 1] = '\0';
        c = itest_connect(d);
        /* The daemon may close before all of it went out. */
        int rc = itest_send_bytes(c, big, len, false);
        ck_assert_msg(rc == 0 || rc == -EPIPE || rc == -ECONNRESET, "send: %s", strerror(-rc));
        cJSON *j = itest_recv(c);
        itest_assert_error(j, CUDACKPT_ERROR_MESSAGE_TOO_LARGE);
        itest_assert_int(j, "max_bytes", 4096);
        itest_assert_eof(c, 5000);

        /* A complete message over the limit, NUL included, is refused too. */
        c = itest_connect(d);
        big[4200] = '\0';
        big[4199] = '}';
        rc = itest_send_bytes(c, big, 4201, false);
        ck_assert_msg(rc == 0 || rc == -EPIPE || rc == -ECONNRESET, "send: %s", strerror(-rc));
        j = itest_recv(c);
        itest_assert_error(j, CUDACKPT_ERROR_MESSAGE_TOO_LARGE);
        itest_assert_eof(c, 5000);

        assert_usable(itest_connect(d), pid);
}
END_TEST

START_TEST(split_writes)
{
        struct itest_daemon *d;
        struct itest_conn *c;
        pid_t pid = itest_sim_conn(&d, &c);
        char *msg = itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_GET_STATE "\",\"parameters\":{\"pid\":%d}}", (int)pid);
        /* One byte per write, the NUL too, twice on the same connection. */
        for (int round = 0; round < 2; round++) {
                ck_assert_int_eq(itest_send_bytes(c, msg, strlen(msg) + 1, true), 0);
                itest_assert_state(itest_recv(c), pid, "running");
        }
        /* A message split in the middle of a UTF-8 sequence and of a number. */
        char *utf = itest_strdupf("{\"method\":\"" CUDACKPT_METHOD_GET_STATE "\",\"parameters\":{\"pid\":%d,"
                                  "\"start_time\":%llu}}",
                                  (int)pid, (unsigned long long)itest_start_time(pid));
        size_t half = strlen(utf) - 5;
        ck_assert_int_eq(itest_send_bytes(c, utf, half, false), 0);
        ck_assert_int_eq(itest_send_bytes(c, utf + half, strlen(utf) + 1 - half, false), 0);
        itest_assert_state(itest_recv(c), pid, "running");
}
END_TEST

START_TEST(pipelined_in_one_write)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t a = itest_sim_target();
        pid_t b = itest_sim_target();
        pid_t dead = itest_dead_pid();
        struct itest_conn *c = itest_connect(d);
        char buf[1024];
        int n = snprintf(buf, sizeof(buf),
                         "{\"method\":\"" CUDACKPT_METHOD_GET_STATE "\",\"parameters\":{\"pid\":%d}}%c"
                         "{\"method\":\"" CUDACKPT_METHOD_GET_STATE "\",\"parameters\":{\"pid\":%d}}%c"
                         "{\"method\":\"org.varlink.service.GetInfo\"}%c"
                         "{\"method\":\"" CUDACKPT_METHOD_LOCK "\",\"parameters\":{\"pid\":%d,\"bogus\":1}}%c"
                         "{\"method\":\"" CUDACKPT_METHOD_GET_STATE "\",\"parameters\":{\"pid\":%d}}%c",
                         (int)a, '\0', (int)dead, '\0', '\0', (int)a, '\0', (int)b, '\0');
        ck_assert(n > 0 && (size_t)n < sizeof(buf));
        ck_assert_int_eq(itest_send_bytes(c, buf, (size_t)n, false), 0);
        itest_assert_state(itest_recv(c), a, "running");
        cJSON *j = itest_recv(c);
        itest_assert_error(j, CUDACKPT_ERROR_NO_SUCH_PROCESS);
        itest_assert_int(j, "pid", dead);
        j = itest_recv(c);
        itest_assert_ok(j);
        ck_assert_msg(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(itest_params(j), "interfaces")),
                      "GetInfo expected third: %s", itest_dump(j));
        j = itest_recv(c);
        itest_assert_error(j, CUDACKPT_VARLINK_INVALID_PARAMETER);
        itest_assert_str(j, "parameter", "bogus");
        itest_assert_state(itest_recv(c), b, "running");
        /* The refused Lock did nothing. */
        assert_usable(c, a);
}
END_TEST

/* oneway: no reply, yet the call runs.  The Checkpoint sent next on the
 * same connection runs after it (same pid, arrival order), so it succeeds
 * only if the oneway Lock happened, and its reply is the first to come. */
START_TEST(oneway)
{
        struct itest_daemon *d;
        struct itest_conn *c;
        pid_t pid = itest_sim_conn(&d, &c);
        itest_sendf(c, "{\"method\":\"" CUDACKPT_METHOD_LOCK "\",\"parameters\":{\"pid\":%d},\"oneway\":true}",
                    (int)pid);
        cJSON *j = itest_call_pid(c, CUDACKPT_METHOD_CHECKPOINT, pid);
        itest_assert_state(j, pid, "checkpointed");
        /* A oneway call that fails is silent too. */
        itest_sendf(c, "{\"method\":\"" CUDACKPT_METHOD_UNLOCK "\",\"parameters\":{\"pid\":%d},\"oneway\":true}",
                    (int)pid);
        j = itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, pid);
        itest_assert_state(j, pid, "checkpointed");
        itest_sendf(c, "{\"method\":\"" CUDACKPT_METHOD_RESUME "\",\"parameters\":{\"pid\":%d},\"oneway\":true}",
                    (int)pid);
        /* A GetState answers at once while the Resume runs; a queued
         * operation waits for it. */
        j = itest_call_pid(c, CUDACKPT_METHOD_LOCK, pid);
        itest_assert_state(j, pid, "locked");
}
END_TEST

/* "more": a single reply, not marked as continuing. */
START_TEST(more_gets_one_reply)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t a = itest_sim_target();
        pid_t b = itest_sim_target();
        struct itest_conn *c = itest_connect(d);
        itest_sendf(c, "{\"method\":\"" CUDACKPT_METHOD_GET_STATE "\",\"parameters\":{\"pid\":%d},\"more\":true}",
                    (int)a);
        cJSON *j = itest_recv(c);
        itest_assert_state(j, a, "running");
        const cJSON *cont = cJSON_GetObjectItemCaseSensitive(j, "continues");
        ck_assert_msg(!cont || cJSON_IsFalse(cont), "continues in %s", itest_dump(j));
        /* The next reply belongs to the next call. */
        itest_assert_state(itest_call_pid(c, CUDACKPT_METHOD_GET_STATE, b), b, "running");
}
END_TEST

START_TEST(get_info_and_description)
{
        struct itest_daemon *d = itest_daemon_start_default();
        struct itest_conn *c = itest_connect(d);
        cJSON *j = itest_call(c, "org.varlink.service.GetInfo", "{}");
        itest_assert_ok(j);
        static const char *const keys[] = { "vendor", "product", "version", "url", NULL };
        for (size_t i = 0; keys[i]; i++)
                ck_assert_msg(itest_str(j, keys[i]), "%s in %s", keys[i], itest_dump(j));
        itest_assert_lists_interface(j);
        /* Without parameters at all, too. */
        itest_assert_ok(itest_call(c, "org.varlink.service.GetInfo", NULL));

        j = itest_call(c, "org.varlink.service.GetInterfaceDescription", "{\"interface\":\"" CUDACKPT_INTERFACE "\"}");
        itest_assert_ok(j);
        const char *desc = itest_str(j, "description");
        ck_assert_msg(desc, "description in %s", itest_dump(j));
        ck_assert_msg(strstr(desc, "interface " CUDACKPT_INTERFACE), "description: %s", desc);
        static const char *const parts[] = { "method GetState(", "method Resume(", "error DriverError",
                                             "error MessageTooLarge", NULL };
        for (size_t k = 0; parts[k]; k++)
                ck_assert_msg(strstr(desc, parts[k]), "%s not in the description", parts[k]);

        j = itest_call(c, "org.varlink.service.GetInterfaceDescription", "{}");
        itest_assert_error(j, CUDACKPT_VARLINK_INVALID_PARAMETER);
        itest_assert_str(j, "parameter", "interface");
}
END_TEST

/* A client that vanishes in the middle of a message, or right after
 * sending a whole one, leaves the daemon serving others. */
START_TEST(vanish_mid_message)
{
        struct itest_daemon *d = itest_daemon_start_default();
        pid_t pid = itest_sim_target();
        for (int k = 0; k < 10; k++) {
                struct itest_conn *c = itest_connect(d);
                static const char part[] = "{\"method\":\"io.cudackpt.Process.GetSt";
                ck_assert_int_eq(itest_send_bytes(c, part, sizeof(part) - 1, false), 0);
                itest_conn_close(c);
                c = itest_connect(d);
                itest_sendf(c, "{\"method\":\"" CUDACKPT_METHOD_GET_STATE "\",\"parameters\":{\"pid\":%d}}", (int)pid);
                itest_conn_close(c);
        }
        assert_usable(itest_connect(d), pid);
}
END_TEST

int main(void)
{
        const TTest *tests[] = { invalid_requests, invalid_pid, invalid_timeout_and_start_time,
                unknown_parameter, invalid_gpu_mapping_parameter, unknown_method_and_interface,
                message_too_large, split_writes, pipelined_in_one_write, oneway, more_gets_one_reply,
                get_info_and_description, vanish_mid_message, NULL };

        return itest_run("integration.input", "input", 30, tests);
}
