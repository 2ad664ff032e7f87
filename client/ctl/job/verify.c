/* verify.c: the digests of digest.c where dump, restore --images and
 * cudackptctl verify --images need them (see verify.h). */
#include "verify.h"

#include "describe.h"
#include "digest.h"
#include "exitcode.h"
#include "monotime.h"

#include <cJSON.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* digest.c's view of m's trees, tree i in fds[i]; NULL: out of memory. */
static ctl_digest_tree *verify_trees(const ctl_manifest *m, const int *fds, const ctl_criu_run *runs) {
        ctl_digest_tree *t = calloc(m->n_trees + 1, sizeof(*t));

        for (size_t i = 0; t && i < m->n_trees; i++)
                t[i] = (ctl_digest_tree) { .dir_fd = fds ? fds[i] : runs[i].dir_fd, .name = m->trees[i].images,
                                           .set = m->trees[i].files };
        return t;
}

static double verify_mb_s(uint64_t bytes, double ms) {
        return ms > 0 ? (double) bytes / 1e6 / (ms / 1e3) : 0;
}

int ctl_verify_digest_dump(const ctl_job_args *a, ctl_manifest *m, const ctl_criu_run *runs) {
        char err[PATH_MAX + 128] = "";
        double t0 = monotime_ms_exact(), ms;
        ctl_digest_tree *t;
        uint64_t bytes = 0;
        int r = 0;

        for (size_t i = 0; r == 0 && i < m->n_trees; i++)
                if (!m->trees[i].files && !(m->trees[i].files = calloc(1, sizeof(ctl_digest_set))))
                        r = -ENOMEM;
        t = r == 0 ? verify_trees(m, NULL, runs) : NULL;
        r = t ? ctl_digest_compute(t, m->n_trees, &bytes, err, sizeof(err)) : -ENOMEM;
        ms = monotime_ms_exact() - t0;
        free(t);
        if (r < 0)
                fprintf(stderr, "%sthe images could not be hashed: %s\n", a->prefix, *err ? err : strerror(-r));
        else
                ctl_job_progress(a, "images hashed: %.1f MB in %.1f ms (%.0f MB/s)", (double) bytes / 1e6, ms,
                                 verify_mb_s(bytes, ms));
        return r;
}

int ctl_verify_before_restore(const ctl_job_args *a, const ctl_manifest *m, const ctl_criu_run *runs) {
        char err[PATH_MAX + 128] = "";
        double t0 = monotime_ms_exact(), ms;
        ctl_digest_tree *t;
        uint64_t bytes = 0;
        int r;

        if (a->no_verify) {
                if (ctl_manifest_has_digests(m))
                        ctl_job_progress(a, "the images' digests were not checked (--no-verify)");
                return CUDACKPT_EXIT_OK;
        }
        if (!ctl_manifest_has_digests(m)) {
                fprintf(stderr, "%s%s/%s has no digests of the images (a dump older than them): nothing can tell "
                        "whether they are whole; give --no-verify to restore them all the same; nothing was "
                        "restored\n", a->prefix, a->images, CTL_MANIFEST_NAME);
                return CUDACKPT_EXIT_IMAGES_DAMAGED;
        }
        t = verify_trees(m, NULL, runs);
        r = t ? ctl_digest_verify(t, m->n_trees, &bytes, err, sizeof(err)) : -ENOMEM;
        ms = monotime_ms_exact() - t0;
        free(t);
        if (r == 0) {
                ctl_job_progress(a, "images verified: %.1f MB in %.1f ms (%.0f MB/s)", (double) bytes / 1e6, ms,
                                 verify_mb_s(bytes, ms));
                return CUDACKPT_EXIT_OK;
        }
        fprintf(stderr, "%sthe images in %s are not as dumped: %s; nothing was restored\n", a->prefix, a->images,
                *err ? err : strerror(-r));
        return r == -EBADMSG ? CUDACKPT_EXIT_IMAGES_DAMAGED : CUDACKPT_EXIT_FAILURE;
}

/* ---- cudackptctl verify --images DIR ---------------------------------------- */

static void verify_print(const ctl_job_args *a, const ctl_manifest *m, const char *error, uint64_t bytes, double ms) {
        size_t files = 0;
        cJSON *o;

        for (size_t i = 0; m && i < m->n_trees; i++)
                files += m->trees[i].files ? m->trees[i].files->n : 0;
        if (!a->json) {
                if (!error) {
                        printf("%s: %zu file%s in %zu tree%s as dumped (%.1f MB, %.1f ms, %.0f MB/s)\n", a->images,
                               files, files == 1 ? "" : "s", m->n_trees, m->n_trees == 1 ? "" : "s",
                               (double) bytes / 1e6, ms, verify_mb_s(bytes, ms));
                }
                return;
        }
        o = cJSON_CreateObject();
        if (!o)
                return;
        cJSON_AddStringToObject(o, "images", a->images);
        cJSON_AddBoolToObject(o, "verified", error == NULL);
        if (error)
                cJSON_AddStringToObject(o, "error", error);
        cJSON_AddNumberToObject(o, "files", (double) files);
        cJSON_AddNumberToObject(o, "bytes", (double) bytes);
        cJSON_AddNumberToObject(o, "duration_ms", ms);
        ctl_job_print_json(o);
}

/* DIR's trees opened (read only: a copy may be anyone's) into fds. */
static int verify_open_trees(const ctl_job_args *a, int dir_fd, const ctl_manifest *m, int *fds, char *err,
                             size_t err_size) {
        for (size_t i = 0; i < m->n_trees; i++) {
                fds[i] = openat(dir_fd, m->trees[i].images, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fds[i] < 0) {
                        snprintf(err, err_size, "%s/%s: %s", a->images, m->trees[i].images, strerror(errno));
                        return errno == ENOENT || errno == ENOTDIR || errno == ELOOP ? -EBADMSG : -errno;
                }
        }
        return 0;
}

int ctl_job_verify(const ctl_job_args *a) {
        char err[PATH_MAX + 512] = "";
        ctl_manifest m = { 0 };
        double t0 = monotime_ms_exact();
        int dir_fd = open(a->images, O_RDONLY | O_DIRECTORY | O_CLOEXEC), *fds = NULL, r;
        ctl_digest_tree *t = NULL;
        uint64_t bytes = 0;

        if (dir_fd < 0) {
                r = -errno;
                snprintf(err, sizeof(err), "cannot open %s: %s", a->images, strerror(errno));
        } else
                r = ctl_manifest_read_copy(dir_fd, a->images, &m, err, sizeof(err));
        if (r == 0 && !ctl_manifest_has_digests(&m)) {
                snprintf(err, sizeof(err), "%s/%s has no digests of the images (a dump older than them): nothing "
                         "to check them against", a->images, CTL_MANIFEST_NAME);
                r = -ENODATA;
        }
        if (r == 0) {
                fds = malloc(m.n_trees * sizeof(int));
                for (size_t i = 0; fds && i < m.n_trees; i++)
                        fds[i] = -1;
                r = fds ? verify_open_trees(a, dir_fd, &m, fds, err, sizeof(err)) : -ENOMEM;
        }
        if (r == 0) {
                t = verify_trees(&m, fds, NULL);
                r = t ? ctl_digest_verify(t, m.n_trees, &bytes, err, sizeof(err)) : -ENOMEM;
        }
        if (r < 0 && !a->json)
                fprintf(stderr, "%s%s\n", a->prefix, *err ? err : strerror(-r));
        verify_print(a, &m, r < 0 ? (*err ? err : strerror(-r)) : NULL, bytes, monotime_ms_exact() - t0);
        for (size_t i = 0; fds && i < m.n_trees; i++)
                if (fds[i] >= 0)
                        close(fds[i]);
        free(fds);
        free(t);
        ctl_manifest_free(&m);
        if (dir_fd >= 0)
                close(dir_fd);
        /* A manifest not as dump writes it, or without digests, fails the check as a damaged file does. */
        return r == 0 ? CUDACKPT_EXIT_OK
               : r == -EBADMSG || r == -EINVAL || r == -ENODATA ? CUDACKPT_EXIT_IMAGES_DAMAGED
                                                                 : CUDACKPT_EXIT_FAILURE;
}
