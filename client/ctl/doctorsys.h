/* doctorsys.h: the checks of cudackptctl doctor on the system around the
 * CUDA stack (doctorsys.c): the kernel features the daemon uses, cgroup v2,
 * CRIU, transparent huge pages.  Private to client/. */
#ifndef CUDACKPT_DOCTORSYS_H
#define CUDACKPT_DOCTORSYS_H

#include "doctorcheck.h"

void doctor_check_pidfd_open(const ctl_doctor *d, doctor_result *r);
void doctor_check_peer_pidfd(const ctl_doctor *d, doctor_result *r);
void doctor_check_pidns_ioctl(const ctl_doctor *d, doctor_result *r);
void doctor_check_procmap_query(const ctl_doctor *d, doctor_result *r);
void doctor_check_cgroup(const ctl_doctor *d, doctor_result *r);
void doctor_check_criu(const ctl_doctor *d, doctor_result *r);
void doctor_check_thp(const ctl_doctor *d, doctor_result *r);

#endif
