/* doctorcheck.c: filling in what a check of cudackptctl doctor found
 * (doctorcheck.h). */
#include "doctorcheck.h"

#include <stdarg.h>
#include <stdio.h>

void doctor_set(doctor_result *r, doctor_verdict v, const char *fmt, ...) {
        va_list ap;

        r->verdict = v;
        va_start(ap, fmt);
        (void) vsnprintf(r->found, sizeof(r->found), fmt, ap);
        va_end(ap);
}

void doctor_advise(doctor_result *r, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(r->advice, sizeof(r->advice), fmt, ap);
        va_end(ap);
}
