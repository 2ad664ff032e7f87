/* bench_syscall.h: what the daemon costs processes it does not serve, the
 * "syscall" part of cudackpt-bench-sim.
 *
 * Times a trivial system call (getppid, through syscall(2) so no library
 * cache answers it) in this process, in blocks of many calls, under three
 * conditions taken in turn in every round: no daemon running; the daemon
 * running with its default settings (its process index on fentry where the
 * kernel has BPF trampolines, else no index and /proc scans); and the daemon
 * running with process_index_tracepoint, which on a kernel without BPF
 * trampolines attaches the sys_enter_mmap tracepoint, run by every system
 * call of every process on the node.  Each daemon is started for its block
 * and stopped after it, once it has said how it sees mmaps (its log), so
 * that nothing of one condition stays for the next.  Reports the median and
 * the best block of each condition in ns per call, the difference from no
 * daemon, and how each daemon's index saw mmaps; timing never fails it, a
 * daemon that does not start or say so does. */
#ifndef CUDACKPT_BENCH_SYSCALL_H
#define CUDACKPT_BENCH_SYSCALL_H

typedef struct bench_syscall_cfg {
        const char *daemon_path;
        const char *sim_path;   /* the driver the daemons load (its file is what the index follows) */
        const char *workdir;    /* the daemons' socket, log and configuration go here */
        long calls;             /* calls per block */
        long rounds;            /* blocks of each condition */
} bench_syscall_cfg;

/* Runs the rounds and prints the report and RESULT lines; 0, or -EIO when a
 * daemon did not start or did not say how its index sees mmaps. */
int bench_syscall_run(const bench_syscall_cfg *cfg);

#endif
