/* run.c: cudackptctl run (run.h).
 *
 *   cudackptctl run [--name=N] [--user=U[:G]] [--output=FILE] [--cgroup-parent=DIR | --no-cgroup]
 *                   [--env-fd=FD] [--chdir=DIR] [--output-as-user=PATH] [--cgroups-of=PIDFD]
 *                   [--limits-of=PIDFD]
 *                   [--ready-fd=FD] [--die-with-parent] -- COMMAND [ARG...]
 *   cudackptctl run --list [--json]
 *
 * Root only (a pid namespace needs CAP_SYS_ADMIN): the operator's way to
 * start a job for a user (a scheduler's prolog, a node agent).  In order:
 * the name checked free, the cgroup made, the init cloned into a new pid
 * and mount namespace (pid 1 there: it mounts its /proc, runmntns.h, makes
 * a session, joins the cgroup, reports ready and waits); the name recorded with the init's pid and start time;
 * then the init execs cudackpt-init, which starts COMMAND as the user
 * (setgroups, setgid, setuid: no capability left; no_new_privs) and stays
 * root itself (runinit.h says why).  A --user job gets nothing of this
 * process's but what runinherit.h lists.  This process stays in the
 * foreground: it forwards the job's signals to the init, and ends with the
 * job's status, removing the name and the (empty) cgroup.
 *
 * The second line's options are cudackptd's, which starts a user's job
 * with them: runenv.h, runuser.h, runjoin.h, runready.h, runparent.h. */
#include "run.h"

#include "runargs.h"

#include "args.h"
#include "exitcode.h"
#include "proctree.h"
#include "runcgroup.h"
#include "runenv.h"
#include "runinherit.h"
#include "runinit.h"
#include "runjoin.h"
#include "runlimits.h"
#include "runmntns.h"
#include "runparent.h"
#include "runready.h"
#include "runreg.h"
#include "runuser.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>


/* The job being started. */
typedef struct run_job {
        const ctl_run_args *a;
        int dir_fd;               /* the names' directory */
        int cg_fd;                /* its cgroup, or -1 */
        char cg_path[512];
        int report[2], go[2];     /* init -> run, run -> init */
        char *user;               /* cudackpt-init's USER (ctl_run_user_spec()) */
        ctl_run_inherit inherit;  /* what the job gets of this process */
        int env_fd;               /* --env-fd's environment, checked (runenv.h), or -1 */
        ctl_run_join join;        /* --cgroups-of's cgroups */
        ctl_run_record rec;
        pid_t init;
} run_job;

/* The job's cgroup, unless --no-cgroup; where cgroup v2 cannot be
 * written the job goes without one (said), unless --cgroup-parent asked
 * for one.  The exit status, or -1 to go on. */
static int run_cgroup(run_job *j) {
        const char *parent = j->a->cgroup_parent ? j->a->cgroup_parent : CTL_RUN_CGROUP_PARENT;
        int r;

        if (j->a->no_cgroup)
                return -1;
        r = ctl_run_cgroup_make(parent, j->a->name, &j->cg_fd, j->cg_path, sizeof(j->cg_path));
        if (r == 0)
                return -1;
        j->cg_path[0] = '\0';
        if (r == -EEXIST || j->a->cgroup_given) {
                fprintf(stderr, CTL_RUN_PREFIX "cannot make the cgroup %s/%s: %s%s\n", parent, j->a->name,
                        r == -ENOTSUP ? "not a cgroup v2 hierarchy" : strerror(-r),
                        r == -EEXIST ? " (a cgroup of that name has processes)" : "");
                return CTL_RUN_EXIT_FAILED;
        }
        fprintf(stderr, CTL_RUN_PREFIX "note: no cgroup of its own for job %s (%s: %s); it stays in this command's "
                "cgroups\n", j->a->name, parent, r == -ENOTSUP ? "not on a cgroup v2 hierarchy" : strerror(-r));
        return -1;
}


/* cudackpt-init's options of runuser.h into argv from k; the next k. */
static size_t run_init_user_args(const run_job *j, char **argv, size_t k, char *env_fd) {
        if (j->env_fd >= 0)
                argv[k++] = env_fd;
        if (j->a->chdir && asprintf(&argv[k], CTL_RUN_USER_CHDIR "%s", j->a->chdir) >= 0)
                k++;
        if (j->a->output_as_user && asprintf(&argv[k], CTL_RUN_USER_OUTPUT "%s", j->a->output_as_user) >= 0)
                k++;
        return k;
}

/* cudackpt-init, pid 1 of the namespace: "cudackpt-init FD USER [OPTIONS]
 * -- COMMAND...". */
static _Noreturn void run_exec_init(run_job *j) {
        size_t n = 0, k;
        char fd[16], env_fd[32], **argv, *user = j->user;

        while (j->a->argv[n])
                n++;
        argv = calloc(n + 8, sizeof(char *));
        snprintf(fd, sizeof(fd), "%d", j->report[1]);
        snprintf(env_fd, sizeof(env_fd), CTL_RUN_USER_ENV_FD "%d", j->env_fd);
        errno = ENOMEM;
        if (argv && user && fcntl(j->report[1], F_SETFD, 0) == 0 &&
            (j->env_fd < 0 || fcntl(j->env_fd, F_SETFD, 0) == 0)) {
                argv[0] = (char *) "cudackpt-init";
                argv[1] = fd;
                argv[2] = user;
                k = run_init_user_args(j, argv, 3, env_fd);
                argv[k++] = (char *) "--";
                memcpy(argv + k, j->a->argv, (n + 1) * sizeof(char *));
                errno = ENOMEM;
                if (k == (size_t) (4 + (j->env_fd >= 0) + !!j->a->chdir + !!j->a->output_as_user))
                        execve(j->a->init, argv, j->inherit.env);
        }
        ctl_run_report_send(j->report[1], CTL_RUN_SETUP, errno ? errno : ENOMEM);
        _exit(CTL_RUN_EXIT_FAILED);
}

/* The init (pid 1 of the new namespaces): its /proc, a session, the cgroup, ready;
 * once its name is recorded, cudackpt-init, which starts COMMAND as the
 * user. */
static _Noreturn void run_child(run_job *j) {
        char go = 0;
        int r = 0;

        close(j->report[0]);
        close(j->go[1]);
        /* Its /proc first, and nothing opened before but what is reopened
         * there (runmntns.h). */
        r = ctl_run_mntns_make();
        if (r == 0 && setsid() < 0)
                r = -errno;
        if (r == 0 && j->cg_fd >= 0)
                r = ctl_run_cgroup_join(j->cg_fd);
        if (r == 0)
                r = ctl_run_inherit_apply(&j->inherit);
        if (r == 0)
                ctl_run_mntns_reopen_fds();
        ctl_run_report_send(j->report[1], r < 0 ? CTL_RUN_SETUP : CTL_RUN_READY, -r);
        if (r < 0 || read(j->go[0], &go, 1) != 1 || go != 'g')
                _exit(CTL_RUN_EXIT_FAILED);
        close(j->go[0]);
        run_exec_init(j);
}

/* One report from the init; 0 at EOF (all went well). */
static int run_read_report(run_job *j, ctl_run_report *rep) {
        ssize_t k;

        while ((k = read(j->report[0], rep, sizeof(*rep))) < 0 && errno == EINTR)
                ;
        return k == (ssize_t) sizeof(*rep) ? 1 : 0;
}

/* A start that failed at r (0: the init's report rep said why), said;
 * its exit status. */
static int run_start_failed(const run_job *j, int r, const ctl_run_report *rep, long limit, bool per_uid) {
        static const char *const steps[] = { "", "cannot set up the job's init", "cannot become the user",
                                             "cannot start the command", "cannot enter --chdir's directory as the user",
                                             "cannot open --output-as-user's file as the user",
                                             "cannot read the environment" };

        if (r == -ECANCELED)
                ; /* said */
        else if (r == -EEXIST)
                fprintf(stderr, CTL_RUN_PREFIX "the name %s is a running job's\n", j->a->name);
        else if (r == -EUSERS)
                fprintf(stderr, CTL_RUN_PREFIX "%ld jobs have a name already%s (the bound, $%s)\n", limit,
                        per_uid ? " for this user" : "", per_uid ? CTL_RUN_MAX_JOBS_PER_UID_ENV : CTL_RUN_MAX_JOBS_ENV);
        else if (r < 0)
                fprintf(stderr, CTL_RUN_PREFIX "cannot record the name %s: %s\n", j->a->name, strerror(-r));
        else
                fprintf(stderr, CTL_RUN_PREFIX "%s: %s\n", steps[rep->stage >= 1 && rep->stage <= 6 ? rep->stage : 1],
                        strerror(rep->err));
        return rep->stage == CTL_RUN_EXEC ? (rep->err == ENOENT ? 127 : 126) : CTL_RUN_EXIT_FAILED;
}

/* The init forked and ready, its name recorded, let go.  The exit status,
 * or -1 to go on (the job runs). */
static int run_start(run_job *j) {
        char err[PATH_MAX + 256];
        ctl_run_report rep = { 0 };
        long limit = 0;
        bool per_uid = false;
        int r;

        if (pipe2(j->report, O_CLOEXEC) < 0 || pipe2(j->go, O_CLOEXEC) < 0) {
                fprintf(stderr, CTL_RUN_PREFIX "pipe: %s\n", strerror(errno));
                return CTL_RUN_EXIT_FAILED;
        }
        /* The child alone in the new namespace (as fork(), no stack of its
         * own): not unshare(), after which this process could fork no more
         * once the job's init has ended. */
        j->init = (pid_t) syscall(SYS_clone, CLONE_NEWPID | CLONE_NEWNS | SIGCHLD, NULL, NULL, NULL, 0);
        if (j->init < 0) {
                fprintf(stderr, CTL_RUN_PREFIX "cannot make a pid namespace: %s\n", strerror(errno));
                return CTL_RUN_EXIT_FAILED;
        }
        if (j->init == 0)
                run_child(j);
        close(j->report[1]);
        close(j->go[0]);
        j->report[1] = j->go[0] = -1;
        r = run_read_report(j, &rep) ? 0 : -EIO;
        /* In the caller's cgroups before anything runs as the user. */
        if (r == 0 && rep.stage == CTL_RUN_READY && j->join.n &&
            ctl_run_join_move(&j->join, j->init, err, sizeof(err)) < 0) {
                fprintf(stderr, CTL_RUN_PREFIX "%s\n", err);
                r = -ECANCELED; /* said */
                rep.stage = CTL_RUN_SETUP;
        }
        if (r == 0 && rep.stage == CTL_RUN_READY) {
                j->rec.init_pid = j->init;
                /* Our child, not yet waited for: the pid is surely its. */
                j->rec.init_start_time = ctl_proc_start_time(j->init);
                r = ctl_run_record_add(j->dir_fd, &j->rec, &limit, &per_uid);
                if (r == 0 && write(j->go[1], "g", 1) != 1)
                        r = -errno;
        }
        /* Let go, or (nothing written) told to end: it reads EOF. */
        close(j->go[1]);
        j->go[1] = -1;
        if (r == 0 && rep.stage == CTL_RUN_READY && run_read_report(j, &rep) == 0)
                return -1;
        return run_start_failed(j, r, &rep, limit, per_uid);
}

/* Root, the names' directory, the name free, the cgroup: the exit status,
 * or -1 to go on. */
/* --limits-of: this process takes them (the job's init inherits them). */
static int run_limits(int pidfd, char *err, size_t err_size) {
        ctl_run_limits l;
        int r = ctl_run_limits_read(pidfd, &l, err, err_size);

        return r < 0 ? r : ctl_run_limits_apply(&l, err, err_size);
}

static int run_prepare(run_job *j) {
        char err[PATH_MAX + 256];
        ctl_run_record old;

        if (geteuid() != 0) {
                fputs(CTL_RUN_PREFIX "only root may start a job (a pid namespace needs CAP_SYS_ADMIN); run it as root, "
                      "with --user for the user the job is for\n", stderr);
                return CTL_RUN_EXIT_FAILED;
        }
        if (ctl_run_dir_open(true, &j->dir_fd, err, sizeof(err)) < 0) {
                fprintf(stderr, CTL_RUN_PREFIX "the names' directory: %s\n", err);
                return CTL_RUN_EXIT_FAILED;
        }
        if (ctl_run_record_read(j->dir_fd, j->a->name, &old) == 0 && ctl_run_record_live(&old)) {
                fprintf(stderr, CTL_RUN_PREFIX "the name %s is a running job's (init pid %d)\n", j->a->name,
                        old.init_pid);
                return CTL_RUN_EXIT_FAILED;
        }
        j->user = ctl_run_user_spec(j->a);
        if (!j->user) {
                fputs(CTL_RUN_PREFIX "out of memory\n", stderr);
                return CTL_RUN_EXIT_FAILED;
        }
        if (ctl_run_inherit_make(&j->inherit, j->a->drop, j->a->uid, j->a->gid, j->a->user, j->a->output, err,
                                 sizeof(err)) < 0) {
                fprintf(stderr, CTL_RUN_PREFIX "%s\n", err);
                return CTL_RUN_EXIT_FAILED;
        }
        if (j->a->env_fd >= 0) {
                j->env_fd = ctl_run_env_read(j->a->env_fd, err, sizeof(err));
                close(j->a->env_fd);
                if (j->env_fd < 0) {
                        fprintf(stderr, CTL_RUN_PREFIX "%s\n", err);
                        return CTL_RUN_EXIT_FAILED;
                }
        }
        if (j->a->cgroups_of >= 0 && ctl_run_join_open(j->a->cgroups_of, &j->join, err, sizeof(err)) < 0) {
                fprintf(stderr, CTL_RUN_PREFIX "%s\n", err);
                return CTL_RUN_EXIT_FAILED;
        }
        if (j->a->limits_of >= 0 && run_limits(j->a->limits_of, err, sizeof(err)) < 0) {
                fprintf(stderr, CTL_RUN_PREFIX "%s\n", err);
                return CTL_RUN_EXIT_FAILED;
        }
        snprintf(j->rec.name, sizeof(j->rec.name), "%s", j->a->name);
        j->rec.uid = j->a->drop ? j->a->uid : getuid();
        j->rec.gid = j->a->drop ? j->a->gid : getgid();
        return run_cgroup(j);
}

/* --ready-fd's line: the job runs under its name. */
static void run_say_ready(const ctl_run_args *a, const ctl_run_record *rec) {
        int r = ctl_run_ready_write(a->ready_fd, a->name, rec->init_pid, rec->init_start_time);

        if (r < 0)
                fprintf(stderr, CTL_RUN_PREFIX "note: cannot write the ready line on fd %d: %s\n", a->ready_fd,
                        strerror(-r));
}

/* --die-with-parent armed: the exit status, or -1 to go on. */
static int run_arm(const ctl_run_args *a) {
        if (!a->die_with_parent || ctl_run_parent_arm() == 0)
                return -1;
        fputs(CTL_RUN_PREFIX "--die-with-parent: the process that started run has ended already\n", stderr);
        return CTL_RUN_EXIT_FAILED;
}

static int run_job_main(const ctl_run_args *a) {
        run_job j = { .a = a, .dir_fd = -1, .cg_fd = -1, .report = { -1, -1 }, .go = { -1, -1 }, .init = -1,
                      .inherit = { .out_fd = -1 }, .env_fd = -1 };
        sigset_t set;
        int status = run_arm(a), ws;

        if (status < 0)
                status = run_prepare(&j);
        /* Blocked before the init exists: it inherits them blocked, and
         * this process forwards them to it. */
        ctl_run_signals(&set);
        (void) sigprocmask(SIG_BLOCK, &set, NULL);
        snprintf(j.rec.cgroup, sizeof(j.rec.cgroup), "%s", j.cg_path);
        if (status < 0)
                status = run_start(&j);
        if (status < 0 && a->ready_fd >= 0)
                run_say_ready(a, &j.rec);
        if (j.init > 0) {
                ws = ctl_run_supervise_or_kill(j.init, 0, a->die_with_parent ? CTL_RUN_PARENT_SIGNAL : 0);
                if (status < 0)
                        status = WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : 1;
                if (j.rec.init_start_time)
                        ctl_run_record_remove(j.dir_fd, &j.rec);
        }
        for (int i = 0; i < 2; i++) {
                if (j.report[i] >= 0)
                        close(j.report[i]);
                if (j.go[i] >= 0)
                        close(j.go[i]);
        }
        if (j.cg_fd >= 0)
                close(j.cg_fd);
        if (j.env_fd >= 0)
                close(j.env_fd);
        ctl_run_join_close(&j.join);
        ctl_run_cgroup_remove(j.cg_path);
        if (j.dir_fd >= 0)
                close(j.dir_fd);
        free(j.user);
        ctl_run_inherit_free(&j.inherit);
        return status;
}

int ctl_run_main(int argc, char **argv) {
        ctl_run_args a;
        int status = ctl_run_parse(argc, argv, &a), r;

        if (status >= 0)
                return status;
        if (!a.list)
                return run_job_main(&a);
        r = ctl_run_list(stdout, a.json);
        if (r == -EPERM || r == -EACCES)
                fputs(CTL_RUN_PREFIX "only root sees the jobs' names (they are root's)\n", stderr);
        else if (r < 0)
                fprintf(stderr, CTL_RUN_PREFIX "cannot list the jobs: %s\n", strerror(-r));
        return r < 0 ? CUDACKPT_EXIT_FAILURE : CUDACKPT_EXIT_OK;
}
