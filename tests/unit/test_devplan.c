/* Unit tests: client/ctl/job/devplan.c and manifestgpu.c, the device plan
 * of restore --images and the manifest's records it is made from: a GPU
 * this node has keeps its place, one it lacks goes onto one of the same
 * model with room (the same ordinal first, one to one), the memory check
 * sums the members and the margin, an older driver, another model, too
 * little memory and a map onto a GPU this node lacks are refused, --force
 * lets checks pass, and no records means no plan; malformed records are
 * refused. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <cJSON.h>

#include "runner.h"

#include "devplan.h"

#define A0 "GPU-aaaaaaaa-0000-4000-8000-000000000000"
#define A1 "GPU-aaaaaaaa-0000-4000-8000-000000000001"
#define B0 "GPU-bbbbbbbb-0000-4000-8000-000000000000"
#define B1 "GPU-bbbbbbbb-0000-4000-8000-000000000001"
#define B2 "GPU-bbbbbbbb-0000-4000-8000-000000000002"
#define MIB (1024ull * 1024)

/* Records of a dump on GPUs A0 (ordinal 0) and A1 (ordinal 1), H200s:
 * member 1 held 100 MiB on A0, member 2 50 MiB on A0 and 30 MiB on A1. */
static const char records[] =
        "{\"members\": [{\"pid\": 1, \"gpu_memory\": [{\"uuid\": \"" A0 "\", \"bytes\": 104857600}]},"
        "  {\"pid\": 2, \"gpu_memory\": [{\"uuid\": \"" A0 "\", \"bytes\": 52428800},"
        "                               {\"uuid\": \"" A1 "\", \"bytes\": 31457280}]}],"
        " \"devices\": {\"driver_version\": \"580.95.05\", \"gpus\": ["
        "  {\"uuid\": \"" A0 "\", \"name\": \"NVIDIA H200\", \"pci_bus_id\": \"00000000:18:00.0\", \"index\": 0,"
        "   \"memory_total_bytes\": 150754820096},"
        "  {\"uuid\": \"" A1 "\", \"name\": \"NVIDIA H200\", \"pci_bus_id\": \"00000000:19:00.0\", \"index\": 1}]}}";

static ctl_devrec *rec;
static ctl_node_gpu gpus[3];
static ctl_node node;

static void load(const char *text) {
        cJSON *root = cJSON_Parse(text);

        ck_assert_ptr_nonnull(root);
        ctl_devrec_free(rec);
        ck_assert_int_eq(ctl_devrec_read(root, 2, &rec), 0);
        cJSON_Delete(root);
}

static int read_text(const char *text) {
        cJSON *root = cJSON_Parse(text);
        ctl_devrec *d = NULL;
        int r;

        ck_assert_ptr_nonnull(root);
        r = ctl_devrec_read(root, 2, &d);
        ctl_devrec_free(d);
        cJSON_Delete(root);
        return r;
}

/* This node: B0, B1 (H200s, ordinals 0 and 1) and B2 (ordinal 2), each
 * with free_mib free; driver 580.95.05; margin 10 MiB. */
static void setup(void) {
        rec = NULL;
        load(records);
        gpus[0] = (ctl_node_gpu) { B0, "NVIDIA H200", 0, true, 1000 * MIB };
        gpus[1] = (ctl_node_gpu) { B1, "NVIDIA H200", 1, true, 1000 * MIB };
        gpus[2] = (ctl_node_gpu) { B2, "NVIDIA H200", 2, true, 1000 * MIB };
        node = (ctl_node) { "580.95.05", 10 * MIB, gpus, 3 };
}

static void teardown(void) {
        ctl_devrec_free(rec);
}

static ctl_plan make(const ctl_map *map, bool force) {
        ctl_plan p;

        ck_assert_int_eq(ctl_plan_make(rec, &node, map, force, &p), 0);
        return p;
}

START_TEST(test_moved_same_ordinal) {
        ctl_plan p = make(NULL, false);
        ctl_map m;

        ck_assert_str_eq(ctl_plan_verdict_name(p.verdict), "fits");
        ck_assert_uint_eq(p.n, 2);
        /* A0: 100 + 50 MiB and a margin per member; A1: 30 MiB and one. */
        ck_assert_uint_eq(p.e[0].need, 170 * MIB);
        ck_assert_uint_eq(p.e[0].members, 2);
        ck_assert_uint_eq(p.e[1].need, 40 * MIB);
        ck_assert_int_eq(p.e[0].to, 0);
        ck_assert_int_eq(p.e[1].to, 1);
        ck_assert_int_eq(p.e[0].how, CTL_PLAN_CHOSEN);
        ck_assert_int_eq(p.driver, CTL_CHECK_OK);
        ck_assert_int_eq(ctl_plan_map(&p, &node, &m), 0);
        ck_assert_uint_eq(m.n_items, 4);
        ck_assert_str_eq(m.items[0], A0);
        ck_assert_str_eq(m.items[1], B0);
        ck_assert_str_eq(m.items[3], B1);
        ctl_map_free(&m);
        ctl_plan_free(&p);
}
END_TEST

START_TEST(test_kept_no_map) {
        ctl_plan p;
        ctl_map m;

        gpus[0].uuid = A0;
        gpus[1].uuid = A1;
        p = make(NULL, false);
        ck_assert_int_eq(p.verdict, CTL_PLAN_FITS);
        ck_assert_int_eq(p.e[0].how, CTL_PLAN_KEPT);
        ck_assert_int_eq(p.e[1].how, CTL_PLAN_KEPT);
        ck_assert_int_eq(ctl_plan_map(&p, &node, &m), 0);
        ck_assert_ptr_null(m.items);
        ctl_plan_free(&p);
}
END_TEST

START_TEST(test_ordinal_full_next_in_order) {
        ctl_plan p;

        /* B0 is too small for A0 (170 MiB): A0 takes the next in order, B1;
         * A1's own ordinal (B1) is then taken: the first in order with room,
         * B0 (40 MiB fit), one to one. */
        gpus[0].free = 169 * MIB;
        p = make(NULL, false);
        ck_assert_int_eq(p.verdict, CTL_PLAN_FITS);
        ck_assert_int_eq(p.e[0].to, 1);
        ck_assert_int_eq(p.e[1].to, 0);
        ctl_plan_free(&p);
        /* Exactly enough fits. */
        gpus[0].free = 170 * MIB;
        p = make(NULL, false);
        ck_assert_int_eq(p.e[0].to, 0);
        ctl_plan_free(&p);
}
END_TEST

START_TEST(test_refusals) {
        ctl_plan p;

        /* Another model everywhere. */
        for (int i = 0; i < 3; i++)
                gpus[i].name = "NVIDIA A100-SXM4-80GB";
        p = make(NULL, false);
        ck_assert_int_eq(p.verdict, CTL_PLAN_NO_GPU);
        ck_assert_uint_eq(p.failed, 0);
        ctl_plan_free(&p);
        /* Too little free on every H200. */
        for (int i = 0; i < 3; i++) {
                gpus[i].name = "NVIDIA H200";
                gpus[i].free = 100 * MIB;
        }
        p = make(NULL, false);
        ck_assert_int_eq(p.verdict, CTL_PLAN_NO_MEMORY);
        ctl_plan_free(&p);
        /* One H200 alone cannot take both GPUs of the job: one to one. */
        node.n_gpus = 1;
        gpus[0].free = 1000 * MIB;
        p = make(NULL, false);
        ck_assert_int_eq(p.verdict, CTL_PLAN_NO_GPU);
        ck_assert_uint_eq(p.failed, 1);
        ctl_plan_free(&p);
        /* An older driver, compared by numbers, not by text. */
        node.n_gpus = 3;
        node.driver_version = "580.9.05";
        p = make(NULL, false);
        ck_assert_int_eq(p.verdict, CTL_PLAN_OLDER_DRIVER);
        ctl_plan_free(&p);
        node.driver_version = "580.100";
        p = make(NULL, false);
        ck_assert_int_eq(p.verdict, CTL_PLAN_FITS);
        ctl_plan_free(&p);
}
END_TEST

START_TEST(test_device_map) {
        ctl_map map = { 0 };
        ctl_plan p;

        /* A0 onto B2 by the map; A1 chosen (its ordinal, B1). */
        ck_assert_int_eq(ctl_map_add(&map, A0 "=" B2), 0);
        p = make(&map, false);
        ck_assert_int_eq(p.verdict, CTL_PLAN_FITS);
        ck_assert_int_eq(p.e[0].to, 2);
        ck_assert_int_eq(p.e[0].how, CTL_PLAN_MAPPED);
        ck_assert_int_eq(p.e[1].to, 1);
        ctl_plan_free(&p);
        /* Both onto B2: the sum must fit there. */
        ck_assert_int_eq(ctl_map_add(&map, A1 "=" B2), 0);
        gpus[2].free = 200 * MIB;
        p = make(&map, false);
        ck_assert_int_eq(p.verdict, CTL_PLAN_NO_MEMORY);
        ck_assert_uint_eq(p.e[1].need_there, 210 * MIB);
        ctl_plan_free(&p);
        /* --force lets it pass, and says so. */
        p = make(&map, true);
        ck_assert_int_eq(p.verdict, CTL_PLAN_FITS);
        ck_assert_int_eq(p.e[0].memory, CTL_CHECK_FORCED);
        ctl_plan_free(&p);
        ctl_map_free(&map);
        /* A GPU this node lacks. */
        ck_assert_int_eq(ctl_map_add(&map, A0 "=" A1), 0);
        p = make(&map, false);
        ck_assert_int_eq(p.verdict, CTL_PLAN_UNKNOWN_TARGET);
        ctl_plan_free(&p);
        ctl_map_free(&map);
}
END_TEST

START_TEST(test_no_records) {
        ctl_plan p;
        cJSON *root = cJSON_Parse("{\"members\": [{\"pid\": 1}, {\"pid\": 2}]}");

        /* An older manifest: no records, no plan. */
        ctl_devrec_free(rec);
        ck_assert_int_eq(ctl_devrec_read(root, 2, &rec), 0);
        ck_assert_ptr_null(rec);
        p = make(NULL, false);
        ck_assert_int_eq(p.verdict, CTL_PLAN_NO_RECORDS);
        ctl_plan_free(&p);
        cJSON_Delete(root);
        /* A member whose memory was not told. */
        load("{\"members\": [{\"pid\": 1}, {\"pid\": 2, \"gpu_memory\": []}],"
             " \"devices\": {\"driver_version\": \"580.95.05\", \"gpus\": []}}");
        p = make(NULL, false);
        ck_assert_int_eq(p.verdict, CTL_PLAN_NO_RECORDS);
        ctl_plan_free(&p);
}
END_TEST

START_TEST(test_malformed) {
        /* A UUID that is not one, one twice, a member's GPU not recorded, bytes below 0. */
        ck_assert_int_eq(read_text("{\"devices\": {\"gpus\": [{\"uuid\": \"GPU-x=y,z\"}]}}"), -EINVAL);
        ck_assert_int_eq(read_text("{\"devices\": {\"gpus\": [{\"uuid\": \"" A0 "\"}, {\"uuid\": \"" A0 "\"}]}}"),
                         -EINVAL);
        ck_assert_int_eq(read_text("{\"members\": [{\"gpu_memory\": [{\"uuid\": \"" A1 "\", \"bytes\": 1}]}],"
                                   " \"devices\": {\"gpus\": [{\"uuid\": \"" A0 "\"}]}}"), -EINVAL);
        ck_assert_int_eq(read_text("{\"members\": [{\"gpu_memory\": [{\"uuid\": \"" A0 "\", \"bytes\": -1}]}],"
                                   " \"devices\": {\"gpus\": [{\"uuid\": \"" A0 "\"}]}}"), -EINVAL);
        ck_assert_int_eq(read_text("{\"devices\": []}"), -EINVAL);
        ck_assert_int_eq(read_text("{\"devices\": {\"driver_version\": 5, \"gpus\": []}}"), -EINVAL);
}
END_TEST

START_TEST(test_versions) {
        int c;

        ck_assert_int_eq(ctl_version_cmp("580.95.05", "580.95.5", &c), 0);
        ck_assert_int_eq(c, 0);
        ck_assert_int_eq(ctl_version_cmp("580.9", "580.10", &c), 0);
        ck_assert_int_lt(c, 0);
        ck_assert_int_eq(ctl_version_cmp("590.1", "580.95.05", &c), 0);
        ck_assert_int_gt(c, 0);
        ck_assert_int_eq(ctl_version_cmp("580", "580.0", &c), 0);
        ck_assert_int_eq(c, 0);
        ck_assert_int_eq(ctl_version_cmp("580.x", "580.1", &c), -EINVAL);
        ck_assert_int_eq(ctl_version_cmp("", "580.1", &c), -EINVAL);
        ck_assert_int_eq(ctl_version_cmp("580.", "580.1", &c), -EINVAL);
}
END_TEST

const char unit_suite_name[] = "devplan";

void unit_tests(TCase *tc) {
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_moved_same_ordinal);
        tcase_add_test(tc, test_kept_no_map);
        tcase_add_test(tc, test_ordinal_full_next_in_order);
        tcase_add_test(tc, test_refusals);
        tcase_add_test(tc, test_device_map);
        tcase_add_test(tc, test_no_records);
        tcase_add_test(tc, test_malformed);
        tcase_add_test(tc, test_versions);
}
