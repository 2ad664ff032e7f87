/* job.c: the command line of cudackptctl dump and restore --images.
 *
 *   cudackptctl dump (--tree PID | --pids LIST | --cgroup PATH) --images DIR
 *                    [--leave-running] [--lock-timeout MS] [-- CRIU-OPTIONS...]
 *   cudackptctl restore --images DIR [--device-map OLD=NEW,...] [-- CRIU-OPTIONS...]
 *
 * main() hands such a command line here (ctl_job_wanted) before its own
 * parser sees it: "restore PID" stays the driver's single restore, and
 * what follows "--" belongs to criu.  "criu-barrier SOCKET" is the job's
 * own action script for CRIU (criu.c), not for people.
 *
 * Also what dump.c and jobrestore.c share: the image directory's checks,
 * the group calls, the report of failed criu runs, --json's trees and
 * progress lines. */
#include "job.h"

#include <cudackpt/protocol.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define JOB_NAME "cudackptctl"

double ctl_job_now_ms(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec * 1000.0 + (double) ts.tv_nsec / 1e6;
}

/* ---- dump's image directory ---- */

/* The image directory: created if needed, opened by a checked walk
 * (safedir.c), without a finished dump in it, writable (the manifest's
 * temporary file is created now).  Root writes into it: from here on only
 * its descriptor is used, no path in it followed. */
int ctl_job_dump_dir(const ctl_job_args *a, int *ret_dir_fd, int *ret_part_fd, char *part_name, size_t size) {
        char err[PATH_MAX + 512];
        struct stat st;
        int r;

        r = ctl_safedir_open(a->images, true, ret_dir_fd, err, sizeof(err));
        if (r < 0) {
                fprintf(stderr, "%sthe image directory: %s; nothing was suspended\n", a->prefix, err);
                return CUDACKPT_EXIT_FAILURE;
        }
        if (fstatat(*ret_dir_fd, CTL_MANIFEST_NAME, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT) {
                fprintf(stderr, "%s%s already holds a dump (%s): restore it, or give another directory; nothing was "
                        "suspended\n",
                        a->prefix, a->images, CTL_MANIFEST_NAME);
                return CUDACKPT_EXIT_FAILURE;
        }
        *ret_part_fd = ctl_manifest_create_part(*ret_dir_fd, part_name, size);
        if (*ret_part_fd < 0) {
                fprintf(stderr, "%scannot write into the image directory %s: %s; nothing was suspended\n",
                        a->prefix, a->images, strerror(-*ret_part_fd));
                return CUDACKPT_EXIT_FAILURE;
        }
        return CUDACKPT_EXIT_OK;
}

/* DIR/tree-ROOT: made, or one of this user's already there (a dump that
 * failed); anything else there is refused, said on stderr. */
int ctl_job_tree_dir(const ctl_job_args *a, int dir_fd, const char *name, int *ret_fd) {
        int r = ctl_safedir_sub(dir_fd, name, true, ret_fd);

        if (r == 0) {
                /* An earlier dump's log would be shown as this one's. */
                (void) unlinkat(*ret_fd, "dump.log", 0);
                return 0;
        }
        if (r == -EEXIST)
                fprintf(stderr, "%s%s/%s exists and is not a directory of this user's writable by no one else (a "
                        "symbolic link?)\n", a->prefix, a->images, name);
        return r;
}

int ctl_job_sync_dirs(const ctl_criu_run *runs, size_t n) {
        dev_t *seen = calloc(n + 1, sizeof(dev_t));
        size_t n_seen = 0;
        struct stat st;
        int r = seen ? 0 : -ENOMEM;

        for (size_t i = 0; r == 0 && i < n; i++) {
                bool done = false;

                if (fstat(runs[i].dir_fd, &st) < 0) {
                        r = -errno;
                        break;
                }
                for (size_t k = 0; k < n_seen && !done; k++)
                        done = seen[k] == st.st_dev;
                /* syncfs() reports a write-back error of the file system
                 * since the descriptor was opened (Linux 5.8). */
                if (!done && syncfs(runs[i].dir_fd) < 0)
                        r = -errno;
                seen[n_seen++] = st.st_dev;
        }
        free(seen);
        return r;
}

int ctl_job_group(cudackpt_client *client, const ctl_job_args *a, const char *method, const cJSON *sel,
                  bool lease_on_close, cJSON **ret_members) {
        ctl_selector s = { .kind = CTL_SELECT_PIDS, .arg = "", .json = (cJSON *) sel };
        ctl_group g = {
                .prefix = a->prefix,
                .method = method,
                .selector = a->dump && strcmp(method, CUDACKPT_METHOD_SUSPEND_GROUP) == 0 ? &a->selector : &s,
                .lock_timeout = strcmp(method, CUDACKPT_METHOD_SUSPEND_GROUP) == 0 ? a->lock_timeout : -1,
                .map = a->dump ? NULL : (const char *const *) a->map.items,
                .force = !a->dump && a->force,
                .progress = a->progress,
                .progress_tty = a->progress_tty,
                .lease_ms = -1,
                .lease_on_close = lease_on_close,
                .ret_members = ret_members,
                .quiet = true,
        };

        return ctl_group_run(client, &g);
}

int *ctl_job_selector_pids(const cJSON *sel, size_t *ret_n) {
        const cJSON *pids = cJSON_GetObjectItemCaseSensitive(sel, "pids"), *ref;
        int *out = calloc((size_t) cJSON_GetArraySize(pids) + 1, sizeof(int));
        size_t n = 0;

        if (!out)
                return NULL;
        cJSON_ArrayForEach(ref, pids) {
                const cJSON *p = cJSON_GetObjectItemCaseSensitive(ref, "pid");

                if (cJSON_IsNumber(p))
                        out[n++] = (int) p->valuedouble;
        }
        *ret_n = n;
        return out;
}

void ctl_job_print_criu_failures(const ctl_job_args *a, const char *verb, const ctl_criu_run *runs,
                                 const ctl_manifest *m) {
        for (size_t i = 0; i < m->n_trees; i++) {
                const ctl_criu_run *r = &runs[i];
                int root = m->trees[i].root;

                if (r->status == 0 && !r->early)
                        continue;
                fputs(a->prefix, stderr);
                if (r->early)
                        fprintf(stderr, "criu %s of tree %d exited 0 after %.1f ms without getting to post-dump: it "
                                "dumped nothing (an option such as -V, --help or --check-only?)%s\n", verb, root,
                                r->ms, r->output && *r->output ? "; it printed:" : "");
                else if (r->status < 0)
                        fprintf(stderr, "criu %s of tree %d was not started\n", verb, root);
                else
                        fprintf(stderr, "criu %s of tree %d exited with status %d after %.1f ms%s\n", verb,
                                root, r->status, r->ms, r->output && *r->output ? "; it printed:" : "");
                if (r->output && *r->output)
                        ctl_criu_print_lines(r->output);
                if (r->status > 0 && r->log && r->dir_fd > STDERR_FILENO) {
                        fputs("criu's log ", stderr);
                        ctl_fputs_safe(r->log, stderr);
                        fputs(", its end:\n", stderr);
                        ctl_criu_print_log_tail(r->dir_fd, r->log_name, 25);
                }
        }
}

cJSON *ctl_job_trees_json(const ctl_manifest *m, const ctl_criu_run *runs, bool with_images) {
        cJSON *arr = cJSON_CreateArray();

        for (size_t i = 0; arr && i < m->n_trees; i++) {
                cJSON *o = cJSON_CreateObject();

                if (!o || !cJSON_AddItemToArray(arr, o)) {
                        cJSON_Delete(o);
                        break;
                }
                cJSON_AddNumberToObject(o, "root", m->trees[i].root);
                if (with_images)
                        cJSON_AddStringToObject(o, "images", m->trees[i].images);
                cJSON_AddNumberToObject(o, "processes", (double) m->trees[i].n_pids);
                if (runs) {
                        cJSON_AddNumberToObject(o, "criu_status", runs[i].status);
                        cJSON_AddNumberToObject(o, "criu_ms", runs[i].ms);
                }
        }
        return arr;
}

void ctl_job_print_json(cJSON *o) {
        char *text = o ? cJSON_PrintUnformatted(o) : NULL;

        if (text)
                puts(text);
        cJSON_free(text);
        cJSON_Delete(o);
}

char **ctl_job_argv_checked(char **argv, size_t n) {
        for (size_t k = 0; k < n; k++)
                if (!argv[k]) {
                        for (size_t j = 0; j < n; j++)
                                free(argv[j]);
                        free(argv);
                        return NULL;
                }
        return argv;
}

void ctl_job_progress(const ctl_job_args *a, const char *fmt, ...) {
        va_list ap;

        if (!a->progress)
                return;
        fputs(a->dump ? "criu dump: " : "criu restore: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        fflush(stderr);
}

/* Options of either parser that take their argument as the next word. */
static bool job_option_takes_word(const char *arg) {
        static const char *const with_arg[] = { "--socket", "--timeout", "--lock-timeout", "--map", "--pids",
                                                "--cgroup", "--tree", "--lease-ms", "--output", "--driver",
                                                "--images", "--device-map", NULL };

        for (size_t i = 0; with_arg[i]; i++)
                if (strcmp(arg, with_arg[i]) == 0)
                        return true;
        return false;
}

bool ctl_job_wanted(int argc, char **argv) {
        const char *command = NULL;
        bool images = false;

        for (int i = 1; i < argc; i++) {
                const char *a = argv[i];

                if (strcmp(a, "--") == 0)
                        break;
                if (a[0] == '-' && a[1]) {
                        if (strcmp(a, "--images") == 0 || strncmp(a, "--images=", 9) == 0)
                                images = true;
                        if (job_option_takes_word(a))
                                i++;
                        continue;
                }
                if (!command)
                        command = a;
        }
        return command && (strcmp(command, "dump") == 0 || strcmp(command, "criu-barrier") == 0 ||
                           (strcmp(command, "restore") == 0 && images));
}

static void job_help(void) {
        printf("Usage: " JOB_NAME " dump (--tree=PID | --pids=LIST | --cgroup=PATH) --images=DIR\n"
               "                        [--leave-running] [--no-sync] [--lock-timeout=MS] [-- CRIU-OPTIONS...]\n"
               "       " JOB_NAME " restore --images=DIR [--device-map=OLD=NEW[,...]] [-- CRIU-OPTIONS...]\n"
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
               "\n"
               "  --images=DIR              the image directory\n"
               "  --leave-running           dump: resume the job after a good dump\n"
               "  --no-sync                 dump: do not wait for the images to reach the disk\n"
               "  --lock-timeout=MS         dump: how long to wait for the job's GPU work\n"
               "  --device-map=OLD=NEW,...  restore: restore onto other GPUs (also --map)\n"
               "  --socket=PATH, --json, --progress, --no-progress: as for the other commands\n"
               "The criu run is $CUDACKPT_CRIU, else criu on PATH (4 or newer).  See\n"
               "cudackptctl(1) and docs/criu.md.\n");
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

/* The positional words and the checks between options; -1 to go on. */
static int job_check(ctl_job_args *a, const char *command, int n_positional, int progress, bool saw_lock_timeout) {
        if (n_positional != 1)
                return job_usage("%s takes no argument but its options (CRIU's go after --)", command);
        a->dump = strcmp(command, "dump") == 0;
        if (!a->images || !*a->images)
                return job_usage("%s needs --images=DIR", command);
        if (a->dump && a->selector.kind == CTL_SELECT_NONE)
                return job_usage("dump needs --tree=PID, --pids=LIST or --cgroup=PATH");
        if (!a->dump && a->selector.kind != CTL_SELECT_NONE)
                return job_usage("restore --images takes no selector: the manifest names the processes");
        if (!a->dump && (a->leave_running || a->no_sync || saw_lock_timeout))
                return job_usage("--leave-running, --no-sync and --lock-timeout are for dump");
        if (a->dump && (a->map.items || a->force))
                return job_usage("--device-map and --force are for restore");
        if (job_abbreviated_action_script(a->criu_argv))
                return job_usage("give criu's --action-script in full, not as '%s' (%s runs the job's scripts "
                                 "inside its own)", job_abbreviated_action_script(a->criu_argv), command);
        a->progress_tty = isatty(STDERR_FILENO);
        a->progress = progress < 0 ? a->progress_tty : progress > 0;
        if (asprintf(&a->prefix, JOB_NAME ": %s: ", command) < 0)
                a->prefix = NULL;
        return a->prefix ? -1 : job_usage("out of memory");
}

/* Fill *a; returns -1 to go on, else the exit status. */
static int job_parse(int argc, char **argv, ctl_job_args *a) {
        enum { O_SOCKET = 0x100, O_JSON, O_LOCK_TIMEOUT, O_PIDS, O_CGROUP, O_TREE, O_IMAGES, O_LEAVE, O_MAP,
               O_PROGRESS, O_NO_PROGRESS, O_NO_SYNC, O_FORCE };
        static const struct option options[] = {
                { "socket", required_argument, NULL, O_SOCKET },     { "json", no_argument, NULL, O_JSON },
                { "lock-timeout", required_argument, NULL, O_LOCK_TIMEOUT },
                { "pids", required_argument, NULL, O_PIDS },         { "cgroup", required_argument, NULL, O_CGROUP },
                { "tree", required_argument, NULL, O_TREE },         { "images", required_argument, NULL, O_IMAGES },
                { "leave-running", no_argument, NULL, O_LEAVE },     { "device-map", required_argument, NULL, O_MAP },
                { "map", required_argument, NULL, O_MAP },           { "progress", no_argument, NULL, O_PROGRESS },
                { "no-progress", no_argument, NULL, O_NO_PROGRESS }, { "help", no_argument, NULL, 'h' },
                { "no-sync", no_argument, NULL, O_NO_SYNC },
                { "force", no_argument, NULL, O_FORCE },
                { NULL, 0, NULL, 0 },
        };
        const char *command = NULL;
        int n_positional = 0, progress = -1, c, r;
        bool saw_lock_timeout = false;
        unsigned long long v;

        opterr = 0;
        while ((c = getopt_long(argc, argv, "-:h", options, NULL)) != -1) {
                switch (c) {
                case 1:
                        if (n_positional++ == 0)
                                command = optarg;
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
                        saw_lock_timeout = true;
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
                        a->images = optarg;
                        break;
                case O_LEAVE:
                case O_FORCE:
                        *(c == O_LEAVE ? &a->leave_running : &a->force) = true;
                        break;
                case O_NO_SYNC:
                        a->no_sync = true;
                        break;
                case O_MAP:
                        if (ctl_map_add(&a->map, optarg) < 0)
                                return job_usage("invalid --device-map '%s': expected OLD=NEW[,OLD=NEW...], "
                                                 "each old GPU once", optarg);
                        break;
                case O_PROGRESS:
                case O_NO_PROGRESS:
                        progress = c == O_PROGRESS;
                        break;
                case 'h':
                        job_help();
                        return CUDACKPT_EXIT_OK;
                case ':':
                        return job_usage("option '%s' needs an argument", argv[optind - 1]);
                default:
                        return job_usage("unknown option '%s' (CRIU's options go after --)", argv[optind - 1]);
                }
        }
        a->criu_argv = argv + optind;
        return job_check(a, command ? command : "", n_positional, progress, saw_lock_timeout);
}

int ctl_job_main(int argc, char **argv) {
        ctl_job_args a = { .lock_timeout = -1 };
        int status;

        /* CRIU's action script: "cudackptctl criu-barrier SOCKET". */
        if (argc == 3 && strcmp(argv[1], "criu-barrier") == 0)
                return ctl_criu_barrier_main(argv[2]);
        if (argc >= 2 && strcmp(argv[1], "criu-barrier") == 0)
                return job_usage("criu-barrier is run by CRIU for dump and restore --images, with a socket");
        status = job_parse(argc, argv, &a);
        if (status < 0)
                status = a.dump ? ctl_job_dump(&a) : ctl_job_restore(&a);
        ctl_map_free(&a.map);
        ctl_selector_free(&a.selector);
        free(a.prefix);
        if (fflush(stdout) != 0 && status == CUDACKPT_EXIT_OK)
                status = CUDACKPT_EXIT_FAILURE;
        return status;
}
