/* criu.h: CRIU found and run, several trees at once through the barrier
 * (criubarrier.c); its signals held meanwhile, its logs shown. */
#ifndef CUDACKPT_CTL_CRIU_H
#define CUDACKPT_CTL_CRIU_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

/* One criu run among several started together. */
typedef struct ctl_criu_run {
        char **argv;              /* criu's, NULL-terminated; argv[0] the path */
        int dir_fd;               /* the tree's image directory, criu's -D /proc/self/fd/N; 0: none */
        const char *log;          /* criu's -o log (its path, for people), shown when it fails */
        const char *log_name;     /* ... its name in dir_fd, where it is read */
        int status;               /* exit status, 128+N for signal N, -1: not run */
        bool early;               /* exited 0 before the barrier let it go: it dumped nothing */
        char *output;             /* its stdout and stderr (up to 64 KiB), to free() */
        double ms;                /* how long it ran, less held_ms */
        double held_ms;           /* how long it waited while the barrier's at_barrier ran (the caller's time) */
        int pid;                  /* the criu process, once started (0: not yet) */
} ctl_criu_run;

/* The criu to run: $CUDACKPT_CRIU, else criu on PATH; its version must be
 * 4 or newer.  On failure, a sentence in err. */
int ctl_criu_find(char *path, size_t size, char *version, size_t version_size, char *err, size_t err_size);

/* The barrier of ctl_criu_run_all(): sock, the socket the runs' action
 * scripts connect to at post-dump or post-restore (ctl_criu_barrier_main);
 * at_barrier, when not NULL, is called once all have connected (every
 * tree held by its criu; criu_pids the parents of the connected scripts,
 * the criu processes that wait, in no particular order), before they are
 * let go: below 0, none is. */
typedef struct ctl_criu_barrier {
        const char *sock;
        int (*at_barrier)(void *data, const int *criu_pids, size_t n);
        void *data;
} ctl_criu_barrier;

/* Runs every run at once with env and waits for all.  With barrier, every
 * run's script is let go once all have connected, and none if a run fails
 * first; a run that exits 0 before they are let go never got there (criu
 * -V, --help, ...): it failed (early set).  Returns 0 when all exited 0
 * (through the barrier), -EIO when any failed, -errno when some could not
 * be started (those have status -1). */
int ctl_criu_run_all(ctl_criu_run *runs, size_t n, char **env, const ctl_criu_barrier *barrier);
void ctl_criu_run_free(ctl_criu_run *run);
/* Frees runs[0..n) (their argv, log path and output) and runs itself;
 * accepts NULL. */
void ctl_criu_runs_free(ctl_criu_run *runs, size_t n);

/* While criu runs, this process must not die or stop (criu stopped
 * halfway leaves the tasks it froze in no known state; dump's lease and
 * restore's step 2 wait on it): SIGINT, SIGTERM, SIGHUP and SIGQUIT are
 * noted in ctl_criu_signal, SIGTSTP, SIGTTIN and SIGTTOU ignored (not in
 * criu: criu_spawn puts them back).  ctl_criu_signals_restore() undoes it. */
typedef struct ctl_criu_signals {
        struct sigaction old[7];
} ctl_criu_signals;
extern volatile sig_atomic_t ctl_criu_signal;
void ctl_criu_signals_hold(ctl_criu_signals *s);
void ctl_criu_signals_restore(const ctl_criu_signals *s);
/* The signals noted in ctl_criu_signal, into set. */
void ctl_criu_signals_noted(sigset_t *set);


/* environ with PATH replaced by "dir:PATH" (dir NULL: unchanged); to
 * ctl_criu_env_free(). */
char **ctl_criu_env(const char *path_dir);
void ctl_criu_env_free(char **env);

#endif
