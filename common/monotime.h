/* monotime.h: the one monotonic clock of the client and its command, for
 * deadlines and durations (CLOCK_MONOTONIC: never set back). */
#ifndef CUDACKPT_COMMON_MONOTIME_H
#define CUDACKPT_COMMON_MONOTIME_H

#include <stdint.h>

/* Microseconds, milliseconds of CLOCK_MONOTONIC. */
int64_t monotime_us(void);
int64_t monotime_ms(void);
/* Milliseconds with their fraction, for durations reported to people. */
double monotime_ms_exact(void);

#endif
