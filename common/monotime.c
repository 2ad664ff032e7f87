/* monotime.c: CLOCK_MONOTONIC in the units its callers count in. */
#include "monotime.h"

#include <time.h>

static struct timespec monotime_now(void) {
        struct timespec ts;

        /* CLOCK_MONOTONIC cannot fail with a valid pointer. */
        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts;
}

int64_t monotime_us(void) {
        struct timespec ts = monotime_now();

        return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t monotime_ms(void) {
        struct timespec ts = monotime_now();

        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

double monotime_ms_exact(void) {
        struct timespec ts = monotime_now();

        return (double) ts.tv_sec * 1000.0 + (double) ts.tv_nsec / 1e6;
}
