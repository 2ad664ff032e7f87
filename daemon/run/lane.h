/* lane.h: one warm thread for the short, read-only driver calls.
 *
 * libuv's pool wakes whichever idle worker has waited longest, so with
 * sixteen workers each GetState lands on the coldest thread there is: on the
 * H200 VM that cost ~70 µs of a ~170 µs round trip (the driver call itself
 * runs slower on a thread just woken from a halted vCPU).  The lane is a
 * single thread kept for GetState and GetRestoreThreadId: used for every one
 * of them, it stays warm.  It takes one job at a time; when it is busy the
 * caller hands the job to the pool instead, so a slow call never holds up
 * another one.
 *
 * Spinning (spin_us > 0, the lane_spin_us key): what is left of a round
 * trip is wake-ups, of the lane thread for the job and of the loop for its
 * result and the client's next request.  So while calls come back to back
 * (a job arrives within spin_us of the end of the one before), the lane
 * thread spins on its queue for up to spin_us after each job before it
 * sleeps (with a pause instruction, yielding now and then), and the loop
 * polls instead of sleeping (an active uv_idle_t makes uv_run() poll with
 * timeout 0) while the job is in the lane and for spin_us after its
 * result; while it polls it picks the result up itself, and the thread
 * skips the wake-up (uv_async_send(), a write to an eventfd and a read
 * back).  Each side judges "back to back" by itself.  A call that comes
 * alone costs no spinning at all, and an idle daemon sleeps.  spin_us == 0
 * is the plain lane.
 *
 * Lifetime: lane_init() on the loop thread starts the thread (when it
 * cannot, every submission says -EBUSY and the pool does the work);
 * lane_close() stops and joins it, which must be idle by then, and closes
 * the loop handles; the loop must run once more to finish that. */
#ifndef CUDACKPT_LANE_H
#define CUDACKPT_LANE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

typedef void (*lane_work_cb)(uv_work_t *w);
typedef void (*lane_after_work_cb)(uv_work_t *w, int status);

struct lane {
        uv_loop_t *loop;
        uv_thread_t thread;
        bool started;
        uv_async_t async;       /* a job finished (thread -> loop) */
        lane_work_cb work;      /* run on the lane's thread */
        lane_after_work_cb done;      /* run on the loop thread afterwards */
        uint64_t spin_ns;       /* the spinning window; 0: never spin */
        /* Loop thread only. */
        bool busy;              /* a job is in the lane */
        bool back_to_back;      /* the job in it came within spin_ns of the last end */
        uint64_t busy_since;    /* uv_hrtime() when the job in it was submitted */
        uint64_t last_end;      /* uv_hrtime() when the last job's done ran, 0 never */
        uv_idle_t poll;         /* active: the loop polls instead of sleeping */
        uint64_t poll_until;    /* uv_hrtime() when the loop may sleep again */
        uint64_t n_polled;      /* results the polling loop took itself (for the tests) */
        /* Shared with the thread: pending and stop are written under lock
         * (read without it only by the spinning thread); finished and
         * loop_polling are read and written without it. */
        uv_mutex_t lock;
        uv_cond_t cond;
        uv_work_t *_Atomic pending; /* the job to run next, or NULL */
        uv_work_t *_Atomic finished; /* the job run, for the loop, or NULL */
        atomic_bool loop_polling; /* the loop polls: a finished job needs no wake-up */
        atomic_bool stop;
};

/* spin_us: the spinning window above, 0 for none. */
int lane_init(struct lane *l, uv_loop_t *loop, unsigned spin_us, lane_work_cb work, lane_after_work_cb done);
/* Runs work(w) on the lane's thread and then done(w, 0) on the loop thread,
 * as uv_queue_work() would; -EBUSY (nothing done) while a job is in it. */
int lane_submit(struct lane *l, uv_work_t *w);
void lane_close(struct lane *l);

#endif
