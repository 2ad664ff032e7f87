/* savecaller.c: whether a caller may have the daemon start processes for
 * it (savecaller.h).  Reads /proc (no blocking, as pidns.c does) on the
 * loop thread; what was read is the caller's, as its pidfd is checked
 * alive afterwards. */
#include "saves/savecaller.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* CapEff, CapBnd and Seccomp of /proc/PID/status (pid 0: self). */
struct creds_seen {
        uint64_t cap_eff, cap_bnd;
        unsigned seccomp;
        bool read;
};

static void read_status(pid_t pid, struct creds_seen *ret)
{
        char path[64], line[256];
        FILE *f;

        if (pid > 0)
                snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        else
                snprintf(path, sizeof(path), "/proc/self/status");
        *ret = (struct creds_seen){ .seccomp = 1 };
        f = fopen(path, "re");
        if (!f)
                return;
        while (fgets(line, sizeof(line), f)) {
                if (sscanf(line, "CapEff: %" SCNx64, &ret->cap_eff) == 1)
                        ret->read = true;
                (void)sscanf(line, "CapBnd: %" SCNx64, &ret->cap_bnd);
                (void)sscanf(line, "Seccomp: %u", &ret->seccomp);
        }
        fclose(f);
}

/* Whether pid's user namespace is the daemon's. */
static bool same_userns(pid_t pid)
{
        char path[64];
        struct stat a, b;

        snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
        return stat(path, &a) == 0 && stat("/proc/self/ns/user", &b) == 0 && a.st_dev == b.st_dev &&
               a.st_ino == b.st_ino;
}

int savecaller_check(const struct policy_caller *c, char *why, size_t len)
{
        struct creds_seen caller, self;

        if (!c->has_pidfd || c->pidns.other) {
                snprintf(why, len, "the caller is in another pid namespace than the daemon's (a container): its job "
                                   "would run outside it");
                return -EPERM;
        }
        if (!same_userns(c->pid)) {
                snprintf(why, len, "the caller is in another user namespace than the daemon's (a rootless "
                                   "container): its job would run outside it");
                return -EPERM;
        }
        if (c->uid == 0) {
                read_status(c->pid, &caller);
                read_status(0, &self);
                if (!caller.read || !self.read || (self.cap_bnd & ~caller.cap_eff) || caller.seccomp != 0) {
                        snprintf(why, len, "the caller is root without every capability the daemon hands on "
                                           "(%#" PRIx64 " of %#" PRIx64 ") or under a seccomp filter: its job would "
                                           "have more",
                                 caller.cap_eff, self.cap_bnd);
                        return -EPERM;
                }
        }
        /* What was read was the caller's, not a process that took its pid. */
        if (syscall(SYS_pidfd_send_signal, c->pidfd, 0, NULL, 0) < 0) {
                snprintf(why, len, "the caller has exited");
                return -EPERM;
        }
        return 0;
}
