/* test_units.c: the unit files pass systemd's own checks.
 *
 *   verify:   `systemd-analyze verify` on cudackptd.socket and
 *             cudackptd.service must succeed and print nothing (a warning
 *             about an unknown key or a missing man page fails the test).
 *             The service is the copy CMake generated for the build tree,
 *             with ExecStart= naming the built daemon, because verify checks
 *             that the program exists; the man pages are looked up in a
 *             scratch MANPATH made from docs/man.
 *   security: `systemd-analyze security --offline=yes` must rate the
 *             service at or below THRESHOLD, in tenths as --threshold=
 *             takes it (24 = exposure 2.4; docs/operations.md records the
 *             score), so that a change that loosens the sandbox shows.
 *
 * Usage: test-sd-units verify SYSTEMD-ANALYZE UNITDIR MANSRCDIR
 *        test-sd-units security SYSTEMD-ANALYZE UNITDIR THRESHOLD
 * Exit 77 when systemd-analyze is not installed. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sdtest.h"

#define TIMEOUT_MS 60000

/* Runs argv with stdout and stderr into a file; returns the output. */
static char *run(const char *const *argv, const char *const *env, int *ret_status)
{
        char out[PATH_MAX];
        struct sdt_child c;
        char *text;

        snprintf(out, sizeof(out), "%s/output.%s", sdt_tmpdir(), argv[1]);
        (void)unlink(out);
        sdt_spawn(argv, &(struct sdt_spawn_opts){ .setenv = env, .log_path = out }, &c);
        *ret_status = sdt_wait_exit(&c, TIMEOUT_MS);
        SDT_CHECK(*ret_status >= 0, "%s %s did not finish within %d ms", argv[0], argv[1],
                  TIMEOUT_MS);
        text = sdt_read_file(out);
        SDT_CHECK(text != NULL, "no output file %s", out);
        return text;
}

static void copy_file(const char *from, const char *to)
{
        char *text = sdt_read_file(from);
        FILE *f;

        SDT_CHECK(text != NULL, "cannot read %s: %s", from, strerror(errno));
        f = fopen(to, "we");
        SDT_CHECK(f != NULL, "cannot create %s: %s", to, strerror(errno));
        fputs(text, f);
        SDT_CHECK(fclose(f) == 0, "cannot write %s", to);
        free(text);
}

static bool in_path(const char *name)
{
        const char *path = getenv("PATH");
        char buf[PATH_MAX];

        for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
                size_t n = strcspn(p, ":");
                snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, p, name);
                if (n > 0 && access(buf, X_OK) == 0)
                        return true;
                p += n + (p[n] == ':');
        }
        return false;
}

static int verify(const char *analyze, const char *unitdir, const char *mansrc)
{
        char man[PATH_MAX], sub[PATH_MAX + 16], from[PATH_MAX], to[PATH_MAX + 32];
        char sock[PATH_MAX], svc[PATH_MAX], msvc[PATH_MAX], mtimer[PATH_MAX], env_manpath[PATH_MAX + 16];
        static const char *const pages[][2] = { { "man8", "cudackptd.8" },
                                                { "man1", "cudackptctl.1" } };
        bool have_man = in_path("man");
        int status;
        char *out;

        snprintf(man, sizeof(man), "%s/man", sdt_tmpdir());
        SDT_CHECK(mkdir(man, 0755) == 0, "mkdir %s: %s", man, strerror(errno));
        for (size_t i = 0; i < 2; i++) {
                snprintf(sub, sizeof(sub), "%s/%s", man, pages[i][0]);
                (void)mkdir(sub, 0755);
                snprintf(from, sizeof(from), "%s/%s", mansrc, pages[i][1]);
                snprintf(to, sizeof(to), "%s/%s", sub, pages[i][1]);
                copy_file(from, to);
        }
        snprintf(env_manpath, sizeof(env_manpath), "MANPATH=%s", man);
        snprintf(sock, sizeof(sock), "%s/cudackptd.socket", unitdir);
        snprintf(svc, sizeof(svc), "%s/cudackptd.service", unitdir);
        snprintf(msvc, sizeof(msvc), "%s/cudackpt-metrics.service", unitdir);
        snprintf(mtimer, sizeof(mtimer), "%s/cudackpt-metrics.timer", unitdir);
        const char *env[] = { env_manpath, NULL };
        /* Without man(1) the Documentation= check cannot run; the rest can. */
        const char *argv[] = { analyze, "verify", have_man ? "--man=yes" : "--man=no", sock, svc, msvc, mtimer,
                               NULL };
        out = run(argv, env, &status);
        fputs(out, stdout);
        SDT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "systemd-analyze verify failed (status 0x%x)", status);
        SDT_CHECK(out[strspn(out, " \n")] == '\0', "systemd-analyze verify complained");
        free(out);
        printf("ok: systemd-analyze verify accepts the four units%s\n", have_man ? " and finds their man pages" : "");
        /* A part not checked is a skip that make test reports (tests/skipped.py). */
        if (!have_man)
                printf("SKIP: units' man pages (Documentation=): no man(1) on PATH\n");
        return 0;
}

static int security(const char *analyze, const char *unitdir, const char *threshold)
{
        char svc[PATH_MAX], opt[64], *out, *level;
        int status;

        snprintf(svc, sizeof(svc), "%s/cudackptd.service", unitdir);
        snprintf(opt, sizeof(opt), "--threshold=%s", threshold);
        const char *argv[] = { analyze, "security", "--offline=yes", "--no-pager", opt, svc, NULL };
        out = run(argv, NULL, &status);
        level = strstr(out, "Overall exposure level");
        SDT_CHECK(level != NULL, "no exposure level in the output:\n%s", out);
        *strchrnul(level, '\n') = '\0';
        printf("%s (threshold %s tenths)\n", level, threshold);
        SDT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "exposure above %s, or systemd-analyze security failed (status 0x%x)", threshold,
                  status);
        free(out);
        return 0;
}

int main(int argc, char **argv)
{
        if (argc != 5) {
                fprintf(stderr, "usage: %s verify|security SYSTEMD-ANALYZE UNITDIR ARG\n", argv[0]);
                return 2;
        }
        if (argv[2][0] == '\0' || strstr(argv[2], "NOTFOUND") || access(argv[2], X_OK) != 0)
                sdt_skip("systemd-analyze is not installed (Debian package systemd)");
        if (strcmp(argv[1], "verify") == 0)
                return verify(argv[2], argv[3], argv[4]);
        if (strcmp(argv[1], "security") == 0)
                return security(argv[2], argv[3], argv[4]);
        fprintf(stderr, "%s: unknown check %s\n", argv[0], argv[1]);
        return 2;
}
