/* harness_skip.c: tests that skip themselves (harness.h, itest_skip()).
 *
 * Check has no verdict for "skipped": a test that returns early passes.
 * So a skipping test says so through a file of the run's directory, one
 * line a skip (its children run in Check's forked processes, which share
 * nothing else with the runner), and itest_main() reads it back once the
 * suite has run: every skip is printed as "SKIP: TEST: why", which
 * tests/skipped.py lists after `make test`, and a suite whose every test
 * skipped exits 77, which ctest reports as skipped. */
#include "harness_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The run's skip file; set by itest_skips_begin() before the runner forks. */
static char itest_skip_file[128];

void itest_skips_begin(const char *root)
{
        /* A dot file: the run's directory holds the dirs of failed tests besides. */
        snprintf(itest_skip_file, sizeof(itest_skip_file), "%s/.skipped", root);
}

void itest_skip(const char *fmt, ...)
{
        char line[512];
        va_list ap;
        int n = snprintf(line, sizeof(line), "%s: ", tcase_name());

        va_start(ap, fmt);
        vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
        va_end(ap);
        /* One write of the whole line: the file is the only record. */
        size_t len = strlen(line);
        if (len == sizeof(line) - 1)
                len--;
        line[len++] = '\n';
        int fd = open(itest_skip_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        ck_assert_msg(fd >= 0 && write(fd, line, len) == (ssize_t)len, "cannot record the skip of %s in %s: %s",
                      tcase_name(), itest_skip_file, strerror(errno));
        close(fd);
}

bool itest_need_root(void)
{
        if (geteuid() == 0)
                return false;
        itest_skip("needs root to switch uids");
        return true;
}

int itest_skips_report(int n_run, int failed)
{
        FILE *f = fopen(itest_skip_file, "re");
        char line[512];
        int n = 0;

        while (f && fgets(line, sizeof(line), f)) {
                printf("SKIP: %s", line);
                n++;
        }
        if (f)
                fclose(f);
        if (n > 0)
                printf("%d of %d tests skipped\n", n, n_run);
        fflush(stdout);
        if (failed)
                return 1;
        /* Nothing was tested: the suite counts as skipped, not passed. */
        return n > 0 && n >= n_run ? 77 : 0;
}
