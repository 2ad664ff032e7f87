/* runinit.c: the init of a job that `cudackptctl run` started (runinit.h).
 *
 * Small and plain on purpose, since CRIU dumps and restores it with the
 * job: no thread, no signal handler, no descriptor but /dev/null; it waits
 * in sigwaitinfo() with the signals it forwards blocked (pending signals
 * and the blocked mask are part of what CRIU saves), so a restored init
 * goes on where it was.  As a namespace's init it also reaps the orphans
 * the kernel gives it, and when its child ends it exits with that status,
 * and the kernel ends the rest of the namespace. */
#include "runinit.h"

#include "runuser.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/keyctl.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

void ctl_run_report_send(int fd, ctl_run_stage stage, int err) {
        ctl_run_report rep = { .stage = stage, .err = err };

        (void) !write(fd, &rep, sizeof(rep));
}

static const int run_forwarded[] = { SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGWINCH };

void ctl_run_signals(sigset_t *set) {
        sigemptyset(set);
        for (size_t i = 0; i < sizeof(run_forwarded) / sizeof(run_forwarded[0]); i++)
                sigaddset(set, run_forwarded[i]);
        sigaddset(set, SIGCHLD);
}

/* Every child that has ended reaped (only child unless reap_all); true,
 * with its status, once child has. */
static int run_reap(pid_t child, int reap_all, int *ret_status) {
        int status, done = 0;
        pid_t p;

        while ((p = waitpid(reap_all ? -1 : child, &status, WNOHANG)) > 0 || (p < 0 && errno == EINTR))
                if (p == child) {
                        *ret_status = status;
                        done = 1;
                }
        /* No child left at all (ECHILD): nothing will end it. */
        if (p < 0 && errno == ECHILD && !done) {
                *ret_status = 0;
                done = 1;
        }
        return done;
}

int ctl_run_supervise_or_kill(pid_t child, int reap_all, int kill_sig) {
        sigset_t set;
        int status = 0;

        ctl_run_signals(&set);
        if (kill_sig > 0)
                sigaddset(&set, kill_sig);
        for (;;) {
                int sig;

                if (run_reap(child, reap_all, &status))
                        return status;
                sig = sigwaitinfo(&set, NULL);
                /* EINTR: a stop and continue, or a restore by CRIU. */
                if (sig > 0 && sig != SIGCHLD)
                        (void) kill(child, sig == kill_sig ? SIGKILL : sig);
        }
}

int ctl_run_supervise(pid_t child, int reap_all) {
        return ctl_run_supervise_or_kill(child, reap_all, 0);
}

int ctl_run_new_keyring(void) {
        /* Without keys in the kernel (ENOSYS), or keyctl forbidden (EPERM:
         * a seccomp filter, which every child inherits too), there is no
         * keyring to read. */
        if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL) < 0 && errno != ENOSYS && errno != EPERM)
                return -errno;
        return 0;
}

/* ids taken on for good: 0 or -errno. */
static int run_drop(const ctl_run_ids *ids) {
        if (setgroups(ids->n_groups, ids->groups) < 0 || setgid(ids->gid) < 0 || setuid(ids->uid) < 0 ||
            prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        /* Root's way back must be shut. */
        if (ids->uid != 0 && (setuid(0) == 0 || setgid(0) == 0))
                return -EPERM;
        /* setuid() keeps the session keyring: the user's own instead. */
        return ctl_run_new_keyring();
}

/* The child: the command, as ids, given what user says, with an empty
 * signal mask. */
static _Noreturn void run_exec(char *const *argv, int report_fd, const ctl_run_ids *ids,
                               const ctl_run_user *user) {
        int stage = CTL_RUN_DROP, step = 0;
        sigset_t none;
        int e = ids ? -run_drop(ids) : 0;

        if (e == 0 && user && (e = -ctl_run_user_enter(user, &step)) != 0)
                stage = CTL_RUN_CHDIR + step;
        if (e) {
                ctl_run_report_send(report_fd, (ctl_run_stage) stage, e);
                _exit(125);
        }
        sigemptyset(&none);
        (void) sigprocmask(SIG_SETMASK, &none, NULL);
        execvp(argv[0], argv);
        e = errno;
        ctl_run_report_send(report_fd, CTL_RUN_EXEC, e);
        _exit(e == ENOENT ? 127 : 126);
}

void ctl_run_init(char *const *argv, int report_fd, const ctl_run_ids *ids, const ctl_run_user *user) {
        pid_t child = fork();
        int status, null;

        if (child < 0) {
                ctl_run_report_send(report_fd, CTL_RUN_EXEC, errno);
                _exit(126);
        }
        if (child == 0)
                run_exec(argv, report_fd, ids, user);
        /* Nothing of the caller's held here: CRIU dumps /dev/null only. */
        null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0) {
                (void) dup2(null, STDIN_FILENO);
                (void) dup2(null, STDOUT_FILENO);
                (void) dup2(null, STDERR_FILENO);
        }
        (void) close_range(STDERR_FILENO + 1, ~0U, 0);
        status = ctl_run_supervise(child, 1);
        _exit(WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1);
}
