/* jobpin.h: the processes criu held, pinned by pidfd. */
#ifndef CUDACKPT_CTL_JOBPIN_H
#define CUDACKPT_CTL_JOBPIN_H

#include "proctree.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A process pinned while criu held it: pidfd, and what it was then. */
typedef struct ctl_pin {
        int pid;
        int pidfd;
        uint64_t start_time;
} ctl_pin;

typedef struct ctl_pins {
        ctl_pin *v;
        size_t n;
} ctl_pins;

/* Pins root and its descendants in t (a scan made while criu holds them);
 * one gone or a zombie is left out. */
int ctl_pins_add_tree(ctl_pins *s, const ctl_proctree *t, int root);
const ctl_pin *ctl_pins_find(const ctl_pins *s, int pid);
/* Whether p's process has not exited. */
bool ctl_pin_alive(const ctl_pin *p);
/* sig to every pinned process still there; the first error but ESRCH. */
int ctl_pins_signal(const ctl_pins *s, int sig);
/* Waits up to timeout_ms for every pinned process to exit; how many have not. */
size_t ctl_pins_await_gone(const ctl_pins *s, int timeout_ms);
void ctl_pins_free(ctl_pins *s);

#endif
