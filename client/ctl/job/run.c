/* run.c: cudackptctl run (run.h).
 *
 *   cudackptctl run [--name=N] [--user=U[:G]] [--output=FILE] [--cgroup-parent=DIR | --no-cgroup]
 *                   [--env-fd=FD] [--chdir=DIR] [--output-as-user=PATH] [--cgroups-of=PIDFD]
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

#include "args.h"
#include "exitcode.h"
#include "proctree.h"
#include "runcgroup.h"
#include "runenv.h"
#include "runinherit.h"
#include "runinit.h"
#include "runjoin.h"
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

#define RUN_PREFIX "cudackptctl: run: "

typedef struct run_args {
        char name[CTL_RUN_NAME_MAX + 1];
        bool drop;                /* --user given */
        uid_t uid;
        gid_t gid;
        char user[256];           /* its passwd name, for its groups; "": none */
        const char *cgroup_parent;
        const char *output;       /* --output, or NULL */
        bool cgroup_given, no_cgroup, list, json;
        int env_fd, ready_fd, cgroups_of; /* --env-fd, --ready-fd, --cgroups-of; -1: none */
        const char *chdir;        /* --chdir, or NULL */
        const char *output_as_user; /* --output-as-user, or NULL */
        bool die_with_parent;
        char **argv;
        char init[PATH_MAX];      /* cudackpt-init */
} run_args;

static void run_help(void) {
        printf("Usage: cudackptctl run [--name=N] [--user=U[:G]] [--output=FILE]\n"
               "                       [--cgroup-parent=DIR | --no-cgroup] [--env-fd=FD] [--chdir=DIR]\n"
               "                       [--output-as-user=PATH] [--cgroups-of=PIDFD] [--ready-fd=FD]\n"
               "                       [--die-with-parent] -- COMMAND [ARG...]\n"
               "       cudackptctl run --list [--json]\n"
               "\n"
               "Start COMMAND as a job that can be dumped and restored anywhere: in a pid\n"
               "namespace of its own (its init reaps orphans and forwards HUP, INT, QUIT,\n"
               "TERM, USR1, USR2 and WINCH) with a /proc of its own (the node's other\n"
               "mounts, private), in a cgroup of its own (DIR/N, DIR by default\n"
               CTL_RUN_CGROUP_PARENT ", where cgroup v2 can be written), under the name N\n"
               "(default job-PID) that 'cudackptctl dump --run=N' takes.  Root only; --user\n"
               "runs the job as U, with /dev/null as its input, FILE (appended to; in a\n"
               "directory of root's) or /dev/null as its output, and of this environment\n"
               "only " CTL_RUN_ENV_KEPT ".\n"
               "Ends with the job's exit status (125: run itself failed).\n"
               "\n"
               "For cudackptd, which starts a user's job (FD: a descriptor it passes):\n"
               "  --env-fd=FD           with --user: the command's exact environment, NUL-separated\n"
               "                        KEY=VALUE (at most " CTL_RUN_ENV_BOUNDS_TEXT "), used at its exec only\n"
               "  --chdir=DIR           with --user: its working directory, entered as the user\n"
               "  --output-as-user=PATH with --user: its stdout and stderr, opened (appended to,\n"
               "                        made 0644) as the user; not with --output\n"
               "  --cgroups-of=PIDFD    the job joins every cgroup of that process (no cgroup of\n"
               "                        its own); a pidfd of a process that has ended fails\n"
               "  --ready-fd=FD         once the job runs: {\"name\",\"pid\",\"start_time\"} of its\n"
               "                        init, one JSON line, written to FD, then closed\n"
               "  --die-with-parent     when the process that started run ends, or sends\n"
               "                        SIGRTMIN+2, the job is killed (exit status 137)\n");
}

#define run_usage(...)                                                                                \
        ctl_usage_fail(CUDACKPT_EXIT_USAGE, "cudackptctl run",                                          \
                       "\nTry 'cudackptctl run --help' for more information.\n", __VA_ARGS__)

/* --user's U (a name or a uid) and G (a name or a gid; default U's group). */
static int run_user(run_args *a, const char *spec) {
        char u[256], *g;
        unsigned long long v;
        struct passwd *pw;
        struct group *gr;

        if (snprintf(u, sizeof(u), "%s", spec) >= (int) sizeof(u))
                return -EINVAL;
        g = strchr(u, ':');
        if (g)
                *g++ = '\0';
        pw = getpwnam(u);
        if (!pw && ctl_parse_uint(u, 4294967294ULL, &v) == 0)
                pw = getpwuid((uid_t) v);
        if (pw) {
                a->uid = pw->pw_uid;
                a->gid = pw->pw_gid;
                snprintf(a->user, sizeof(a->user), "%s", pw->pw_name);
        } else if (ctl_parse_uint(u, 4294967294ULL, &v) == 0 && g)
                a->uid = (uid_t) v;
        else
                return -ENOENT; /* no such user, or a bare uid with no group */
        if (g) {
                gr = getgrnam(g);
                if (gr)
                        a->gid = gr->gr_gid;
                else if (ctl_parse_uint(g, 4294967294ULL, &v) == 0)
                        a->gid = (gid_t) v;
                else
                        return -ENOENT;
        }
        a->drop = true;
        return 0;
}

enum { R_NAME = 0x100, R_USER, R_OUTPUT, R_CGROUP_PARENT, R_NO_CGROUP, R_LIST, R_JSON, R_ENV_FD, R_CHDIR,
       R_OUTPUT_AS_USER, R_CGROUPS_OF, R_READY_FD, R_DIE_WITH_PARENT };

static const struct option run_options[] = {
        { "name", required_argument, NULL, R_NAME },       { "user", required_argument, NULL, R_USER },
        { "output", required_argument, NULL, R_OUTPUT },
        { "cgroup-parent", required_argument, NULL, R_CGROUP_PARENT },
        { "no-cgroup", no_argument, NULL, R_NO_CGROUP },  { "list", no_argument, NULL, R_LIST },
        { "json", no_argument, NULL, R_JSON },            { "help", no_argument, NULL, 'h' },
        { "env-fd", required_argument, NULL, R_ENV_FD },   { "chdir", required_argument, NULL, R_CHDIR },
        { "output-as-user", required_argument, NULL, R_OUTPUT_AS_USER },
        { "cgroups-of", required_argument, NULL, R_CGROUPS_OF },
        { "ready-fd", required_argument, NULL, R_READY_FD },
        { "die-with-parent", no_argument, NULL, R_DIE_WITH_PARENT },
        { NULL, 0, NULL, 0 },
};

/* One of cudackptd's options (the help's second part); -1 to go on, else
 * the exit status. */
static int run_option_daemon(run_args *a, int c, char **argv) {
        int *fd = c == R_ENV_FD ? &a->env_fd : c == R_READY_FD ? &a->ready_fd : &a->cgroups_of;

        switch (c) {
        case R_ENV_FD:
        case R_READY_FD:
        case R_CGROUPS_OF:
                if (ctl_run_fd_arg(optarg, fd) < 0)
                        return run_usage("invalid %s '%s': an open descriptor above 2", argv[optind - 1], optarg);
                return -1;
        case R_CHDIR:
                a->chdir = optarg;
                return -1;
        case R_OUTPUT_AS_USER:
                if (optarg[0] != '/')
                        return run_usage("--output-as-user needs an absolute path, not '%s'", optarg);
                a->output_as_user = optarg;
                return -1;
        case R_DIE_WITH_PARENT:
                a->die_with_parent = true;
                return -1;
        default:
                return run_usage("unknown option '%s' (the command goes after --)", argv[optind - 1]);
        }
}

/* One option; -1 to go on, else the exit status. */
static int run_option(run_args *a, int c, char **argv) {
        switch (c) {
        case R_NAME:
                if (!ctl_run_name_valid(optarg))
                        return run_usage("invalid --name '%s': 1 to %d of A-Z a-z 0-9 _ . -, not first . or -",
                                         optarg, CTL_RUN_NAME_MAX);
                snprintf(a->name, sizeof(a->name), "%s", optarg);
                return -1;
        case R_USER:
                if (run_user(a, optarg) < 0)
                        return run_usage("invalid --user '%s': a user (name or uid) known here, or UID:GID",
                                         optarg);
                return -1;
        case R_OUTPUT:
                a->output = optarg;
                return -1;
        case R_CGROUP_PARENT:
                a->cgroup_parent = optarg;
                a->cgroup_given = true;
                return -1;
        case R_NO_CGROUP:
        case R_LIST:
        case R_JSON:
                *(c == R_NO_CGROUP ? &a->no_cgroup : c == R_LIST ? &a->list : &a->json) = true;
                return -1;
        case 'h':
                run_help();
                return CUDACKPT_EXIT_OK;
        case ':':
                return run_usage("option '%s' needs an argument", argv[optind - 1]);
        default:
                return run_option_daemon(a, c, argv);
        }
}

#ifndef CUDACKPT_INIT_INSTALLED
#define CUDACKPT_INIT_INSTALLED "/usr/libexec/cudackpt/cudackpt-init"
#endif

/* cudackpt-init: beside this program (a build tree), else where it is
 * installed.  0 or -ENOENT. */
static int run_find_init(char *path, size_t size) {
        char self[PATH_MAX], *slash;
        ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);

        if (k > 0) {
                self[k] = '\0';
                slash = strrchr(self, '/');
                if (slash && (size_t) snprintf(path, size, "%.*s/cudackpt-init", (int) (slash - self), self) < size &&
                    access(path, X_OK) == 0)
                        return 0;
        }
        snprintf(path, size, "%s", CUDACKPT_INIT_INSTALLED);
        return access(path, X_OK) == 0 ? 0 : -ENOENT;
}

static int run_parse(int argc, char **argv, run_args *a) {
        int c, r, n_positional = 0;

        opterr = 0;
        /* "-": the words in order ("run" first); the command after "--". */
        while ((c = getopt_long(argc, argv, "-:h", run_options, NULL)) != -1) {
                if (c == 1 && n_positional++ == 0)
                        continue;
                if (c == 1)
                        return run_usage("unexpected '%s': the command goes after --", optarg);
                r = run_option(a, c, argv);
                if (r >= 0)
                        return r;
        }
        a->argv = argv + optind;
        if (a->list)
                return a->argv[0] || a->name[0] || a->drop || a->output || a->env_fd >= 0 || a->ready_fd >= 0 ||
                                       a->cgroups_of >= 0 || a->chdir || a->output_as_user || a->die_with_parent
                               ? run_usage("--list takes no other option but --json")
                               : -1;
        if (!a->argv[0])
                return run_usage("run needs a command, after --");
        if (a->no_cgroup && a->cgroup_given)
                return run_usage("give --cgroup-parent or --no-cgroup, not both");
        if (a->cgroups_of >= 0 && a->cgroup_given)
                return run_usage("give --cgroup-parent or --cgroups-of, not both");
        a->no_cgroup |= a->cgroups_of >= 0;
        if (!a->drop && (a->env_fd >= 0 || a->chdir || a->output_as_user))
                return run_usage("--env-fd, --chdir and --output-as-user are for a --user job");
        if (a->output && a->output_as_user)
                return run_usage("give --output or --output-as-user, not both");
        if (a->json)
                return run_usage("--json is for --list");
        if (!a->name[0])
                snprintf(a->name, sizeof(a->name), "job-%d", (int) getpid());
        if (run_find_init(a->init, sizeof(a->init)) < 0) {
                fprintf(stderr, RUN_PREFIX "cudackpt-init is neither beside cudackptctl nor at %s\n",
                        CUDACKPT_INIT_INSTALLED);
                return CTL_RUN_EXIT_FAILED;
        }
        return -1;
}

/* The job being started. */
typedef struct run_job {
        const run_args *a;
        int dir_fd;               /* the names' directory */
        int cg_fd;                /* its cgroup, or -1 */
        char cg_path[512];
        int report[2], go[2];     /* init -> run, run -> init */
        char *user;               /* cudackpt-init's USER (run_user_spec()) */
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
                fprintf(stderr, RUN_PREFIX "cannot make the cgroup %s/%s: %s%s\n", parent, j->a->name,
                        r == -ENOTSUP ? "not a cgroup v2 hierarchy" : strerror(-r),
                        r == -EEXIST ? " (a cgroup of that name has processes)" : "");
                return CTL_RUN_EXIT_FAILED;
        }
        fprintf(stderr, RUN_PREFIX "note: no cgroup of its own for job %s (%s: %s); it stays in this command's "
                "cgroups\n", j->a->name, parent, r == -ENOTSUP ? "not on a cgroup v2 hierarchy" : strerror(-r));
        return -1;
}

/* cudackpt-init's USER: "-", or UID:GID:GROUPS with the user's groups
 * (none for a bare uid), for it to take on.  NULL when out of memory. */
static char *run_user_spec(const run_args *a) {
        int n = 64;
        gid_t *g = NULL;
        char *s = NULL;
        size_t len = 0;
        FILE *f;

        if (!a->drop)
                return strdup("-");
        for (;;) {
                gid_t *ng = realloc(g, (size_t) n * sizeof(gid_t));
                int want = n;

                if (!ng)
                        break;
                g = ng;
                if (!a->user[0]) {
                        n = 0;
                        break;
                }
                if (getgrouplist(a->user, a->gid, g, &want) >= 0) {
                        n = want;
                        break;
                }
                n = want > n ? want : 2 * n;
        }
        f = g ? open_memstream(&s, &len) : NULL;
        if (f) {
                fprintf(f, "%u:%u:", (unsigned) a->uid, (unsigned) a->gid);
                for (int i = 0; i < n; i++)
                        fprintf(f, "%s%u", i ? "," : "", (unsigned) g[i]);
                if (fclose(f) != 0) {
                        free(s);
                        s = NULL;
                }
        }
        free(g);
        return s;
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

/* The init forked and ready, its name recorded, let go.  The exit status,
 * or -1 to go on (the job runs). */
static int run_start(run_job *j) {
        static const char *const steps[] = { "", "cannot set up the job's init", "cannot become the user",
                                             "cannot start the command", "cannot enter --chdir's directory as the user",
                                             "cannot open --output-as-user's file as the user",
                                             "cannot read the environment" };
        char err[PATH_MAX + 256];
        ctl_run_report rep = { 0 };
        long limit = 0;
        bool per_uid = false;
        int r;

        if (pipe2(j->report, O_CLOEXEC) < 0 || pipe2(j->go, O_CLOEXEC) < 0) {
                fprintf(stderr, RUN_PREFIX "pipe: %s\n", strerror(errno));
                return CTL_RUN_EXIT_FAILED;
        }
        /* The child alone in the new namespace (as fork(), no stack of its
         * own): not unshare(), after which this process could fork no more
         * once the job's init has ended. */
        j->init = (pid_t) syscall(SYS_clone, CLONE_NEWPID | CLONE_NEWNS | SIGCHLD, NULL, NULL, NULL, 0);
        if (j->init < 0) {
                fprintf(stderr, RUN_PREFIX "cannot make a pid namespace: %s\n", strerror(errno));
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
                fprintf(stderr, RUN_PREFIX "%s\n", err);
                r = -EPERM;
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
        if (r == -EPERM)
                ; /* said */
        else if (r == -EEXIST)
                fprintf(stderr, RUN_PREFIX "the name %s is a running job's\n", j->a->name);
        else if (r == -EUSERS)
                fprintf(stderr, RUN_PREFIX "%ld jobs have a name already%s (the bound, $%s)\n", limit,
                        per_uid ? " for this user" : "", per_uid ? CTL_RUN_MAX_JOBS_PER_UID_ENV : CTL_RUN_MAX_JOBS_ENV);
        else if (r < 0)
                fprintf(stderr, RUN_PREFIX "cannot record the name %s: %s\n", j->a->name, strerror(-r));
        else
                fprintf(stderr, RUN_PREFIX "%s: %s\n", steps[rep.stage >= 1 && rep.stage <= 6 ? rep.stage : 1],
                        strerror(rep.err));
        return rep.stage == CTL_RUN_EXEC ? (rep.err == ENOENT ? 127 : 126) : CTL_RUN_EXIT_FAILED;
}

/* Root, the names' directory, the name free, the cgroup: the exit status,
 * or -1 to go on. */
static int run_prepare(run_job *j) {
        char err[PATH_MAX + 256];
        ctl_run_record old;

        if (geteuid() != 0) {
                fputs(RUN_PREFIX "only root may start a job (a pid namespace needs CAP_SYS_ADMIN); run it as root, "
                      "with --user for the user the job is for\n", stderr);
                return CTL_RUN_EXIT_FAILED;
        }
        if (ctl_run_dir_open(true, &j->dir_fd, err, sizeof(err)) < 0) {
                fprintf(stderr, RUN_PREFIX "the names' directory: %s\n", err);
                return CTL_RUN_EXIT_FAILED;
        }
        if (ctl_run_record_read(j->dir_fd, j->a->name, &old) == 0 && ctl_run_record_live(&old)) {
                fprintf(stderr, RUN_PREFIX "the name %s is a running job's (init pid %d)\n", j->a->name,
                        old.init_pid);
                return CTL_RUN_EXIT_FAILED;
        }
        j->user = run_user_spec(j->a);
        if (!j->user) {
                fputs(RUN_PREFIX "out of memory\n", stderr);
                return CTL_RUN_EXIT_FAILED;
        }
        if (ctl_run_inherit_make(&j->inherit, j->a->drop, j->a->uid, j->a->gid, j->a->user, j->a->output, err,
                                 sizeof(err)) < 0) {
                fprintf(stderr, RUN_PREFIX "%s\n", err);
                return CTL_RUN_EXIT_FAILED;
        }
        if (j->a->env_fd >= 0) {
                j->env_fd = ctl_run_env_read(j->a->env_fd, err, sizeof(err));
                close(j->a->env_fd);
                if (j->env_fd < 0) {
                        fprintf(stderr, RUN_PREFIX "%s\n", err);
                        return CTL_RUN_EXIT_FAILED;
                }
        }
        if (j->a->cgroups_of >= 0 && ctl_run_join_open(j->a->cgroups_of, &j->join, err, sizeof(err)) < 0) {
                fprintf(stderr, RUN_PREFIX "%s\n", err);
                return CTL_RUN_EXIT_FAILED;
        }
        snprintf(j->rec.name, sizeof(j->rec.name), "%s", j->a->name);
        j->rec.uid = j->a->drop ? j->a->uid : getuid();
        j->rec.gid = j->a->drop ? j->a->gid : getgid();
        return run_cgroup(j);
}

/* --ready-fd's line: the job runs under its name. */
static void run_say_ready(const run_args *a, const ctl_run_record *rec) {
        int r = ctl_run_ready_write(a->ready_fd, a->name, rec->init_pid, rec->init_start_time);

        if (r < 0)
                fprintf(stderr, RUN_PREFIX "note: cannot write the ready line on fd %d: %s\n", a->ready_fd,
                        strerror(-r));
}

/* --die-with-parent armed: the exit status, or -1 to go on. */
static int run_arm(const run_args *a) {
        if (!a->die_with_parent || ctl_run_parent_arm() == 0)
                return -1;
        fputs(RUN_PREFIX "--die-with-parent: the process that started run has ended already\n", stderr);
        return CTL_RUN_EXIT_FAILED;
}

static int run_job_main(const run_args *a) {
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
        run_args a = { .env_fd = -1, .ready_fd = -1, .cgroups_of = -1 };
        int status = run_parse(argc, argv, &a), r;

        if (status >= 0)
                return status;
        if (!a.list)
                return run_job_main(&a);
        r = ctl_run_list(stdout, a.json);
        if (r == -EPERM || r == -EACCES)
                fputs(RUN_PREFIX "only root sees the jobs' names (they are root's)\n", stderr);
        else if (r < 0)
                fprintf(stderr, RUN_PREFIX "cannot list the jobs: %s\n", strerror(-r));
        return r < 0 ? CUDACKPT_EXIT_FAILURE : CUDACKPT_EXIT_OK;
}
