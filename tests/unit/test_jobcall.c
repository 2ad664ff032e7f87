/* Unit tests: client/ctl/saves/jobcall.c, the job and save methods as
 * cudackptctl calls them: which names pass (the daemon's rule), a
 * JobEvent read strictly (a reply of another shape, a name or save too
 * long for the fields, a number out of range: refused or left absent,
 * never copied past a field), and StartJob's parameters as the daemon
 * reads them. */
#include <check.h>
#include <cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"

#include <cudackpt/protocol.h>

#include "jobcall.h"

START_TEST(names) {
        char longest[CTL_JOB_NAME_MAX + 2];

        ck_assert(ctl_job_name_valid("train"));
        ck_assert(ctl_job_name_valid("slurm-4242.a_b"));
        ck_assert(!ctl_job_name_valid(""));
        ck_assert(!ctl_job_name_valid(NULL));
        ck_assert(!ctl_job_name_valid(".hidden"));
        ck_assert(!ctl_job_name_valid("-opt"));
        ck_assert(!ctl_job_name_valid("a/b"));
        ck_assert(!ctl_job_name_valid(".."));
        ck_assert(!ctl_job_name_valid("a b"));
        memset(longest, 'x', sizeof(longest));
        longest[CTL_JOB_NAME_MAX] = '\0';
        ck_assert(ctl_job_name_valid(longest));
        longest[CTL_JOB_NAME_MAX] = 'x';
        longest[CTL_JOB_NAME_MAX + 1] = '\0';
        ck_assert(!ctl_job_name_valid(longest));
}
END_TEST

START_TEST(events) {
        ctl_job_event ev;
        char big[512];

        ck_assert_int_eq(ctl_job_event_parse("{\"job\":{\"event\":\"started\",\"name\":\"t\",\"pid\":42,"
                                             "\"start_time\":77}}", &ev), 0);
        ck_assert_str_eq(ev.event, "started");
        ck_assert_str_eq(ev.name, "t");
        ck_assert_int_eq(ev.pid, 42);
        ck_assert_int_eq(ev.start_time, 77);
        ck_assert_int_eq(ev.exit_status, -1);
        ck_assert_int_eq(ctl_job_event_parse("{\"job\":{\"event\":\"ended\",\"name\":\"t\",\"exit_status\":3}}", &ev),
                         0);
        ck_assert_int_eq(ev.exit_status, 3);
        ck_assert_int_eq(ev.pid, -1);
        ck_assert_int_eq(ctl_job_event_parse("{\"job\":{\"event\":\"saved\",\"name\":\"t\",\"save\":\"s1\"}}", &ev), 0);
        ck_assert_str_eq(ev.save, "s1");
        /* Out of range: absent, not wrapped. */
        ck_assert_int_eq(ctl_job_event_parse("{\"job\":{\"event\":\"ended\",\"name\":\"t\",\"exit_status\":256,"
                                             "\"pid\":-5}}", &ev), 0);
        ck_assert_int_eq(ev.exit_status, -1);
        ck_assert_int_eq(ev.pid, -1);
        /* Not a JobEvent. */
        ck_assert_int_eq(ctl_job_event_parse("{}", &ev), -EBADMSG);
        ck_assert_int_eq(ctl_job_event_parse("{\"job\":{\"name\":\"t\"}}", &ev), -EBADMSG);
        ck_assert_int_eq(ctl_job_event_parse("{\"job\":{\"event\":1,\"name\":\"t\"}}", &ev), -EBADMSG);
        ck_assert_int_eq(ctl_job_event_parse("not json", &ev), -EBADMSG);
        /* Longer than the fields: refused, not cut or copied past them. */
        memset(big, 'a', sizeof(big));
        memcpy(big, "{\"job\":{\"event\":\"ended\",\"name\":\"", 33);
        strcpy(big + 33 + 100, "\"}}");
        ck_assert_int_eq(ctl_job_event_parse(big, &ev), -EBADMSG);
}
END_TEST

START_TEST(start_params) {
        char *argv[] = { "python", "train.py", "--lr=\"0.1\"", NULL };
        char *envp[] = { "SLURM_JOB_ID=42", "PATH=/usr/bin", NULL };
        char *text = ctl_job_start_params("train", argv, envp, "/home/u", NULL);
        cJSON *p = cJSON_Parse(text);

        ck_assert_ptr_nonnull(p);
        ck_assert_str_eq(cJSON_GetObjectItem(p, "name")->valuestring, "train");
        ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(p, "argv")), 3);
        ck_assert_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(p, "argv"), 2)->valuestring, "--lr=\"0.1\"");
        ck_assert_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(p, "environment"), 0)->valuestring, "SLURM_JOB_ID=42");
        ck_assert_str_eq(cJSON_GetObjectItem(p, "directory")->valuestring, "/home/u");
        ck_assert_ptr_null(cJSON_GetObjectItem(p, "output"));
        cJSON_Delete(p);
        free(text);
        text = ctl_job_save_params("train", "s1", true, false);
        p = cJSON_Parse(text);
        ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(p, "leave_running")));
        ck_assert_ptr_null(cJSON_GetObjectItem(p, "replace"));
        cJSON_Delete(p);
        free(text);
}
END_TEST

const char unit_suite_name[] = "jobcall";

void unit_tests(TCase *tc) {
        tcase_add_test(tc, names);
        tcase_add_test(tc, events);
        tcase_add_test(tc, start_params);
}
