/* dump.c: cudackptctl dump, a whole job to disk.
 *
 *   1. suspend: SuspendGroup of the selection, with an on-close lease held
 *      by this process's connection (killed, the daemon resumes the job);
 *      the GPU memory is free from its end;
 *   2. criu dump of each process tree of the job (a process of the job
 *      none of whose ancestors is in it) at once, into DIR/tree-ROOT (its
 *      checked descriptor, /proc/self/fd/N); CRIU's CUDA plugin leaves the
 *      checkpointed CUDA processes alone.  The trees wait for each other at
 *      post-dump (criu.c), frozen, their connections under criu's lock,
 *      where every process of them is pinned (jobpin.c);
 *   3. there: the images synced (unless --no-sync; digests first,
 *      verify.c), DIR/manifest.json written and synced (--archive: the
 *      stream made durable, archivejob.c), the job's other parts waited
 *      for (--barrier-fd, crossbarrier.h); only then does every criu go
 *      on and end its tree (the lock kept for the restore) or, with
 *      --leave-running, resume it.  Any failure lets none go on: each criu
 *      lifts its lock, takes the sockets out of repair and resumes its
 *      tree, and the command resumes the GPU state (ResumeGroup of exactly
 *      the members).  A job is never ended before the images that replace
 *      it are on stable storage, and one that goes on keeps its
 *      connections.
 *
 * Nothing is suspended before the image directory is known writable and a
 * usable criu found. */
#include "dump.h"

#include "args.h"
#include "criu.h"
#include "criumntns.h"
#include "criubarrier.h"
#include "crossbarrier.h"
#include "describe.h"
#include "dumpghost.h"
#include "dumpgpus.h"
#include "dumptrees.h"
#include "exitcode.h"
#include "jobpin.h"
#include "jobstep.h"
#include "manifest.h"
#include "proctree.h"
#include "runreg.h"
#include "selector.h"
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

extern char **environ;

typedef struct dump_job {
        const ctl_job_args *a;
        char criu[PATH_MAX];
        char criu_version[32];
        int dir_fd;                   /* DIR, opened (every file in it made through it) */
        int part_fd;                  /* DIR/part_name, the manifest's temporary file */
        char part_name[64];
        cudackpt_client *client;
        cJSON *processes;             /* ListProcesses' list (for the GPUs), or NULL */
        cJSON *gpus;                  /* ListGpus' answer (dumpgpus.h), or NULL */
        cJSON *members;               /* the suspended members as a Selector; NULL: none */
        int outside;                  /* a member in none of the trees, or 0 */
        ctl_manifest m;
        ctl_criu_run *runs;           /* one per tree (its dir_fd DIR/tree-ROOT) */
        ctl_pins pins;                /* every process of the trees, pinned at post-dump */
        double suspend_ms, criu_ms, sync_ms, resume_ms, t0;
        bool synced;                  /* the images were synced to disk */
        bool save_failed;             /* step 3 failed at the barrier: no criu went on */
        bool cross_failed;            /* ... or the barrier across the job's parts (--barrier-fd) */
        bool let_go, criu_failed_after; /* step 3 done, every criu let go on; and one failed after */
        char refused[PATH_MAX + 512]; /* --owner: why the job may not be saved, or "" */
} dump_job;

/* The image directory, as ctl_job_dump_dir() wants it. */
static int dump_prepare_dir(dump_job *x) {
        return ctl_job_dump_dir(x->a, &x->dir_fd, &x->part_fd, x->part_name, sizeof(x->part_name));
}

/* criu dump's command line for tree i. */
static char **dump_criu_argv(const dump_job *x, size_t i, const char *barrier) {
        char root[16], dir[32];
        /* Ended by criu (its default) once step 3, at its post-dump, let
         * it go on. */
        const char *words[9 + CTL_CRIU_MNTNS_MAX_WORDS + 1] = { "dump", "-t", root, "-D", dir, "-o", "dump.log", "-v4",
                                                                 "--leave-running" };

        ctl_criu_mntns_words(words, x->a->leave_running ? 9 : 8, x->m.trees[i].mnt_ns, false);
        snprintf(root, sizeof(root), "%d", x->m.trees[i].root);
        snprintf(dir, sizeof(dir), "/proc/self/fd/%d", x->runs[i].dir_fd);
        return ctl_job_criu_argv(x->a, x->criu, words, barrier);
}

/* After every criu exited 0: each tree's images are there (its
 * inventory.img, which every dump writes); -EIO, said, if not. */
static int dump_check_images(const dump_job *x) {
        struct stat st;

        for (size_t i = 0; i < x->m.n_trees; i++)
                if (fstatat(x->runs[i].dir_fd, "inventory.img", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode)) {
                        fprintf(stderr, "%scriu dump of tree %d exited 0, but %s/%s/inventory.img is missing: nothing "
                                "was dumped\n", x->a->prefix, x->m.trees[i].root, x->a->images, x->m.trees[i].images);
                        return -EIO;
                }
        return 0;
}

static int dump_save(dump_job *x);

/* At post-dump, every tree frozen by its criu: each of their processes
 * pinned (the processes whose GPU state is resumed, or that are ended, are
 * those criu held), then step 3; below 0, no criu goes on. */
static int dump_at_barrier(void *data, const int *criu_pids, size_t n) {
        dump_job *x = data;
        ctl_proctree t = { 0 };
        int r = ctl_proctree_scan(&t);

        (void) criu_pids;
        (void) n;
        for (size_t i = 0; r == 0 && i < x->m.n_trees; i++)
                r = ctl_pins_add_tree(&x->pins, &t, x->m.trees[i].root);
        ctl_proctree_free(&t);
        /* --run: what criu froze is the job's init (its start time). */
        if (r == 0 && x->a->run_name && (!ctl_pins_find(&x->pins, x->m.trees[0].root) ||
                                         ctl_pins_find(&x->pins, x->m.trees[0].root)->start_time !=
                                                 x->a->run.init_start_time))
                r = -ESTALE;
        if (r < 0)
                fprintf(stderr, "%scannot pin the job's processes at post-dump: %s\n", x->a->prefix, strerror(-r));
        /* For its owner: no deleted file that a restore would make again
         * where the owner decides (dumpghost.h). */
        if (r == 0 && x->a->owner_given && (r = ctl_dump_ghost_check(&x->pins, x->a->owner, x->refused,
                                                                      sizeof(x->refused))) < 0 && r != -EACCES) {
                fprintf(stderr, "%s%s\n", x->a->prefix, x->refused);
                x->refused[0] = '\0';
        }
        if (r == 0 && (dump_save(x) < 0 ||
                       (x->a->before_end && x->a->before_end(x->a->before_end_data, x->dir_fd, &x->m) < 0))) {
                x->save_failed = true;
                r = -EIO;
        }
        /* The job's other parts (other nodes'): this one's images are
         * complete, its manifest taken back when they are not all. */
        if (r == 0 && ctl_cross_barrier_wait(x->a->barrier_fd, "dump", x->a->prefix) < 0) {
                ctl_job_dump_take_back(x->a, x->dir_fd);
                x->save_failed = x->cross_failed = true;
                r = -ECANCELED;
        }
        x->let_go = r == 0;
        return r;
}

/* A criu failed after step 3 let it go on (criu 4.2 can, or be killed):
 * the images and manifest were durable, other trees ended by then, so the
 * dump stands and the job is ended (or resumed) through its pins; 0. */
static int dump_criu_failed_after(dump_job *x) {
        ctl_job_print_criu_failures(x->a, "dump", x->runs, &x->m);
        fprintf(stderr, "%scriu failed after the images were complete and on disk and %s written: the dump stands, "
                "and the job is %s by this command\n", x->a->prefix, CTL_MANIFEST_NAME,
                x->a->leave_running ? "resumed (a tree whose criu failed may not run as before)" : "ended");
        x->criu_failed_after = true;
        return 0;
}

/* Step 2: every tree's criu dump at once.  Returns 0, -EIO (a criu
 * failed) or -errno (could not run them). */
static int dump_run_criu(dump_job *x) {
        char rundir[] = "/tmp/cudackpt-dump.XXXXXX", sock[sizeof(rundir) + 16], *script = NULL;
        ctl_criu_barrier barrier = { .sock = sock, .at_barrier = dump_at_barrier, .data = x };
        int r = 0;

        x->runs = calloc(x->m.n_trees, sizeof(*x->runs));
        if (!x->runs)
                return -ENOMEM;
        for (size_t i = 0; i < x->m.n_trees; i++)
                x->runs[i].status = -1;
        /* The barrier even for one tree: getting there proves the dump. */
        if (!mkdtemp(rundir))
                return -errno;
        script = ctl_job_barrier(x->a, rundir, sock, sizeof(sock), &r);
        for (size_t i = 0; r == 0 && i < x->m.n_trees; i++) {
                r = ctl_job_tree_dir(x->a, x->dir_fd, x->m.trees[i].images, &x->runs[i].dir_fd);
                if (r == 0)
                        r = ctl_job_run_set(x->a, &x->runs[i], dump_criu_argv(x, i, script), x->m.trees[i].images,
                                            "dump.log");
        }
        if (r == 0) {
                double t0 = monotime_ms_exact();

                r = ctl_criu_run_all(x->runs, x->m.n_trees, environ, &barrier);
                /* Its time at the barrier (pins, step 3, the job's other
                 * parts) is not criu's. */
                x->criu_ms = monotime_ms_exact() - t0 - (x->m.n_trees ? x->runs[0].held_ms : 0);
                if (r == -EIO && x->let_go)
                        r = dump_criu_failed_after(x);
        }
        if (r == 0)
                r = dump_check_images(x);
        unlink(sock);
        if (script)
                unlink(script);
        rmdir(rundir);
        free(script);
        return r;
}

/* ResumeGroup of exactly the suspended members (after a failed dump, or
 * --leave-running); the status of the call. */
static int dump_resume(dump_job *x) {
        double t0 = monotime_ms_exact();
        int status;

        if (!x->members)
                return CUDACKPT_EXIT_OK;
        status = ctl_job_group(x->client, x->a, CUDACKPT_METHOD_RESUME_GROUP, x->members, false, NULL);
        x->resume_ms = monotime_ms_exact() - t0;
        return status;
}

/* --json: one object on stdout, whatever the outcome. */
static void dump_print_json(const dump_job *x, const char *failed_step, bool resumed) {
        cJSON *o = cJSON_CreateObject();

        if (!o)
                return;
        ctl_job_json_source(o, x->a);
        cJSON_AddBoolToObject(o, "dumped", failed_step == NULL);
        if (failed_step) {
                cJSON_AddStringToObject(o, "failed_step", failed_step);
                cJSON_AddBoolToObject(o, "resumed", resumed);
        }
        cJSON_AddBoolToObject(o, "left_running", x->a->leave_running && !failed_step);
        if (x->criu_failed_after)
                cJSON_AddBoolToObject(o, "criu_failed_after", true);
        cJSON_AddNumberToObject(o, "members", (double) x->m.n_members);
        cJSON_AddItemToObject(o, "trees", ctl_job_trees_json(&x->m, x->runs, true));
        cJSON_AddNumberToObject(o, "suspend_ms", x->suspend_ms);
        cJSON_AddNumberToObject(o, "criu_ms", x->criu_ms);
        cJSON_AddBoolToObject(o, "synced", x->synced);
        if (x->synced)
                cJSON_AddNumberToObject(o, "sync_ms", x->sync_ms);
        if (x->resume_ms > 0)
                cJSON_AddNumberToObject(o, "resume_ms", x->resume_ms);
        cJSON_AddNumberToObject(o, "duration_ms", monotime_ms_exact() - x->t0);
        ctl_job_print_json(o);
}

/* Step 2 failed (or could not run): resume the job, say what happened. */
static int dump_fail_finish(dump_job *x);

static int dump_fail_criu(dump_job *x, int r) {
        const char *step = "step 2 of 3 (criu dump)";
        int status;

        if (x->save_failed)
                return dump_fail_finish(x);
        if (r != -EIO)
                fprintf(stderr, "%s%s could not be run: %s\n", x->a->prefix, step, strerror(-r));
        else
                ctl_job_print_criu_failures(x->a, "dump", x->runs, &x->m);
        /* No criu went on: each resumed its tree (criu's failure, or its
         * post-dump script's). */
        status = dump_resume(x);
        if (status == CUDACKPT_EXIT_OK)
                fprintf(stderr, "%s%s failed; the job was resumed (%zu CUDA process%s running again, every "
                        "tree running)\n", x->a->prefix, step, x->m.n_members,
                        x->m.n_members == 1 ? "" : "es");
        else
                fprintf(stderr, "%s%s failed, and the job could not be resumed (above); its CUDA processes "
                        "may still be checkpointed: cudackptctl resume %s %s\n", x->a->prefix, step,
                        ctl_selector_option(x->a->selector.kind), x->a->selector.arg);
        if (x->a->json)
                dump_print_json(x, "criu", status == CUDACKPT_EXIT_OK);
        /* Said last: the daemon tells its caller the last line. */
        if (x->refused[0])
                fprintf(stderr, "%sthe job may not be saved for its owner: %s\n", x->a->prefix, x->refused);
        return status != CUDACKPT_EXIT_OK ? status : x->refused[0] ? CUDACKPT_EXIT_PERMISSION_DENIED
                                                                   : CUDACKPT_EXIT_FAILURE;
}

/* Step 3 failed at the barrier: every criu resumed its tree, with its
 * connections; the job's GPU state is resumed. */
static int dump_fail_finish(dump_job *x) {
        int status;

        status = dump_resume(x);
        if (status == CUDACKPT_EXIT_OK)
                fprintf(stderr, "%sstep 3 of 3 failed: %s, so the job was not ended but resumed\n", x->a->prefix,
                        x->cross_failed ? "the job's other parts were not all dumped"
                                        : "the images are not known to be complete on disk");
        else
                fprintf(stderr, "%sstep 3 of 3 failed, and the job could not be resumed (above): cudackptctl resume "
                        "%s %s\n", x->a->prefix, ctl_selector_option(x->a->selector.kind), x->a->selector.arg);
        if (x->a->json)
                dump_print_json(x, "finish", status == CUDACKPT_EXIT_OK);
        return status == CUDACKPT_EXIT_OK ? CUDACKPT_EXIT_FAILURE : status;
}

/* The images on stable storage (unless --no-sync), then the manifest,
 * written and synced; 0 or -errno, said. */
static int dump_save(dump_job *x) {
        int r = ctl_verify_digest_dump(x->a, &x->m, x->runs);
        double t0 = monotime_ms_exact();

        if (r == 0 && !x->a->no_sync) {
                r = ctl_job_sync_dirs(x->runs, x->m.n_trees);
                x->sync_ms = monotime_ms_exact() - t0;
                x->synced = r == 0;
                if (r < 0)
                        fprintf(stderr, "%sthe images could not be synced to disk: %s\n", x->a->prefix, strerror(-r));
                else
                        ctl_job_progress(x->a, "images synced to disk in %.1f ms", x->sync_ms);
        }
        if (r < 0)
                return r;
        x->m.selector = x->a->selector.json;
        x->m.criu_version = x->criu_version;
        x->m.left_running = x->a->leave_running;
        /* --run: the name goes with the images, for restore to take again. */
        if (x->a->run_name && !(x->m.run = ctl_run_record_json(&x->a->run))) {
                x->m.selector = NULL;
                return -ENOMEM;
        }
        r = ctl_manifest_write(&x->m, x->dir_fd, x->part_fd, x->part_name);
        x->m.selector = NULL;
        x->m.criu_version = NULL;
        if (r < 0)
                fprintf(stderr, "%sthe images are written, but not %s/%s: %s\n", x->a->prefix, x->a->images,
                        CTL_MANIFEST_NAME, strerror(-r));
        else
                ctl_job_progress(x->a, "%s written", CTL_MANIFEST_NAME);
        return r;
}

/* The job ended by criu: its pinned processes gone (SIGKILL through the
 * pins for one that criu left, which a pidfd makes safe); the status. */
static int dump_end(dump_job *x) {
        size_t left;

        (void) ctl_pins_signal(&x->pins, SIGKILL);
        left = ctl_pins_await_gone(&x->pins, CTL_JOB_END_MS);
        if (left == 0) {
                ctl_job_progress(x->a, "job ended (%zu process%s)", x->pins.n, x->pins.n == 1 ? "" : "es");
                return CUDACKPT_EXIT_OK;
        }
        fprintf(stderr, "%sthe dump is complete, but %zu process%s of the job did not end within %d ms of SIGKILL\n",
                x->a->prefix, left, left == 1 ? "" : "es", CTL_JOB_END_MS);
        return CUDACKPT_EXIT_FAILURE;
}

/* After every criu went on (step 3 done at the barrier): the job ended,
 * or its GPU state resumed with --leave-running. */
static int dump_finish(dump_job *x) {
        int status;

        if (x->a->leave_running) {
                status = dump_resume(x);
                if (status != CUDACKPT_EXIT_OK)
                        fprintf(stderr, "%sthe dump is complete, but the job could not be resumed (above)\n",
                                x->a->prefix);
        } else
                status = dump_end(x);
        if (x->a->json)
                dump_print_json(x, status == CUDACKPT_EXIT_OK ? NULL : "finish", false);
        else if (status == CUDACKPT_EXIT_OK) {
                printf("dumped %zu CUDA process%s in %zu tree%s to ", x->m.n_members, x->m.n_members == 1 ? "" : "es",
                       x->m.n_trees, x->m.n_trees == 1 ? "" : "s");
                if (!x->a->archive)
                        ctl_fputs_safe(x->a->images, stdout);
                else if (strcmp(x->a->archive, "-") == 0)
                        fputs("the archive on stdout", stdout);
                else {
                        fputs("the archive ", stdout);
                        ctl_fputs_safe(x->a->archive, stdout);
                }
                printf(": suspend %.1f ms (GPU memory free from then on), criu %.1f ms", x->suspend_ms, x->criu_ms);
                if (x->synced)
                        printf(", sync %.1f ms", x->sync_ms);
                if (x->a->leave_running)
                        printf(", resumed %.1f ms", x->resume_ms);
                printf(", total %.1f ms\n", monotime_ms_exact() - x->t0);
        }
        return status;
}

/* Steps 1 and the trees; the exit status, CUDACKPT_EXIT_OK to go on. */
static int dump_suspend(dump_job *x) {
        const char *path = ctl_socket_path(x->a->socket);
        double t0;
        int r, status;

        r = cudackpt_client_connect(path, &x->client);
        if (r < 0) {
                fprintf(stderr, "%scannot reach cudackptd at %s: %s\n", x->a->prefix, path, strerror(-r));
                return CUDACKPT_EXIT_UNREACHABLE;
        }
        x->processes = ctl_dump_gpus_processes(x->client, x->a->selector.json);
        x->gpus = ctl_dump_gpus_ask(x->client);
        t0 = monotime_ms_exact();
        status = ctl_job_group(x->client, x->a, CUDACKPT_METHOD_SUSPEND_GROUP, NULL, true, &x->members);
        x->suspend_ms = monotime_ms_exact() - t0;
        if (status != CUDACKPT_EXIT_OK) {
                fprintf(stderr, "%sstep 1 of 3 (suspend the job as one group) failed; nothing was dumped\n",
                        x->a->prefix);
                return status;
        }
        ctl_job_progress(x->a, "job suspended in %.1f ms; GPU memory free", x->suspend_ms);
        r = ctl_dump_find_trees(x->a, x->members, x->processes, &x->m, &x->outside);
        /* --run: still the job's init (not a process that took its pid since). */
        if (r == 0 && x->a->run_name &&
            (!x->m.trees[0].pid_ns || ctl_proc_start_time(x->m.trees[0].root) != x->a->run.init_start_time))
                r = -ESTALE;
        if (r < 0) {
                fputs(x->a->prefix, stderr);
                if (r == -EXDEV)
                        fprintf(stderr, "CUDA process %d of the job is in none of its process trees (it exited, or "
                                "its parent did, since the suspend): nothing was dumped\n", x->outside);
                else if (r == -ESTALE)
                        fprintf(stderr, "job %s ended since its name was read (pid %s is not its init): nothing "
                                "was dumped\n", x->a->run_name, x->a->run_tree);
                else if (r == -ENXIO)
                        fputs("a process of the job entered its pid namespace from outside (setns): criu cannot "
                              "dump it with the namespace; nothing was dumped\n", stderr);
                else if (r == -E2BIG)
                        fputs("the job has more process trees than dump runs criu at once (" CTL_JOB_MAX_TREES_TEXT
                              "): nothing was dumped\n", stderr);
                else
                        fprintf(stderr, "cannot read the job's process trees: %s\n",
                                r == -ESRCH ? "no process of the selection is left" : strerror(-r));
                status = dump_resume(x);
                if (status == CUDACKPT_EXIT_OK)
                        fprintf(stderr, "%sthe job was resumed\n", x->a->prefix);
                return status == CUDACKPT_EXIT_OK ? CUDACKPT_EXIT_FAILURE : status;
        }
        ctl_dump_gpus_record(&x->m, x->gpus, x->processes);
        return CUDACKPT_EXIT_OK;
}

int ctl_job_dump(const ctl_job_args *a) {
        dump_job x = { .a = a, .dir_fd = -1, .part_fd = -1, .t0 = monotime_ms_exact() };
        char err[PATH_MAX + 128];
        ctl_criu_signals held;
        int status, r;

        ctl_criu_signal = 0;
        if (ctl_criu_find(x.criu, sizeof(x.criu), x.criu_version, sizeof(x.criu_version), err, sizeof(err)) < 0) {
                fprintf(stderr, "%s%s; nothing was suspended\n", a->prefix, err);
                return CUDACKPT_EXIT_FAILURE;
        }
        status = dump_prepare_dir(&x);
        if (status == CUDACKPT_EXIT_OK)
                status = dump_suspend(&x);
        if (status != CUDACKPT_EXIT_OK && a->json)
                dump_print_json(&x, x.client ? "suspend" : "prepare", false);
        if (status == CUDACKPT_EXIT_OK) {
                ctl_job_progress(a, "%zu tree%s (criu %s)", x.m.n_trees, x.m.n_trees == 1 ? "" : "s", x.criu_version);
                /* A signal now waits for criu and for the end of the job:
                 * stopped halfway, either would leave the tasks it froze or
                 * stopped in no known state. */
                ctl_criu_signals_hold(&held);
                r = dump_run_criu(&x);
                if (r == 0)
                        ctl_job_progress(a, "done in %.1f ms", x.criu_ms);
                status = r < 0 ? dump_fail_criu(&x, r) : dump_finish(&x);
                ctl_criu_signals_restore(&held);
                if (ctl_criu_signal)
                        fprintf(stderr, "%sgot signal %d during criu dump: waited for criu to finish\n", a->prefix,
                                (int) ctl_criu_signal);
        }
        if (x.part_fd >= 0) {
                close(x.part_fd);
                (void) unlinkat(x.dir_fd, x.part_name, 0); /* renamed away after a good dump */
        }
        if (x.dir_fd >= 0)
                close(x.dir_fd);
        for (size_t i = 0; x.runs && i < x.m.n_trees; i++)
                if (x.runs[i].dir_fd > STDERR_FILENO)
                        close(x.runs[i].dir_fd);
        ctl_pins_free(&x.pins);
        ctl_criu_runs_free(x.runs, x.m.n_trees);
        ctl_manifest_free(&x.m);
        cJSON_Delete(x.processes);
        cJSON_Delete(x.gpus);
        cJSON_Delete(x.members);
        cudackpt_client_free(x.client);
        return status;
}
