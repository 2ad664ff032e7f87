/* doctor.c: cudackptctl doctor, a node checked the way a GPU-cluster
 * operator would before relying on it.
 *
 * Each check looks at one thing the daemon depends on (the CUDA driver,
 * persistence mode, the daemon itself, the kernel features it uses, the
 * cgroup version, CRIU, transparent huge pages) and gives a verdict: ok,
 * warn (works, but worse than it could), fail (something will not work)
 * or skip (does not apply here), with what it found and, unless ok, what
 * to do.  One line per check on stdout, or one JSON object per line.
 *
 * Nothing here changes the node or touches a GPU: the driver library is
 * loaded and asked its version (cuDriverGetVersion needs no cuInit), never
 * initialised; the kernel features are tried on this process's own pid,
 * namespace and maps. */
#include "doctor.h"

#include "ctl.h"

#include <cJSON.h>
#include "cuda-api.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CUDACKPT_VERSION
#error "CUDACKPT_VERSION must be defined by the build"
#endif

/* The kernel interfaces the daemon uses, as it defines them for older
 * headers, and what it needs of the CUDA driver (common/). */
#include "cuda-version.h"
#include "kernel-abi.h"

/* The oldest CRIU whose CUDA plugin drives cuda-checkpoint (docs/criu.md). */
#define DOCTOR_CRIU_MIN_MAJOR 4

/* How long a program run for a check (criu, nvidia-smi) may take. */
#define DOCTOR_PROGRAM_TIMEOUT_MS 10000

#define DOCTOR_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define DOCTOR_THP_FILE "/sys/kernel/mm/transparent_hugepage/enabled"
#define DOCTOR_THP_ADVICE                                                                       \
        "echo always > " DOCTOR_THP_FILE ": checkpoints of large GPUs about 1.5x faster "       \
        "(docs/performance.md)"

typedef enum doctor_verdict {
        DOCTOR_OK,
        DOCTOR_WARN,
        DOCTOR_FAIL,
        DOCTOR_SKIP,
} doctor_verdict;

static const char *const doctor_verdict_words[] = {
        [DOCTOR_OK] = "ok",
        [DOCTOR_WARN] = "warn",
        [DOCTOR_FAIL] = "fail",
        [DOCTOR_SKIP] = "skip",
};

/* The outcome of one check. */
typedef struct doctor_result {
        doctor_verdict verdict;
        char found[1024];       /* what the check saw, one line */
        char advice[512];       /* what to do about it; "" for none */
} doctor_result;

typedef void (*doctor_check_fn)(const ctl_doctor *d, doctor_result *r);

__attribute__((format(printf, 3, 4)))
static void doctor_set(doctor_result *r, doctor_verdict v, const char *fmt, ...) {
        va_list ap;

        r->verdict = v;
        va_start(ap, fmt);
        (void) vsnprintf(r->found, sizeof(r->found), fmt, ap);
        va_end(ap);
}

__attribute__((format(printf, 2, 3)))
static void doctor_advise(doctor_result *r, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(r->advice, sizeof(r->advice), fmt, ap);
        va_end(ap);
}

/* ---- Helpers ---------------------------------------------------------------- */

/* Reads at most size - 1 bytes of path into buf, NUL-terminated; returns
 * the length or -errno. */
static ssize_t doctor_read_file(const char *path, char *buf, size_t size) {
        size_t len = 0;
        ssize_t k;
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

        if (fd < 0)
                return -errno;
        while (len < size - 1 && (k = read(fd, buf + len, size - 1 - len)) != 0) {
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0) {
                        k = -errno;
                        close(fd);
                        return k;
                }
                len += (size_t) k;
        }
        close(fd);
        buf[len] = '\0';
        return (ssize_t) len;
}

/* The first executable regular file called name in a directory of $PATH
 * (a default list when unset) into buf.  Empty components, which mean the
 * current directory, are not searched.  -ENOENT when there is none. */
static int doctor_find_program(const char *name, char *buf, size_t size) {
        const char *path = secure_getenv("PATH");

        if (!path || !*path)
                path = DOCTOR_DEFAULT_PATH;
        for (const char *p = path; *p;) {
                const char *end = strchrnul(p, ':');
                size_t len = (size_t) (end - p);
                struct stat st;
                int n;

                if (len > 0) {
                        n = snprintf(buf, size, "%.*s/%s", (int) len, p, name);
                        if (n > 0 && (size_t) n < size && stat(buf, &st) == 0 && S_ISREG(st.st_mode) &&
                            access(buf, X_OK) == 0)
                                return 0;
                }
                p = *end ? end + 1 : end;
        }
        return -ENOENT;
}

static long long doctor_now_ms(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs path with argv (stdin and stderr /dev/null) and collects what it
 * writes to stdout into out (cut at size - 1 bytes, NUL-terminated).
 * After timeout_ms it is killed, with whatever it started (its own
 * process group).  Returns its wait status, or -errno (-ETIMEDOUT when it
 * was killed). */
static int doctor_run_program(const char *path, char *const argv[], char *out, size_t size, int timeout_ms) {
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        long long deadline = doctor_now_ms() + timeout_ms;
        bool timed_out = false;
        size_t len = 0;
        int p[2], r, status;
        pid_t pid;

        out[0] = '\0';
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        r = posix_spawn_file_actions_init(&fa);
        if (r != 0) {
                close(p[0]);
                close(p[1]);
                return -r;
        }
        r = posix_spawnattr_init(&attr);
        if (r != 0) {
                posix_spawn_file_actions_destroy(&fa);
                close(p[0]);
                close(p[1]);
                return -r;
        }
        /* dup2 clears O_CLOEXEC on the child's stdout. */
        r = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
        if (r == 0)
                r = posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
        if (r == 0)
                r = posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
        if (r == 0)
                r = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
        if (r == 0)
                r = posix_spawnattr_setpgroup(&attr, 0);
        if (r == 0)
                r = posix_spawn(&pid, path, &fa, &attr, argv, environ);
        posix_spawnattr_destroy(&attr);
        posix_spawn_file_actions_destroy(&fa);
        close(p[1]);
        if (r != 0) {
                close(p[0]);
                return -r;
        }

        for (;;) {
                struct pollfd pfd = { .fd = p[0], .events = POLLIN };
                long long left = deadline - doctor_now_ms();
                char scratch[512];
                ssize_t k;

                if (left <= 0) {
                        timed_out = true;
                        break;
                }
                r = poll(&pfd, 1, left > INT_MAX ? INT_MAX : (int) left);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        break;
                if (r == 0) {
                        timed_out = true;
                        break;
                }
                /* What does not fit is read and dropped, so the program never blocks on a full pipe. */
                k = len < size - 1 ? read(p[0], out + len, size - 1 - len) : read(p[0], scratch, sizeof(scratch));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                if (len < size - 1)
                        len += (size_t) k;
        }
        out[len] = '\0';
        close(p[0]);
        if (timed_out)
                (void) kill(-pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return timed_out ? -ETIMEDOUT : status;
}

/* "CUDA 13.0" from 13000. */
static void doctor_cuda_version(int v, char *buf, size_t size) {
        snprintf(buf, size, "CUDA %d.%d", v / 1000, v % 1000 / 10);
}

/* The NVIDIA kernel module's version from /proc/driver/nvidia/version
 * ("NVRM version: NVIDIA UNIX ... Kernel Module ...  580.95.05  ..."): its
 * first word of digits and dots.  -ENOENT when none. */
static int doctor_kernel_module_version(char *buf, size_t size) {
        char text[512], *save = NULL;
        char *nl;

        if (doctor_read_file("/proc/driver/nvidia/version", text, sizeof(text)) < 0)
                return -ENOENT;
        nl = strchr(text, '\n');
        if (nl)
                *nl = '\0';
        for (char *w = strtok_r(text, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
                size_t n = strspn(w, "0123456789.");

                if (n == strlen(w) && w[0] >= '0' && w[0] <= '9' && strchr(w, '.') && n < size) {
                        memcpy(buf, w, n + 1);
                        return 0;
                }
        }
        return -ENOENT;
}

/* ---- The CUDA driver ---------------------------------------------------------- */

static void doctor_check_driver(const ctl_doctor *d, doctor_result *r) {
#define DOCTOR_SYMBOL_NAME(field, name) name,
        static const char *const symbols[] = { CUDA_CHECKPOINT_SYMBOLS(DOCTOR_SYMBOL_NAME) };
#undef DOCTOR_SYMBOL_NAME
        const char *path = d->driver ? d->driver : CTL_DOCTOR_DEFAULT_DRIVER;
        cuda_cuDriverGetVersion_fn *get_version;
        cuda_cuGetErrorName_fn *get_error_name;
        int (*is_sim)(void);
        char what[PATH_MAX * 2 + 128], real[PATH_MAX], missing[512] = "";
        char cuda[32], module[64], extra[96] = "";
        const char *name = NULL, *e;
        size_t off = 0;
        Dl_info info;
        CUresult cr;
        int version = 0;
        void *h, *sym;

        (void) dlerror();
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
                e = dlerror();
                doctor_set(r, DOCTOR_FAIL, "cannot load %s", e ? e : path);
                doctor_advise(r, "install the NVIDIA driver, 570 or newer (580 to restore onto other GPUs)%s",
                              d->driver ? "" : ", or name its libcuda.so.1 with --driver=PATH");
                return;
        }
        /* Not unloaded, as the daemon keeps it (daemon/driver.c): the
         * program ends soon after anyway. */
        sym = dlsym(h, "cuDriverGetVersion");
        if (!sym) {
                doctor_set(r, DOCTOR_FAIL, "%s has no cuDriverGetVersion: not a CUDA driver library", path);
                doctor_advise(r, "name the NVIDIA driver's libcuda.so.1 (--driver=PATH)");
                return;
        }
        *(void **) (&get_version) = sym;
        *(void **) (&get_error_name) = dlsym(h, "cuGetErrorName");
        *(void **) (&is_sim) = dlsym(h, "cudackptSimIsSimulator");

        /* The file behind the name, links resolved ("libcuda.so.580.95.05"),
         * when it is not the name given. */
        if (dladdr(sym, &info) != 0 && info.dli_fname && realpath(info.dli_fname, real) &&
            strcmp(real, path) != 0)
                snprintf(what, sizeof(what), "%s (%s)", path, real);
        else
                snprintf(what, sizeof(what), "%s", path);

        cr = get_version(&version);
        if (cr != CUDA_SUCCESS) {
                if (!get_error_name || get_error_name(cr, &name) != CUDA_SUCCESS || !name)
                        name = NULL;
                if (name)
                        doctor_set(r, DOCTOR_FAIL, "%s: cuDriverGetVersion failed: %s", what, name);
                else
                        doctor_set(r, DOCTOR_FAIL, "%s: cuDriverGetVersion failed: CUDA error %d", what, (int) cr);
                doctor_advise(r, "reinstall the NVIDIA driver");
                return;
        }
        doctor_cuda_version(version, cuda, sizeof(cuda));

        for (size_t i = 0; i < sizeof(symbols) / sizeof(symbols[0]); i++) {
                int n;

                if (dlsym(h, symbols[i]))
                        continue;
                n = snprintf(missing + off, sizeof(missing) - off, "%s%s", off ? ", " : "", symbols[i]);
                if (n > 0 && (size_t) n < sizeof(missing) - off)
                        off += (size_t) n;
        }
        if (off > 0) {
                doctor_set(r, DOCTOR_FAIL, "%s, %s, lacks %s: the checkpoint API came with CUDA 12.8", what, cuda,
                           missing);
                doctor_advise(r, "upgrade the NVIDIA driver to 570 or newer (580 to restore onto other GPUs)");
                return;
        }
        if (is_sim && is_sim() == 1)
                snprintf(extra, sizeof(extra), ", the cudackpt simulator (no GPU)");
        else if (doctor_kernel_module_version(module, sizeof(module)) == 0)
                snprintf(extra, sizeof(extra), ", kernel module %s", module);

        if (version < CUDA_VERSION_MIN) {
                doctor_set(r, DOCTOR_FAIL, "%s, %s%s: cudackptd needs CUDA 12.8 or newer", what, cuda, extra);
                doctor_advise(r, "upgrade the NVIDIA driver to 570 or newer (580 to restore onto other GPUs)");
        } else if (version < CUDA_VERSION_REMAP) {
                doctor_set(r, DOCTOR_WARN, "%s, %s%s: checkpoint API present, but no restore onto other GPUs",
                           what, cuda, extra);
                doctor_advise(r, "upgrade the NVIDIA driver to 580 or newer (CUDA 13.0) to restore onto other "
                                 "GPUs (--map, migration)");
        } else
                doctor_set(r, DOCTOR_OK, "%s, %s%s: checkpoint API present", what, cuda, extra);
}

/* ---- Persistence mode --------------------------------------------------------- */

/* Whether a process of this pid namespace has comm name (cut, as the
 * kernel cuts it, to 15 bytes). */
static bool doctor_process_running(const char *name) {
        DIR *dir = opendir("/proc");
        struct dirent *e;
        bool found = false;
        size_t n = strnlen(name, 15);

        if (!dir)
                return false;
        while (!found && (e = readdir(dir))) {
                char path[sizeof(e->d_name) + 16], comm[32];
                ssize_t len;

                if (e->d_name[0] < '1' || e->d_name[0] > '9')
                        continue;
                snprintf(path, sizeof(path), "/proc/%s/comm", e->d_name);
                len = doctor_read_file(path, comm, sizeof(comm));
                if (len <= 0)
                        continue;
                if (comm[len - 1] == '\n')
                        comm[--len] = '\0';
                found = (size_t) len == n && memcmp(comm, name, n) == 0;
        }
        closedir(dir);
        return found;
}

static void doctor_check_persistence(const ctl_doctor *d, doctor_result *r) {
        char smi[PATH_MAX], out[4096];
        char *argv[] = { smi, (char *) "--query-gpu=persistence_mode", (char *) "--format=csv,noheader", NULL };
        unsigned on = 0, off = 0;
        char *save = NULL;
        int status;

        (void) d;
        if (access("/proc/driver/nvidia", F_OK) < 0) {
                doctor_set(r, DOCTOR_SKIP, "no NVIDIA GPU driver loaded (no /proc/driver/nvidia)");
                return;
        }
        if (doctor_process_running("nvidia-persistenced")) {
                doctor_set(r, DOCTOR_OK, "nvidia-persistenced is running");
                return;
        }
        /* Not visible from here (another pid namespace), or persistence
         * set the legacy way (nvidia-smi -pm 1): ask the driver. */
        if (doctor_find_program("nvidia-smi", smi, sizeof(smi)) < 0)
                doctor_set(r, DOCTOR_WARN, "nvidia-persistenced is not running (and no nvidia-smi on PATH to ask "
                                           "the driver)");
        else {
                status = doctor_run_program(smi, argv, out, sizeof(out), DOCTOR_PROGRAM_TIMEOUT_MS);
                if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                        out[0] = '\0';
                for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                        line += strspn(line, " \t");
                        if (strncmp(line, "Enabled", 7) == 0)
                                on++;
                        else
                                off++;
                }
                if (on > 0 && off == 0) {
                        doctor_set(r, DOCTOR_OK, "persistence mode on for %u GPU(s) (nvidia-smi; "
                                                 "nvidia-persistenced is not running)", on);
                        return;
                }
                if (on + off > 0)
                        doctor_set(r, DOCTOR_WARN, "persistence mode off on %u of %u GPU(s); nvidia-persistenced "
                                                   "is not running", off, on + off);
                else
                        doctor_set(r, DOCTOR_WARN, "nvidia-persistenced is not running, and %s %s", smi,
                                   status == -ETIMEDOUT ? "did not answer in time" : "said nothing usable");
        }
        doctor_advise(r, "systemctl enable --now nvidia-persistenced: without persistence the driver sets up "
                         "each GPU again at its first use (seconds per GPU)");
}

/* ---- The daemon -------------------------------------------------------------- */

/* What the daemon says of its driver (GetStatus), for the daemon line: true
 * when that decides the verdict (the daemon has no usable driver: fail; it
 * runs on the simulator: warn; a daemon of this release that does not
 * tell: fail).  Else driver holds the driver's description for an ok
 * line, empty from a daemon of another release that does not tell. */
static bool doctor_daemon_driver(cudackpt_client *client, const char *path, const char *version,
                                 doctor_result *r, char *driver, size_t size) {
        bool ours = version && strcmp(version, CUDACKPT_VERSION) == 0;
        ctl_driver_status drv;
        cudackpt_reply reply;
        cJSON *params = NULL;
        char what[1024];
        int k;

        driver[0] = '\0';
        cudackpt_reply_init(&reply);
        k = cudackpt_call(client, CUDACKPT_METHOD_GET_STATUS, NULL, &reply);
        if (k == 0 && !reply.error)
                params = cJSON_Parse(reply.parameters_json);
        k = k < 0 ? k : reply.error ? -ENOSYS : ctl_status_driver(params, &drv);
        cJSON_Delete(params);
        cudackpt_reply_clear(&reply);
        if (k < 0) {
                /* An older daemon has no GetStatus: its version says the rest. */
                if (ours) {
                        doctor_set(r, DOCTOR_FAIL, "cudackptd at %s does not say its driver (GetStatus)", path);
                        doctor_advise(r, "journalctl -u cudackptd; systemctl restart cudackptd.service");
                }
                return ours;
        }
        ctl_status_describe_driver(&drv, what, sizeof(what));
        if (!drv.available) {
                doctor_set(r, DOCTOR_FAIL, "cudackptd %s at %s has %s", version ? version : "?", path, what);
                doctor_advise(r, "fix the driver (the driver line), then systemctl restart cudackptd.service: "
                                 "it loads the driver once, at its start");
        } else if (drv.simulated) {
                doctor_set(r, DOCTOR_WARN, "cudackptd %s at %s runs on the simulated driver: %s",
                           version ? version : "?", path, what);
                doctor_advise(r, "for development and tests only: start cudackptd on libcuda.so.1 (its default "
                                 "driver) to checkpoint GPUs");
        } else {
                snprintf(driver, size, ", %s", what);
                return false;
        }
        return true;
}

static void doctor_check_daemon(const ctl_doctor *d, doctor_result *r) {
        const char *path = ctl_socket_path(d->socket);
        cudackpt_client *client = NULL;
        const cJSON *interfaces, *item;
        const char *version, *product;
        cudackpt_reply reply;
        cJSON *params = NULL;
        bool has_interface = false;
        char driver[1100];
        int k;

        cudackpt_reply_init(&reply);
        k = cudackpt_client_connect(path, &client);
        if (k < 0) {
                doctor_set(r, DOCTOR_FAIL, "cannot reach cudackptd at %s: %s", path, strerror(-k));
                doctor_advise(r, "systemctl start cudackptd.socket (or name the socket with --socket or "
                                 "$" CUDACKPT_SOCKET_ENV ")");
                return;
        }
        /* Cannot fail: a timeout is never negative. */
        (void) cudackpt_client_set_timeout(client, d->timeout_ms > 0 ? d->timeout_ms : CTL_DOCTOR_DEFAULT_TIMEOUT_MS);
        k = cudackpt_call(client, "org.varlink.service.GetInfo", NULL, &reply);
        if (k < 0) {
                doctor_set(r, DOCTOR_FAIL, "%s: %s", path, ctl_describe_call_failure(k));
                doctor_advise(r, "journalctl -u cudackptd; systemctl restart cudackptd.service");
                goto done;
        }
        if (reply.error) {
                doctor_set(r, DOCTOR_FAIL, "%s answered GetInfo with %s", path, reply.error);
                doctor_advise(r, "check that --socket names cudackptd's socket");
                goto done;
        }
        params = cJSON_Parse(reply.parameters_json);
        version = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(params, "version"));
        product = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(params, "product"));
        interfaces = cJSON_GetObjectItemCaseSensitive(params, "interfaces");
        if (cJSON_IsArray(interfaces))
                cJSON_ArrayForEach(item, interfaces)
                        if (cJSON_IsString(item) && item->valuestring &&
                            strcmp(item->valuestring, CUDACKPT_INTERFACE) == 0)
                                has_interface = true;
        if (!has_interface) {
                doctor_set(r, DOCTOR_FAIL, "%s serves %s, which lacks " CUDACKPT_INTERFACE, path,
                           product ? product : "a Varlink service");
                doctor_advise(r, "check that --socket names cudackptd's socket");
        } else if (doctor_daemon_driver(client, path, version, r, driver, sizeof(driver))) {
                /* Said: the daemon's driver is missing or simulated, or it
                 * does not tell, though of this release. */
        } else if (!version) {
                doctor_set(r, DOCTOR_WARN, "cudackptd at %s does not say its version", path);
                doctor_advise(r, "use cudackptd and cudackptctl of the same release");
        } else if (strcmp(version, CUDACKPT_VERSION) != 0) {
                doctor_set(r, DOCTOR_WARN, "cudackptd %s at %s, but this cudackptctl is " CUDACKPT_VERSION,
                           version, path);
                doctor_advise(r, "after an upgrade, systemctl restart cudackptd.service; else use cudackptctl of "
                                 "the daemon's release");
        } else
                doctor_set(r, DOCTOR_OK, "cudackptd %s at %s%s", version, path, driver);
done:
        cJSON_Delete(params);
        cudackpt_reply_clear(&reply);
        cudackpt_client_free(client);
}

/* ---- Kernel features ---------------------------------------------------------- */

/* "not in this kernel" for the errors of a kernel that lacks a feature,
 * else the error itself (a seccomp filter's EPERM, say). */
static const char *doctor_missing_why(int err) {
        if (err == ENOSYS || err == ENOTTY || err == EINVAL || err == ENOPROTOOPT)
                return "not in this kernel";
        return strerror(err);
}

static void doctor_check_pidfd_open(const ctl_doctor *d, doctor_result *r) {
        int fd = (int) syscall(SYS_pidfd_open, getpid(), 0);

        (void) d;
        if (fd >= 0) {
                close(fd);
                doctor_set(r, DOCTOR_OK, "pidfd_open() works (Linux 5.3 or newer)");
                return;
        }
        doctor_set(r, DOCTOR_FAIL, "pidfd_open(): %s", doctor_missing_why(errno));
        doctor_advise(r, "run Linux 5.3 or newer and allow pidfd_open in any seccomp filter: the daemon pins "
                         "every process it acts on with a pidfd, and acts on none without");
}

static void doctor_check_peer_pidfd(const ctl_doctor *d, doctor_result *r) {
        socklen_t len = sizeof(int);
        int sv[2], pidfd = -1, err;

        (void) d;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
                doctor_set(r, DOCTOR_WARN, "cannot try SO_PEERPIDFD: socketpair(): %s", strerror(errno));
                return;
        }
        err = getsockopt(sv[0], SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0 && pidfd >= 0 ? 0 : errno;
        if (err == 0)
                close(pidfd);
        close(sv[0]);
        close(sv[1]);
        if (err == 0) {
                doctor_set(r, DOCTOR_OK, "SO_PEERPIDFD works (Linux 6.5 or newer)");
                return;
        }
        doctor_set(r, DOCTOR_WARN, "SO_PEERPIDFD: %s", doctor_missing_why(err));
        doctor_advise(r, "run Linux 6.5 or newer: until then the daemon knows its callers by pid alone, not "
                         "pinned by a pidfd (a narrow pid-reuse race when it reads a caller's pid namespace)");
}

static void doctor_check_pidns_ioctl(const ctl_doctor *d, doctor_result *r) {
        unsigned long self = (unsigned long) getpid();
        int fd, from, in, err = 0;

        (void) d;
        fd = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                doctor_set(r, DOCTOR_WARN, "cannot open /proc/self/ns/pid: %s", strerror(errno));
                doctor_advise(r, "mount /proc");
                return;
        }
        from = ioctl(fd, NS_GET_PID_FROM_PIDNS, self);
        if (from < 0)
                err = errno;
        in = ioctl(fd, NS_GET_PID_IN_PIDNS, self);
        if (in < 0 && err == 0)
                err = errno;
        close(fd);
        if (err == 0 && (unsigned long) from == self && (unsigned long) in == self) {
                doctor_set(r, DOCTOR_OK,
                           "NS_GET_PID_FROM_PIDNS and NS_GET_PID_IN_PIDNS work (Linux 6.7 or newer)");
                return;
        }
        if (err != 0)
                doctor_set(r, DOCTOR_WARN, "NS_GET_PID_FROM_PIDNS, NS_GET_PID_IN_PIDNS: %s", doctor_missing_why(err));
        else
                doctor_set(r, DOCTOR_WARN, "NS_GET_PID_FROM_PIDNS, NS_GET_PID_IN_PIDNS: pid %lu came back as %d "
                           "and %d", self, from, in);
        doctor_advise(r, "run Linux 6.7 or newer: until then callers in another pid namespace (containers "
                         "without hostPID) are refused with PermissionDenied");
}

static void doctor_check_procmap_query(const ctl_doctor *d, doctor_result *r) {
        char name[PATH_MAX];
        struct procmap_query q = {
                .size = sizeof(q),
                .query_flags = PROCMAP_QUERY_COVERING_OR_NEXT_VMA | PROCMAP_QUERY_FILE_BACKED_VMA |
                               PROCMAP_QUERY_VMA_EXECUTABLE,
                .query_addr = 0,
                .vma_name_addr = (uint64_t) (uintptr_t) name,
                .vma_name_size = sizeof(name),
        };
        int fd, err = 0;

        (void) d;
        fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                doctor_set(r, DOCTOR_WARN, "cannot open /proc/self/maps: %s", strerror(errno));
                doctor_advise(r, "mount /proc");
                return;
        }
        /* ENOENT: no such mapping, which a kernel without the ioctl never says. */
        if (ioctl(fd, PROCMAP_QUERY, &q) < 0 && errno != ENOENT)
                err = errno;
        close(fd);
        if (err == 0) {
                doctor_set(r, DOCTOR_OK, "PROCMAP_QUERY works (Linux 6.11 or newer)");
                return;
        }
        doctor_set(r, DOCTOR_WARN, "PROCMAP_QUERY: %s", doctor_missing_why(err));
        doctor_advise(r, "run Linux 6.11 or newer: until then ps, --cgroup and --tree find CUDA processes by "
                         "reading each /proc/PID/maps as text, slower on busy nodes");
}

/* ---- cgroups ------------------------------------------------------------------ */

static bool doctor_fs_is(const char *path, unsigned long magic) {
        struct statfs sfs;

        return statfs(path, &sfs) == 0 && (unsigned long) sfs.f_type == magic;
}

static void doctor_check_cgroup(const ctl_doctor *d, doctor_result *r) {
        struct statfs sfs;
        unsigned long type;

        (void) d;
        if (statfs("/sys/fs/cgroup", &sfs) < 0) {
                doctor_set(r, DOCTOR_WARN, "cannot look at /sys/fs/cgroup: %s", strerror(errno));
                doctor_advise(r, "mount cgroup v2 at /sys/fs/cgroup: --cgroup selectors need it");
                return;
        }
        type = (unsigned long) sfs.f_type;
        if (type == CGROUP2_SUPER_MAGIC) {
                doctor_set(r, DOCTOR_OK, "cgroup v2 at /sys/fs/cgroup");
                return;
        }
        if (type == TMPFS_MAGIC && doctor_fs_is("/sys/fs/cgroup/unified", CGROUP2_SUPER_MAGIC))
                doctor_set(r, DOCTOR_WARN, "hybrid: cgroup v1 at /sys/fs/cgroup, v2 only at /sys/fs/cgroup/unified");
        else if (type == TMPFS_MAGIC || type == CGROUP_SUPER_MAGIC)
                doctor_set(r, DOCTOR_WARN, "cgroup v1 at /sys/fs/cgroup");
        else
                doctor_set(r, DOCTOR_WARN, "/sys/fs/cgroup is no cgroup file system (type %#lx)", type);
        doctor_advise(r, "boot with systemd.unified_cgroup_hierarchy=1 (cgroup v2): --cgroup selectors and ps's "
                         "CGROUP column read cgroup v2 paths; under v1 processes have none, under hybrid only "
                         "systemd's (not a v1 container runtime's /kubepods/...)");
}

/* ---- CRIU --------------------------------------------------------------------- */

static void doctor_check_criu(const ctl_doctor *d, doctor_result *r) {
        char criu[PATH_MAX], out[4096];
        char *argv[] = { criu, (char *) "--version", NULL };
        const char *v;
        int status, major = 0, minor = 0;

        (void) d;
        if (doctor_find_program("criu", criu, sizeof(criu)) < 0) {
                doctor_set(r, DOCTOR_SKIP, "no criu on PATH");
                doctor_advise(r, "needed only for checkpoints to disk (docs/criu.md): install CRIU %d.0 or newer",
                              DOCTOR_CRIU_MIN_MAJOR);
                return;
        }
        status = doctor_run_program(criu, argv, out, sizeof(out), DOCTOR_PROGRAM_TIMEOUT_MS);
        v = status >= 0 ? strstr(out, "Version:") : NULL;
        if (!v || sscanf(v, "Version: %d.%d", &major, &minor) < 1) {
                if (status == -ETIMEDOUT)
                        doctor_set(r, DOCTOR_WARN, "%s --version did not answer within %d s", criu,
                                   DOCTOR_PROGRAM_TIMEOUT_MS / 1000);
                else if (status < 0)
                        doctor_set(r, DOCTOR_WARN, "%s --version: %s", criu, strerror(-status));
                else
                        doctor_set(r, DOCTOR_WARN, "%s --version does not say \"Version: X.Y\"", criu);
                doctor_advise(r, "needed only for checkpoints to disk (docs/criu.md): install CRIU %d.0 or newer",
                              DOCTOR_CRIU_MIN_MAJOR);
                return;
        }
        if (major < DOCTOR_CRIU_MIN_MAJOR) {
                doctor_set(r, DOCTOR_WARN, "criu %d.%d at %s: too old for the CUDA plugin", major, minor, criu);
                doctor_advise(r, "needed only for checkpoints to disk (docs/criu.md): install CRIU %d.0 or newer",
                              DOCTOR_CRIU_MIN_MAJOR);
                return;
        }
        doctor_set(r, DOCTOR_OK, "criu %d.%d at %s", major, minor, criu);
}

/* ---- Transparent huge pages --------------------------------------------------- */

static void doctor_check_thp(const ctl_doctor *d, doctor_result *r) {
        char text[256], *open_, *close_;
        ssize_t len;

        (void) d;
        len = doctor_read_file(DOCTOR_THP_FILE, text, sizeof(text));
        if (len == -ENOENT) {
                doctor_set(r, DOCTOR_SKIP, "no transparent huge pages in this kernel (no %s)", DOCTOR_THP_FILE);
                return;
        }
        open_ = len > 0 ? strchr(text, '[') : NULL;
        close_ = open_ ? strchr(open_, ']') : NULL;
        if (len < 0 || !close_) {
                if (len < 0)
                        doctor_set(r, DOCTOR_WARN, "cannot read %s: %s", DOCTOR_THP_FILE, strerror((int) -len));
                else
                        doctor_set(r, DOCTOR_WARN, "%s names no mode in brackets", DOCTOR_THP_FILE);
                doctor_advise(r, "%s", DOCTOR_THP_ADVICE);
                return;
        }
        *close_ = '\0';
        if (strcmp(open_ + 1, "always") == 0) {
                doctor_set(r, DOCTOR_OK, "transparent huge pages: always");
                return;
        }
        doctor_set(r, DOCTOR_WARN, "transparent huge pages: %s", open_ + 1);
        doctor_advise(r, "%s", DOCTOR_THP_ADVICE);
}

/* ---- Running them ------------------------------------------------------------- */

static const struct {
        const char *name;
        doctor_check_fn fn;
} doctor_checks[] = {
        { "driver", doctor_check_driver },
        { "persistence", doctor_check_persistence },
        { "daemon", doctor_check_daemon },
        { "kernel.pidfd_open", doctor_check_pidfd_open },
        { "kernel.so_peerpidfd", doctor_check_peer_pidfd },
        { "kernel.pidns_ioctl", doctor_check_pidns_ioctl },
        { "kernel.procmap_query", doctor_check_procmap_query },
        { "cgroup", doctor_check_cgroup },
        { "criu", doctor_check_criu },
        { "thp", doctor_check_thp },
};

/* {"check":..., "verdict":..., "found":..., "advice":... or null} */
static int doctor_print_json(const char *name, const doctor_result *r) {
        cJSON *o = cJSON_CreateObject();
        char *text = NULL;

        if (o && cJSON_AddStringToObject(o, "check", name) &&
            cJSON_AddStringToObject(o, "verdict", doctor_verdict_words[r->verdict]) &&
            cJSON_AddStringToObject(o, "found", r->found) &&
            (r->advice[0] ? cJSON_AddStringToObject(o, "advice", r->advice) != NULL
                          : cJSON_AddNullToObject(o, "advice") != NULL))
                text = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (!text)
                return -ENOMEM;
        puts(text);
        cJSON_free(text);
        return 0;
}

int ctl_doctor_run(const ctl_doctor *d) {
        int status = CUDACKPT_EXIT_OK;

        for (size_t i = 0; i < sizeof(doctor_checks) / sizeof(doctor_checks[0]); i++) {
                doctor_result r = { .verdict = DOCTOR_SKIP };

                doctor_checks[i].fn(d, &r);
                /* Found text holds what others wrote: the daemon's version, a path, dlerror(). */
                ctl_sanitize(r.found);
                ctl_sanitize(r.advice);
                if (r.verdict == DOCTOR_FAIL)
                        status = CUDACKPT_EXIT_FAILURE;
                if (d->json) {
                        if (doctor_print_json(doctor_checks[i].name, &r) < 0) {
                                fputs("cudackptctl: doctor: out of memory\n", stderr);
                                return CUDACKPT_EXIT_FAILURE;
                        }
                } else {
                        printf("%-4s %-20s %s", doctor_verdict_words[r.verdict], doctor_checks[i].name, r.found);
                        if (r.advice[0])
                                printf(" -- %s", r.advice);
                        putchar('\n');
                }
                /* A slow check (the daemon, nvidia-smi) shows the lines before it at once. */
                fflush(stdout);
        }
        return status;
}
