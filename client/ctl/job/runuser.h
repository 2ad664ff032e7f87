/* runuser.h: what a job's command is given as its user, in the child of
 * cudackpt-init, after it took on the user for good and before its exec
 * (runuser.c): its working directory, its output and its environment.
 *
 * Done as the user, not as root: the kernel checks the user's own rights
 * to the directory and the output file, so root enters or opens nothing
 * on the user's behalf that the user could not.  The environment is the
 * command's alone: cudackpt-init and the run command never use it. */
#ifndef CUDACKPT_CTL_RUNUSER_H
#define CUDACKPT_CTL_RUNUSER_H

/* cudackpt-init's options for them (runinitmain.c), before its "--". */
#define CTL_RUN_USER_ENV_FD "--env-fd="
#define CTL_RUN_USER_CHDIR "--chdir="
#define CTL_RUN_USER_OUTPUT "--output="

typedef struct ctl_run_user {
        int env_fd;               /* a sealed memfd of NUL-terminated KEY=VALUE (runenv.h); -1: the init's own */
        const char *chdir;        /* the working directory; NULL: the init's */
        const char *output;       /* stdout and stderr (appended to, made 0666 under umask 022); NULL: as they are */
} ctl_run_user;

/* In the command's process, as the user: u applied, in the order above
 * (the environment last: it becomes environ, for the exec to search its
 * PATH).  0, or -errno with the step that failed in *ret_step (0 the
 * directory, 1 the output, 2 the environment: runinit.h's CTL_RUN_CHDIR
 * and those after it). */
int ctl_run_user_enter(const ctl_run_user *u, int *ret_step);

#endif
