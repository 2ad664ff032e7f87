/* test_lane.c: the read-only lane's bounded spinning (run/lane.c): the loop
 * polls instead of sleeping only while calls come back to back and only
 * for lane_spin_us; a long call on the lane lets the loop sleep. */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <time.h>
#include <uv.h>

#include "runner.h"
#include "run/lane.h"

static struct lane lane;
static uv_work_t jobs[3];
static uv_timer_t timer;
static int next;
static double cpu_before, cpu_during;
static uint64_t t_before, t_during;

static double thread_cpu_s(void)
{
        struct rusage r;

        getrusage(RUSAGE_THREAD, &r);
        return (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

/* The last job is a long call (a driver call on a slow or stopped process). */
static void work_cb(uv_work_t *w)
{
        if (w == &jobs[2]) {
                struct timespec ts = { .tv_sec = 0, .tv_nsec = 400 * 1000 * 1000 };
                nanosleep(&ts, NULL);
        }
}

static void submit_cb(uv_timer_t *t)
{
        (void)t;
        if (next == 2) {
                cpu_before = thread_cpu_s();
                t_before = uv_hrtime();
        }
        ck_assert_int_eq(lane_submit(&lane, &jobs[next]), 0);
        ck_assert(next == 0 || lane.back_to_back);
}

static void done_cb(uv_work_t *w, int status)
{
        (void)status;
        if (w == &jobs[2]) {
                cpu_during = thread_cpu_s() - cpu_before;
                t_during = uv_hrtime() - t_before;
                uv_close((uv_handle_t *)&timer, NULL);
                return;
        }
        next = w == &jobs[0] ? 1 : 2;
        uv_timer_start(&timer, submit_cb, 0, 0); /* back to back */
}

/* Two quick calls, then a back-to-back call of 400 ms: the loop polls for
 * at most lane_spin_us of it, then sleeps until its result. */
START_TEST(test_long_call_lets_the_loop_sleep)
{
        uv_loop_t loop;

        ck_assert_int_eq(uv_loop_init(&loop), 0);
        uv_timer_init(&loop, &timer);
        ck_assert_int_eq(lane_init(&lane, &loop, 200, work_cb, done_cb), 0);
        next = 0;
        submit_cb(&timer);
        uv_run(&loop, UV_RUN_DEFAULT);
        ck_assert_msg(t_during >= 400u * 1000 * 1000, "the long call took %.1f ms", t_during / 1e6);
        ck_assert_msg(cpu_during < 0.1, "the loop thread used %.0f ms of CPU during a %.0f ms call on the lane",
                      cpu_during * 1e3, t_during / 1e6);
        lane_close(&lane);
        uv_run(&loop, UV_RUN_DEFAULT);
        ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

/* Back-to-back jobs whose length straddles the polling window (190 to
 * 210 µs against lane_spin_us 200): the loop stops polling just as some
 * finish, and no result may be lost between the thread's "the loop polls,
 * no wake-up" and the loop's "the window is over, sleep". */
#define RACE_JOBS 3000
static struct lane race_lane;
static uv_work_t race_job;
static uv_timer_t race_timer;
static int race_done;

static void race_work_cb(uv_work_t *w)
{
        long ns = (long)(uintptr_t)w->data;
        uint64_t until = uv_hrtime() + (uint64_t)ns;

        while (uv_hrtime() < until)
                ;
}

/* The next job comes from the loop after the result's callback, as a
 * client's next request does. */
static void race_submit_cb(uv_timer_t *t)
{
        (void)t;
        race_job.data = (void *)(uintptr_t)(190000 + (race_done * 7919L) % 2000 * 10); /* 190-210 µs */
        ck_assert_int_eq(lane_submit(&race_lane, &race_job), 0);
}

static void race_done_cb(uv_work_t *w, int status)
{
        (void)w;
        (void)status;
        if (++race_done == RACE_JOBS) {
                uv_close((uv_handle_t *)&race_timer, NULL);
                return;
        }
        uv_timer_start(&race_timer, race_submit_cb, 0, 0);
}

START_TEST(test_no_result_lost_at_the_window_edge)
{
        uv_loop_t loop;

        ck_assert_int_eq(uv_loop_init(&loop), 0);
        ck_assert_int_eq(lane_init(&race_lane, &loop, 200, race_work_cb, race_done_cb), 0);
        uv_timer_init(&loop, &race_timer);
        race_done = 0;
        race_job.data = NULL;
        ck_assert_int_eq(lane_submit(&race_lane, &race_job), 0);
        /* A lost result would leave the loop asleep for good: the test's
         * timeout fails it. */
        uv_run(&loop, UV_RUN_DEFAULT);
        ck_assert_int_eq(race_done, RACE_JOBS);
        /* The path under test was taken: results picked up by polling. */
        ck_assert_msg(race_lane.n_polled > 0, "no result of %d was taken by the polling loop", RACE_JOBS);
        lane_close(&race_lane);
        uv_run(&loop, UV_RUN_DEFAULT);
        ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

const char unit_suite_name[] = "lane";

void unit_tests(TCase *tc)
{
        tcase_add_test(tc, test_long_call_lets_the_loop_sleep);
        tcase_add_test(tc, test_no_result_lost_at_the_window_edge);
}
