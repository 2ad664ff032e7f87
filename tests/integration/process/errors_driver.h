/* errors_driver.h: the driver's errors of integration.errors
 * (errors_driver.c). */
#ifndef CUDACKPT_ITEST_ERRORS_DRIVER_H
#define CUDACKPT_ITEST_ERRORS_DRIVER_H

#include <check.h>

/* Adds them to tc. */
void errors_driver_add_tests(TCase *tc);

#endif
