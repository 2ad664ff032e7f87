/* job.c: the command line of cudackptctl dump and restore --images.
 *
 *   cudackptctl dump (--tree PID | --pids LIST | --cgroup PATH) --images DIR
 *                    [--leave-running] [--lock-timeout MS] [-- CRIU-OPTIONS...]
 *   cudackptctl restore --images DIR [--device-map OLD=NEW,...] [-- CRIU-OPTIONS...]
 *   cudackptctl verify (--images DIR | --archive FILE|-)
 * dump and restore take --archive FILE|- in place of --images (archivejob.c).
 *
 * They are rows of the verb table (cmdline.c), which hands their command
 * line here whole: "restore PID" stays the driver's single restore, and
 * what follows "--" belongs to criu.  "criu-barrier SOCKET" is the job's
 * own action script for CRIU (criu.c), not for people.
 */
#include "job.h"

#include "archivewrite.h"
#include "archivejob.h"
#include "args.h"
#include "criubarrier.h"
#include "dump.h"
#include "exitcode.h"
#include "jobrestore.h"
#include "jobstep.h"
#include "runready.h"
#include "runreg.h"
#include "selector.h"
#include "verify.h"

#include <cudackpt/protocol.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define JOB_NAME "cudackptctl"

static void job_help(void) {
        printf("Usage: " JOB_NAME " dump (--tree=PID | --pids=LIST | --cgroup=PATH | --run=NAME) --images=DIR\n"
               "                        [--leave-running] [--no-sync] [--lock-timeout=MS] [-- CRIU-OPTIONS...]\n"
               "       " JOB_NAME " restore --images=DIR [--device-map=OLD=NEW[,...]] [--dry-run] [--force]\n"
               "                        [-- CRIU-OPTIONS...]\n"
               "       " JOB_NAME " dump --run=NAME --owner=UID --images=DIR [--leave-running]\n"
               "       " JOB_NAME " restore --images=DIR --owner=UID [--wait [--die-with-parent]]\n"
               "                        [--cgroups-of=PIDFD] [--ready-fd=FD]\n"
               "       " JOB_NAME " verify --images=DIR\n"
               "dump, restore and verify take --archive=FILE|- in place of --images=DIR.\n"
               "\n"
               "dump: suspend the job's CUDA processes as one group (GPU memory free from\n"
               "then on), under a lease held by this command, then have CRIU dump every\n"
               "process tree of the job into DIR (one directory per tree, and manifest.json).\n"
               "If CRIU fails the job is resumed; with --leave-running it is resumed after\n"
               "the dump, otherwise it is ended once the images are on stable storage.\n"
               "restore: CRIU restores every tree of DIR with its CUDA plugin standing\n"
               "aside, then every process's GPU state is restored at once (none running\n"
               "before all are restored).  DIR and every directory above it must be\n"
               "root's or yours and writable by no one else (or sticky, as /tmp).\n"
               "The manifest holds a digest of every image file: restore checks them all\n"
               "before it starts criu, verify checks a copy (anyone who may read it).\n"
               "--archive: one zstd-compressed tar stream of the images and the manifest\n"
               "(\"-\": stdout for dump, stdin for restore), made or unpacked in a private\n"
               "directory of --work-dir (default " CTL_ARCHIVE_WORK_DIR "); dump ends the job only once\n"
               "FILE is synced and in place (\"-\": once all of it was written).\n"
               "\n"
               "  --images=DIR              the image directory\n"
               "  --run=NAME                dump: the job cudackptctl run started as NAME\n"
               "  --leave-running           dump: resume the job after a good dump\n"
               "  --no-sync                 dump: do not wait for the images to reach the disk\n"
               "  --lock-timeout=MS         dump: how long to wait for the job's GPU work\n"
               "  --device-map=OLD=NEW,...  restore: restore onto other GPUs (also --map); without\n"
               "                            it, the device plan maps GPUs this node lacks\n"
               "  --dry-run                 restore: print the device plan and its checks, touch nothing\n"
               "  --force                   restore: restore even where the plan's checks fail\n"
               "  --archive=FILE|-          dump, restore, verify: one compressed stream, not DIR\n"
               "  --work-dir=DIR            --archive: where its private directory goes\n"
               "  --archive-max-files=N     restore, verify --archive: at most N image files\n"
               "                            (default " CTL_ARCHIVE_MAX_FILES_TEXT ")\n"
               "  --archive-max-bytes=N     ... of at most N bytes in all (default " CTL_ARCHIVE_MAX_BYTES_TEXT ")\n"
               "  --no-verify               restore --images: do not check the digests (a dump\n"
               "                            older than them has none)\n"
               "  --socket=PATH, --json, --progress, --no-progress: as for the other commands\n"
               "For cudackptd, which dumps and restores a user's job (FD: a descriptor it passes):\n"
               "  --owner=UID               dump --run, restore: refuse (exit status 12), before\n"
               "                            anything is suspended or restored, unless the job's\n"
               "                            run record says it runs as UID\n"
               "  --wait                    restore (a run job): stay the restored job's parent,\n"
               "                            forward its signals, end with its exit status\n"
               "  --die-with-parent         restore --wait: when the process that started restore\n"
               "                            ends, or sends SIGRTMIN+2, the job is killed (137)\n"
               "  --cgroups-of=PIDFD        restore: the job stays in that process's cgroups\n"
               "                            (criu --manage-cgroups=ignore)\n"
               "  --ready-fd=FD             restore: once the job runs again, its init's\n"
               "                            {\"name\",\"pid\",\"start_time\"}, one JSON line, on FD\n"
               "  --barrier-fd=FD           dump, restore: once every criu waits, a ready line on\n"
               "                            FD; go on at 'g', fail at anything else or its end\n"
               "The criu run is $CUDACKPT_CRIU, else criu on PATH (4 or newer); see docs/criu.md.\n");
}

#define job_usage(...)                                                                            \
        ctl_usage_fail(CUDACKPT_EXIT_USAGE, JOB_NAME, "\nTry '" JOB_NAME " dump --help' for more information.\n", \
                       __VA_ARGS__)

/* A selector option of dump. */
static int job_selector(ctl_job_args *a, ctl_selector_kind kind, const char *arg) {
        int r;

        if (a->selector.kind != CTL_SELECT_NONE)
                return job_usage("give one of --pids, --cgroup and --tree, once");
        r = ctl_selector_parse(&a->selector, kind, arg);
        if (r == -ENOMEM)
                return job_usage("out of memory");
        if (r < 0)
                return job_usage("invalid %s '%s'", ctl_selector_option(kind), arg);
        return -1;
}

/* A word criu's getopt_long would take for --action-script, in short:
 * dump gives the user's scripts to criu inside its barrier's script, and
 * one it did not see would run beside it. */
static const char *job_abbreviated_action_script(char **criu_argv) {
        static const char full[] = "--action-script";

        for (size_t i = 0; criu_argv[i]; i++) {
                const char *a = criu_argv[i], *eq = strchr(a, '=');
                size_t len = eq ? (size_t) (eq - a) : strlen(a);

                if (len > 2 && len < sizeof(full) - 1 && strncmp(a, full, len) == 0)
                        return a;
        }
        return NULL;
}

/* dump --run N: the job's init, as --tree; -1 to go on, else the exit status. */
static int job_run_name(ctl_job_args *a, const char *command) {
        char err[PATH_MAX + 256];

        if (!a->run_name)
                return -1;
        if (strcmp(command, "dump") != 0 || a->selector.kind != CTL_SELECT_NONE)
                return job_usage("--run is for dump, in place of --tree, --pids and --cgroup");
        if (ctl_run_resolve(a->run_name, &a->run, err, sizeof(err)) < 0) {
                fprintf(stderr, JOB_NAME ": dump: %s; nothing was suspended\n", err);
                return CUDACKPT_EXIT_FAILURE;
        }
        if (a->owner_given && a->run.uid != a->owner) {
                fprintf(stderr, JOB_NAME ": dump: the job %s does not run as uid %u (--owner); nothing was "
                        "suspended\n", a->run_name, (unsigned) a->owner);
                return CUDACKPT_EXIT_PERMISSION_DENIED;
        }
        snprintf(a->run_tree, sizeof(a->run_tree), "%d", a->run.init_pid);
        return ctl_selector_parse(&a->selector, CTL_SELECT_TREE, a->run_tree) < 0 ? job_usage("out of memory") : -1;
}

/* The checks of cudackptd's options (a->dump set); -1 to go on. */
static int job_check_daemon(const ctl_job_args *a) {
        bool restore_only = a->wait || a->ready_fd >= 0 || a->cgroups_of >= 0 || a->die_with_parent;

        if (a->verify && (a->owner_given || restore_only || a->barrier_fd >= 0))
                return job_usage("verify takes --images or --archive, and --json");
        if (a->dry_run && a->barrier_fd >= 0)
                return job_usage("--dry-run restores nothing: it takes no --barrier-fd");
        if (a->dump && a->owner_given && !a->run_name)
                return job_usage("dump --owner is for --run");
        if (a->dump && restore_only)
                return job_usage("--wait, --ready-fd, --cgroups-of and --die-with-parent are for restore");
        if (a->die_with_parent && !a->wait)
                return job_usage("--die-with-parent is for restore --wait");
        if (!a->dump && a->dry_run && (a->owner_given || restore_only))
                return job_usage("--dry-run restores nothing: it takes no --owner, --wait, --ready-fd or --cgroups-of");
        return -1;
}

/* The positional words and the checks between options; -1 to go on. */
static int job_check(ctl_job_args *a, const char *command, int n_positional, int progress, bool saw_lock_timeout) {
        int r;

        if (n_positional != 1)
                return job_usage("%s takes no argument but its options (CRIU's go after --)", command);
        a->dump = strcmp(command, "dump") == 0;
        a->verify = strcmp(command, "verify") == 0;
        if ((!a->images || !*a->images) == (!a->archive || !*a->archive))
                return job_usage("%s needs --images=DIR or --archive=FILE|-, one of them", command);
        if (a->verify && (a->selector.kind != CTL_SELECT_NONE || a->leave_running || a->no_sync ||
                          saw_lock_timeout || a->map.items || a->force || a->dry_run || a->no_verify || *a->criu_argv))
                return job_usage("verify takes --images or --archive, and --json");
        if ((a->no_verify && (a->dump || a->archive)) || (a->work_dir && !a->archive))
                return job_usage("--no-verify is for restore --images, --work-dir for --archive");
        if ((a->dump || !a->archive) &&
            (a->archive_max_files != CTL_ARCHIVE_MAX_FILES || a->archive_max_bytes != CTL_ARCHIVE_MAX_BYTES))
                return job_usage("--archive-max-files and --archive-max-bytes are for restore and verify --archive");
        r = job_check_daemon(a);
        if (r < 0)
                r = job_run_name(a, command);
        if (r >= 0)
                return r;
        if (a->dump && a->selector.kind == CTL_SELECT_NONE)
                return job_usage("dump needs --tree=PID, --pids=LIST, --cgroup=PATH or --run=NAME");
        if (!a->dump && a->selector.kind != CTL_SELECT_NONE)
                return job_usage("restore --images takes no selector: the manifest names the processes");
        if (!a->dump && (a->leave_running || a->no_sync || saw_lock_timeout))
                return job_usage("--leave-running, --no-sync and --lock-timeout are for dump");
        if (a->dump && (a->map.items || a->force || a->dry_run))
                return job_usage("--device-map, --dry-run and --force are for restore");
        if (job_abbreviated_action_script(a->criu_argv))
                return job_usage("give criu's --action-script in full, not as '%s' (%s runs the job's scripts "
                                 "inside its own)", job_abbreviated_action_script(a->criu_argv), command);
        a->progress_tty = isatty(STDERR_FILENO);
        a->progress = progress < 0 ? a->progress_tty : progress > 0;
        if (asprintf(&a->prefix, JOB_NAME ": %s: ", command) < 0)
                a->prefix = NULL;
        return a->prefix ? -1 : job_usage("out of memory");
}

enum { O_SOCKET = 0x100, O_JSON, O_LOCK_TIMEOUT, O_PIDS, O_CGROUP, O_TREE, O_IMAGES, O_LEAVE, O_MAP,
       O_PROGRESS, O_NO_PROGRESS, O_NO_SYNC, O_FORCE, O_DRY_RUN, O_RUN,
       O_ARCHIVE, O_WORK_DIR, O_MAX_FILES, O_MAX_BYTES, O_NO_VERIFY, O_OWNER, O_WAIT, O_READY_FD, O_CGROUPS_OF, O_BARRIER_FD,
       O_DIE_WITH_PARENT };

const struct option ctl_job_options[] = {
        { "socket", required_argument, NULL, O_SOCKET },     { "json", no_argument, NULL, O_JSON },
        { "lock-timeout", required_argument, NULL, O_LOCK_TIMEOUT },
        { "pids", required_argument, NULL, O_PIDS },         { "cgroup", required_argument, NULL, O_CGROUP },
        { "tree", required_argument, NULL, O_TREE },         { "images", required_argument, NULL, O_IMAGES },
        { "leave-running", no_argument, NULL, O_LEAVE },     { "device-map", required_argument, NULL, O_MAP },
        { "map", required_argument, NULL, O_MAP },           { "progress", no_argument, NULL, O_PROGRESS },
        { "no-progress", no_argument, NULL, O_NO_PROGRESS }, { "help", no_argument, NULL, 'h' },
        { "no-sync", no_argument, NULL, O_NO_SYNC },
        { "force", no_argument, NULL, O_FORCE },
        { "dry-run", no_argument, NULL, O_DRY_RUN },
        { "run", required_argument, NULL, O_RUN },
        { "archive", required_argument, NULL, O_ARCHIVE },   { "work-dir", required_argument, NULL, O_WORK_DIR },
        { "archive-max-files", required_argument, NULL, O_MAX_FILES },
        { "archive-max-bytes", required_argument, NULL, O_MAX_BYTES },
        { "no-verify", no_argument, NULL, O_NO_VERIFY },
        { "owner", required_argument, NULL, O_OWNER },       { "wait", no_argument, NULL, O_WAIT },
        { "ready-fd", required_argument, NULL, O_READY_FD }, { "cgroups-of", required_argument, NULL, O_CGROUPS_OF },
        { "die-with-parent", no_argument, NULL, O_DIE_WITH_PARENT },
        { "barrier-fd", required_argument, NULL, O_BARRIER_FD },
        { NULL, 0, NULL, 0 },
};

/* What the parse has seen besides *a. */
typedef struct job_state {
        const char *command;
        int n_positional;
        int progress;             /* --progress 1, --no-progress 0, else -1 */
        bool saw_lock_timeout;
} job_state;

/* job_option_images()'s: cudackptd's options (and what no option is); -1
 * to go on, else the exit status. */
static int job_option_daemon(ctl_job_args *a, int c, char **argv) {
        unsigned long long v;

        switch (c) {
        case O_OWNER:
                if (ctl_parse_uint(optarg, 4294967294ULL, &v) < 0)
                        return job_usage("invalid --owner '%s': a uid", optarg);
                a->owner = (uid_t) v;
                a->owner_given = true;
                break;
        case O_WAIT:
        case O_DIE_WITH_PARENT:
                *(c == O_WAIT ? &a->wait : &a->die_with_parent) = true;
                break;
        case O_READY_FD:
        case O_CGROUPS_OF:
        case O_BARRIER_FD:
                if (ctl_run_fd_arg(optarg, c == O_READY_FD ? &a->ready_fd : c == O_CGROUPS_OF ? &a->cgroups_of
                                                                                              : &a->barrier_fd) < 0)
                        return job_usage("invalid %s '%s': an open descriptor above 2", argv[optind - 1], optarg);
                /* Its end is this command's only: criu and its scripts
                 * holding a copy would keep it open after this one died. */
                if (c == O_BARRIER_FD)
                        (void) fcntl(a->barrier_fd, F_SETFD, FD_CLOEXEC);
                break;
        default:
                return job_usage("unknown option '%s' (CRIU's options go after --)", argv[optind - 1]);
        }
        return -1;
}

/* job_option()'s options of the images' sync, checks and archives (and
 * cudackptd's); -1 to go on, else the exit status. */
static int job_option_images(ctl_job_args *a, int c, char **argv) {
        unsigned long long v;

        switch (c) {
        case O_NO_SYNC:
                a->no_sync = true;
                break;
        case O_ARCHIVE:
                a->archive = optarg;
                break;
        case O_WORK_DIR:
                a->work_dir = optarg;
                break;
        case O_MAX_FILES:
        case O_MAX_BYTES:
                if (ctl_parse_uint(optarg, 1ULL << 62, &v) < 0 || v == 0)
                        return job_usage("invalid %s '%s'", argv[optind - 1], optarg);
                *(c == O_MAX_FILES ? &a->archive_max_files : &a->archive_max_bytes) = v;
                break;
        case O_NO_VERIFY:
                a->no_verify = true;
                break;
        default:
                return job_option_daemon(a, c, argv);
        }
        return -1;
}

/* One getopt_long() result; -1 to go on, else the exit status. */
static int job_option(ctl_job_args *a, job_state *st, int c, char **argv) {
        unsigned long long v;
        int r;

        switch (c) {
        case 1:
                if (st->n_positional++ == 0)
                        st->command = optarg;
                break;
        case O_SOCKET:
                a->socket = optarg;
                break;
        case O_JSON:
                a->json = true;
                break;
        case O_LOCK_TIMEOUT:
                if (ctl_parse_uint(optarg, 4294967295ULL, &v) < 0)
                        return job_usage("invalid --lock-timeout '%s'", optarg);
                a->lock_timeout = (long long) v;
                st->saw_lock_timeout = true;
                break;
        case O_PIDS:
        case O_CGROUP:
        case O_TREE:
                r = job_selector(a, c == O_PIDS ? CTL_SELECT_PIDS : c == O_CGROUP ? CTL_SELECT_CGROUP
                                                                                  : CTL_SELECT_TREE,
                                 optarg);
                if (r >= 0)
                        return r;
                break;
        case O_IMAGES:
        case O_RUN:
                *(c == O_IMAGES ? &a->images : &a->run_name) = optarg;
                break;
        case O_LEAVE:
        case O_FORCE:
        case O_DRY_RUN:
                *(c == O_LEAVE ? &a->leave_running : c == O_FORCE ? &a->force : &a->dry_run) = true;
                break;
        case O_MAP:
                if (ctl_map_add(&a->map, optarg) < 0)
                        return job_usage("invalid --device-map '%s': expected OLD=NEW[,OLD=NEW...], "
                                         "each old GPU once", optarg);
                break;
        case O_PROGRESS:
        case O_NO_PROGRESS:
                st->progress = c == O_PROGRESS;
                break;
        case 'h':
                job_help();
                return CUDACKPT_EXIT_OK;
        case ':':
                return job_usage("option '%s' needs an argument", argv[optind - 1]);
        default:
                return job_option_images(a, c, argv);
        }
        return -1;
}

/* Fill *a; returns -1 to go on, else the exit status. */
static int job_parse(int argc, char **argv, ctl_job_args *a) {
        job_state st = { .progress = -1 };
        int c, r;

        opterr = 0;
        while ((c = getopt_long(argc, argv, "-:h", ctl_job_options, NULL)) != -1) {
                r = job_option(a, &st, c, argv);
                if (r >= 0)
                        return r;
        }
        a->criu_argv = argv + optind;
        return job_check(a, st.command ? st.command : "", st.n_positional, st.progress, st.saw_lock_timeout);
}

int ctl_job_main(int argc, char **argv) {
        ctl_job_args a = { .lock_timeout = -1, .archive_max_files = CTL_ARCHIVE_MAX_FILES,
                           .archive_max_bytes = CTL_ARCHIVE_MAX_BYTES, .ready_fd = -1, .cgroups_of = -1,
                           .barrier_fd = -1 };
        int status;

        /* CRIU's action script: "cudackptctl criu-barrier SOCKET". */
        if (argc == 3 && strcmp(argv[1], "criu-barrier") == 0)
                return ctl_criu_barrier_main(argv[2]);
        if (argc >= 2 && strcmp(argv[1], "criu-barrier") == 0)
                return job_usage("criu-barrier is run by CRIU for dump and restore --images, with a socket");
        status = job_parse(argc, argv, &a);
        if (status < 0 && a.verify)
                status = a.archive ? ctl_archive_verify(&a) : ctl_job_verify(&a);
        else if (status < 0 && a.archive)
                status = a.dump ? ctl_archive_dump(&a) : ctl_archive_restore(&a);
        else if (status < 0)
                status = a.dump ? ctl_job_dump(&a) : ctl_job_restore(&a);
        ctl_map_free(&a.map);
        ctl_selector_free(&a.selector);
        free(a.prefix);
        if (fflush(stdout) != 0 && status == CUDACKPT_EXIT_OK)
                status = CUDACKPT_EXIT_FAILURE;
        return status;
}
