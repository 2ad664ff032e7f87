/* stepdescent.c: whether a process descends from a slurmstepd of job J on
 * this node (stepdescent.h). */
#include "stepdescent.h"

#include "fdio.h"
#include "procfs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The most of a /proc/PID/cmdline read: a slurmstepd's title is short, and
 * a longer command line is no slurmstepd's. */
#define STEPDESCENT_MAX_CMDLINE 256
/* The most of /proc/PID/stat and /proc/PID/status read (the uids are on the
 * status's ninth line). */
#define STEPDESCENT_MAX_FILE 4096

/* One process, its files read through one /proc/PID descriptor: once the
 * process has ended, no file of a process that takes its pid after it can
 * be read through it. */
typedef struct sd_proc {
        int dir;
        int ppid;
        uint64_t start;
} sd_proc;

/* p's parent and start time, (again) from its stat. */
static int sd_stat(sd_proc *p) {
        char buf[STEPDESCENT_MAX_FILE];
        ssize_t n = fdio_read_at(p->dir, "stat", buf, sizeof(buf));

        if (n < 0)
                return (int)n;
        if (procfs_stat_ppid(buf, &p->ppid) < 0 || procfs_stat_u64(buf, 22, &p->start) < 0)
                return -EINVAL;
        return 0;
}

static void sd_close(sd_proc *p) {
        if (p->dir >= 0)
                close(p->dir);
        p->dir = -1;
}

static int sd_open(int pid, sd_proc *ret) {
        char path[32];
        int r;

        snprintf(path, sizeof(path), "/proc/%d", pid);
        if ((ret->dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
                return -errno;
        if ((r = sd_stat(ret)) < 0)
                sd_close(ret);
        return r;
}

/* c's parent into *ret, the link pinned: the parent started no later than
 * c, and c still has that parent after it was opened (had the parent
 * ended, c would have been given to another, and a pid taken again
 * after it cannot be c's parent).  0, or -ESRCH (no parent, or it ended),
 * -ESTALE (the link changed). */
static int sd_parent(sd_proc *c, sd_proc *ret) {
        int ppid = c->ppid;
        uint64_t start = c->start;

        if (ppid <= 0 || sd_open(ppid, ret) < 0)
                return -ESRCH;
        if (ret->start > start || sd_stat(c) < 0 || c->ppid != ppid || c->start != start) {
                sd_close(ret);
                return -ESTALE;
        }
        return 0;
}

/* Whether p's real and effective uids are 0. */
static bool sd_root(const sd_proc *p) {
        char buf[STEPDESCENT_MAX_FILE];
        const char *line;
        unsigned long real, effective;

        if (fdio_read_at(p->dir, "status", buf, sizeof(buf)) < 0 || !(line = strstr(buf, "\nUid:")) ||
            sscanf(line + 5, "%lu %lu", &real, &effective) != 2)
                return false;
        return real == 0 && effective == 0;
}

/* Whether len bytes at s are a decimal number (1 to 10 digits). */
static bool sd_number(const char *s, size_t len) {
        if (len == 0 || len > 10)
                return false;
        for (size_t i = 0; i < len; i++)
                if (s[i] < '0' || s[i] > '9')
                        return false;
        return true;
}

static bool sd_is(const char *s, size_t len, const char *word) {
        return len == strlen(word) && memcmp(s, word, len) == 0;
}

stepdescent_kind stepdescent_cmdline_kind(const char *cmdline, size_t len, const char *job) {
        static const char prefix[] = "slurmstepd: [";
        size_t n = strnlen(cmdline, len), pl = sizeof(prefix) - 1;
        const char *id = cmdline + pl, *dot;
        size_t idlen;

        /* One argument only, padded with NULs (Slurm's setproctitle). */
        if (n < pl + 4 || memcmp(cmdline, prefix, pl) != 0 || cmdline[n - 1] != ']')
                return STEPDESCENT_NONE;
        for (size_t i = n; i < len; i++)
                if (cmdline[i])
                        return STEPDESCENT_NONE;
        idlen = n - 1 - pl;
        if (!(dot = memchr(id, '.', idlen)) || !sd_number(id, (size_t)(dot - id)))
                return STEPDESCENT_NONE;
        const char *step = dot + 1;
        size_t steplen = idlen - (size_t)(step - id);
        if (!sd_number(step, steplen) && !sd_is(step, steplen, "batch") && !sd_is(step, steplen, "extern") &&
            !sd_is(step, steplen, "interactive"))
                return STEPDESCENT_NONE;
        return sd_is(id, (size_t)(dot - id), job) ? STEPDESCENT_JOB : STEPDESCENT_OTHER;
}

/* Walks up from *p (closed) to its nearest ancestor that is a slurmstepd:
 * its kind, with *ret open when not STEPDESCENT_NONE (a walk that broke
 * off, or went past STEPDESCENT_MAX_DEPTH links, is STEPDESCENT_NONE). */
static stepdescent_kind sd_walk(const char *job, sd_proc *p, sd_proc *ret) {
        for (int depth = 0; depth < STEPDESCENT_MAX_DEPTH; depth++) {
                char cmdline[STEPDESCENT_MAX_CMDLINE];
                sd_proc parent;
                ssize_t n;
                stepdescent_kind k;

                if (sd_parent(p, &parent) < 0)
                        break;
                sd_close(p);
                *p = parent;
                /* Its status and command line are the pinned process's
                 * (its own descriptor); only root makes a process of uid
                 * 0, and one that only calls itself a slurmstepd is
                 * walked past. */
                if (!sd_root(p) || (n = fdio_read_at(p->dir, "cmdline", cmdline, sizeof(cmdline))) <= 0 ||
                    (size_t)n == sizeof(cmdline) - 1)
                        continue;
                k = stepdescent_cmdline_kind(cmdline, (size_t)n, job);
                if (k != STEPDESCENT_NONE) {
                        *ret = *p;
                        return k;
                }
        }
        sd_close(p);
        return STEPDESCENT_NONE;
}

static int sd_uts(int dir, char *buf, size_t size) {
        ssize_t n = readlinkat(dir, "ns/uts", buf, size - 1);

        if (n <= 0)
                return n < 0 ? -errno : -EINVAL;
        buf[n] = '\0';
        return 0;
}

int stepdescent_init(stepdescent *d, const char *job) {
        sd_proc self, step;
        struct stat st;
        int r;

        memset(d, 0, sizeof(*d));
        if (!sd_number(job, strlen(job)))
                return -EINVAL;
        if ((r = sd_open(getpid(), &self)) < 0)
                return r;
        if ((r = sd_uts(self.dir, d->uts, sizeof(d->uts))) < 0) {
                sd_close(&self);
                return r;
        }
        stepdescent_kind k = sd_walk(job, &self, &step);
        if (k == STEPDESCENT_NONE)
                return -ESRCH;
        if (k == STEPDESCENT_JOB && fstatat(step.dir, "exe", &st, 0) == 0) {
                d->exe_known = true;
                d->exe_dev = st.st_dev;
                d->exe_ino = st.st_ino;
        } else if (k == STEPDESCENT_JOB && errno != EACCES && errno != EPERM)
                r = -errno;
        sd_close(&step);
        if (k != STEPDESCENT_JOB)
                return -ESRCH;
        if (r < 0)
                return r;
        snprintf(d->job, sizeof(d->job), "%s", job);
        return 0;
}

bool stepdescent_of(const stepdescent *d, int pid, uint64_t start_time) {
        sd_proc p, step;
        char uts[sizeof(d->uts)];
        struct stat st;
        bool of;

        if (!d->job[0] || pid <= 0 || sd_open(pid, &p) < 0)
                return false;
        if (p.start != start_time || sd_uts(p.dir, uts, sizeof(uts)) < 0 || strcmp(uts, d->uts) != 0) {
                sd_close(&p);
                return false;
        }
        switch (sd_walk(d->job, &p, &step)) {
        case STEPDESCENT_NONE:
                return false;
        case STEPDESCENT_JOB:
                /* The same program as the caller's own slurmstepd, where
                 * the caller may read it. */
                of = !d->exe_known || (fstatat(step.dir, "exe", &st, 0) == 0 && st.st_dev == d->exe_dev &&
                                       st.st_ino == d->exe_ino);
                break;
        default:
                of = false;
        }
        sd_close(&step);
        return of;
}
