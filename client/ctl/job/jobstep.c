/* jobstep.c: what dump (dump.c) and restore --images (jobrestore.c)
 * share: the image directory's checks, the group calls, the report of
 * failed criu runs, --json's trees and progress lines.  Below both: it
 * calls neither. */
#include "jobstep.h"

#include "criu.h"
#include "criubarrier.h"
#include "criulog.h"
#include "describe.h"
#include "exitcode.h"
#include "group.h"
#include "manifest.h"
#include "safedir.h"
#include "selector.h"

#include <cudackpt/protocol.h>

#include <cudackpt/protocol.h>
#include <cJSON.h>
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

void ctl_job_dump_take_back(const ctl_job_args *a, int dir_fd) {
        /* Gone for good: a crash must not bring it back. */
        if (unlinkat(dir_fd, CTL_MANIFEST_NAME, 0) == 0 && !a->no_sync)
                (void) fsync(dir_fd);
        if (a->taken_back)
                a->taken_back(a->before_end_data);
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

void ctl_job_json_source(cJSON *o, const ctl_job_args *a) {
        if (a->archive)
                cJSON_AddStringToObject(o, "archive", a->archive);
        else
                cJSON_AddStringToObject(o, "images", a->images);
}

const char *ctl_job_restore_left(const ctl_job_args *a) {
        if (!a->archive)
                return "the images are intact: fix the cause and run restore again";
        if (strcmp(a->archive, "-") != 0)
                return "the archive file is intact (its unpacked copy was removed): fix the cause and run restore "
                       "--archive again";
        /* The stream was read to its end: its only copy is the private
         * directory, which restore --archive keeps and names (archivejob.c). */
        return "the archive read from stdin is used up, but its checked copy is kept (below)";
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

char **ctl_job_criu_argv(const ctl_job_args *a, const char *criu, const char *const *words, const char *script) {
        size_t n_user = 0, n_words = 0, n = 0;
        char **argv;

        while (a->criu_argv[n_user])
                n_user++;
        while (words[n_words])
                n_words++;
        argv = calloc(n_user + n_words + 4, sizeof(char *));
        if (!argv)
                return NULL;
        argv[n++] = strdup(criu);
        for (size_t k = 0; k < n_words; k++)
                argv[n++] = strdup(words[k]);
        if (script) {
                argv[n++] = strdup("--action-script");
                argv[n++] = strdup(script);
        }
        for (size_t k = 0, skip; k < n_user; k++) {
                /* The user's action scripts run inside the barrier's. */
                if (ctl_criu_is_action_script(a->criu_argv, k, &skip))
                        k += skip;
                else
                        argv[n++] = strdup(a->criu_argv[k]);
        }
        return ctl_job_argv_checked(argv, n);
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

char *ctl_job_barrier(const ctl_job_args *a, const char *rundir, char *sock, size_t size, int *ret_r) {
        char *script;

        snprintf(sock, size, "%s/barrier", rundir);
        errno = 0;
        script = ctl_criu_barrier_script(a->prefix, rundir, sock, a->criu_argv);
        *ret_r = script ? 0 : errno ? -errno : -ENOMEM;
        return script;
}

int ctl_job_run_set(const ctl_job_args *a, ctl_criu_run *run, char **argv, const char *tree_images,
                    const char *log_name) {
        run->argv = argv;
        run->log_name = log_name;
        if (asprintf((char **) &run->log, "%s/%s/%s", a->images, tree_images, log_name) < 0)
                run->log = NULL;
        return run->argv && run->log ? 0 : -ENOMEM;
}
