/* Unit tests: common/procfs.c and common/gpu-uuid.c, what the daemon and
 * cudackptctl both parse: /proc/PID/stat (a command name may hold spaces
 * and parentheses), the cgroup v2 line, the process tree walk, GPU UUIDs. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu-uuid.h"
#include "procfs.h"
#include "runner.h"

/* A stat line whose command is ") 1 2 (" : only the last ')' ends it. */
static const char stat_line[] = "4242 () 1 2 () S 17 4242 4242 0 -1 4194560 150 0 0 0 1 2 0 0 20 0 1 0 "
                                "987654321 1000 100\n";

START_TEST(test_stat)
{
        uint64_t v;
        int ppid;

        ck_assert_int_eq(strncmp(procfs_stat_field(stat_line, 3), "S ", 2), 0);
        ck_assert_int_eq(procfs_stat_ppid(stat_line, &ppid), 0);
        ck_assert_int_eq(ppid, 17);
        ck_assert_int_eq(procfs_stat_u64(stat_line, 22, &v), 0);
        ck_assert_uint_eq(v, 987654321);
        ck_assert_ptr_null(procfs_stat_field("4242 (x)", 3));
        ck_assert_ptr_null(procfs_stat_field("4242 x S 1", 3));
        ck_assert_int_eq(procfs_stat_u64("1 (x) S -1 2", 4, &v), -EINVAL);
        ck_assert_int_eq(procfs_stat_u64("1 (x) S 12a 2", 4, &v), -EINVAL);
        ck_assert_int_eq(procfs_stat_ppid("1 (x) S 4294967296 2", &ppid), -EINVAL);
        ck_assert_int_eq(procfs_stat_u64(stat_line, 60, &v), -EINVAL);
}
END_TEST

START_TEST(test_cgroup_line)
{
        const char *p;
        size_t n;

        ck_assert_int_eq(procfs_cgroup_v2("12:cpu:/x\n0::/kubepods/pod42\n", &p, &n), 0);
        ck_assert_uint_eq(n, strlen("/kubepods/pod42"));
        ck_assert_int_eq(strncmp(p, "/kubepods/pod42", n), 0);
        ck_assert_int_eq(procfs_cgroup_v2("0::/", &p, &n), 0);
        ck_assert_uint_eq(n, 1);
        ck_assert_int_eq(procfs_cgroup_v2("1:name=systemd:/a\n10::/b\n", &p, &n), -ENOENT);
        ck_assert_int_eq(procfs_cgroup_v2("", &p, &n), -ENOENT);
}
END_TEST

START_TEST(test_descendants)
{
        /* 1 -> 10 -> (11, 12); 12 -> 13; 20 apart; 30 names itself its parent. */
        static const int pid[] = { 1, 10, 11, 12, 13, 20, 30 };
        static const int ppid[] = { 0, 1, 10, 10, 12, 1, 30 };
        size_t n = sizeof(pid) / sizeof(pid[0]), k;
        int *out;

        ck_assert_int_eq(procfs_descendants(pid, ppid, n, 10, SIZE_MAX, &out, &k), 0);
        ck_assert_uint_eq(k, 4);
        ck_assert_int_eq(out[0], 10);
        ck_assert_int_eq(out[1], 11);
        ck_assert_int_eq(out[2], 12);
        ck_assert_int_eq(out[3], 13);
        free(out);
        ck_assert_int_eq(procfs_descendants(pid, ppid, n, 30, SIZE_MAX, &out, &k), 0);
        ck_assert_uint_eq(k, 1);
        free(out);
        ck_assert_int_eq(procfs_descendants(pid, ppid, n, 10, 3, &out, &k), -E2BIG);
        ck_assert_int_eq(procfs_descendants(pid, ppid, n, 10, 4, &out, &k), 0);
        free(out);
        ck_assert_int_eq(procfs_descendants(pid, ppid, n, 99, SIZE_MAX, &out, &k), -ESRCH);
}
END_TEST

START_TEST(test_uuid)
{
        static const char a[] = "GPU-6987cd69-a0ec-5a42-c1ab-ecda53d34e96";
        unsigned char u[GPU_UUID_BYTES];
        char text[GPU_UUID_STRING_MAX];

        ck_assert_int_eq(gpu_uuid_parse(a, u), 0);
        gpu_uuid_format(u, text);
        ck_assert_str_eq(text, a);
        ck_assert(gpu_uuid_same(a, "gpu-6987CD69-A0EC-5A42-C1AB-ECDA53D34E96"));
        ck_assert(gpu_uuid_same(a, "6987cd69a0ec5a42c1abecda53d34e96"));
        ck_assert(gpu_uuid_same(a, "6987cd69-a0ec5a42-c1abecda-53d34e96"));
        ck_assert(!gpu_uuid_same(a, "GPU-6987cd69-a0ec-5a42-c1ab-ecda53d34e97"));
        /* The nvidia-smi spelling keeps its hyphens in their places. */
        ck_assert(!gpu_uuid_same(a, "GPU-6987cd69a0ec5a42c1abecda53d34e96"));
        ck_assert(!gpu_uuid_same("", ""));
        ck_assert(!gpu_uuid_same("x", "x"));
        ck_assert_int_eq(gpu_uuid_parse("6987cd69a0ec5a42c1abecda53d34e9", u), -EINVAL);
        ck_assert_int_eq(gpu_uuid_parse("-6987cd69a0ec5a42c1abecda53d34e96", u), -EINVAL);
        ck_assert_int_eq(gpu_uuid_parse("6987cd69a0ec5a42c1abecda53d34e96-", u), -EINVAL);
        ck_assert_int_eq(gpu_uuid_parse("6987cd69--a0ec5a42c1abecda53d34e96", u), -EINVAL);
}
END_TEST

const char unit_suite_name[] = "procfs";

void unit_tests(TCase *tc)
{
        tcase_add_test(tc, test_stat);
        tcase_add_test(tc, test_cgroup_line);
        tcase_add_test(tc, test_descendants);
        tcase_add_test(tc, test_uuid);
}
