/* harness_targets.c: the target processes of the integration tests
 * (killed at teardown), this program as a target in a helper mode, the
 * simulator's preload, and /proc readers (see harness.h). */
#include "harness_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ITEST_MAX_TARGETS 64

/* The targets of the current test, killed at its teardown. */
static pid_t itest_targets[ITEST_MAX_TARGETS];
static size_t itest_n_targets;

/* ---- targets ------------------------------------------------------------- */

/* Drops to uid/gid `uid` with exactly the supplementary groups given;
 * -errno on failure. */
int itest_become_with(uid_t uid, const gid_t *groups, size_t n_groups)
{
        gid_t got[16];

        if (setgroups(n_groups, groups) < 0 || setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0)
                return -errno;
        if (getuid() != uid || geteuid() != uid || n_groups > 16 || getgroups(16, got) != (int)n_groups)
                return -EPERM;
        return 0;
}

int itest_become(uid_t uid)
{
        return itest_become_with(uid, NULL, 0);
}

/* Reads /proc/PID/NAME whole into buf (NUL-terminated): its length, or
 * -errno. */
static ssize_t itest_read_proc(pid_t pid, const char *name, char *buf, size_t size)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        size_t n = 0;
        ssize_t k;
        while (n < size - 1 && ((k = read(fd, buf + n, size - 1 - n)) > 0 || (k < 0 && errno == EINTR)))
                if (k > 0)
                        n += (size_t)k;
        close(fd);
        buf[n] = '\0';
        return (ssize_t)n;
}

bool itest_await_exec(pid_t pid, const char *const *env)
{
        const size_t size = 1 << 16;
        char *buf = malloc(size);
        bool over = false;
        const char *lib = NULL;
        if (!buf)
                return false;
        for (const char *const *e = env; *e; e++)
                if (strncmp(*e, "LD_PRELOAD=", 11) == 0)
                        lib = strrchr(*e, '/'); /* maps names the real path: the file name */
        if (lib)
                lib++;
        for (int i = 0; i < 10000 && !over; i++) {
                ssize_t n = itest_read_proc(pid, "environ", buf, size);
                if (n == -EACCES) {
                        over = true; /* nothing to await by */
                        break;
                }
                over = n > 0;
                if (over && lib) {
                        n = itest_read_proc(pid, "maps", buf, size);
                        over = n == -EACCES || (n > 0 && memmem(buf, (size_t)n, lib, strlen(lib)));
                }
                if (n < 0 && n != -EACCES)
                        break;
                if (!over)
                        nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
        }
        free(buf);
        return over;
}

/* Forks and execs path; with ready, fd 3 of the child is a pipe whose
 * first byte (or EOF) the parent waits for after the exec. */
static pid_t itest_spawn_target(uid_t uid, const char *path, const char *const *argv, const char *const *env,
                                bool ready)
{
        ck_assert_msg(itest_n_targets < ITEST_MAX_TARGETS, "too many targets");
        int p[2], r[2] = { -1, -1 };
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        if (ready)
                ck_assert_int_eq(pipe2(r, O_CLOEXEC), 0);
        pid_t parent = getpid();
        pid_t pid = fork();
        ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
                close(p[0]);
                int err = 0;
                if (uid != (uid_t)-1)
                        err = itest_become(uid);
                if (err == 0) {
                        /* After the uid change, which clears it. */
                        prctl(PR_SET_PDEATHSIG, SIGKILL);
                        if (getppid() != parent)
                                _exit(127);
                        int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
                        if (devnull >= 0) {
                                dup2(devnull, STDIN_FILENO);
                                dup2(devnull, STDOUT_FILENO);
                        }
                        /* dup2 clears close-on-exec on fd 3. */
                        if (ready && dup2(r[1], 3) < 0)
                                err = -errno;
                        if (err == 0) {
                                execve(path, (char *const *)argv, (char *const *)env);
                                err = -errno;
                        }
                }
                ssize_t w = write(p[1], &err, sizeof(err));
                (void)w;
                _exit(127);
        }
        close(p[1]);
        if (ready)
                close(r[1]);
        /* EOF means the exec happened (the pipe is close-on-exec). */
        int err = 0;
        ssize_t n;
        do
                n = read(p[0], &err, sizeof(err));
        while (n < 0 && errno == EINTR);
        close(p[0]);
        if (n > 0) {
                waitpid(pid, NULL, 0);
                ck_abort_msg("starting target %s as uid %d failed: %s", path, (int)uid, strerror(-err));
        }
        itest_targets[itest_n_targets++] = pid;
        if (!ready)
                ck_assert_msg(itest_await_exec(pid, env), "target %s (pid %d) did not finish its exec", path,
                              (int)pid);
        if (ready) {
                struct pollfd pf = { .fd = r[0], .events = POLLIN };
                int k = poll(&pf, 1, ITEST_READY_TIMEOUT_MS);
                char c = 0;
                ssize_t got = k > 0 ? read(r[0], &c, 1) : -1;
                close(r[0]);
                ck_assert_msg(got == 1, "target %s did not signal readiness", path);
        }
        return pid;
}

pid_t itest_target_env(uid_t uid, const char *const *env)
{
        static const char *const argv[] = { "sleep", "3600", NULL };
        return itest_spawn_target(uid, "/bin/sleep", argv, env, false);
}

pid_t itest_target_exec(uid_t uid, const char *path, const char *const *argv, const char *const *env)
{
        return itest_spawn_target(uid, path, argv, env, true);
}

static pid_t itest_target_va(uid_t uid, const char *first, va_list ap)
{
        const char *env[32];
        size_t n = 0;
        for (const char *e = first; e && n < 31; e = va_arg(ap, const char *))
                env[n++] = e;
        env[n] = NULL;
        return itest_target_env(uid, env);
}

pid_t itest_target(const char *first, ...)
{
        va_list ap;
        va_start(ap, first);
        pid_t pid = itest_target_va((uid_t)-1, first, ap);
        va_end(ap);
        return pid;
}

pid_t itest_target_as(uid_t uid, const char *first, ...)
{
        va_list ap;
        va_start(ap, first);
        pid_t pid = itest_target_va(uid, first, ap);
        va_end(ap);
        return pid;
}

pid_t itest_sim_target(void)
{
        return itest_target("CUDACKPT_SIM=1", NULL);
}

pid_t itest_small_target(void)
{
        return itest_target("CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=8", NULL);
}

pid_t itest_mapped_target(void)
{
        return itest_target(itest_sim_preload(), "CUDACKPT_SIM=1", "CUDACKPT_SIM_MEM_MIB=8", NULL);
}

void itest_target_kill(pid_t pid)
{
        for (size_t i = 0; i < itest_n_targets; i++) {
                if (itest_targets[i] != pid)
                        continue;
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                itest_targets[i] = itest_targets[--itest_n_targets];
                return;
        }
        ck_abort_msg("pid %d is not a target", (int)pid);
}

pid_t itest_dead_pid(void)
{
        pid_t pid = fork();
        ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0)
                _exit(0);
        ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
        ck_assert_msg(kill(pid, 0) < 0 && errno == ESRCH, "pid %d still exists", (int)pid);
        return pid;
}

uint64_t itest_start_time(pid_t pid)
{
        char path[64], buf[2048];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        ck_assert(n > 0);
        buf[n] = '\0';
        /* comm may hold spaces and parentheses: fields start after the last ')'. */
        char *p = strrchr(buf, ')');
        ck_assert(p);
        p++;
        /* p is before field 3; field 22 is 20 fields on. */
        for (int field = 3; field < 22; field++) {
                p = strchr(p + 1, ' ');
                ck_assert(p);
        }
        return strtoull(p + 1, NULL, 10);
}

pid_t itest_target_uids(uid_t r, uid_t e, uid_t s)
{
        const char *argv[] = { "itest-hold-uids", "--itest-hold-uids", itest_strdupf("%u", (unsigned)r),
                               itest_strdupf("%u", (unsigned)e), itest_strdupf("%u", (unsigned)s), NULL };
        static const char *const env[] = { "CUDACKPT_SIM=1", NULL };
        return itest_target_exec((uid_t)-1, itest_self_exe(), argv, env);
}

int itest_hold_uids(char **argv)
{
        uid_t r = (uid_t)strtoul(argv[2], NULL, 10);
        uid_t e = (uid_t)strtoul(argv[3], NULL, 10);
        uid_t s = (uid_t)strtoul(argv[4], NULL, 10);
        if (setgroups(0, NULL) < 0 || setresgid(ITEST_OTHER_UID, ITEST_OTHER_UID, ITEST_OTHER_UID) < 0 ||
            setresuid(r, e, s) < 0) {
                perror("itest-hold-uids");
                return 1;
        }
        return itest_ready_and_wait();
}

int itest_ready_and_wait(void)
{
        if (write(3, "1", 1) != 1)
                return 1;
        close(3);
        for (;;)
                pause();
}

/* ---- groups, process trees, other uids ------------------------------------ */

/* The sanitizer runtime this program runs with (a sanitizer build links
 * the simulator with it too), or NULL: /proc/self/maps names it. */
static const char *itest_sanitizer_runtime(void)
{
        FILE *f = fopen("/proc/self/maps", "re");
        char line[4096];
        const char *found = NULL;
        while (f && !found && fgets(line, sizeof(line), f)) {
                char *path = strchr(line, '/');
                if (!path)
                        continue;
                path[strcspn(path, "\n")] = '\0';
                const char *base = strrchr(path, '/') + 1;
                if (strncmp(base, "libasan.so", 10) == 0 || strncmp(base, "libtsan.so", 10) == 0)
                        found = itest_strdupf("%s", path);
        }
        if (f)
                fclose(f);
        return found;
}

const char *itest_preload(const char *lib)
{
        /* A sanitizer runtime must come first in a process's libraries:
         * a sanitizer build's libraries need it preloaded before them. */
        const char *rt = itest_sanitizer_runtime();
        if (rt)
                return itest_strdupf("LD_PRELOAD=%s:%s", rt, lib);
        return itest_strdupf("LD_PRELOAD=%s", lib);
}

const char *itest_sim_preload(void)
{
        return itest_preload(itest_need_env("CUDACKPT_TEST_SIM"));
}

/* Whether others may read path and everything above it. */
static bool open_to_others(const char *path)
{
        char buf[4096];
        snprintf(buf, sizeof(buf), "%s", path);
        struct stat st;
        if (stat(buf, &st) < 0 || !(st.st_mode & S_IROTH))
                return false;
        for (char *slash = strrchr(buf, '/'); slash && slash != buf; slash = strrchr(buf, '/')) {
                *slash = '\0';
                if (stat(buf, &st) < 0 || !(st.st_mode & S_IXOTH))
                        return false;
        }
        return true;
}

/* LD_PRELOAD of the driver for a target of another uid: the daemon's own
 * file where that uid can open it, else a copy named libcuda.so.1 (which
 * counts as the driver by its name). */
const char *itest_sim_preload_for_others(struct itest_daemon *d)
{
        const char *sim = getenv("CUDACKPT_TEST_SIM");
        ck_assert(sim);
        const char *pre = itest_sim_preload();
        if (open_to_others(sim))
                return pre;
        /* The same list, with the copy in the simulator's place. */
        const char *at = strstr(pre, sim);
        ck_assert(at);
        return itest_strdupf("%.*s%s%s", (int)(at - pre), pre, itest_stage_exe(d, sim, "libcuda.so.1"),
                             at + strlen(sim));
}

size_t itest_children(pid_t pid, pid_t *ret, size_t max)
{
        char path[64];
        size_t n = 0;
        snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
        DIR *dir = opendir(path);
        struct dirent *e;
        while (dir && (e = readdir(dir))) {
                int tid = atoi(e->d_name);
                if (tid <= 0)
                        continue;
                char cpath[96];
                snprintf(cpath, sizeof(cpath), "/proc/%d/task/%d/children", (int)pid, tid);
                FILE *f = fopen(cpath, "re");
                if (!f)
                        continue;
                long v;
                while (n < max && fscanf(f, "%ld", &v) == 1)
                        ret[n++] = (pid_t)v;
                fclose(f);
        }
        if (dir)
                closedir(dir);
        return n;
}

char itest_proc_state(pid_t pid)
{
        char path[64], buf[512];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "re");
        ck_assert_msg(f, "%s: %s", path, strerror(errno));
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        const char *p = strrchr(buf, ')');
        ck_assert_msg(p && p[1] == ' ', "bad stat line %s", buf);
        return p[2];
}

void itest_await_proc_state(pid_t pid, char want, bool equal)
{
        double deadline = itest_now_ms() + 5000;
        char st;
        while (((st = itest_proc_state(pid)) == want) != equal) {
                ck_assert_msg(itest_now_ms() < deadline, "process %d stays in state %c", (int)pid, st);
                usleep(1000);
        }
}

/* The value of the first CUDACKPT_SIM_STEP entry in pid's environment, read
 * afresh (the simulator writes it into the target's memory); '\0' when the
 * target has none or cannot be read. */
static char itest_sim_step(pid_t pid, char *buf, size_t size)
{
        static const char name[] = "CUDACKPT_SIM_STEP=";
        ssize_t n = itest_read_proc(pid, "environ", buf, size);

        for (size_t off = 0; n > 0 && off < (size_t)n; off += strlen(buf + off) + 1)
                if (strncmp(buf + off, name, sizeof(name) - 1) == 0)
                        return buf[off + sizeof(name) - 1];
        return '\0';
}

void itest_await_sim_step(pid_t pid, char letter, int timeout_ms)
{
        const size_t size = 1 << 16;
        char *buf = itest_keep(malloc(size)), seen;
        double deadline = itest_now_ms() + timeout_ms;

        ck_assert(buf);
        while ((seen = itest_sim_step(pid, buf, size)) != letter) {
                ck_assert_msg(seen != '\0', "target %d has no CUDACKPT_SIM_STEP slot", (int)pid);
                ck_assert_msg(itest_now_ms() < deadline,
                              "target %d: the simulator's step slot reads '%c', not '%c', after %d ms", (int)pid, seen,
                              letter, timeout_ms);
                usleep(1000);
        }
}

/* --itest-grow MIB_PER_S: a target whose resident memory grows at that
 * rate (up to 1 GiB), as a real one's does while the driver checkpoints
 * it; the simulator moves no memory. */
int itest_grow_mode(char **argv)
{
        size_t cap = (size_t)1 << 30, step = (size_t)1 << 20, done = 0;
        long rate = strtol(argv[2], NULL, 10);
        char *p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

        if (p == MAP_FAILED || rate <= 0 || write(3, "r", 1) != 1)
                return 1;
        close(3);
        for (;;) {
                if (done + step <= cap) {
                        memset(p + done, 1, step);
                        done += step;
                }
                usleep((useconds_t)(1000000 / rate));
        }
}

void itest_targets_reset(void)
{
        itest_n_targets = 0;
}

void itest_targets_kill_all(void)
{
        while (itest_n_targets > 0)
                itest_target_kill(itest_targets[itest_n_targets - 1]);
}
