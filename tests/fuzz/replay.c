/* replay.c: runs fuzz inputs through fuzz_request.c without libFuzzer.
 *
 * The standard standalone runner: every argument is a file or a directory
 * of files (in name order, dot files skipped), and each file is passed once
 * to LLVMFuzzerTestOneInput.  Exits 0 when all ran; a finding abort()s on
 * the way, after the name of the file on stderr.  Built with the ordinary
 * compiler, this is the ctest test fuzz.corpus, which replays the seed
 * corpus tests/fuzz/corpus/ (and so also reproduces a crash file of a
 * libFuzzer run: `fuzz-replay crash-...`). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fuzz.h"

static unsigned n_run;

static int run_file(const char *path)
{
        FILE *f = fopen(path, "rb");
        unsigned char *data = NULL;
        size_t len = 0, cap = 0, n;

        if (!f) {
                fprintf(stderr, "fuzz-replay: %s: %s\n", path, strerror(errno));
                return -1;
        }
        do {
                if (len == cap) {
                        unsigned char *d;
                        cap = cap ? cap * 2 : 4096;
                        d = realloc(data, cap);
                        if (!d) {
                                fprintf(stderr, "fuzz-replay: out of memory\n");
                                free(data);
                                fclose(f);
                                return -1;
                        }
                        data = d;
                }
                n = fread(data + len, 1, cap - len, f);
                len += n;
        } while (n > 0);
        if (ferror(f)) {
                fprintf(stderr, "fuzz-replay: %s: read error\n", path);
                free(data);
                fclose(f);
                return -1;
        }
        fclose(f);
        fprintf(stderr, "fuzz-replay: %s (%zu bytes)\n", path, len);
        /* A copy of exactly len bytes, so ASan sees any read past the input. */
        unsigned char *copy = malloc(len ? len : 1);
        if (!copy) {
                free(data);
                return -1;
        }
        memcpy(copy, data, len);
        free(data);
        LLVMFuzzerTestOneInput(copy, len);
        free(copy);
        n_run++;
        return 0;
}

static int run_path(const char *path)
{
        struct dirent **names;
        struct stat st;
        int n, r = 0;

        if (stat(path, &st) < 0) {
                fprintf(stderr, "fuzz-replay: %s: %s\n", path, strerror(errno));
                return -1;
        }
        if (!S_ISDIR(st.st_mode))
                return run_file(path);
        n = scandir(path, &names, NULL, alphasort);
        if (n < 0) {
                fprintf(stderr, "fuzz-replay: %s: %s\n", path, strerror(errno));
                return -1;
        }
        for (int i = 0; i < n; i++) {
                char *p = NULL;

                if (r == 0 && names[i]->d_name[0] != '.') {
                        if (asprintf(&p, "%s/%s", path, names[i]->d_name) < 0) {
                                r = -1;
                        } else {
                                if (stat(p, &st) == 0 && S_ISREG(st.st_mode))
                                        r = run_file(p);
                                free(p);
                        }
                }
                free(names[i]);
        }
        free(names);
        return r;
}

int main(int argc, char **argv)
{
        struct timespec t0, t1;

        if (argc < 2) {
                fprintf(stderr, "Usage: %s FILE|DIR...\n"
                                "Runs each input once through the cudackptd request fuzz target.\n",
                        argv[0]);
                return 2;
        }
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int i = 1; i < argc; i++)
                if (run_path(argv[i]) < 0)
                        return 1;
        if (n_run == 0) {
                fprintf(stderr, "fuzz-replay: no inputs found\n");
                return 1;
        }
        fuzz_request_teardown();
        clock_gettime(CLOCK_MONOTONIC, &t1);
        printf("fuzz-replay: %u inputs, no finding, %.2f s\n", n_run,
               (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
        return 0;
}
