/* runargs.c: the command line of cudackptctl run (runargs.h). */
#include "runargs.h"

#include "args.h"
#include "exitcode.h"
#include "runenv.h"
#include "runinherit.h"
#include "runcgroup.h"
#include "runready.h"

#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>



static void run_help(void) {
        printf("Usage: cudackptctl run [--name=N] [--user=U[:G]] [--output=FILE]\n"
               "                       [--cgroup-parent=DIR | --no-cgroup] [--env-fd=FD] [--chdir=DIR]\n"
               "                       [--output-as-user=PATH] [--cgroups-of=PIDFD] [--limits-of=PIDFD]\n"
               "                       [--ready-fd=FD] [--die-with-parent] -- COMMAND [ARG...]\n"
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
               "  --limits-of=PIDFD     the job gets that process's resource limits and umask\n"
               "  --ready-fd=FD         once the job runs: {\"name\",\"pid\",\"start_time\"} of its\n"
               "                        init, one JSON line, written to FD, then closed\n"
               "  --die-with-parent     when the process that started run ends, or sends\n"
               "                        SIGRTMIN+2, the job is killed (exit status 137)\n");
}

#define run_usage(...)                                                                                \
        ctl_usage_fail(CUDACKPT_EXIT_USAGE, "cudackptctl run",                                          \
                       "\nTry 'cudackptctl run --help' for more information.\n", __VA_ARGS__)

/* --user's U (a name or a uid) and G (a name or a gid; default U's group). */
static int run_user(ctl_run_args *a, const char *spec) {
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
       R_OUTPUT_AS_USER, R_CGROUPS_OF, R_READY_FD, R_DIE_WITH_PARENT, R_LIMITS_OF };

static const struct option run_options[] = {
        { "name", required_argument, NULL, R_NAME },       { "user", required_argument, NULL, R_USER },
        { "output", required_argument, NULL, R_OUTPUT },
        { "cgroup-parent", required_argument, NULL, R_CGROUP_PARENT },
        { "no-cgroup", no_argument, NULL, R_NO_CGROUP },  { "list", no_argument, NULL, R_LIST },
        { "json", no_argument, NULL, R_JSON },            { "help", no_argument, NULL, 'h' },
        { "env-fd", required_argument, NULL, R_ENV_FD },   { "chdir", required_argument, NULL, R_CHDIR },
        { "output-as-user", required_argument, NULL, R_OUTPUT_AS_USER },
        { "cgroups-of", required_argument, NULL, R_CGROUPS_OF },
        { "limits-of", required_argument, NULL, R_LIMITS_OF },
        { "ready-fd", required_argument, NULL, R_READY_FD },
        { "die-with-parent", no_argument, NULL, R_DIE_WITH_PARENT },
        { NULL, 0, NULL, 0 },
};

/* One of cudackptd's options (the help's second part); -1 to go on, else
 * the exit status. */
static int run_option_daemon(ctl_run_args *a, int c, char **argv) {
        int *fd = c == R_ENV_FD     ? &a->env_fd
                  : c == R_READY_FD ? &a->ready_fd
                  : c == R_LIMITS_OF ? &a->limits_of
                                     : &a->cgroups_of;

        switch (c) {
        case R_ENV_FD:
        case R_READY_FD:
        case R_CGROUPS_OF:
        case R_LIMITS_OF:
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
static int run_option(ctl_run_args *a, int c, char **argv) {
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

int ctl_run_parse(int argc, char **argv, ctl_run_args *a) {
        int c, r, n_positional = 0;

        *a = (ctl_run_args) { .env_fd = -1, .ready_fd = -1, .cgroups_of = -1, .limits_of = -1 };
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
                                       a->cgroups_of >= 0 || a->limits_of >= 0 || a->chdir || a->output_as_user ||
                                       a->die_with_parent
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
                fprintf(stderr, CTL_RUN_PREFIX "cudackpt-init is neither beside cudackptctl nor at %s\n",
                        CUDACKPT_INIT_INSTALLED);
                return CTL_RUN_EXIT_FAILED;
        }
        return -1;
}

char *ctl_run_user_spec(const ctl_run_args *a) {
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
