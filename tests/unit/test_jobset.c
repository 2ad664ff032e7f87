/* Unit tests: client/ctl/saves/jobset.c, the names of a job's part saves
 * across nodes: a name made is parsed back to its generation, for its own
 * node only; S of JOBSET_SAVE_MAX characters fits a save name, one more
 * does not; generation 0, other saves' names, upper-case or short hex, a
 * longer S sharing the prefix, and names with anything after them are
 * none of S's.  And jobholds.c, what the nodes' hellos say they hold: the
 * newest generation every node holds (not one only some hold), parts of
 * another node seen (none of the job's: strangers), two names of one hash
 * refused, a node's newest generations kept past JOBHOLDS_MAX_GENS. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "runner.h"

#include "jobholds.h"
#include "jobset.h"

START_TEST(test_round_trip)
{
        uint32_t n1 = jobset_node_hash("n1"), n2 = jobset_node_hash("n2"), gen = 0;
        char buf[64];

        ck_assert_uint_ne(n1, n2);
        ck_assert_uint_eq(jobset_node_hash(""), 2166136261u); /* FNV-1a's offset basis */
        ck_assert_int_eq(jobset_part_name("set-42", 7, n1, buf, sizeof(buf)), 0);
        ck_assert_uint_eq(strlen(buf), strlen("set-42") + JOBSET_SUFFIX_LEN);
        ck_assert(jobset_part_parse(buf, "set-42", n1, &gen));
        ck_assert_uint_eq(gen, 7);
        ck_assert(!jobset_part_parse(buf, "set-42", n2, &gen));
        ck_assert(!jobset_part_parse(buf, "set-4", n1, &gen));
        ck_assert(!jobset_part_parse(buf, "set-420", n1, &gen));
        ck_assert_int_eq(jobset_part_name("set-42", JOBSET_GEN_MAX, n1, buf, sizeof(buf)), 0);
        ck_assert(jobset_part_parse(buf, "set-42", n1, &gen));
        ck_assert_uint_eq(gen, JOBSET_GEN_MAX);
}
END_TEST

START_TEST(test_bounds)
{
        char s[JOBSET_SAVE_MAX + 2], buf[64];
        uint32_t gen;

        memset(s, 'a', JOBSET_SAVE_MAX);
        s[JOBSET_SAVE_MAX] = '\0';
        ck_assert_int_eq(jobset_part_name(s, 1, 1, buf, sizeof(buf)), 0);
        ck_assert_uint_eq(strlen(buf), 48);
        ck_assert_int_eq(jobset_part_name(s, 1, 1, buf, 48), -EINVAL); /* no room for the NUL */
        strcat(s, "a");
        ck_assert_int_eq(jobset_part_name(s, 1, 1, buf, sizeof(buf)), -EINVAL);
        ck_assert_int_eq(jobset_part_name("s", 0, 1, buf, sizeof(buf)), -EINVAL);
        ck_assert_int_eq(jobset_part_name("", 1, 1, buf, sizeof(buf)), -EINVAL);
        ck_assert(!jobset_part_parse("s.g00000000.n00000001", "s", 1, &gen));
        ck_assert(!jobset_part_parse("s.g0000000A.n00000001", "s", 1, &gen));
        ck_assert(!jobset_part_parse("s.g0000001.n00000001", "s", 1, &gen));
        ck_assert(!jobset_part_parse("s.g00000001.n00000001x", "s", 1, &gen));
        ck_assert(!jobset_part_parse("s-g00000001-n00000001", "s", 1, &gen));
        ck_assert(!jobset_part_parse("s", "s", 1, &gen));
        ck_assert(jobset_part_parse("s.g0000000a.n00000001", "s", 1, &gen));
        ck_assert_uint_eq(gen, 10);
}
END_TEST

static cJSON *hello(const char *json)
{
        cJSON *o = cJSON_Parse(json);

        ck_assert_ptr_nonnull(o);
        return o;
}

START_TEST(test_holds)
{
        jobholds_node v[3];
        jobholds h = { .v = v };
        cJSON *a = hello("{\"gens\":[1,2,3]}"), *b = hello("{\"gens\":[2,1]}"), *c;
        char others[96];

        ck_assert_int_eq(jobholds_add(&h, "n1", a), 0);
        ck_assert_int_eq(jobholds_add(&h, "n2", b), 0);
        ck_assert_uint_eq(h.top, 3);
        ck_assert_uint_eq(jobholds_whole(&h), 2);
        ck_assert(!jobholds_strangers(&h));
        ck_assert_int_eq(jobholds_add(&h, "n1", b), -ENOTUNIQ);
        snprintf(others, sizeof(others), "{\"gens\":[],\"others\":[%u,%u]}", jobset_node_hash("n1"),
                 jobset_node_hash("n9"));
        c = hello(others);
        ck_assert_int_eq(jobholds_add(&h, "n3", c), 0);
        ck_assert_uint_eq(jobholds_whole(&h), 0);
        ck_assert(jobholds_strangers(&h)); /* n9's parts */
        cJSON_Delete(a);
        cJSON_Delete(b);
        cJSON_Delete(c);
}
END_TEST

START_TEST(test_holds_newest)
{
        char json[2048];
        size_t n = 0;
        jobholds_node v[1];
        jobholds h = { .v = v };
        cJSON *a;

        n += (size_t)snprintf(json + n, sizeof(json) - n, "{\"gens\":[");
        for (unsigned g = 1; g <= JOBHOLDS_MAX_GENS + 10; g++)
                n += (size_t)snprintf(json + n, sizeof(json) - n, "%s%u", g > 1 ? "," : "", g);
        snprintf(json + n, sizeof(json) - n, ",0,-1,1.5,\"7\"]}");
        a = hello(json);
        ck_assert_int_eq(jobholds_add(&h, "n1", a), 0);
        ck_assert_uint_eq(h.top, JOBHOLDS_MAX_GENS + 10);
        ck_assert_uint_eq(v[0].n_gens, JOBHOLDS_MAX_GENS);
        ck_assert_uint_eq(jobholds_whole(&h), JOBHOLDS_MAX_GENS + 10);
        for (unsigned k = 0; k < v[0].n_gens; k++)
                ck_assert_uint_gt(v[0].gens[k], 10);
        cJSON_Delete(a);
}
END_TEST

const char unit_suite_name[] = "jobset";

void unit_tests(TCase *tc)
{
        tcase_add_test(tc, test_round_trip);
        tcase_add_test(tc, test_bounds);
        tcase_add_test(tc, test_holds);
        tcase_add_test(tc, test_holds_newest);
}
