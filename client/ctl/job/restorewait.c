/* restorewait.c: restore's options for cudackptd (restorewait.h). */
#include "restorewait.h"

#include "exitcode.h"
#include "proctree.h"
#include "runinit.h"
#include "runjoin.h"
#include "runparent.h"
#include "runready.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

int ctl_restore_daemon_check(const ctl_job_args *a, const ctl_manifest *m) {
        ctl_run_record rec;
        bool run_job = m->run && m->n_trees == 1 && m->trees[0].pid_ns && ctl_run_record_from_json(m->run, &rec) == 0;

        if ((a->owner_given || a->wait) && !run_job) {
                fprintf(stderr, "%sthe images are not of one job of cudackptctl run (one tree in a pid namespace of "
                        "its own, dumped with --run), which %s is for; nothing was restored\n", a->prefix,
                        a->owner_given ? "--owner" : "--wait");
                return a->owner_given ? CUDACKPT_EXIT_PERMISSION_DENIED : CUDACKPT_EXIT_FAILURE;
        }
        if (a->owner_given && rec.uid != a->owner) {
                fprintf(stderr, "%sthe job %s did not run as uid %u (--owner); nothing was restored\n", a->prefix,
                        rec.name, (unsigned) a->owner);
                return CUDACKPT_EXIT_PERMISSION_DENIED;
        }
        return CUDACKPT_EXIT_OK;
}

int ctl_restore_daemon_arm(const ctl_job_args *a) {
        char err[PATH_MAX + 256];
        ctl_run_join join;
        int r = 0;

        if (a->die_with_parent && ctl_run_parent_arm() < 0) {
                fprintf(stderr, "%s--die-with-parent: the process that started restore has ended already; nothing "
                        "was restored\n", a->prefix);
                return CUDACKPT_EXIT_FAILURE;
        }
        if (a->wait && prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
                fprintf(stderr, "%s--wait: PR_SET_CHILD_SUBREAPER: %s; nothing was restored\n", a->prefix,
                        strerror(errno));
                return CUDACKPT_EXIT_FAILURE;
        }
        if (a->cgroups_of < 0)
                return CUDACKPT_EXIT_OK;
        r = ctl_run_join_open(a->cgroups_of, &join, err, sizeof(err));
        if (r == 0)
                r = ctl_run_join_move(&join, getpid(), err, sizeof(err));
        ctl_run_join_close(&join);
        if (r < 0) {
                fprintf(stderr, "%s%s; nothing was restored\n", a->prefix, err);
                return CUDACKPT_EXIT_FAILURE;
        }
        return CUDACKPT_EXIT_OK;
}

const char *ctl_restore_daemon_criu_word(const ctl_job_args *a) {
        return a->cgroups_of >= 0 ? "--manage-cgroups=ignore" : NULL;
}

/* --wait: the job (rec's init, this process's child now) to its end; its
 * exit status. */
static int restore_wait(const ctl_job_args *a, const ctl_run_record *rec, int signal) {
        char err[PATH_MAX + 256];
        int ws, fd = -1;

        if (signal)
                (void) kill(rec->init_pid, signal);
        ws = ctl_run_supervise_or_kill(rec->init_pid, 1, a->die_with_parent ? CTL_RUN_PARENT_SIGNAL : 0);
        if (ctl_run_dir_open(false, &fd, err, sizeof(err)) == 0) {
                ctl_run_record_remove(fd, rec);
                close(fd);
        }
        return WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : 1;
}

int ctl_restore_daemon_after(const ctl_job_args *a, const ctl_pins *pins, int r, const ctl_run_record *rec,
                             int signal) {
        int ppid = 0;

        if (!a->wait && a->ready_fd < 0)
                return CUDACKPT_EXIT_OK;
        /* The job is known by its name (and, waited for, is this process's child). */
        if (r == 0 && a->wait && (ctl_proc_stat(rec->init_pid, &ppid, NULL) < 0 || ppid != getpid()))
                r = -ECHILD;
        if (r < 0) {
                (void) ctl_pins_signal(pins, SIGKILL);
                fprintf(stderr, "%s%s: the restored job was ended (the images are whole: restore them again)\n",
                        a->prefix, r == -ECHILD ? "--wait: the restored job's init is not this command's child"
                                                : "the job did not get its name back");
                return CUDACKPT_EXIT_FAILURE;
        }
        if (a->ready_fd >= 0) {
                r = ctl_run_ready_write(a->ready_fd, rec->name, rec->init_pid, rec->init_start_time);
                if (r < 0)
                        fprintf(stderr, "%snote: cannot write the ready line: %s\n", a->prefix, strerror(-r));
        }
        return a->wait ? restore_wait(a, rec, signal) : CUDACKPT_EXIT_OK;
}
