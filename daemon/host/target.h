/* target.h: pinning the process a request names.
 *
 * A pid is only a number; the process behind it can exit and the number be
 * reused.  target_open() takes a pidfd first and reads the process's user
 * ids and start time afterwards, then confirms through the pidfd that the
 * process still lives: what was read therefore belongs to the pinned
 * process.  The pidfd stays open as long as the daemon keeps the target, so
 * later requests skip the pinning: target_alive() asks the pidfd itself
 * (poll: readable once the process has exited, zombies included), and
 * target_refresh() re-reads the user ids, which a process can change
 * (setuid(), or exec of a set-user-id program) while keeping its pid and
 * pidfd: through the pidfd (PIDFD_GET_INFO, Linux 6.13), or on older
 * kernels through a /proc/PID/status descriptor opened at pinning time,
 * and the main thread's state, through a /proc/PID/stat descriptor opened
 * then too (the status file is read for the state on older kernels, and
 * for the resident memory).  Such a descriptor keeps naming that process:
 * its reads fail once it has gone.
 * Worker threads only (procfs reads); target_alive() and target_close()
 * are non-blocking and may run anywhere. */
#ifndef CUDACKPT_TARGET_H
#define CUDACKPT_TARGET_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct target_identity {
        pid_t pid;           /* the process; for a thread id, its process */
        int pidfd;           /* owned; -1 when not open */
        int stat_fd;         /* owned /proc/PID/stat; -1 when not open */
        int status_fd;       /* owned /proc/PID/status; -1 when not open */
        uid_t ruid, euid, suid;
        uint64_t start_time; /* /proc/PID/stat field 22, clock ticks after boot */
        char state;          /* the state letter target_refresh() read; 0 once used */
};

/* -ESRCH when no such process, other -errno when it cannot be read. */
int target_open(pid_t pid, struct target_identity *ret_id);
/* The same for a process of which the caller holds a pidfd already (a
 * peer's, from SO_PEERPIDFD): no window in which pid could name another
 * process.  pidfd is duplicated, not taken. */
int target_open_pidfd(pid_t pid, int pidfd, struct target_identity *ret_id);
void target_close(struct target_identity *id);
/* Waits up to timeout_ms for the process of pidfd to exit: 1 while it
 * lives (zombies count as gone), 0 once gone or for pidfd -1. */
int target_pidfd_wait(int pidfd, int timeout_ms);
/* 1 while the pinned process lives (zombies count as gone), 0 once gone. */
int target_alive(const struct target_identity *id);
/* target_alive() for a driver call that has just failed.  A process's exit
 * first releases its memory and files, then makes the pidfd readable; the
 * driver fails in between.  When the process's main thread has begun to
 * exit, waits up to exit_wait_ms for the exit to end.  Worker threads only. */
int target_alive_settled(const struct target_identity *id, uint64_t exit_wait_ms);
/* Whether every thread of the pinned process is stopped, which makes the
 * driver's calls on it (all but GetRestoreThreadId) wait until it runs
 * again: TARGET_STOPPED_TRACED when one of them is in a tracing stop (a
 * debugger, CRIU's seize), TARGET_STOPPED_SIGNAL for a job-control stop
 * (SIGSTOP, SIGTSTP), 0 when a thread runs or can run, -ESRCH once the
 * process has gone.  One read of its pinned stat file when the main thread
 * is not stopped, which is nearly always; every thread's stat file
 * otherwise. */
#define TARGET_STOPPED_SIGNAL 1
#define TARGET_STOPPED_TRACED 2
int target_stopped(const struct target_identity *id);
/* target_stopped() for the first driver call of an operation whose pin
 * has just refreshed the target: a state of that read (microseconds old)
 * that says the main thread runs or sleeps answers 0 without reading
 * again; any other, or none, reads as target_stopped() does.  The letter
 * is used once. */
int target_stopped_after_refresh(struct target_identity *id);
/* The protocol's word for a TARGET_STOPPED_* value: "traced" or "signal". */
const char *target_stop_name(int stopped);
/* Re-reads the pinned process's user ids and its main thread's state;
 * -ESRCH once it has gone.  On Linux 6.13 and later one ioctl of the pidfd
 * and one read of the stat file (about 3 µs on the H200 VM, against 7 µs
 * for one read of the status file, which older kernels need). */
int target_refresh(struct target_identity *id);
/* For the tests: false makes target_refresh() read the status file, as on
 * kernels without PIDFD_GET_INFO; true tries the ioctl again. */
void target_use_pidfd_info(bool on);
/* The process's resident memory (VmRSS of its pinned status file: exact,
 * where the stat file's is summed lazily), in bytes: it grows as a
 * checkpoint writes GPU memory into the process. */
int target_rss(const struct target_identity *id, uint64_t *ret_bytes);
/* Parses field 22 of a /proc/PID/stat line; exposed for the unit tests. */
int target_parse_start_time(const char *stat_line, uint64_t *ret_start_time, char *ret_state);
/* The start time and state letter (ret_state may be NULL) of whatever
 * process pid names now, from /proc/PID/stat, unpinned: for callers that
 * check the start time against one they know.  -ESRCH when none. */
int target_read_stat(pid_t pid, uint64_t *ret_start_time, char *ret_state);
/* Parses field 9, the kernel's flags of the task. */
int target_parse_flags(const char *stat_line, uint64_t *ret_flags);
/* Parses the real, effective and saved uid from /proc/PID/status text. */
int target_parse_uids(const char *status_text, uid_t *ret_ruid, uid_t *ret_euid, uid_t *ret_suid);
int target_parse_tgid(const char *status_text, pid_t *ret_tgid);

#endif
