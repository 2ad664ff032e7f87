/* Unit tests: strict parsing of Varlink calls and of method parameters. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"

#include "cudackpt/protocol.h"
#include "varlink/proto.h"

static const char *error_of(const cJSON *reply)
{
        return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(reply, "error"));
}

static const char *param_of(const cJSON *reply, const char *key)
{
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(reply, "parameters");
        return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, key));
}

/* Parses a call that must be fatal (connection closed) with InvalidRequest. */
static void assert_fatal(const char *msg)
{
        struct proto_call call;
        cJSON *reply = NULL;

        ck_assert_msg(proto_parse_call(msg, strlen(msg), &call, &reply) == -EPROTO, "accepted %s", msg);
        ck_assert_ptr_nonnull(reply);
        ck_assert_str_eq(error_of(reply), CUDACKPT_ERROR_INVALID_REQUEST);
        cJSON_Delete(reply);
}

START_TEST(test_call_object)
{
        assert_fatal("");
        assert_fatal("{");
        assert_fatal("[1]");
        assert_fatal("\"x\"");
        assert_fatal("{}");
        assert_fatal("{\"method\": 1}");
        assert_fatal("{\"method\": \"io.cudackpt.Process.GetState\", \"parameters\": 3}");
        assert_fatal("{\"method\": \"io.cudackpt.Process.GetState\", \"oneway\": 1}");
        assert_fatal("{\"method\": \"io.cudackpt.Process.GetState\", \"more\": \"yes\"}");
        assert_fatal("{\"method\": \"io.cudackpt.Process.GetState\", \"extra\": true}");
        assert_fatal("{\"method\": \"io.cudackpt.Process.GetState\", \"Method\": \"x\"}");
        assert_fatal("{\"method\": \"a.B\", \"method\": \"io.cudackpt.Process.GetState\"}");
        assert_fatal("{\"method\": \"io.cudackpt.Process.GetState\", \"upgrade\": true}");
        assert_fatal("{\"method\": \"io.cudackpt.Process.GetState\", \"oneway\": true, \"more\": true}");
        assert_fatal("{\"method\": \"io.cudackpt.Process.GetState\"} x");
        assert_fatal("{\"method\": \"NoDot\"}");
        assert_fatal("{\"method\": \"trailing.\"}");
        /* Not UTF-8: a stray continuation byte, an overlong '/', a surrogate,
         * a code point above U+10FFFF, a sequence cut short. */
        assert_fatal("{\"method\": \"io.cudackpt.Process.GetState\x80\"}");
        assert_fatal("{\"method\": \"io.cudackpt.Process.GetState\xc0\xaf\"}");
        assert_fatal("{\"method\": \"io.cudackpt.Process.GetState\xed\xa0\x80\"}");
        assert_fatal("{\"method\": \"io.cudackpt.Process.GetState\xf4\x90\x80\x80\"}");
        assert_fatal("{\"method\": \"io.cudackpt.Process.GetState\xe2\x82\"}");
        /* An escaped NUL would end the name early for cJSON's C strings. */
        assert_fatal("{\"method\": \"io.cudackpt.Process.GetState\\u0000x\"}");
        assert_fatal("{\"method\": \"io.cudackpt.Process.GetState\", \"parameters\": {\"pid\\u0000\": 1}}");
        assert_fatal("{\"method\": \"io.cudackpt.Process.GetState\", \"parameters\": {\"pid\": 1, \"x\": \"\\\\\\u0000\"}}");
}
END_TEST

START_TEST(test_call_lookup)
{
        struct proto_call call;
        cJSON *reply = NULL;
        const char *m;

        /* Well-formed UTF-8 of every length passes (and names no method). */
        m = "{\"method\": \"io.cudackpt.Process.\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}";
        ck_assert_int_eq(proto_parse_call(m, strlen(m), &call, &reply), -ENOENT);
        cJSON_Delete(reply);
        reply = NULL;

        /* An escaped backslash before "u0000" is no escaped NUL. */
        m = "{\"method\": \"io.cudackpt.Process.GetState\\\\u0000\"}";
        ck_assert_int_eq(proto_parse_call(m, strlen(m), &call, &reply), -ENOENT);
        cJSON_Delete(reply);
        reply = NULL;

        m = "{\"method\": \"io.cudackpt.Process.Suspend\", \"parameters\": {\"pid\": 1}, \"oneway\": true}";
        ck_assert_int_eq(proto_parse_call(m, strlen(m), &call, &reply), 0);
        ck_assert_int_eq(call.method, PROTO_SUSPEND);
        ck_assert(call.oneway);
        ck_assert_ptr_nonnull(call.parameters);
        proto_call_free(&call);

        m = "{\"method\": \"org.varlink.service.GetInfo\", \"more\": true}";
        ck_assert_int_eq(proto_parse_call(m, strlen(m), &call, &reply), 0);
        ck_assert_int_eq(call.method, PROTO_GET_INFO);
        ck_assert(call.more);
        proto_call_free(&call);

        m = "{\"method\": \"io.cudackpt.Process.getstate\"}"; /* case matters */
        ck_assert_int_eq(proto_parse_call(m, strlen(m), &call, &reply), -ENOENT);
        ck_assert_str_eq(error_of(reply), CUDACKPT_VARLINK_METHOD_NOT_FOUND);
        ck_assert_str_eq(param_of(reply, "method"), "io.cudackpt.Process.getstate");
        cJSON_Delete(reply);

        m = "{\"method\": \"io.cudackpt.Other.GetState\"}";
        ck_assert_int_eq(proto_parse_call(m, strlen(m), &call, &reply), -ENOENT);
        ck_assert_str_eq(error_of(reply), CUDACKPT_VARLINK_INTERFACE_NOT_FOUND);
        ck_assert_str_eq(param_of(reply, "interface"), "io.cudackpt.Other");
        cJSON_Delete(reply);

        m = "{\"method\": \"org.varlink.service.GetState\"}"; /* right name, wrong interface */
        ck_assert_int_eq(proto_parse_call(m, strlen(m), &call, &reply), -ENOENT);
        ck_assert_str_eq(error_of(reply), CUDACKPT_VARLINK_METHOD_NOT_FOUND);
        cJSON_Delete(reply);
}
END_TEST

/* Parses a call's parameters; returns the error name or NULL. */
static char *request(const char *method, const char *params, struct proto_request *ret,
                     char **ret_param)
{
        char msg[2048];
        struct proto_call call;
        cJSON *reply = NULL;
        char *err = NULL;

        snprintf(msg, sizeof(msg), "{\"method\": \"io.cudackpt.Process.%s\", \"parameters\": %s}", method,
                 params);
        ck_assert_int_eq(proto_parse_call(msg, strlen(msg), &call, &reply), 0);
        if (proto_parse_request(&call, 4, ret, &reply) < 0) {
                err = strdup(error_of(reply));
                if (ret_param) {
                        const char *p = param_of(reply, "parameter");
                        if (!p)
                                p = param_of(reply, "uuid");
                        *ret_param = p ? strdup(p) : NULL;
                }
                cJSON_Delete(reply);
        }
        proto_call_free(&call);
        return err;
}

static void assert_invalid(const char *method, const char *params, const char *param)
{
        struct proto_request req;
        char *name = NULL;
        char *err = request(method, params, &req, &name);

        ck_assert_msg(err != NULL, "%s %s accepted", method, params);
        ck_assert_str_eq(err, CUDACKPT_VARLINK_INVALID_PARAMETER);
        ck_assert_msg(name && strcmp(name, param) == 0, "%s: parameter %s, not %s", params,
                      name ? name : "(none)", param);
        free(err);
        free(name);
}

START_TEST(test_parameters)
{
        struct proto_request req;
        char *err;

        assert_invalid("GetState", "{}", "pid");
        assert_invalid("GetState", "{\"pid\": \"12\"}", "pid");
        assert_invalid("GetState", "{\"pid\": 1.5}", "pid");
        assert_invalid("GetState", "{\"pid\": 0}", "pid");
        assert_invalid("GetState", "{\"pid\": -1}", "pid");
        assert_invalid("GetState", "{\"pid\": 2147483648}", "pid");
        assert_invalid("GetState", "{\"pid\": 1e300}", "pid");
        assert_invalid("GetState", "{\"pid\": null}", "pid");
        assert_invalid("GetState", "{\"pid\": true}", "pid");
        assert_invalid("GetState", "{\"PID\": 1}", "PID");
        assert_invalid("GetState", "{\"pid\": 1, \"pid\": 2}", "pid");
        assert_invalid("GetState", "{\"pid\": 1, \"timeout_ms\": 5}", "timeout_ms");
        assert_invalid("Checkpoint", "{\"pid\": 1, \"gpu_mapping\": {}}", "gpu_mapping");
        assert_invalid("Lock", "{\"pid\": 1, \"timeout_ms\": -1}", "timeout_ms");
        assert_invalid("Lock", "{\"pid\": 1, \"timeout_ms\": 4294967296}", "timeout_ms");
        assert_invalid("Lock", "{\"pid\": 1, \"timeout_ms\": 0.5}", "timeout_ms");
        assert_invalid("Suspend", "{\"pid\": 1, \"timeout_ms\": \"5\"}", "timeout_ms");
        assert_invalid("Lock", "{\"pid\": 1, \"start_time\": -3}", "start_time");
        assert_invalid("Restore", "{\"pid\": 1, \"gpu_mapping\": []}", "gpu_mapping");
        assert_invalid("Restore", "{\"pid\": 1, \"gpu_mapping\": \"x\"}", "gpu_mapping");
        assert_invalid("Resume", "{\"pid\": 1, \"gpu_mapping\": {\"00000000000000000000000000000001\": 5}}",
                       "gpu_mapping");

        err = request("Lock", "{\"pid\": 42, \"timeout_ms\": 4294967295, \"start_time\": 77}", &req, NULL);
        ck_assert_ptr_null(err);
        ck_assert_int_eq(req.pid, 42);
        ck_assert(req.has_timeout);
        ck_assert_uint_eq(req.timeout_ms, 4294967295u);
        ck_assert(req.has_start_time);
        ck_assert_uint_eq(req.start_time, 77);
        proto_request_free(&req);

        err = request("Suspend", "{\"pid\": 2147483647, \"timeout_ms\": null}", &req, NULL);
        ck_assert_ptr_null(err);
        ck_assert_int_eq(req.pid, 2147483647);
        ck_assert(!req.has_timeout);
        proto_request_free(&req);
}
END_TEST

START_TEST(test_mapping)
{
        struct proto_request req;
        char *name = NULL, *err;

        err = request("Restore",
                      "{\"pid\": 7, \"gpu_mapping\": {\"GPU-00000000-5157-4000-8000-000000000001\": "
                      "\"00000000515740008000000000000002\", \"00000000515740008000000000000002\": "
                      "\"GPU-00000000-5157-4000-8000-000000000001\"}}",
                      &req, NULL);
        ck_assert_ptr_null(err);
        ck_assert_uint_eq(req.n_pairs, 2);
        ck_assert_int_eq((unsigned char)req.pairs[0].newUuid.bytes[15], 2);
        ck_assert_int_eq((unsigned char)req.pairs[1].newUuid.bytes[15], 1);
        proto_request_free(&req);

        err = request("Resume", "{\"pid\": 7, \"gpu_mapping\": {}}", &req, NULL);
        ck_assert_ptr_null(err);
        ck_assert_uint_eq(req.n_pairs, 0);
        proto_request_free(&req);

        err = request("Resume", "{\"pid\": 7, \"gpu_mapping\": {\"nope\": \"00000000515740008000000000000002\"}}",
                      &req, &name);
        ck_assert_str_eq(err, CUDACKPT_ERROR_INVALID_GPU_MAPPING);
        ck_assert_str_eq(name, "nope");
        free(err);
        free(name);

        /* The same GPU spelt two ways is still named twice. */
        err = request("Resume",
                      "{\"pid\": 7, \"gpu_mapping\": {\"00000000515740008000000000000001\": "
                      "\"00000000515740008000000000000003\", \"00000000515740008000000000000002\": "
                      "\"GPU-00000000-5157-4000-8000-000000000003\"}}",
                      &req, &name);
        ck_assert_str_eq(err, CUDACKPT_ERROR_INVALID_GPU_MAPPING);
        ck_assert_str_eq(name, "GPU-00000000-5157-4000-8000-000000000003");
        free(err);
        free(name);

        err = request("Resume",
                      "{\"pid\": 7, \"gpu_mapping\": {\"GPU-00000000-5157-4000-8000-000000000001\": "
                      "\"00000000515740008000000000000003\", \"00000000515740008000000000000001\": "
                      "\"00000000515740008000000000000004\"}}",
                      &req, &name);
        ck_assert_str_eq(err, CUDACKPT_ERROR_INVALID_GPU_MAPPING);
        ck_assert_str_eq(name, "00000000515740008000000000000001");
        free(err);
        free(name);

        /* The test's limit is 4 pairs. */
        err = request("Resume",
                      "{\"pid\": 7, \"gpu_mapping\": {\"01000000000000000000000000000000\": \"01000000000000000000000000000001\","
                      "\"02000000000000000000000000000000\": \"02000000000000000000000000000001\","
                      "\"03000000000000000000000000000000\": \"03000000000000000000000000000001\","
                      "\"04000000000000000000000000000000\": \"04000000000000000000000000000001\","
                      "\"05000000000000000000000000000000\": \"05000000000000000000000000000001\"}}",
                      &req, NULL);
        ck_assert_str_eq(err, CUDACKPT_ERROR_INVALID_GPU_MAPPING);
        free(err);
}
END_TEST

START_TEST(test_states_and_output)
{
        char buf[32];
        size_t len;
        char *s;
        cJSON *m;

        ck_assert_str_eq(proto_state_string(0, buf, sizeof(buf)), "running");
        ck_assert_str_eq(proto_state_string(1, buf, sizeof(buf)), "locked");
        ck_assert_str_eq(proto_state_string(2, buf, sizeof(buf)), "checkpointed");
        ck_assert_str_eq(proto_state_string(3, buf, sizeof(buf)), "failed");
        ck_assert_str_eq(proto_state_string(5, buf, sizeof(buf)), "unknown-5");
        ck_assert_str_eq(proto_state_string(-2, buf, sizeof(buf)), "unknown--2");

        m = proto_error_new(CUDACKPT_ERROR_SHUTTING_DOWN, NULL);
        s = proto_serialize(m, &len);
        ck_assert_str_eq(s, "{\"error\":\"io.cudackpt.Process.ShuttingDown\",\"parameters\":{}}");
        ck_assert_uint_eq(len, strlen(s) + 1);
        ck_assert_int_eq(s[len - 1], '\0');
        free(s);
        cJSON_Delete(m);
        ck_assert(strstr(proto_idl_text, "interface io.cudackpt.Process\n") != NULL);
        ck_assert(proto_method_read_only(PROTO_GET_STATE));
        ck_assert(!proto_method_read_only(PROTO_UNLOCK));
}
END_TEST

const char unit_suite_name[] = "proto";

void unit_tests(TCase *tc)
{
        tcase_add_test(tc, test_call_object);
        tcase_add_test(tc, test_call_lookup);
        tcase_add_test(tc, test_parameters);
        tcase_add_test(tc, test_mapping);
        tcase_add_test(tc, test_states_and_output);
}
