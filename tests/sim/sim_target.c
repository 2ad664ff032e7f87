/* The process a call is about: found and pinned, its threads watched while
 * it is stopped, its state slot written. */

#include "sim.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* Whether /proc/PID/cmdline is empty (or unreadable). */
static bool sim_cmdline_empty(int proc_fd) {
        char *buf;
        size_t len;

        if (sim_read_at(proc_fd, "cmdline", 4096, &buf, &len) < 0)
                return true;
        free(buf);
        return len == 0;
}

void sim_target_close(struct sim_target *t) {
        if (t->proc_fd >= 0)
                close(t->proc_fd);
        t->proc_fd = -1;
}

/* Finds the target and decides whether the driver would talk to it at all:
 * CUDA_ERROR_OPERATING_SYSTEM for a bad pid, a dead or zombie process or one
 * the caller may not touch, CUDA_ERROR_NOT_INITIALIZED for a process that is
 * not (simulating) a CUDA process, and CUDA_ERROR_OPERATING_SYSTEM again for
 * one whose /proc is not its pid namespace's (sim_proc_is_own()).  On success ret_target holds an fd that
 * sim_target_close() releases. */
CUresult sim_target_open(int pid, struct sim_target *ret_target) {
        struct sim_target t = { .pid = pid, .proc_fd = -1 };
        char path[32], *env = NULL;
        struct sim_stat st;
        size_t env_len;
        uid_t euid = geteuid();

        sim_driver_load();
        if (pid <= 0)
                return CUDA_ERROR_OPERATING_SYSTEM;
        (void) snprintf(path, sizeof(path), "/proc/%d", pid);
        t.proc_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (t.proc_fd < 0)
                return CUDA_ERROR_OPERATING_SYSTEM;
        if (sim_read_stat_at(t.proc_fd, "stat", &st) < 0 || st.state == 'Z' || st.state == 'X')
                goto fail;
        t.start_time = st.start_time;
        t.env_start = st.env_start;
        if (euid != 0) {
                /* The driver's own check for callers that are not root. */
                uid_t uid;

                if (sim_read_real_uid(t.proc_fd, &uid) < 0 || uid != euid)
                        goto fail;
        }
        for (int tries = 0;; tries++) {
                if (sim_read_at(t.proc_fd, "environ", SIM_MAX_ENVIRON, &env, &env_len) < 0)
                        goto fail;
                /* Inside execve the new image's environment and arguments are
                 * both empty for a few microseconds, after close-on-exec fds
                 * are closed, so a test that waits for that (EOF on a CLOEXEC
                 * pipe) may ask in between.  A process after its exec has at
                 * least argv[0] or, with an empty argv, is not ours either;
                 * a kernel thread (neither) costs the few retries. */
                if (env_len > 0 || tries >= SIM_EXEC_RETRIES || !sim_cmdline_empty(t.proc_fd))
                        break;
                free(env);
                env = NULL;
                sim_sleep_ns(SIM_EXEC_RETRY_NS);
        }
        sim_config_parse(env, env_len, pid == getpid(), &t.cfg);
        free(env);
        if (!t.cfg.cuda) {
                sim_target_close(&t);
                return CUDA_ERROR_NOT_INITIALIZED;
        }
        /* Its cuInit would have failed: the driver needs /proc/<getpid()>
         * to be the process itself (seen on the H200, driver 580). */
        if (!sim_proc_is_own(t.proc_fd))
                goto fail;
        *ret_target = t;
        return CUDA_SUCCESS;
fail:
        sim_target_close(&t);
        return CUDA_ERROR_OPERATING_SYSTEM;
}

/* Whether the pinned process still lives (is not a zombie either). */
bool sim_target_alive(const struct sim_target *t) {
        unsigned long long start;
        char state;

        return sim_read_stat(t->proc_fd, &state, &start) == 0 && state != 'Z' && state != 'X' &&
               start == t->start_time;
}

/* Opens the target's task directory for reading. */
static int sim_target_open_tasks(const struct sim_target *t, DIR **ret_dir) {
        int fd;
        DIR *d;

        fd = openat(t->proc_fd, "task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                int r = -errno;

                close(fd);
                return r;
        }
        *ret_dir = d;
        return 0;
}

/* Whether a stat read shows a thread that is gone or on its way out. */
static bool sim_stat_exiting(const struct sim_stat *st) {
        return st->state == 'Z' || st->state == 'X' || (st->flags & SIM_PF_EXITING);
}

/* Calls fn with the tid and stat of each live thread of the target (one
 * that can be read and does not exit: a thread that exits meanwhile is no
 * answer) until fn returns false; -errno where the task directory cannot
 * be read. */
static int sim_target_each_thread(const struct sim_target *t,
                                  bool (*fn)(int tid, const struct sim_stat *st, void *userdata), void *userdata) {
        struct dirent *de;
        DIR *d = NULL;
        int r;

        r = sim_target_open_tasks(t, &d);
        if (r < 0)
                return r;
        while ((de = readdir(d))) {
                unsigned long long tid;
                struct sim_stat st;
                char path[sizeof(de->d_name) + sizeof("/stat")];

                if (sim_parse_ulong_str(de->d_name, INT_MAX, &tid) < 0)
                        continue;
                (void) snprintf(path, sizeof(path), "%s/stat", de->d_name);
                if (sim_read_stat_at(dirfd(d), path, &st) < 0 || sim_stat_exiting(&st))
                        continue;
                if (!fn((int) tid, &st, userdata))
                        break;
        }
        closedir(d);
        return 0;
}

static bool sim_thread_highest(int tid, const struct sim_stat *st, void *userdata) {
        int *best = userdata;

        (void) st;
        if (tid > *best)
                *best = tid;
        return true;
}

/* The highest tid of a live thread in /proc/PID/task: for a single-threaded
 * process the pid.  It must be a thread that can run: CRIU lets only this
 * one go on while it checkpoints and restores the process, and the calls it
 * then makes wait until a thread runs (see sim_target_wait_running). */
int sim_target_highest_tid(const struct sim_target *t, int *ret_tid) {
        int best = -1, r;

        r = sim_target_each_thread(t, sim_thread_highest, &best);
        if (r < 0)
                return r;
        if (best < 0)
                return -ESRCH;
        *ret_tid = best;
        return 0;
}

/* Whether this thread is stopped; the scan goes on while they are. */
static bool sim_thread_stopped(int tid, const struct sim_stat *st, void *userdata) {
        int *stopped = userdata;

        (void) tid;
        *stopped = st->state == 'T' || st->state == 't';
        return *stopped;
}

/* Whether every live thread of the target is stopped (T: a group stop, as
 * after SIGSTOP; t: a ptrace stop, as under CRIU's seize; a thread that
 * exits is not live): 1 if so, 0 if one runs or none is stopped (all
 * exiting), -errno if it cannot be told.  The
 * scan ends at the first thread that runs, so a running target costs one
 * read of its task directory and of one thread's stat. */
static int sim_target_stopped(const struct sim_target *t) {
        int stopped = 0, r;

        r = sim_target_each_thread(t, sim_thread_stopped, &stopped);
        return r < 0 ? r : stopped;
}

/* Whether a SIGKILL is pending for the process (ShdPnd: kill()) or for
 * its main thread (SigPnd: any fatal signal, which the kernel turns into a
 * SIGKILL for every thread), from /proc/PID/status. */
static bool sim_target_sigkill_pending(const struct sim_target *t) {
        static const char *const fields[] = { "\nSigPnd:\t", "\nShdPnd:\t" };
        bool pending = false;
        char *buf;
        size_t len;

        if (sim_read_at(t->proc_fd, "status", 64 * 1024, &buf, &len) < 0)
                return false;
        for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
                const char *p = strstr(buf, fields[i]);
                char *end;
                unsigned long long mask;

                if (!p)
                        continue;
                errno = 0;
                mask = strtoull(p + strlen(fields[i]), &end, 16);
                if (errno == 0 && *end == '\n' && (mask & (1ull << (SIGKILL - 1))))
                        pending = true;
        }
        free(buf);
        return pending;
}

/* Whether the pinned process lives and is not being killed: its main thread
 * has not begun to exit and no SIGKILL waits for it.  A killed process's
 * threads are woken to exit, so they read as running for a moment (longer
 * on a loaded machine) before they exit. */
static bool sim_target_running_on(const struct sim_target *t) {
        struct sim_stat st;

        return sim_read_stat_at(t->proc_fd, "stat", &st) == 0 && !sim_stat_exiting(&st) &&
               st.start_time == t->start_time && !sim_target_sigkill_pending(t);
}

/* Step 4 of every call but GetRestoreThreadId: as the real driver does, waits
 * without bound while the target is stopped (the driver needs the target's
 * own threads to answer), polling; never called with the table lock held.
 * OPERATING_SYSTEM if the target died while waited for.  A killed target
 * runs again too, for the moment its threads take to begin their exit, so
 * after a wait the target must be seen running on (sim_target_running_on)
 * twice, a poll apart.  A target whose state cannot be told is taken to
 * run: later steps decide. */
CUresult sim_target_wait_running(const struct sim_target *t) {
        bool waited = false, seen_running = false;

        for (;;) {
                if (sim_target_stopped(t) > 0) {
                        seen_running = false;
                } else {
                        if (!waited)
                                return CUDA_SUCCESS;
                        if (!sim_target_running_on(t))
                                return CUDA_ERROR_OPERATING_SYSTEM;
                        if (seen_running)
                                return CUDA_SUCCESS;
                        seen_running = true;
                }
                waited = true;
                sim_sleep_ns(SIM_STOPPED_POLL_NS);
        }
}

/* Writes one character into the target's environment at offset, where a
 * slot's value lies.  Best effort: without the right to write (or a shown
 * env_start) nothing is written. */
static void sim_target_poke(const struct sim_target *t, size_t offset, char c) {
        struct iovec local = { .iov_base = &c, .iov_len = 1 }, remote;

        if (t->env_start == 0 || t->env_start > UINTPTR_MAX - offset)
                return;
        /* process_vm_writev names the target by pid only: make sure the pid
         * still names the pinned process (see the header on the window). */
        if (!sim_target_alive(t))
                return;
        remote.iov_base = (void *) (uintptr_t) (t->env_start + offset);
        remote.iov_len = 1;
        (void) process_vm_writev(t->pid, &local, 1, &remote, 1, 0);
}

/* Writes the letter of state into the target's state slot, if it has one.
 * Best effort: without the right to write (or a shown env_start) the table
 * alone holds the state, as before slots existed. */
void sim_slot_write(const struct sim_target *t, CUprocessState state) {
        char letter = sim_slot_letter(state);

        if (t->cfg.slot_set && letter != '\0')
                sim_target_poke(t, t->cfg.slot_offset, letter);
}

/* Writes letter into the target's step slot, if it has one (sim.c says
 * what it reads when). */
void sim_step_write(const struct sim_target *t, char letter) {
        if (t->cfg.step_slot_set)
                sim_target_poke(t, t->cfg.step_slot_offset, letter);
}
