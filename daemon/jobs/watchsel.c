/* watchsel.c: what a watcher selects (watchsel.h). */
#include "jobs/watchsel.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>

#include "cudackpt/protocol.h"
#include "host/discover.h"
#include "host/pidns.h"
#include "jobs/select.h"

/* What the last scan knows of the process of e. */
static const struct procscan_proc *proc_of(const struct procscan *scan, const struct watch_event *e)
{
        return e->proc ? e->proc : procscan_find(scan, e->pid, e->start_time);
}

/* Cgroup and tree selections follow the scan: a process is in them from
 * the first scan that finds it there. */
bool watchsel_selects(const struct proto_group_request *sel, const char *cgroup_sel, const struct procscan *scan,
                      const struct watch_event *e)
{
        const struct procscan_proc *p;

        switch (sel->kind) {
        case PROTO_SELECT_PIDS:
                for (unsigned i = 0; i < sel->n_pids; i++) {
                        const struct proto_pid_ref *r = &sel->pids[i];
                        if (r->pid == e->pid &&
                            (!r->has_start_time || !e->start_time || r->start_time == e->start_time))
                                return true;
                }
                return false;
        case PROTO_SELECT_CGROUP:
                p = proc_of(scan, e);
                return p && p->cgroup && discover_cgroup_within(p->cgroup, cgroup_sel);
        case PROTO_SELECT_TREE:
                if (e->pid == sel->tree)
                        return true;
                p = proc_of(scan, e);
                for (size_t i = 0; p && i < p->n_ancestors; i++)
                        if (p->ancestors[i] == sel->tree)
                                return true;
                return false;
        default:
                return true;
        }
}

static cJSON *no_such_process(pid_t pid)
{
        cJSON *p = cJSON_CreateObject();

        if (p)
                cJSON_AddNumberToObject(p, "pid", pid);
        return proto_error_new(CUDACKPT_ERROR_NO_SUCH_PROCESS, p);
}

bool watchsel_take(const struct config *cfg, struct conn *c, const struct proto_call *call,
                  struct proto_group_request *sel)
{
        cJSON *err = NULL, *p;
        pid_t root;

        if (proto_parse_group(call, 0, cfg->max_group_members, sel, &err) < 0) {
                conn_send(c, err);
                return false;
        }
        /* The caller's pids into ours.  One that no process has, or that
         * the caller cannot see, is NoSuchProcess, as for a group: a watch
         * of it would stream nothing for ever. */
        for (unsigned i = 0; i < sel->n_pids; i++) {
                pid_t named = sel->pids[i].pid;
                if (pidns_to_daemon(&c->caller.pidns, named, &sel->pids[i].pid) < 0 ||
                    (kill(sel->pids[i].pid, 0) < 0 && errno == ESRCH)) {
                        conn_send(c, no_such_process(named));
                        return false;
                }
        }
        /* Cgroup and tree selections follow the scans: none, none selected. */
        if ((sel->kind == PROTO_SELECT_CGROUP || sel->kind == PROTO_SELECT_TREE) && cfg->watch_scan_ms == 0) {
                p = cJSON_CreateObject();
                if (p)
                        cJSON_AddStringToObject(p, "parameter", "selector");
                conn_send(c, proto_error_new(CUDACKPT_VARLINK_INVALID_PARAMETER, p));
                return false;
        }
        /* A tree's root must exist, as for a group. */
        if (sel->kind == PROTO_SELECT_TREE) {
                if (pidns_to_daemon(&c->caller.pidns, sel->tree, &root) < 0 ||
                    (kill(root, 0) < 0 && errno == ESRCH)) {
                        conn_send(c, no_such_process(sel->tree));
                        return false;
                }
                sel->tree = root;
        }
        return true;
}

int watchsel_cgroup(pid_t caller_pid, const char *cgroup, char **ret_sel)
{
        char root[DISCOVER_CGROUP_MAX];
        int r;

        if (discover_cgroup_ns_root(caller_pid, root, sizeof(root)) < 0)
                return -EREMOTE;
        r = select_cgroup_in_ours(root, cgroup, ret_sel);
        /* A cgroup that does not exist would stream nothing for ever. */
        if (r == 0 && discover_cgroup_exists(*ret_sel) == 0)
                r = -ENOENT;
        return r;
}

void watchsel_refuse_cgroup(struct conn *c, int error, const char *cgroup)
{
        if (error == -ENOENT) {
                conn_send(c, select_no_such_cgroup(cgroup));
                if (!c->closing)
                        conn_close_after_write(c);
                return;
        }
        if (error != -EREMOTE) {
                conn_close(c); /* out of memory: the client cannot be told */
                return;
        }
        conn_send(c, select_cgroup_ns_unknown());
        if (!c->closing)
                conn_close_after_write(c);
}
