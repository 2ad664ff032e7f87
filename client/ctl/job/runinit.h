/* runinit.h: the init of a job's pid namespace (cudackptctl run), and the
 * loop it shares with the run command: forward the job's signals to one
 * child, reap, end with that child's status. */
#ifndef CUDACKPT_CTL_RUNINIT_H
#define CUDACKPT_CTL_RUNINIT_H

#include <signal.h>
#include <sys/types.h>

/* What the job's init tells the run command on its report pipe (one write
 * each): a step that failed, with its errno. */
typedef enum ctl_run_stage {
        CTL_RUN_READY = 0,        /* init made (session, cgroup), waiting for its name */
        CTL_RUN_SETUP,            /* ... could not be made */
        CTL_RUN_DROP,             /* the user could not be taken on */
        CTL_RUN_EXEC,             /* the command could not be started */
        CTL_RUN_CHDIR,            /* ... as the user: its directory not entered (runuser.h) */
        CTL_RUN_OUTPUT,           /* ... its output not opened */
        CTL_RUN_ENV,              /* ... its environment not read */
} ctl_run_stage;

typedef struct ctl_run_report {
        int stage;
        int err;
} ctl_run_report;

/* One report on fd (a pipe: one write). */
void ctl_run_report_send(int fd, ctl_run_stage stage, int err);

/* The user a job's command runs as. */
typedef struct ctl_run_ids {
        uid_t uid;
        gid_t gid;
        const gid_t *groups;      /* supplementary */
        size_t n_groups;
} ctl_run_ids;

/* This process (and what it starts from now on) in a new, empty session
 * keyring of its own: the one it had survives setuid() and exec, and
 * whoever possesses it may read the keys in it (root's, for a job).  0,
 * or -errno (not where the kernel has no keys, or keyctl is forbidden to
 * this process and so to its children). */
int ctl_run_new_keyring(void);

/* The signals forwarded (SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1,
 * SIGUSR2, SIGWINCH), and SIGCHLD: block them all before the child exists. */
void ctl_run_signals(sigset_t *set);
/* With ctl_run_signals() blocked: forwards each of them to child, reaps
 * every child that ends (reap_all: any, as an init must; else child only),
 * until child has ended; its wait status. */
int ctl_run_supervise(pid_t child, int reap_all);
/* The same, and kill_sig (blocked too, before the child exists) ends the
 * child: SIGKILL to it, then reaped as above (its status then says
 * SIGKILL).  --die-with-parent's (runparent.h). */
int ctl_run_supervise_or_kill(pid_t child, int reap_all, int kill_sig);
struct ctl_run_user;

/* pid 1 of the job's namespace, as root, signals blocked as above:
 * starts argv (found on PATH) as its child, which gets this process's
 * descriptors and an empty signal mask, and with ids (NULL: stays root)
 * takes on that user for good (setgroups, setgid, setuid: no capability
 * left; no_new_privs; a session keyring of its own) first, then what user
 * (NULL: nothing) gives it as that user (runuser.h); a failure is
 * reported on report_fd (close-on-exec), CTL_RUN_DROP, a stage of
 * runuser.h's or CTL_RUN_EXEC.  Then holds nothing but
 * /dev/null, and exits with the child's status (128+N when signal N ended
 * it), which ends every process of the namespace.  It stays root itself:
 * CRIU, restoring a namespace whose /proc was not its own (a job started
 * before run made a mount namespace, runmntns.h), has the init mount one,
 * which needs that privilege. */
_Noreturn void ctl_run_init(char *const *argv, int report_fd, const ctl_run_ids *ids,
                            const struct ctl_run_user *user);

#endif
