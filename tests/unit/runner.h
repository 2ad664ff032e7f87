/* runner.h: the one Check runner of the unit tests (runner.c).
 *
 * Each test file is still its own program and ctest entry (unit-NAME), but
 * none writes a main(): runner.c's main() makes the suite and its one test
 * case, asks the file for its tests through unit_tests() and runs them
 * forked, with Check's default per-test timeout unless the file sets one.
 * A new test is a START_TEST function and one tcase_add_test() line in its
 * file's unit_tests().  (runner.c comes from a static library, so a file
 * that still has a main() of its own links and runs as before.) */
#ifndef CUDACKPT_UNIT_RUNNER_H
#define CUDACKPT_UNIT_RUNNER_H

#include <check.h>

/* The suite's name, as Check prints it; defined by the test file. */
extern const char unit_suite_name[];

/* Adds the file's tests to tc, and its fixtures or timeout if it has any;
 * defined by the test file. */
void unit_tests(TCase *tc);

#endif
