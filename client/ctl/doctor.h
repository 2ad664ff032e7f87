/* doctor.h: cudackptctl doctor, the checks of a node before relying on it.
 *
 * cudackptctl.c parses the command line (the global --socket, --json and
 * --timeout, and doctor's own --driver) and hands the result here.
 * Private to client/. */
#ifndef CUDACKPT_DOCTOR_H
#define CUDACKPT_DOCTOR_H

#include <stdbool.h>

/* The driver library checked when --driver is not given: the one the
 * daemon loads by default. */
#define CTL_DOCTOR_DEFAULT_DRIVER "libcuda.so.1"

/* How long the daemon check waits for the daemon's answer when --timeout
 * is not given: a socket-activated daemon answers its first call only
 * once the driver is loaded, which takes seconds per GPU without
 * persistence mode. */
#define CTL_DOCTOR_DEFAULT_TIMEOUT_MS 30000

typedef struct ctl_doctor {
        const char *socket;     /* --socket, NULL for $CUDACKPT_SOCKET or the default */
        const char *driver;     /* --driver, NULL for CTL_DOCTOR_DEFAULT_DRIVER */
        bool json;              /* --json: one JSON object per check and line */
        int timeout_ms;         /* --timeout, 0 for CTL_DOCTOR_DEFAULT_TIMEOUT_MS */
} ctl_doctor;

/* Runs every check, printing one line each to stdout as it completes.
 * Returns the exit status: CUDACKPT_EXIT_OK when no check failed
 * (warnings allowed), CUDACKPT_EXIT_FAILURE when one did. */
int ctl_doctor_run(const ctl_doctor *d);

#endif
