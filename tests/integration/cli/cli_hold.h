/* cli_hold.h: the --hold, release, metrics, watch and --progress tests of
 * integration.cli (cli_hold.c). */
#ifndef CUDACKPT_ITEST_CLI_HOLD_H
#define CUDACKPT_ITEST_CLI_HOLD_H

#include <check.h>

/* Adds them to tc. */
void cli_hold_add_tests(TCase *tc);

#endif
