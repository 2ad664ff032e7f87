/* Unit tests: group selectors parsed, and what discover.c reads in /proc text. */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runner.h"

#include "cudackpt/protocol.h"
#include "host/discover.h"
#include "varlink/proto.h"

/* Parses msg as a call and its parameters as a group request. */
static int parse(const char *msg, struct proto_group_request *req, char **ret_error)
{
        struct proto_call call;
        cJSON *err = NULL;
        int r;

        *ret_error = NULL;
        ck_assert_int_eq(proto_parse_call(msg, strlen(msg), &call, &err), 0);
        r = proto_parse_group(&call, 4, 3, req, &err);
        if (err) {
                const cJSON *e = cJSON_GetObjectItemCaseSensitive(err, "error");
                *ret_error = strdup(cJSON_IsString(e) ? e->valuestring : "?");
                cJSON_Delete(err);
        }
        proto_call_free(&call);
        return r;
}

START_TEST(test_selectors)
{
        struct proto_group_request req;
        char *e;

        ck_assert_int_eq(parse("{\"method\":\"io.cudackpt.Process.SuspendGroup\",\"parameters\":{\"selector\":"
                               "{\"pids\":[{\"pid\":10},{\"pid\":11,\"start_time\":99}]},\"timeout_ms\":5}}",
                               &req, &e), 0);
        ck_assert_int_eq(req.kind, PROTO_SELECT_PIDS);
        ck_assert_uint_eq(req.n_pids, 2);
        ck_assert_int_eq(req.pids[1].pid, 11);
        ck_assert(req.pids[1].has_start_time && req.pids[1].start_time == 99 && !req.pids[0].has_start_time);
        ck_assert(req.has_timeout && req.timeout_ms == 5);
        proto_group_request_free(&req);

        ck_assert_int_eq(parse("{\"method\":\"io.cudackpt.Process.ResumeGroup\",\"parameters\":{\"selector\":"
                               "{\"cgroup\":\"/kubepods/pod42/\"}}}", &req, &e), 0);
        ck_assert_int_eq(req.kind, PROTO_SELECT_CGROUP);
        ck_assert_str_eq(req.cgroup, "/kubepods/pod42");
        proto_group_request_free(&req);

        ck_assert_int_eq(parse("{\"method\":\"io.cudackpt.Process.LockGroup\",\"parameters\":{\"selector\":"
                               "{\"tree\":7}}}", &req, &e), 0);
        ck_assert_int_eq(req.kind, PROTO_SELECT_TREE);
        ck_assert_int_eq(req.tree, 7);
        proto_group_request_free(&req);

        ck_assert_int_eq(parse("{\"method\":\"io.cudackpt.Process.ListProcesses\"}", &req, &e), 0);
        ck_assert_int_eq(req.kind, PROTO_SELECT_ALL);
        proto_group_request_free(&req);
}
END_TEST

START_TEST(test_refused)
{
        static const char *bad[] = {
                "{}",                                            /* no selector */
                "{\"selector\":{}}",                             /* none of the three */
                "{\"selector\":{\"tree\":1,\"cgroup\":\"/a\"}}", /* two */
                "{\"selector\":{\"pids\":[]}}",
                "{\"selector\":{\"pids\":[{\"pid\":0}]}}",
                "{\"selector\":{\"pids\":[{\"pid\":5},{\"pid\":5}]}}",
                "{\"selector\":{\"pids\":[5]}}",
                "{\"selector\":{\"pids\":[{\"pid\":5,\"x\":1}]}}",
                "{\"selector\":{\"cgroup\":\"a/b\"}}",
                "{\"selector\":{\"cgroup\":\"/a/../b\"}}",
                "{\"selector\":{\"cgroup\":\"/a//b\"}}",
                "{\"selector\":{\"cgroup\":\"/a/./b\"}}",
                "{\"selector\":{\"tree\":-1}}",
                "{\"selector\":{\"tree\":1},\"gpu_mapping\":{}}", /* SuspendGroup takes none */
                "{\"selector\":{\"tree\":1},\"pid\":1}",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct proto_group_request req;
                char msg[512], *e;
                snprintf(msg, sizeof(msg), "{\"method\":\"io.cudackpt.Process.SuspendGroup\",\"parameters\":%s}",
                         bad[i]);
                ck_assert_msg(parse(msg, &req, &e) == -EINVAL, "accepted %s", bad[i]);
                ck_assert_str_eq(e, CUDACKPT_VARLINK_INVALID_PARAMETER);
                free(e);
        }
        {
                struct proto_group_request req;
                char *e;
                ck_assert_int_eq(parse("{\"method\":\"io.cudackpt.Process.SuspendGroup\",\"parameters\":{\"selector\":"
                                       "{\"pids\":[{\"pid\":1},{\"pid\":2},{\"pid\":3},{\"pid\":4}]}}}",
                                       &req, &e),
                                 -E2BIG);
                ck_assert_str_eq(e, CUDACKPT_ERROR_GROUP_TOO_LARGE);
                free(e);
        }
}
END_TEST

START_TEST(test_maps)
{
        struct discover_lib sim = { .known = true, .major = 0xfd, .minor = 1, .ino = 424242 };
        static const char plain[] =
                "55d0-55d1 r--p 00000000 fd:01 1000   /usr/bin/sleep\n"
                "7f00-7f01 r-xp 00000000 fd:01 2000   /usr/lib/x86_64-linux-gnu/libc.so.6\n"
                "7f02-7f03 rw-p 00000000 00:00 0 \n"
                "7ffd-7ffe rw-p 00000000 00:00 0      [stack]\n";
        static const char cuda[] =
                "7f00-7f01 r-xp 00000000 fd:01 2000   /usr/lib/x86_64-linux-gnu/libc.so.6\n"
                "7f10-7f20 r-xp 00000000 08:02 3000   /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04\n";
        static const char same_file[] = "7f10-7f20 r-xp 00000000 fd:01 424242 /opt/x/libcudackpt-sim.so\n";
        static const char other_dev[] = "7f10-7f20 r-xp 00000000 fd:02 424242 /opt/x/libcudackpt-sim.so\n";
        static const char lookalike[] = "7f10-7f20 r-xp 00000000 fd:01 5000 /opt/libcudart.so.12\n";

        ck_assert(!discover_maps_text_has_driver(plain, strlen(plain), &sim));
        ck_assert(discover_maps_text_has_driver(cuda, strlen(cuda), &sim));
        ck_assert(discover_maps_text_has_driver(cuda, strlen(cuda), NULL));
        ck_assert(discover_maps_text_has_driver(same_file, strlen(same_file), &sim));
        ck_assert(!discover_maps_text_has_driver(other_dev, strlen(other_dev), &sim));
        ck_assert(!discover_maps_text_has_driver(lookalike, strlen(lookalike), &sim));
        /* Only code counts: the driver's file mapped as data is not CUDA. */
        static const char data_only[] =
                "7f10-7f20 r--p 00000000 08:02 3000   /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
                "7f30-7f40 rw-p 00000000 fd:01 424242 /opt/x/libcudackpt-sim.so\n";
        ck_assert(!discover_maps_text_has_driver(data_only, strlen(data_only), &sim));
}
END_TEST

/* A file named like the driver, mapped here as data and then as code. */
static void *map_named(const char *dir, bool exec, struct discover_lib *ret)
{
        char path[4096];
        struct stat st;
        void *p;
        int fd;

        snprintf(path, sizeof(path), "%s/libcuda.so.1", dir);
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, 4096), 0);
        ck_assert_int_eq(fstat(fd, &st), 0);
        *ret = (struct discover_lib){ .known = true, .major = major(st.st_dev), .minor = minor(st.st_dev),
                                      .ino = (unsigned long long)st.st_ino };
        p = mmap(NULL, 4096, PROT_READ | (exec ? PROT_EXEC : 0), MAP_PRIVATE, fd, 0);
        close(fd);
        return p;
}

/* Both ways of reading the maps (the PROCMAP_QUERY ioctl and the text)
 * agree on this very process, by file and by name. */
START_TEST(test_maps_live)
{
        static const enum discover_maps_how hows[] = { DISCOVER_MAPS_QUERY, DISCOVER_MAPS_TEXT, DISCOVER_MAPS_ANY };
        struct discover_lib libc_lib, file, none = { .known = true, .major = 0, .minor = 0, .ino = 1 };
        char dir[] = "discover-XXXXXX";
        bool query = true;
        void *p;

        ck_assert_int_eq(discover_lib_of((const void *)&printf, &libc_lib), 0);
        ck_assert_ptr_nonnull(mkdtemp(dir));
        for (size_t i = 0; i < sizeof(hows) / sizeof(hows[0]); i++) {
                int r = discover_maps_driver_how(getpid(), &libc_lib, hows[i]);
                if (hows[i] == DISCOVER_MAPS_QUERY && (r == -ENOTTY || r == -EINVAL)) {
                        query = false; /* a kernel before 6.11 */
                        fprintf(stderr, "test_maps_live: no PROCMAP_QUERY here, the text only\n");
                        continue;
                }
                ck_assert_int_eq(r, 1);
                ck_assert_int_eq(discover_maps_driver_how(getpid(), &none, hows[i]), 0);
        }
        p = map_named(dir, false, &file);
        ck_assert(p != MAP_FAILED);
        for (size_t i = query ? 0 : 1; i < sizeof(hows) / sizeof(hows[0]); i++) {
                ck_assert_int_eq(discover_maps_driver_how(getpid(), &file, hows[i]), 0);
                ck_assert_int_eq(discover_maps_driver_how(getpid(), NULL, hows[i]), 0);
        }
        munmap(p, 4096);
        p = map_named(dir, true, &file);
        if (p == MAP_FAILED) {
                fprintf(stderr, "test_maps_live: %s is mounted noexec: the code mapping not tried\n", dir);
        } else {
                for (size_t i = query ? 0 : 1; i < sizeof(hows) / sizeof(hows[0]); i++) {
                        ck_assert_int_eq(discover_maps_driver_how(getpid(), &file, hows[i]), 1);
                        ck_assert_int_eq(discover_maps_driver_how(getpid(), NULL, hows[i]), 1); /* by name */
                }
                munmap(p, 4096);
        }
        ck_assert_int_eq(discover_maps_driver_how(0x3ffffff0, NULL, DISCOVER_MAPS_ANY), -ENOENT);
        {
                char path[4096];
                snprintf(path, sizeof(path), "%s/libcuda.so.1", dir);
                unlink(path);
                rmdir(dir);
        }
}
END_TEST

START_TEST(test_cgroups_and_self)
{
        char cg[DISCOVER_CGROUP_MAX], comm[32];
        pid_t *pids;
        size_t n;
        bool found = false;

        ck_assert(discover_cgroup_within("/a/b", "/a"));
        ck_assert(discover_cgroup_within("/a", "/a"));
        ck_assert(!discover_cgroup_within("/ab", "/a"));
        ck_assert(!discover_cgroup_within("/", "/a"));
        ck_assert(discover_cgroup_within("/x", "/"));

        ck_assert_int_eq(discover_cgroup(getpid(), cg, sizeof(cg)), 0);
        ck_assert_int_eq(cg[0], '/');
        ck_assert_int_eq(discover_comm(getpid(), comm, sizeof(comm)), 0);
        ck_assert_str_eq(comm, "unit-discover");
        ck_assert_int_eq(discover_all(&pids, &n), 0);
        for (size_t i = 0; i < n; i++) {
                found |= pids[i] == getpid();
                if (i > 0)
                        ck_assert_int_lt(pids[i - 1], pids[i]);
        }
        ck_assert(found);
        free(pids);
        /* This process maps no driver. */
        ck_assert_int_eq(discover_maps_driver(getpid(), NULL), 0);
}
END_TEST

START_TEST(test_tree)
{
        pid_t child = fork(), *pids;
        size_t n;

        ck_assert_int_ge(child, 0);
        if (child == 0) {
                pause();
                _exit(0);
        }
        ck_assert_int_eq(discover_tree(getpid(), 100, &pids, &n), 0);
        ck_assert_uint_ge(n, 2);
        ck_assert_int_eq(pids[0], getpid());
        {
                bool found = false;
                for (size_t i = 1; i < n; i++)
                        found |= pids[i] == child;
                ck_assert(found);
        }
        free(pids);
        ck_assert_int_eq(discover_tree(getpid(), 1, &pids, &n), -E2BIG);
        kill(child, SIGKILL);
        (void)waitpid(child, NULL, 0);
        ck_assert_int_eq(discover_tree(999999999, 10, &pids, &n), -ESRCH);
}
END_TEST

const char unit_suite_name[] = "discover";

void unit_tests(TCase *tc)
{
        tcase_add_test(tc, test_selectors);
        tcase_add_test(tc, test_refused);
        tcase_add_test(tc, test_maps);
        tcase_add_test(tc, test_maps_live);
        tcase_add_test(tc, test_cgroups_and_self);
        tcase_add_test(tc, test_tree);
}
