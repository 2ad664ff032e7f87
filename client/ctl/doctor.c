/* doctor.c: cudackptctl doctor, a node checked the way a GPU-cluster
 * operator would before relying on it.
 *
 * Each check looks at one thing the daemon depends on (the CUDA driver,
 * persistence mode, the daemon itself, the kernel features it uses, the
 * cgroup version, CRIU, transparent huge pages) and gives a verdict: ok,
 * warn (works, but worse than it could), fail (something will not work)
 * or skip (does not apply here), with what it found and, unless ok, what
 * to do.  One line per check on stdout, or one JSON object per line.
 * This file holds the checks of the CUDA stack (driver, persistence, the
 * daemon) and runs them all; doctorsys.c those of the system around it.
 *
 * Nothing here changes the node or touches a GPU: the driver library is
 * loaded and asked its version (cuDriverGetVersion needs no cuInit), never
 * initialised. */
#include "doctor.h"

#include "args.h"
#include "describe.h"
#include "doctorcheck.h"
#include "doctorsys.h"
#include "exitcode.h"
#include "host.h"
#include "status.h"

#include <cJSON.h>
#include "cuda-api.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CUDACKPT_VERSION
#error "CUDACKPT_VERSION must be defined by the build"
#endif

/* What the daemon needs of the CUDA driver (common/). */
#include "cuda-version.h"

typedef void (*doctor_check_fn)(const ctl_doctor *d, doctor_result *r);

static const char *const doctor_verdict_words[] = {
        [DOCTOR_OK] = "ok",
        [DOCTOR_WARN] = "warn",
        [DOCTOR_FAIL] = "fail",
        [DOCTOR_SKIP] = "skip",
};

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

        if (ctl_host_read_file("/proc/driver/nvidia/version", text, sizeof(text)) < 0)
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

/* The checkpoint API's symbols that library h lacks, ", "-separated, into
 * missing; returns the length (0: none lacks). */
static size_t doctor_missing_symbols(void *h, char *missing, size_t size) {
#define DOCTOR_SYMBOL_NAME(field, name) name,
        static const char *const symbols[] = { CUDA_CHECKPOINT_ACTION_SYMBOLS(DOCTOR_SYMBOL_NAME)
                                                       CUDA_CHECKPOINT_QUERY_SYMBOLS(DOCTOR_SYMBOL_NAME) };
#undef DOCTOR_SYMBOL_NAME
        size_t off = 0;

        missing[0] = '\0';
        for (size_t i = 0; i < sizeof(symbols) / sizeof(symbols[0]); i++) {
                int n;

                if (dlsym(h, symbols[i]))
                        continue;
                n = snprintf(missing + off, size - off, "%s%s", off ? ", " : "", symbols[i]);
                if (n > 0 && (size_t) n < size - off)
                        off += (size_t) n;
        }
        return off;
}

/* The verdict on a driver library that has the checkpoint API: by its
 * version; what describes it, cuda its CUDA version, sim whether it is the
 * simulator. */
static void doctor_driver_verdict(doctor_result *r, const char *what, const char *cuda, int version, bool sim) {
        char module[64], extra[96] = "";

        if (sim)
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

/* cuDriverGetVersion() of library h into *ret_version; false, with the
 * verdict set, when it fails. */
static bool doctor_driver_version(doctor_result *r, void *h, const char *what, cuda_cuDriverGetVersion_fn *get_version,
                                  int *ret_version) {
        cuda_cuGetErrorName_fn *get_error_name;
        const char *name = NULL;
        CUresult cr;

        *(void **) (&get_error_name) = dlsym(h, "cuGetErrorName");
        cr = get_version(ret_version);
        if (cr == CUDA_SUCCESS)
                return true;
        if (!get_error_name || get_error_name(cr, &name) != CUDA_SUCCESS || !name)
                name = NULL;
        if (name)
                doctor_set(r, DOCTOR_FAIL, "%s: cuDriverGetVersion failed: %s", what, name);
        else
                doctor_set(r, DOCTOR_FAIL, "%s: cuDriverGetVersion failed: CUDA error %d", what, (int) cr);
        doctor_advise(r, "reinstall the NVIDIA driver");
        return false;
}

static void doctor_check_driver(const ctl_doctor *d, doctor_result *r) {
        const char *path = d->driver ? d->driver : CTL_DOCTOR_DEFAULT_DRIVER;
        cuda_cuDriverGetVersion_fn *get_version;
        int (*is_sim)(void);
        char what[PATH_MAX * 2 + 128], real[PATH_MAX], missing[512];
        char cuda[32];
        const char *e;
        Dl_info info;
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
        *(void **) (&is_sim) = dlsym(h, "cudackptSimIsSimulator");

        /* The file behind the name, links resolved ("libcuda.so.580.95.05"),
         * when it is not the name given. */
        if (dladdr(sym, &info) != 0 && info.dli_fname && realpath(info.dli_fname, real) &&
            strcmp(real, path) != 0)
                snprintf(what, sizeof(what), "%s (%s)", path, real);
        else
                snprintf(what, sizeof(what), "%s", path);

        if (!doctor_driver_version(r, h, what, get_version, &version))
                return;
        doctor_cuda_version(version, cuda, sizeof(cuda));
        if (doctor_missing_symbols(h, missing, sizeof(missing)) > 0) {
                doctor_set(r, DOCTOR_FAIL, "%s, %s, lacks %s: the checkpoint API came with CUDA 12.8", what, cuda,
                           missing);
                doctor_advise(r, "upgrade the NVIDIA driver to 570 or newer (580 to restore onto other GPUs)");
                return;
        }
        doctor_driver_verdict(r, what, cuda, version, is_sim && is_sim() == 1);
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
                len = ctl_host_read_file(path, comm, sizeof(comm));
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
        if (ctl_host_find_program("nvidia-smi", smi, sizeof(smi)) < 0)
                doctor_set(r, DOCTOR_WARN, "nvidia-persistenced is not running (and no nvidia-smi on PATH to ask "
                                           "the driver)");
        else {
                status = ctl_host_run_program(smi, argv, out, sizeof(out), DOCTOR_PROGRAM_TIMEOUT_MS);
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

/* Whether GetInfo's params name io.cudackpt.Process among its interfaces. */
static bool doctor_has_interface(const cJSON *params) {
        const cJSON *interfaces = cJSON_GetObjectItemCaseSensitive(params, "interfaces"), *item;

        if (cJSON_IsArray(interfaces))
                cJSON_ArrayForEach(item, interfaces)
                        if (cJSON_IsString(item) && item->valuestring &&
                            strcmp(item->valuestring, CUDACKPT_INTERFACE) == 0)
                                return true;
        return false;
}

static void doctor_check_daemon(const ctl_doctor *d, doctor_result *r) {
        const char *path = ctl_socket_path(d->socket);
        cudackpt_client *client = NULL;
        const char *version, *product;
        cudackpt_reply reply;
        cJSON *params = NULL;
        char driver[1100];
        int k;

        cudackpt_reply_init(&reply);
        k = cudackpt_client_connect(path, &client);
        if (k < 0) {
                doctor_set(r, DOCTOR_FAIL, "cannot reach cudackptd at %s: %s", path, strerror(-k));
                doctor_advise(r, CTL_UNREACHABLE_ADVICE);
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
        if (!doctor_has_interface(params)) {
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
