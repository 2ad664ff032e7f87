/* doctorcheck.h: what a check of cudackptctl doctor gives back (a verdict,
 * what it found, what to do), shared by the checks of the CUDA stack
 * (doctor.c) and those of the system around it (doctorsys.c); doctor_set()
 * and doctor_advise() fill it (doctorcheck.c).  Private to client/. */
#ifndef CUDACKPT_DOCTORCHECK_H
#define CUDACKPT_DOCTORCHECK_H

#include <stdbool.h>

/* The options of a doctor run (doctor.h). */
typedef struct ctl_doctor ctl_doctor;

/* How long a program run for a check (criu, nvidia-smi) may take. */
#define DOCTOR_PROGRAM_TIMEOUT_MS 10000

typedef enum doctor_verdict {
        DOCTOR_OK,
        DOCTOR_WARN,
        DOCTOR_FAIL,
        DOCTOR_SKIP,
} doctor_verdict;

/* The outcome of one check. */
typedef struct doctor_result {
        doctor_verdict verdict;
        char found[1024];       /* what the check saw, one line */
        char advice[512];       /* what to do about it; "" for none */
} doctor_result;

typedef void (*doctor_check_fn)(const ctl_doctor *d, doctor_result *r);

/* What the check saw (replacing what was said), with verdict v. */
__attribute__((format(printf, 3, 4)))
void doctor_set(doctor_result *r, doctor_verdict v, const char *fmt, ...);

/* What to do about it. */
__attribute__((format(printf, 2, 3)))
void doctor_advise(doctor_result *r, const char *fmt, ...);

#endif
