/* Unit tests: watchers' output buffers and their bounds (watchbuf.h). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"
#include "jobs/watchbuf.h"

static char chunk[600];

/* A buffer grows by doubling from 1 KiB; the pool counts what it
 * allocated, plus the buffer being written. */
START_TEST(test_counts)
{
        struct watchbuf_pool p;
        struct watchbuf b = { 0 };
        size_t len, cap;
        char *data;

        watchbuf_pool_init(&p, 1 << 20, 1 << 22, 10, 2);
        ck_assert(watchbuf_append(&p, &b, chunk, sizeof(chunk)));
        ck_assert_uint_eq(b.cap, 1024);
        ck_assert_uint_eq(p.mem, 1024);
        ck_assert_uint_eq(p.mem_unprivileged, 1024);
        ck_assert(watchbuf_append(&p, &b, chunk, sizeof(chunk)));
        ck_assert_uint_eq(b.cap, 2048);
        ck_assert_uint_eq(p.mem, 2048);
        data = watchbuf_take(&p, &b, &len, &cap);
        ck_assert_uint_eq(len, 2 * sizeof(chunk));
        ck_assert_uint_eq(cap, 2048);
        ck_assert_uint_eq(p.mem, 0);
        free(data);
        /* Being written, it still counts; new events go to a new buffer. */
        watchbuf_writing(&p, &b, cap);
        ck_assert_uint_eq(p.mem, 2048);
        ck_assert(watchbuf_append(&p, &b, chunk, 10));
        ck_assert_uint_eq(p.mem, 2048 + 1024);
        watchbuf_drained(&p, &b);
        ck_assert_uint_eq(b.in_flight, 0);
        ck_assert_uint_eq(p.mem, 1024);
        ck_assert_uint_eq(watchbuf_release(&p, &b), 1024);
        ck_assert_uint_eq(p.mem, 0);
        ck_assert_ptr_null(b.out);
}
END_TEST

/* One buffer past max_watcher_bytes is cut, and stays cut. */
START_TEST(test_cut_one)
{
        struct watchbuf_pool p;
        struct watchbuf b = { 0 };

        watchbuf_pool_init(&p, 2048, 1 << 22, 10, 2);
        ck_assert(watchbuf_append(&p, &b, chunk, sizeof(chunk)));
        ck_assert(watchbuf_append(&p, &b, chunk, sizeof(chunk)));
        ck_assert(watchbuf_append(&p, &b, chunk, sizeof(chunk)));
        ck_assert(!watchbuf_append(&p, &b, chunk, sizeof(chunk)));
        ck_assert(b.cut);
        ck_assert_uint_eq(b.len, 3 * sizeof(chunk));
        ck_assert(!watchbuf_append(&p, &b, chunk, 1));
        watchbuf_release(&p, &b);
}
END_TEST

/* All buffers together stay under max_watch_bytes; unprivileged callers'
 * under the part the reserve leaves them (here 8 of 10 watchers: 8 KiB of
 * 10); a privileged caller's may use the rest. */
START_TEST(test_cut_all)
{
        struct watchbuf_pool p;
        struct watchbuf u[9] = { 0 }, root = { .privileged = true };

        watchbuf_pool_init(&p, 4096, 10240, 10, 2);
        ck_assert_uint_eq(p.max_unprivileged, 10240 - 1024 * 2);
        for (int i = 0; i < 8; i++)
                ck_assert(watchbuf_append(&p, &u[i], chunk, 10));
        ck_assert_uint_eq(p.mem_unprivileged, 8192);
        ck_assert(!watchbuf_append(&p, &u[8], chunk, 10));
        ck_assert(watchbuf_append(&p, &root, chunk, sizeof(chunk)));
        ck_assert(watchbuf_append(&p, &root, chunk, sizeof(chunk)));
        ck_assert_uint_eq(p.mem, 10240);
        ck_assert_uint_eq(p.mem_unprivileged, 8192);
        /* Full: even the privileged one cannot grow (1200 bytes in 2 KiB). */
        ck_assert(watchbuf_append(&p, &root, chunk, sizeof(chunk)));
        ck_assert(watchbuf_append(&p, &root, chunk, 200));
        ck_assert(!watchbuf_append(&p, &root, chunk, 100));
        for (int i = 0; i < 9; i++)
                watchbuf_release(&p, &u[i]);
        watchbuf_release(&p, &root);
        ck_assert_uint_eq(p.mem, 0);
        ck_assert_uint_eq(p.mem_unprivileged, 0);
}
END_TEST

const char unit_suite_name[] = "watchbuf";

void unit_tests(TCase *tc)
{
        memset(chunk, 'x', sizeof(chunk));
        tcase_add_test(tc, test_counts);
        tcase_add_test(tc, test_cut_one);
        tcase_add_test(tc, test_cut_all);
}
