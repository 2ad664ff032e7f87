/* archivejob.c: dump, restore and verify through one archive (see
 * archivejob.h).
 *
 * dump --archive: criu needs a directory, so the dump goes into a private
 * one (workdir.c: 0700, a random name, removed afterwards), whose files
 * are never synced (they are not kept); once its manifest is written, and
 * before the job is ended, the directory is streamed (archivewrite.c) into
 * FILE through a temporary name in FILE's directory (O_EXCL, mode 0600),
 * fsynced, renamed into place (never over an existing file) and the
 * directory fsynced: the job ends only once the archive is on stable
 * storage.  With "-" the stream goes to stdout (what the command prints
 * there goes to stderr instead) and the job ends only once all of it was
 * written (and, on a regular file, fsynced); stdout is closed after the
 * end.  What the far end of a pipe does with it is the far end's
 * (docs/migration.md).  A failure before the end
 * resumes the job, as for dump --images.
 *
 * restore --archive: the stream is unpacked into a private directory,
 * every entry judged and every file's digest checked on the way in
 * (archiveread.c), then restored as restore --images does (which checks
 * the digests once more, on what criu will read), and the directory
 * removed; but when the restore fails after a stream on stdin was
 * unpacked, the directory is the job's only copy here: it is kept, and
 * the command says how to restore it again. */
#include "archivejob.h"

#include "archivewrite.h"
#include "archiveread.h"
#include "describe.h"
#include "dump.h"
#include "exitcode.h"
#include "jobrestore.h"
#include "safedir.h"
#include "workdir.h"

#include <cJSON.h>

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Where dump --archive's stream goes. */
typedef struct asink {
        const ctl_job_args *a;
        int out_fd;
        int dest_fd;                      /* FILE's directory; -1 for "-" */
        char part[NAME_MAX + 1];          /* FILE's temporary name in it; "" once renamed */
        char final[NAME_MAX + 1];         /* FILE's last component */
        ctl_archive_stats st;
} asink;

static double archive_mb_s(uint64_t bytes, double ms) {
        return ms > 0 ? (double) bytes / 1e6 / (ms / 1e3) : 0;
}

/* FILE: its directory checked (workdir.c), FILE not there yet, its
 * temporary file made. */
static int asink_open_file(asink *s, const char *path, char *err, size_t err_size) {
        char copy[PATH_MAX], copy2[PATH_MAX], *base, *dir;
        struct stat st;
        int r;

        if (snprintf(copy, sizeof(copy), "%s", path) >= (int) sizeof(copy))
                return snprintf(err, err_size, "%s: %s", path, strerror(ENAMETOOLONG)), -ENAMETOOLONG;
        memcpy(copy2, copy, sizeof(copy));
        base = basename(copy);
        dir = dirname(copy2);
        if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0 || strlen(base) > NAME_MAX - 40)
                return snprintf(err, err_size, "%s does not name a file", path), -EINVAL;
        snprintf(s->final, sizeof(s->final), "%s", base);
        r = ctl_workdir_parent(dir, &s->dest_fd, err, err_size);
        if (r < 0)
                return r;
        if (fstatat(s->dest_fd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
                return snprintf(err, err_size, "%s already exists: give a new name", path), -EEXIST;
        snprintf(copy, sizeof(copy), ".%s.part", base);
        r = ctl_workdir_random_name(copy, s->part, sizeof(s->part));
        s->out_fd = r < 0 ? r
                          : openat(s->dest_fd, s->part, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (s->out_fd < 0) {
                r = r < 0 ? r : -errno;
                s->part[0] = '\0';
                return snprintf(err, err_size, "cannot write into the directory of %s: %s", path, strerror(-r)), r;
        }
        return 0;
}

/* "-": the stream on stdout, what the command prints there on stderr. */
static int asink_open_stdout(asink *s, char *err, size_t err_size) {
        if (isatty(STDOUT_FILENO))
                return snprintf(err, err_size, "the archive would go to a terminal: redirect stdout"), -ENOTTY;
        s->out_fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
        if (s->out_fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
                return snprintf(err, err_size, "cannot take stdout: %s", strerror(errno)), -errno;
        return 0;
}

/* FILE fsynced, renamed into place, its directory fsynced; "-" fsynced
 * when it is a regular file, and left open: closed once the job ended, so
 * that a restore at the far end of a pipe on this node, which reads to
 * the stream's end first, finds the job's pids free. */
static int asink_durable(asink *s) {
        bool sync = !s->a->no_sync;
        struct stat st;
        int r = 0;

        if (s->dest_fd >= 0) {
                if (sync && fsync(s->out_fd) < 0)
                        return -errno;
                /* A file system without RENAME_NOREPLACE: a link, which
                 * does not replace either, then the temporary name gone. */
                if (renameat2(s->dest_fd, s->part, s->dest_fd, s->final, RENAME_NOREPLACE) < 0 &&
                    (errno != EINVAL || linkat(s->dest_fd, s->part, s->dest_fd, s->final, 0) < 0 ||
                     unlinkat(s->dest_fd, s->part, 0) < 0))
                        return -errno;
                s->part[0] = '\0';
                return sync && fsync(s->dest_fd) < 0 ? -errno : 0;
        }
        if (sync && fstat(s->out_fd, &st) == 0 && S_ISREG(st.st_mode) && fsync(s->out_fd) < 0)
                r = -errno;
        return r;
}

/* dump's before_end: the private directory streamed, made durable. */
static int asink_before_end(void *data, int dir_fd, const struct ctl_manifest *m) {
        struct sigaction ign = { .sa_handler = SIG_IGN }, old;
        asink *s = data;
        char err[PATH_MAX + 256] = "";
        int r;

        /* A reader that went away is an EPIPE, and the job is resumed (only
         * here: criu, run before, does not inherit the disposition). */
        sigemptyset(&ign.sa_mask);
        sigaction(SIGPIPE, &ign, &old);
        r = ctl_archive_write(dir_fd, m, s->out_fd, &s->st, err, sizeof(err));
        if (r == 0)
                r = asink_durable(s);
        sigaction(SIGPIPE, &old, NULL);
        if (r < 0) {
                fprintf(stderr, "%sthe archive could not be written: %s\n", s->a->prefix, *err ? err : strerror(-r));
                return r;
        }
        ctl_job_progress(s->a, "archive written%s: %.1f MB of images, %.1f MB compressed, %.1f ms (%.0f MB/s)",
                         s->a->no_sync ? "" : " and synced", (double) s->st.image_bytes / 1e6,
                         (double) s->st.stream_bytes / 1e6, s->st.ms, archive_mb_s(s->st.image_bytes, s->st.ms));
        return 0;
}

/* dump's taken_back: the archive made at before_end removed (its
 * directory synced), as the manifest is; one on stdout cannot be. */
static void asink_taken_back(void *data) {
        asink *s = data;

        if (s->dest_fd < 0) {
                fprintf(stderr, "%sthe archive already written on stdout is complete: whoever reads it must not "
                        "restore it, the job runs on here\n", s->a->prefix);
                return;
        }
        if (s->part[0])
                return; /* never renamed into place: removed with the rest */
        if (unlinkat(s->dest_fd, s->final, 0) < 0 || (!s->a->no_sync && fsync(s->dest_fd) < 0))
                fprintf(stderr, "%scannot take the archive %s back: %s; do not restore it, the job runs on\n",
                        s->a->prefix, s->a->archive, strerror(errno));
}

/* --json's one object when the archive failed before dump or restore ran. */
static void archive_print_failed(const ctl_job_args *a, const char *verb, const char *step) {
        cJSON *o;

        if (!a->json || !(o = cJSON_CreateObject()))
                return;
        cJSON_AddStringToObject(o, "archive", a->archive);
        cJSON_AddBoolToObject(o, verb, false);
        cJSON_AddStringToObject(o, "failed_step", step);
        ctl_job_print_json(o);
}

static void archive_remove(const ctl_job_args *a, ctl_workdir *w) {
        int r = ctl_workdir_remove(w);

        if (r < 0)
                fprintf(stderr, "%scannot remove the private directory %s: %s\n", a->prefix, w->path, strerror(-r));
}

/* A stream's checked copy, kept after a failed restore (FILE is still
 * intact, the stream is not): its descriptors closed, its path said. */
static void archive_keep(const ctl_job_args *a, ctl_workdir *w) {
        close(w->fd);
        close(w->parent_fd);
        w->fd = w->parent_fd = -1;
        fprintf(stderr, "%sthe images unpacked from stdin and checked are kept in %s: once the cause is fixed, restore "
                "them with\n  cudackptctl restore --images %s\nand remove that directory once the job runs again\n",
                a->prefix, w->path, w->path);
}

int ctl_archive_dump(const ctl_job_args *a) {
        asink s = { .a = a, .out_fd = -1, .dest_fd = -1 };
        ctl_workdir w = { .parent_fd = -1, .fd = -1 };
        ctl_job_args b = *a;
        char err[PATH_MAX + 256] = "";
        int r, status = CUDACKPT_EXIT_FAILURE;

        r = strcmp(a->archive, "-") == 0 ? asink_open_stdout(&s, err, sizeof(err))
                                         : asink_open_file(&s, a->archive, err, sizeof(err));
        if (r == 0)
                r = ctl_workdir_make(a->work_dir ? a->work_dir : CTL_ARCHIVE_WORK_DIR, &w, err, sizeof(err));
        if (r < 0) {
                fprintf(stderr, "%s%s; nothing was suspended\n", a->prefix, err);
                archive_print_failed(a, "dumped", "prepare");
        } else {
                b.images = w.path;
                b.no_sync = true; /* the private directory is not kept: the archive is synced */
                b.before_end = asink_before_end;
                b.taken_back = asink_taken_back;
                b.before_end_data = &s;
                status = ctl_job_dump(&b);
                archive_remove(a, &w);
        }
        if (status == CUDACKPT_EXIT_OK && !a->json) {
                printf("archive ");
                ctl_fputs_safe(a->archive, stdout);
                printf(": %llu files, %.1f MB of images, %.1f MB compressed, written in %.1f ms\n",
                       (unsigned long long) s.st.files, (double) s.st.image_bytes / 1e6,
                       (double) s.st.stream_bytes / 1e6, s.st.ms);
        }
        if (s.part[0])
                (void) unlinkat(s.dest_fd, s.part, 0);
        if (s.out_fd >= 0)
                close(s.out_fd);
        if (s.dest_fd >= 0)
                close(s.dest_fd);
        return status;
}

/* The archive (FILE or stdin) unpacked into a fresh private directory w,
 * checked on the way in; the exit status (said on stderr, tail after the
 * reason, on failure).  For restore (trusted), FILE is opened as an image
 * directory is (safedir.h): root would restore whatever another user wrote
 * there, with the digests of their choice; verify reads anyone's copy. */
static int archive_unpack(const ctl_job_args *a, ctl_workdir *w, ctl_archive_stats *st, bool trusted,
                          const char *tail) {
        ctl_archive_limits lim = { a->archive_max_files, a->archive_max_bytes };
        bool std_in = strcmp(a->archive, "-") == 0;
        int in_fd = std_in ? STDIN_FILENO : -1;
        char err[PATH_MAX + 512] = "";
        ctl_manifest m = { 0 };
        int r = 0;

        if (!std_in && trusted)
                r = ctl_safedir_open_file(a->archive, &in_fd, err, sizeof(err));
        else if (!std_in && (in_fd = open(a->archive, O_RDONLY | O_CLOEXEC)) < 0) {
                r = -errno;
                snprintf(err, sizeof(err), "cannot open it: %s", strerror(-r));
        }
        if (r == 0 && std_in && isatty(in_fd))
                r = -ENOTTY, snprintf(err, sizeof(err), "stdin is a terminal, not an archive");
        if (r == 0)
                r = ctl_workdir_make(a->work_dir ? a->work_dir : CTL_ARCHIVE_WORK_DIR, w, err, sizeof(err));
        if (r == 0)
                r = ctl_archive_read(in_fd, w->fd, &lim, &m, st, err, sizeof(err));
        ctl_manifest_free(&m);
        if (!std_in && in_fd >= 0)
                close(in_fd);
        if (r == 0)
                return CUDACKPT_EXIT_OK;
        fprintf(stderr, "%sthe archive %s: %s%s\n", a->prefix, std_in ? "on stdin" : a->archive, err, tail);
        return r == -EBADMSG ? CUDACKPT_EXIT_IMAGES_DAMAGED : CUDACKPT_EXIT_FAILURE;
}

int ctl_archive_restore(const ctl_job_args *a) {
        ctl_workdir w = { .parent_fd = -1, .fd = -1 };
        ctl_archive_stats st;
        ctl_job_args b = *a;
        int status = archive_unpack(a, &w, &st, true, "; nothing was restored");
        bool unpacked = status == CUDACKPT_EXIT_OK;

        if (!unpacked)
                archive_print_failed(a, "restored", "archive");
        else {
                ctl_job_progress(a, "archive unpacked and checked: %.1f MB of images from %.1f MB, %.1f ms "
                                 "(%.0f MB/s)", (double) st.image_bytes / 1e6, (double) st.stream_bytes / 1e6, st.ms,
                                 archive_mb_s(st.image_bytes, st.ms));
                b.images = w.path;
                status = ctl_job_restore(&b);
        }
        if (unpacked && status != CUDACKPT_EXIT_OK && strcmp(a->archive, "-") == 0)
                archive_keep(a, &w);
        else
                archive_remove(a, &w);
        return status;
}

int ctl_archive_verify(const ctl_job_args *a) {
        ctl_workdir w = { .parent_fd = -1, .fd = -1 };
        ctl_archive_stats st = { 0 };
        int status = archive_unpack(a, &w, &st, false, "");
        cJSON *o;

        archive_remove(a, &w);
        if (!a->json) {
                if (status == CUDACKPT_EXIT_OK)
                        printf("archive %s: %llu files as dumped (%.1f MB of images, %.1f MB compressed, %.1f ms)\n",
                               strcmp(a->archive, "-") == 0 ? "on stdin" : a->archive,
                               (unsigned long long) st.files, (double) st.image_bytes / 1e6,
                               (double) st.stream_bytes / 1e6, st.ms);
                return status;
        }
        o = cJSON_CreateObject();
        if (o) {
                cJSON_AddStringToObject(o, "archive", a->archive);
                cJSON_AddBoolToObject(o, "verified", status == CUDACKPT_EXIT_OK);
                cJSON_AddNumberToObject(o, "files", (double) st.files);
                cJSON_AddNumberToObject(o, "bytes", (double) st.image_bytes);
                cJSON_AddNumberToObject(o, "compressed_bytes", (double) st.stream_bytes);
                cJSON_AddNumberToObject(o, "duration_ms", st.ms);
        }
        ctl_job_print_json(o);
        return status;
}
