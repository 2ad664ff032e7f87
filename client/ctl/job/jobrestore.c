/* jobrestore.c: cudackptctl restore --images, a dumped job back from disk.
 *
 *   1. criu restore -d of every tree of DIR's manifest, all at once, each
 *      given its checked directory as a descriptor (/proc/self/fd/N), with
 *      CRIU's CUDA plugin standing aside (a failing "cuda-checkpoint" first
 *      on criu's PATH turns it off): the processes come back checkpointed.
 *      The trees wait for each other (and, with --barrier-fd, the job's
 *      other parts: crossbarrier.h) at post-restore (criu.c), restored and
 *      not yet running: there every process of each tree is pinned
 *      (jobpin.c), its root a child of a waiting criu, each member in it;
 *   2. one ResumeGroup of every member, each pinned by the start time read
 *      then (a process that took a member's pid since is not it): restored
 *      in parallel, none unlocked before all are restored, the device map
 *      applied to each.
 *
 * Before step 1 (nothing changed yet): the map, the pids free, every image
 * file as the manifest's digests say (verify.c).
 *
 * A failure in step 1 ends the trees that came back (the images stay
 * whole, to restore again); one in step 2 unlocks no member (the daemon's
 * rule): none runs on the GPU while another is checkpointed. */
#include "jobrestore.h"

#include "args.h"
#include "criu.h"
#include "criumntns.h"
#include "criubarrier.h"
#include "crossbarrier.h"
#include "exitcode.h"
#include "gpu-uuid.h"
#include "jobpin.h"
#include "jobplan.h"
#include "jobstep.h"
#include "manifest.h"
#include "nstree.h"
#include "proctree.h"
#include "restoreaccess.h"
#include "restorewait.h"
#include "runinit.h"
#include "runrestore.h"
#include "safedir.h"
#include "verify.h"
#include "monotime.h"

#include <cudackpt/protocol.h>
#include <cJSON.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct jrestore {
        const ctl_job_args *a;
        char criu[PATH_MAX];
        char criu_version[32];
        ctl_manifest m;
        ctl_criu_run *runs;           /* one per tree (its dir_fd DIR/tree-ROOT) */
        ctl_pins pins;                /* every process of the trees, pinned at post-restore */
        cJSON *members;               /* Selector of the restored members, pinned; NULL: none */
        int dir_fd;                   /* DIR */
        double criu_ms, resume_ms, t0;
        bool plan_said;               /* the device plan was said (--dry-run --json: its object) */
        char refused[PATH_MAX + 256]; /* --owner: what the restored job may not hold, or "" */
} jrestore;

/* Every old GPU a member used must be mapped (the driver wants them all). */
static int jrestore_check_map(const jrestore *x) {
        const ctl_map *map = &x->a->map;

        if (!map->items)
                return CUDACKPT_EXIT_OK;
        for (size_t i = 0; i < x->m.n_members; i++)
                for (size_t j = 0; j < x->m.members[i].n_gpus; j++) {
                        bool found = false;

                        for (size_t k = 0; k + 1 < map->n_items && !found; k += 2)
                                found = gpu_uuid_same(map->items[k], x->m.members[i].gpus[j]);
                        if (!found) {
                                fprintf(stderr, "%s--device-map does not map %s, which process %d used: map every "
                                        "GPU of the job; nothing was restored\n", x->a->prefix,
                                        x->m.members[i].gpus[j], x->m.members[i].pid);
                                return CUDACKPT_EXIT_INVALID_GPU_MAPPING;
                        }
                }
        return CUDACKPT_EXIT_OK;
}

/* DIR and its manifest, trusted only when they are this user's and no one
 * else may write them (restore runs as root and believes them), and each
 * tree's directory the same. */
static int jrestore_read_images(jrestore *x) {
        char err[PATH_MAX + 512];

        if (ctl_safedir_open(x->a->images, false, &x->dir_fd, err, sizeof(err)) < 0 ||
            ctl_manifest_read(x->dir_fd, x->a->images, &x->m, err, sizeof(err)) < 0) {
                fprintf(stderr, "%sthe image directory: %s; nothing was restored\n", x->a->prefix, err);
                return CUDACKPT_EXIT_FAILURE;
        }
        x->runs = calloc(x->m.n_trees, sizeof(*x->runs));
        if (!x->runs) {
                fprintf(stderr, "%sout of memory\n", x->a->prefix);
                return CUDACKPT_EXIT_FAILURE;
        }
        /* Not run, until they are: none is taken for restored (and ended). */
        for (size_t i = 0; i < x->m.n_trees; i++)
                x->runs[i].status = -1;
        for (size_t i = 0; i < x->m.n_trees; i++)
                if (ctl_safedir_sub(x->dir_fd, x->m.trees[i].images, false, &x->runs[i].dir_fd) < 0) {
                        fprintf(stderr, "%s%s/%s is not a directory of uid %u that no one else may write; nothing "
                                "was restored\n", x->a->prefix, x->a->images, x->m.trees[i].images,
                                (unsigned) geteuid());
                        return CUDACKPT_EXIT_FAILURE;
                }
        return CUDACKPT_EXIT_OK;
}

/* CRIU gives the processes their pids back: none may be in use (but in a
 * tree that is a pid namespace of its own: its pids are the namespace's). */
static int jrestore_check_pids(const jrestore *x) {
        for (size_t i = 0; i < x->m.n_trees; i++)
                for (size_t j = 0; !x->m.trees[i].pid_ns && j < x->m.trees[i].n_pids; j++) {
                        int pid = x->m.trees[i].pids[j];

                        if (kill(pid, 0) == 0 || errno != ESRCH) {
                                fprintf(stderr, "%spid %d (of tree %d) is in use: CRIU restores each process with "
                                        "its pid (is the job still running?); nothing was restored\n",
                                        x->a->prefix, pid, x->m.trees[i].root);
                                return CUDACKPT_EXIT_FAILURE;
                        }
                }
        return CUDACKPT_EXIT_OK;
}

/* A private directory holding a cuda-checkpoint that fails "-h" (the
 * plugin's probe), and later the barrier's script and socket. */
static int jrestore_stub(char *dir) {
        static const char script[] = "#!/bin/sh\n# cudackptctl restore --images: CRIU's CUDA plugin stands aside\nexit 1\n";
        char path[PATH_MAX];
        int fd;

        if (!mkdtemp(dir))
                return -errno;
        snprintf(path, sizeof(path), "%s/cuda-checkpoint", dir);
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
        if (fd < 0 || write(fd, script, sizeof(script) - 1) != (ssize_t) (sizeof(script) - 1)) {
                int e = errno;
                if (fd >= 0)
                        close(fd);
                unlink(path);
                rmdir(dir);
                return -e;
        }
        close(fd);
        return 0;
}

static void jrestore_unstub(const char *dir) {
        static const char *const names[] = { "cuda-checkpoint", "barrier.sh", "barrier" };
        char path[PATH_MAX];

        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
                unlink(path);
        }
        rmdir(dir);
}

static char **jrestore_criu_argv(const jrestore *x, size_t i, const char *script) {
        char dir[32];
        const char *words[8 + CTL_CRIU_MNTNS_MAX_WORDS + 1] = { "restore", "-d", "-D", dir, "-o", "restore.log", "-v4" },
                   *cg = ctl_restore_daemon_criu_word(x->a);

        if (cg)
                words[7] = cg;
        ctl_criu_mntns_words(words, cg ? 8 : 7, x->m.trees[i].mnt_ns, true);

        snprintf(dir, sizeof(dir), "/proc/self/fd/%d", x->runs[i].dir_fd);
        return ctl_job_criu_argv(x->a, x->criu, words, script);
}

/* At post-restore, every tree restored and held by its criu: each of its
 * processes pinned; its root a child of a criu that waits there (not a
 * process that took the pid), every member among the pinned. */
static int jrestore_pin(void *data, const int *criu_pids, size_t n) {
        jrestore *x = data;
        ctl_proctree t = { 0 };
        int r = ctl_proctree_scan(&t), ppid = 0;

        for (size_t i = 0; r == 0 && i < x->m.n_trees; i++) {
                int old_root = x->m.trees[i].root, root;
                const ctl_pin *p;
                bool by_criu = false;

                /* A namespace's tree: its new host pids, found by its criu. */
                if (x->m.trees[i].pid_ns)
                        r = ctl_nstree_locate(&x->m.trees[i], &t, x->runs[i].pid);
                root = x->m.trees[i].root;
                if (r == 0)
                        r = ctl_pins_add_tree(&x->pins, &t, root);
                p = ctl_pins_find(&x->pins, root);
                /* Pinned, then its parent read, then still the pinned one. */
                if (r == 0 && p && ctl_proc_stat(root, &ppid, NULL) == 0)
                        for (size_t k = 0; k < n; k++)
                                by_criu |= criu_pids[k] == ppid;
                if (r == 0 && (!by_criu || !ctl_pin_alive(p)))
                        r = -ESRCH;
                if (r == 0 && x->m.trees[i].pid_ns)
                        r = ctl_nstree_map(&x->m, i, old_root, &t, &x->pins);
        }
        for (size_t i = 0; r == 0 && i < x->m.n_members; i++)
                if (!ctl_pins_find(&x->pins, x->m.members[i].pid))
                        r = -ESRCH;
        ctl_proctree_free(&t);
        if (r < 0)
                fprintf(stderr, "%sat post-restore, the job's processes are not all criu's (a tree's root not a child "
                        "of its criu, or a member outside its tree): %s\n", x->a->prefix, strerror(-r));
        /* criu opened the job's files by path, as root: each must be one
         * the owner could open (restoreaccess.h), before any of it runs. */
        if (r == 0 && x->a->owner_given)
                r = ctl_restore_access_check(&x->pins, x->m.trees[0].root, x->a->owner, x->runs, x->m.n_trees,
                                             x->a->prefix, x->refused, sizeof(x->refused));
        /* The job's other parts: criu lifts its lock once let go on. */
        return r == 0 ? ctl_cross_barrier_wait(x->a->barrier_fd, "restore", x->a->prefix) : r;
}

/* Step 1; 0, -EIO (a criu failed) or -errno. */
static int jrestore_run_criu(jrestore *x) {
        char rundir[] = "/tmp/cudackpt-restore.XXXXXX", sock[sizeof(rundir) + 16], **env = NULL, *script;
        ctl_criu_barrier barrier = { .sock = sock, .at_barrier = jrestore_pin, .data = x };
        ctl_criu_signals held;
        double t0;
        int r;

        /* criu's children, the restored processes, would possess this
         * command's session keyring (root's: CRIU restores none). */
        r = ctl_run_new_keyring();
        if (r == 0)
                r = jrestore_stub(rundir);
        if (r < 0)
                return r;
        script = ctl_job_barrier(x->a, rundir, sock, sizeof(sock), &r);
        for (size_t i = 0; r == 0 && i < x->m.n_trees; i++)
                r = ctl_job_run_set(x->a, &x->runs[i], jrestore_criu_argv(x, i, script), x->m.trees[i].images,
                                    "restore.log");
        env = r == 0 ? ctl_criu_env(rundir) : NULL;
        if (r == 0 && !env)
                r = -ENOMEM;
        if (r < 0) {
                free(script);
                jrestore_unstub(rundir);
                return r;
        }
        /* As for dump: criu stopped halfway leaves half a tree. */
        ctl_criu_signals_hold(&held);
        t0 = monotime_ms_exact();
        r = ctl_criu_run_all(x->runs, x->m.n_trees, env, &barrier);
        /* Its time at the barrier (pins, the job's other parts) is not criu's. */
        x->criu_ms = monotime_ms_exact() - t0 - (x->m.n_trees ? x->runs[0].held_ms : 0);
        /* --wait forwards them to the job from now on: blocked before
         * they would end this command. */
        if (x->a->wait) {
                sigset_t set;

                ctl_run_signals(&set);
                (void) sigprocmask(SIG_BLOCK, &set, NULL);
        }
        ctl_criu_signals_restore(&held);
        if (ctl_criu_signal)
                fprintf(stderr, "%sgot signal %d during criu restore: waited for criu to finish\n", x->a->prefix,
                        (int) ctl_criu_signal);
        ctl_criu_env_free(env);
        free(script);
        jrestore_unstub(rundir);
        return r;
}

/* After a failed step: the trees that came back are ended, through their
 * pins (a tree never pinned was ended by its own criu). */
static size_t jrestore_end_trees(const jrestore *x) {
        size_t ended = 0;

        for (size_t i = 0; i < x->m.n_trees; i++)
                ended += x->runs[i].status == 0 && ctl_pins_find(&x->pins, x->m.trees[i].root);
        (void) ctl_pins_signal(&x->pins, SIGKILL);
        return ended;
}

/* {"pids": [{"pid": P, "start_time": NEW}, ...]} of the restored members,
 * NEW as pinned at post-restore; -ESRCH (its pid in *ret_gone) when one
 * has exited since. */
static int jrestore_members(jrestore *x, int *ret_gone) {
        cJSON *sel, *pids;

        if (x->m.n_members == 0)
                return 0;
        for (size_t i = 0; i < x->m.n_members; i++) {
                const ctl_pin *p = ctl_pins_find(&x->pins, x->m.members[i].pid);

                if (!p || !ctl_pin_alive(p)) {
                        *ret_gone = x->m.members[i].pid;
                        return -ESRCH;
                }
        }
        sel = cJSON_CreateObject();
        pids = sel ? cJSON_AddArrayToObject(sel, "pids") : NULL;
        for (size_t i = 0; pids && i < x->m.n_members; i++) {
                cJSON *ref = cJSON_CreateObject();
                const ctl_pin *p = ctl_pins_find(&x->pins, x->m.members[i].pid);

                if (!ref || !cJSON_AddItemToArray(pids, ref) ||
                    !cJSON_AddNumberToObject(ref, "pid", x->m.members[i].pid) ||
                    !cJSON_AddNumberToObject(ref, "start_time", (double) p->start_time))
                        pids = NULL;
        }
        if (!pids) {
                cJSON_Delete(sel);
                return -ENOMEM;
        }
        x->members = sel;
        return 0;
}

static void jrestore_print_json(const jrestore *x, const char *failed_step) {
        cJSON *o = cJSON_CreateObject(), *trees = ctl_job_trees_json(&x->m, x->runs, false);

        if (!o || !trees || !cJSON_AddItemToObject(o, "trees", trees)) {
                cJSON_Delete(trees);
                cJSON_Delete(o);
                return;
        }
        ctl_job_json_source(o, x->a);
        cJSON_AddBoolToObject(o, "restored", failed_step == NULL);
        if (failed_step)
                cJSON_AddStringToObject(o, "failed_step", failed_step);
        cJSON_AddNumberToObject(o, "members", (double) x->m.n_members);
        cJSON_AddNumberToObject(o, "criu_ms", x->criu_ms);
        cJSON_AddNumberToObject(o, "resume_ms", x->resume_ms);
        cJSON_AddNumberToObject(o, "duration_ms", monotime_ms_exact() - x->t0);
        ctl_job_print_json(o);
}

/* Step 1 failed: end what came back, say so. */
static int jrestore_fail_criu(jrestore *x, int r) {
        size_t ended;

        if (r != -EIO)
                fprintf(stderr, "%sstep 1 of 2 (criu restore) could not be run: %s\n", x->a->prefix, strerror(-r));
        else
                ctl_job_print_criu_failures(x->a, "restore", x->runs, &x->m);
        ended = x->runs ? jrestore_end_trees(x) : 0;
        fprintf(stderr, "%sstep 1 of 2 (criu restore) failed; %zu tree%s restored meanwhile %s ended, so no process "
                "of the job runs; %s\n", x->a->prefix, ended, ended == 1 ? "" : "s", ended == 1 ? "was" : "were",
                ctl_job_restore_left(x->a));
        if (x->a->json)
                jrestore_print_json(x, "criu");
        /* Said last: the daemon tells its caller the last line. */
        if (x->refused[0])
                fprintf(stderr, "%sthe restored job was refused before it ran: %s\n", x->a->prefix, x->refused);
        return x->refused[0] ? CUDACKPT_EXIT_PERMISSION_DENIED : CUDACKPT_EXIT_FAILURE;
}

/* Step 2: every member's GPU state at once. */
static int jrestore_resume(jrestore *x) {
        const char *path = ctl_socket_path(x->a->socket);
        cudackpt_client *client = NULL;
        double t0 = monotime_ms_exact();
        int r, status, gone = 0;

        r = jrestore_members(x, &gone);
        if (r == -ESRCH) {
                size_t ended = jrestore_end_trees(x);

                fprintf(stderr, "%sprocess %d exited after criu restored it: its pid may be another process's by "
                        "now, so no member was resumed; %zu tree%s ended; %s\n", x->a->prefix, gone, ended,
                        ended == 1 ? "" : "s", ctl_job_restore_left(x->a));
                return CUDACKPT_EXIT_FAILURE;
        }
        if (r < 0) {
                fprintf(stderr, "%sout of memory\n", x->a->prefix);
                return CUDACKPT_EXIT_FAILURE;
        }
        if (!x->members)
                return CUDACKPT_EXIT_OK;
        r = cudackpt_client_connect(path, &client);
        if (r < 0) {
                fprintf(stderr, "%scannot reach cudackptd at %s: %s\n", x->a->prefix, path, strerror(-r));
                status = CUDACKPT_EXIT_UNREACHABLE;
        } else
                status = ctl_job_group(client, x->a, CUDACKPT_METHOD_RESUME_GROUP, x->members, false, NULL);
        x->resume_ms = monotime_ms_exact() - t0;
        cudackpt_client_free(client);
        if (status != CUDACKPT_EXIT_OK) {
                fprintf(stderr, "%sstep 2 of 2 (resume the job's GPU state) failed; no process was unlocked (those "
                        "restored are locked, the others checkpointed), so none runs on the GPU.  Fix the cause "
                        "and run: cudackptctl resume --pids=", x->a->prefix);
                for (size_t i = 0; i < x->m.n_members; i++)
                        fprintf(stderr, "%s%d", i ? "," : "", x->m.members[i].pid);
                fputs(" [--map=...]; or end the job: kill -KILL ", stderr);
                for (size_t i = 0; i < x->m.n_trees; i++)
                        fprintf(stderr, "%s%d", i ? " " : "", x->m.trees[i].root);
                fputc('\n', stderr);
        }
        return status;
}

static void jrestore_free(jrestore *x) {
        for (size_t i = 0; x->runs && i < x->m.n_trees; i++)
                if (x->runs[i].dir_fd > STDERR_FILENO)
                        close(x->runs[i].dir_fd);
        ctl_pins_free(&x->pins);
        ctl_criu_runs_free(x->runs, x->m.n_trees);
        cJSON_Delete(x->members);
        ctl_manifest_free(&x->m);
        if (x->dir_fd >= 0)
                close(x->dir_fd);
}

/* The checks before anything is touched: the images, the device plan
 * (jobplan.h: its map, when it makes one, into *plan_map and *planned,
 * which x uses from then on), the map, and unless --dry-run the pids. */
static int jrestore_check(jrestore *x, ctl_job_args *planned, ctl_map *plan_map) {
        int status = jrestore_read_images(x);

        if (status == CUDACKPT_EXIT_OK)
                status = ctl_restore_daemon_check(x->a, &x->m);
        if (status == CUDACKPT_EXIT_OK) {
                status = ctl_job_plan(x->a, &x->m, plan_map);
                x->plan_said = status != CUDACKPT_EXIT_UNREACHABLE;
        }
        if (plan_map->items) {
                planned->map = *plan_map;
                x->a = planned;
        }
        if (status == CUDACKPT_EXIT_OK)
                status = jrestore_check_map(x);
        if (status == CUDACKPT_EXIT_OK && !x->a->dry_run)
                status = jrestore_check_pids(x);
        /* The digests last: every cheaper refusal first, nothing touched. */
        if (status == CUDACKPT_EXIT_OK)
                status = ctl_verify_before_restore(x->a, &x->m, x->runs);
        return status;
}

int ctl_job_restore(const ctl_job_args *a) {
        jrestore x = { .a = a, .dir_fd = -1, .t0 = monotime_ms_exact() };
        ctl_job_args planned = *a;
        ctl_map plan_map = { 0 };
        ctl_run_record rec = { 0 };
        char err[PATH_MAX + 128];
        int status, r;

        /* --dry-run runs no criu. */
        if (!a->dry_run &&
            ctl_criu_find(x.criu, sizeof(x.criu), x.criu_version, sizeof(x.criu_version), err, sizeof(err)) < 0) {
                fprintf(stderr, "%s%s; nothing was restored\n", a->prefix, err);
                if (a->json)
                        jrestore_print_json(&x, "check");
                return CUDACKPT_EXIT_FAILURE;
        }
        status = jrestore_check(&x, &planned, &plan_map);
        /* --json answers a failed check too, as dump's does ("prepare"). */
        if (status != CUDACKPT_EXIT_OK && a->json && !(a->dry_run && x.plan_said))
                jrestore_print_json(&x, "check");
        if (status != CUDACKPT_EXIT_OK || a->dry_run) {
                ctl_map_free(&plan_map);
                jrestore_free(&x);
                return status;
        }
        ctl_job_progress(a, "%zu tree%s (criu %s), CUDA plugin aside", x.m.n_trees, x.m.n_trees == 1 ? "" : "s",
                         x.criu_version);
        status = ctl_restore_daemon_arm(a);
        r = status == CUDACKPT_EXIT_OK ? jrestore_run_criu(&x) : 0;
        if (r < 0)
                status = jrestore_fail_criu(&x, r);
        else if (status == CUDACKPT_EXIT_OK) {
                ctl_job_progress(a, "done in %.1f ms; resuming %zu CUDA process%s", x.criu_ms, x.m.n_members,
                                 x.m.n_members == 1 ? "" : "es");
                status = jrestore_resume(&x);
                if (status == CUDACKPT_EXIT_OK)
                        r = ctl_run_restored(a->prefix, &x.m, &x.pins, &rec);
                if (a->json)
                        jrestore_print_json(&x, status == CUDACKPT_EXIT_OK ? NULL : "resume");
                else if (status == CUDACKPT_EXIT_OK)
                        printf("restored %zu CUDA process%s in %zu tree%s: criu %.1f ms, resume %.1f ms, total %.1f ms\n",
                               x.m.n_members, x.m.n_members == 1 ? "" : "es", x.m.n_trees,
                               x.m.n_trees == 1 ? "" : "s", x.criu_ms, x.resume_ms, monotime_ms_exact() - x.t0);
                if (status == CUDACKPT_EXIT_OK && fflush(stdout) == 0)
                        status = ctl_restore_daemon_after(a, &x.pins, r, &rec, (int) ctl_criu_signal);
        }
        ctl_map_free(&plan_map);
        jrestore_free(&x);
        return status;
}
