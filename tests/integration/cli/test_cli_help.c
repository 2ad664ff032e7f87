/* test_cli_help.c: cudackptctl's help: the whole of it (--help, help), and
 * one command's (COMMAND --help, help COMMAND) for every command. */
#include "harness.h"

#include <stdio.h>
#include <string.h>

/* Every command of the native command line (client/ctl/main/cmdline.c). */
static const char *const verbs[] = { "state", "restore-tid", "lock", "checkpoint", "restore", "unlock",
                                     "suspend", "resume", "info", "status", "ps", "doctor", "watch",
                                     "metrics", "release", "renew" };

static void assert_has(const char *what, const char *text, const char *want, bool has)
{
        ck_assert_msg(!strstr(text, want) == !has, "%s %s \"%s\":\n%s", what, has ? "lacks" : "has", want, text);
}

/* A run that printed help: exit status 0, stdout only. */
static const char *help_of(struct itest_proc_result *r, const char *what)
{
        ck_assert_msg(r->status == 0 && r->out[0] && !r->err[0], "%s: %d, stdout \"%s\", stderr \"%s\"", what,
                      r->status, r->out, r->err);
        return r->out;
}

START_TEST(cli_help_of_every_command)
{
        const char *all = help_of(itest_ctl(NULL, "--help", NULL), "--help");
        ck_assert_str_eq(help_of(itest_ctl(NULL, "help", NULL), "help"), all);
        for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
                const char *v = verbs[i], *what = itest_strdupf("%s --help", v);
                const char *one = help_of(itest_ctl(NULL, v, "--help", NULL), what);
                ck_assert_msg(strncmp(one, itest_strdupf("Usage: cudackptctl [OPTIONS] %s", v),
                                      strlen("Usage: cudackptctl [OPTIONS] ") + strlen(v)) == 0,
                              "%s:\n%s", what, one);
                assert_has(what, one, itest_strdupf("\n  %s", v), true);
                ck_assert_msg(strcmp(one, all) != 0 && strlen(one) < strlen(all), "%s is the whole help", what);
                /* The same, asked the other way, and after other options. */
                ck_assert_str_eq(help_of(itest_ctl(NULL, "help", v, NULL), v), one);
                ck_assert_str_eq(help_of(itest_ctl(NULL, "--json", v, "-h", NULL), v), one);
        }
        /* Each command's options, not the others'. */
        const char *lock = help_of(itest_ctl(NULL, "lock", "--help", NULL), "lock --help");
        assert_has("lock --help", lock, "--lock-timeout=MS", true);
        assert_has("lock --help", lock, "--cgroup=PATH", true);
        assert_has("lock --help", lock, "--driver", false);
        assert_has("lock --help", lock, "--map", false);
        const char *doctor = help_of(itest_ctl(NULL, "help", "doctor", NULL), "help doctor");
        assert_has("help doctor", doctor, "--driver=PATH", true);
        assert_has("help doctor", doctor, "--pids", false);
        const char *restore = help_of(itest_ctl(NULL, "help", "restore", NULL), "help restore");
        assert_has("help restore", restore, "--map=OLD=NEW", true);
        assert_has("help restore", restore, "restore --images=DIR", true);
        const char *ps = help_of(itest_ctl(NULL, "help", "ps", NULL), "help ps");
        assert_has("help ps", ps, "--tree=PID", true);
        assert_has("help ps", ps, "--progress", false);
        /* dump's help is its own. */
        ck_assert_str_eq(help_of(itest_ctl(NULL, "help", "dump", NULL), "help dump"),
                         help_of(itest_ctl(NULL, "dump", "--help", NULL), "dump --help"));
        itest_assert_run(itest_ctl(NULL, "help", "frobnicate", NULL), 2, "");
}
END_TEST

int main(void)
{
        const TTest *tests[] = { cli_help_of_every_command, NULL };

        return itest_run("integration.cli_help", "cli_help", 60, tests);
}
