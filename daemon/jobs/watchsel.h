/* watchsel.h: what a watcher selects (watch.h): its selector taken from
 * the Watch call, in the daemon's pids; a cgroup selector read in the
 * caller's cgroup namespace; whether an event is of a process the
 * selector names.  Cgroup and tree selections follow the scans
 * (procscan.h): a process is in them from the first scan that finds it
 * there. */
#ifndef CUDACKPT_WATCHSEL_H
#define CUDACKPT_WATCHSEL_H

#include <stdbool.h>
#include <sys/types.h>

#include "base/config.h"
#include "net/conn.h"
#include "jobs/procscan.h"
#include "varlink/proto.h"
#include "jobs/watchevent.h"

/* The selector of a Watch call of c into *sel, its pids (and tree's root)
 * in the daemon's namespace: false when it was refused (answered on c:
 * a parameter error, NoSuchProcess, or a cgroup or tree selector while
 * watch_scan_ms is 0). */
bool watchsel_take(const struct config *cfg, struct conn *c, const struct proto_call *call,
                   struct proto_group_request *sel);
/* Worker thread: cgroup, as the caller of pid caller_pid names it, into a
 * selector of the daemon's (*ret_sel, to free()).  0; -EREMOTE when no
 * cgroup2 mount of the caller shows its namespace's root; -ENOENT when no
 * such cgroup exists (a watch of it would stream nothing for ever);
 * -ENOMEM. */
int watchsel_cgroup(pid_t caller_pid, const char *cgroup, char **ret_sel);
/* Answers c for watchsel_cgroup()'s error and closes it after the write;
 * cgroup is read before anything is sent. */
void watchsel_refuse_cgroup(struct conn *c, int error, const char *cgroup);
/* Whether e is of a process that sel (with cgroup_sel, a cgroup selector's
 * path in ours) names, by e and what scan's last pass knows. */
bool watchsel_selects(const struct proto_group_request *sel, const char *cgroup_sel, const struct procscan *scan,
                      const struct watch_event *e);

#endif
