/* runargs.h: the command line of cudackptctl run (runargs.c), parsed
 * for run.c, and the user it names as cudackpt-init takes it. */
#ifndef CUDACKPT_CTL_RUNARGS_H
#define CUDACKPT_CTL_RUNARGS_H

#include "runreg.h"

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#define CTL_RUN_PREFIX "cudackptctl: run: "
/* The exit status of run's own failures (as env(1) and container
 * runtimes do); the job's own status otherwise. */
#define CTL_RUN_EXIT_FAILED 125

typedef struct ctl_run_args {
        char name[CTL_RUN_NAME_MAX + 1];
        bool drop;                /* --user given */
        uid_t uid;
        gid_t gid;
        char user[256];           /* its passwd name, for its groups; "": none */
        const char *cgroup_parent;
        const char *output;       /* --output, or NULL */
        bool cgroup_given, no_cgroup, list, json;
        int env_fd, ready_fd, cgroups_of; /* --env-fd, --ready-fd, --cgroups-of; -1: none */
        int limits_of;            /* --limits-of; -1: none */
        const char *chdir;        /* --chdir, or NULL */
        const char *output_as_user; /* --output-as-user, or NULL */
        bool die_with_parent;
        char **argv;
        char init[PATH_MAX];      /* cudackpt-init */
} ctl_run_args;

/* argv (whole, "run" first) into *a: -1 to go on, else the exit status
 * (--help's 0, a usage error's, or run's own failure: said). */
int ctl_run_parse(int argc, char **argv, ctl_run_args *a);
/* cudackpt-init's USER: "-", or UID:GID:GROUPS with the user's groups
 * (none for a bare uid), for it to take on.  NULL when out of memory. */
char *ctl_run_user_spec(const ctl_run_args *a);

#endif
