/* criu.c: finding and running CRIU for dump and restore --images.
 *
 * Each tree of a job is one criu run; the runs of a job start together and
 * are waited for together.  A job of several trees must be all or nothing,
 * and what is done with its processes after criu must be done to the
 * processes criu held.  So each run gets one more --action-script
 * (criubarrier.c), which at post-dump (images written, tasks still frozen)
 * or post-restore (tasks restored, not yet running) connects to this
 * process and waits for one byte.  Once every run has connected, the
 * caller's at_barrier() pins the trees' processes (jobpin.c), and every
 * script is sent 'g'; when a run fails first, or at_barrier() does, the
 * others are sent nothing, their scripts fail, and each criu resumes (dump)
 * or kills (restore) its tree.  A run that exits 0 before the barrier let
 * them go never got there (criu -V, say): it did nothing, and counts as
 * failed; so even a single tree goes through the barrier.  Should
 * cudackptctl die meanwhile, the scripts see the connection close and fail
 * the same way.
 *
 * Each run's image directory is handed to criu as a descriptor,
 * -D /proc/self/fd/N (the way CRIU's own RPC service opens the directory
 * a client passes): criu opens what was checked, whatever the path names
 * by then.
 *
 * criu runs in a process group of its own: a terminal's ^C, meant for
 * cudackptctl, must not kill it halfway through a dump (its parasite code
 * inside the frozen tasks).  Its stdout and stderr are kept for the report
 * (its real log is its -o file). */
#include "criu.h"

#include "describe.h"
#include "host.h"
#include "proctree.h"
#include "monotime.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define CRIU_OUTPUT_MAX (64 * 1024)

/* ---- finding criu ---------------------------------------------------------- */

int ctl_criu_find(char *path, size_t size, char *version, size_t version_size, char *err, size_t err_size) {
        char *argv[] = { path, (char *) "--version", NULL };
        ctl_criu_run run = { .argv = argv };
        const char *v;
        int major = 0, minor = 0, r;

        r = ctl_host_find_criu(path, size);
        if (r < 0) {
                const char *env = getenv(CTL_HOST_CRIU_ENV);

                snprintf(err, err_size, "no criu found (%s): set " CTL_HOST_CRIU_ENV " to its path, or put it on PATH",
                         env && *env ? CTL_HOST_CRIU_ENV " names no executable" : "none on PATH");
                return r;
        }
        r = ctl_criu_run_all(&run, 1, environ, NULL);
        v = run.output ? strstr(run.output, "Version:") : NULL;
        if (r < 0 || !v || sscanf(v, "Version: %d.%d", &major, &minor) < 1) {
                snprintf(err, err_size, "%s --version failed or does not say \"Version: N.M\"", path);
                ctl_criu_run_free(&run);
                return -ENOEXEC;
        }
        ctl_criu_run_free(&run);
        if (major < 4) {
                snprintf(err, err_size, "%s is CRIU %d.%d; its CUDA plugin needs CRIU 4 or newer", path, major, minor);
                return -ENOTSUP;
        }
        snprintf(version, version_size, "%d.%d", major, minor);
        return 0;
}

/* ---- environment ----------------------------------------------------------- */

char **ctl_criu_env(const char *path_dir) {
        size_t n = 0, k = 0;
        char **env;
        bool had_path = false;

        while (environ[n])
                n++;
        env = calloc(n + 2, sizeof(char *));
        if (!env)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                bool is_path = strncmp(environ[i], "PATH=", 5) == 0;

                if (is_path && path_dir) {
                        had_path = true;
                        if (asprintf(&env[k], "PATH=%s:%s", path_dir, environ[i] + 5) < 0)
                                env[k] = NULL;
                } else
                        env[k] = strdup(environ[i]);
                if (!env[k++]) {
                        ctl_criu_env_free(env);
                        return NULL;
                }
        }
        if (path_dir && !had_path &&
            asprintf(&env[k++], "PATH=%s:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", path_dir) < 0) {
                env[k - 1] = NULL;
                ctl_criu_env_free(env);
                return NULL;
        }
        return env;
}

void ctl_criu_env_free(char **env) {
        if (!env)
                return;
        for (size_t i = 0; env[i]; i++)
                free(env[i]);
        free(env);
}

/* ---- running --------------------------------------------------------------- */

volatile sig_atomic_t ctl_criu_signal;

static const int criu_held[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU };
#define CRIU_N_NOTED 4  /* the first four are noted, the others ignored */

static void criu_signal_cb(int sig) {
        ctl_criu_signal = sig;
}

void ctl_criu_signals_hold(ctl_criu_signals *s) {
        struct sigaction noted = { .sa_handler = criu_signal_cb }, ignored = { .sa_handler = SIG_IGN };

        ctl_criu_signal = 0;
        for (size_t i = 0; i < sizeof(criu_held) / sizeof(criu_held[0]); i++)
                sigaction(criu_held[i], i < CRIU_N_NOTED ? &noted : &ignored, &s->old[i]);
}

void ctl_criu_signals_restore(const ctl_criu_signals *s) {
        for (size_t i = 0; i < sizeof(criu_held) / sizeof(criu_held[0]); i++)
                sigaction(criu_held[i], &s->old[i], NULL);
}

void ctl_criu_signals_noted(sigset_t *set) {
        sigemptyset(set);
        for (size_t i = 0; i < CRIU_N_NOTED; i++)
                sigaddset(set, criu_held[i]);
}

static int criu_pidfd_open(pid_t pid) {
        return (int) syscall(SYS_pidfd_open, pid, 0);
}

/* Starts one run with its output on a pipe; ret_fd the pipe's read end. */
static pid_t criu_spawn(ctl_criu_run *run, char **env, int *ret_fd) {
        /* What is ignored stays so through execve: not for criu. */
        static const int defaults[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU, SIGPIPE };
        ctl_spawn s = {
                .path = run->argv[0],
                .argv = run->argv,
                .env = env,
                .capture = true,
                .capture_stderr = true,
                .own_group = true,
                .default_signals = defaults,
                .n_default_signals = sizeof(defaults) / sizeof(defaults[0]),
                /* The images' directory, which criu opens as /proc/self/fd/N:
                 * the one checked, whatever its path names by now. */
                .keep_fd = run->dir_fd > STDERR_FILENO ? run->dir_fd : -1,
        };
        pid_t pid;
        int r = ctl_host_spawn(&s, &pid, ret_fd);

        return r < 0 ? r : pid;
}

/* The state of ctl_criu_run_all(): per run a pid, pidfd and output pipe;
 * the barrier's listening socket and accepted connections. */
typedef struct criu_set {
        ctl_criu_run *runs;
        size_t n;
        pid_t *pid;
        int *pidfd;
        int *out;
        size_t *out_len;
        double *t0;
        int listen_fd;
        int *waiting;             /* accepted barrier connections */
        int *waiting_criu;        /* ... the criu each came from */
        size_t n_waiting;
        size_t running;
        const ctl_criu_barrier *barrier; /* NULL: none */
        bool failed;
        bool released;
        double held_ms;           /* in at_barrier, every run waiting */
} criu_set;

static void criu_read_output(criu_set *s, size_t i) {
        ctl_criu_run *run = &s->runs[i];
        char scratch[4096];
        ssize_t k;

        if (!run->output) {
                run->output = calloc(1, CRIU_OUTPUT_MAX + 1);
                if (!run->output) {
                        /* Drain it all the same. */
                        k = read(s->out[i], scratch, sizeof(scratch));
                        goto check;
                }
        }
        if (s->out_len[i] < CRIU_OUTPUT_MAX)
                k = read(s->out[i], run->output + s->out_len[i], CRIU_OUTPUT_MAX - s->out_len[i]);
        else
                k = read(s->out[i], scratch, sizeof(scratch));
        if (k > 0 && s->out_len[i] < CRIU_OUTPUT_MAX)
                s->out_len[i] += (size_t) k;
check:
        if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN)) {
                close(s->out[i]);
                s->out[i] = -1;
        }
}

static void criu_reap(criu_set *s, size_t i) {
        int status = 0;

        while (waitpid(s->pid[i], &status, 0) < 0 && errno == EINTR)
                ;
        s->runs[i].status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        s->runs[i].held_ms = s->held_ms;
        s->runs[i].ms = monotime_ms_exact() - s->t0[i] - s->held_ms;
        close(s->pidfd[i]);
        s->pidfd[i] = -1;
        s->running--;
        /* Out with 0 before the barrier let anyone go: it never got to
         * post-dump, so it dumped nothing (-V, --help, --check-only...). */
        if (s->runs[i].status == 0 && s->barrier && !s->released)
                s->runs[i].early = true;
        if (s->runs[i].status != 0 || s->runs[i].early)
                s->failed = true;
}

/* Barrier: a script connected (post-dump, post-restore); once all have, let them go. */
static void criu_accept(criu_set *s) {
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC), ppid = 0;
        struct ucred cred;
        socklen_t len = sizeof(cred);

        if (fd < 0)
                return;
        /* The script's parent is the criu that waits (the socket is in a
         * directory only this user may enter). */
        if (s->failed || s->n_waiting == s->n || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
            ctl_proc_stat(cred.pid, &ppid, NULL) < 0) {
                close(fd); /* its script fails: its criu resumes its tree */
                return;
        }
        s->waiting_criu[s->n_waiting] = ppid;
        s->waiting[s->n_waiting++] = fd;
}

static void criu_barrier_step(criu_set *s) {
        if (s->released || s->listen_fd < 0)
                return;
        if (s->failed) {
                /* None goes on: every waiting script fails. */
                for (size_t i = 0; i < s->n_waiting; i++)
                        close(s->waiting[i]);
                s->n_waiting = 0;
                close(s->listen_fd);
                s->listen_fd = -1;
                return;
        }
        if (s->n_waiting < s->n)
                return;
        /* Every tree held by its criu: what must be taken then is taken. */
        double t0 = monotime_ms_exact();
        int r = s->barrier->at_barrier ? s->barrier->at_barrier(s->barrier->data, s->waiting_criu, s->n_waiting) : 0;

        s->held_ms = monotime_ms_exact() - t0;
        if (r < 0) {
                s->failed = true;
                criu_barrier_step(s);
                return;
        }
        for (size_t i = 0; i < s->n_waiting; i++) {
                ssize_t w = send(s->waiting[i], "g", 1, MSG_NOSIGNAL);
                (void) w; /* a script gone meanwhile fails its criu: reported as its failure */
                close(s->waiting[i]);
        }
        s->n_waiting = 0;
        s->released = true;
}

/* Waits for every started run (pollfd per run: output, pidfd; then the barrier). */
static void criu_wait_all(criu_set *s) {
        struct pollfd *pf = calloc(2 * s->n + 1, sizeof(*pf));

        while (s->running > 0 && pf) {
                size_t k = 0;

                for (size_t i = 0; i < s->n; i++) {
                        pf[k++] = (struct pollfd) { .fd = s->out[i], .events = POLLIN };
                        pf[k++] = (struct pollfd) { .fd = s->pidfd[i], .events = POLLIN };
                }
                pf[k++] = (struct pollfd) { .fd = s->listen_fd, .events = POLLIN };
                if (poll(pf, k, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                for (size_t i = 0; i < s->n; i++) {
                        if (pf[2 * i].revents)
                                criu_read_output(s, i);
                        /* Its output first: what it wrote before it exited. */
                        if (pf[2 * i + 1].revents && s->out[i] < 0)
                                criu_reap(s, i);
                        else if (pf[2 * i + 1].revents) {
                                (void) fcntl(s->out[i], F_SETFL, O_NONBLOCK);
                                criu_read_output(s, i);
                                if (s->out[i] >= 0) {
                                        /* Something it started may hold the pipe: stop at what is there. */
                                        close(s->out[i]);
                                        s->out[i] = -1;
                                }
                                criu_reap(s, i);
                        }
                }
                if (pf[k - 1].revents)
                        criu_accept(s);
                criu_barrier_step(s);
        }
        free(pf);
        /* poll failing (ENOMEM): wait the plain way. */
        for (size_t i = 0; i < s->n; i++)
                if (s->pidfd[i] >= 0)
                        criu_reap(s, i);
}

static int criu_listen(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(fd, 64) < 0) {
                int e = errno;
                close(fd);
                return -e;
        }
        return fd;
}

/* Starts run i of s: its pid, pidfd and output pipe.  0 or -errno (then
 * nothing of it is left running). */
static int criu_start(criu_set *s, size_t i, char **env) {
        s->t0[i] = monotime_ms_exact();
        s->pid[i] = criu_spawn(&s->runs[i], env, &s->out[i]);
        if (s->pid[i] < 0)
                return s->pid[i];
        s->runs[i].pid = s->pid[i];
        s->pidfd[i] = criu_pidfd_open(s->pid[i]);
        if (s->pidfd[i] < 0) {
                /* No pidfd (a kernel before 5.3): nothing to poll it by. */
                int r = -errno;

                kill(-s->pid[i], SIGKILL);
                s->pidfd[i] = -1;
                while (waitpid(s->pid[i], NULL, 0) < 0 && errno == EINTR)
                        ;
                close(s->out[i]);
                s->out[i] = -1;
                return r;
        }
        s->running++;
        return 0;
}

static void criu_set_free(criu_set *s) {
        for (size_t i = 0; s->out && i < s->n; i++)
                if (s->out[i] >= 0)
                        close(s->out[i]);
        for (size_t i = 0; s->waiting && i < s->n_waiting; i++)
                close(s->waiting[i]);
        if (s->listen_fd >= 0)
                close(s->listen_fd);
        free(s->pid);
        free(s->pidfd);
        free(s->out);
        free(s->out_len);
        free(s->t0);
        free(s->waiting);
        free(s->waiting_criu);
}

int ctl_criu_run_all(ctl_criu_run *runs, size_t n, char **env, const ctl_criu_barrier *barrier) {
        criu_set s = { .runs = runs, .n = n, .listen_fd = -1 };
        int r = 0;

        s.pid = calloc(n, sizeof(pid_t));
        s.pidfd = calloc(n, sizeof(int));
        s.out = calloc(n, sizeof(int));
        s.out_len = calloc(n, sizeof(size_t));
        s.t0 = calloc(n, sizeof(double));
        s.waiting = calloc(n, sizeof(int));
        s.waiting_criu = calloc(n, sizeof(int));
        if (!s.pid || !s.pidfd || !s.out || !s.out_len || !s.t0 || !s.waiting || !s.waiting_criu) {
                s.n = 0; /* no descriptor of s.out is open yet */
                criu_set_free(&s);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                runs[i].status = -1;
                runs[i].early = false;
                runs[i].held_ms = 0;
                s.pidfd[i] = s.out[i] = -1;
        }
        if (barrier) {
                s.barrier = barrier;
                s.listen_fd = criu_listen(barrier->sock);
                if (s.listen_fd < 0) {
                        r = s.listen_fd;
                        criu_set_free(&s);
                        return r;
                }
        }
        for (size_t i = 0; i < n && r == 0; i++)
                r = criu_start(&s, i, env);
        if (r < 0)
                s.failed = true; /* the barrier lets none go */
        criu_wait_all(&s);
        if (r == 0 && s.failed)
                r = -EIO;
        criu_set_free(&s);
        return r;
}

void ctl_criu_run_free(ctl_criu_run *run) {
        if (!run)
                return;
        free(run->output);
        run->output = NULL;
}

void ctl_criu_runs_free(ctl_criu_run *runs, size_t n) {
        for (size_t i = 0; runs && i < n; i++) {
                for (size_t k = 0; runs[i].argv && runs[i].argv[k]; k++)
                        free(runs[i].argv[k]);
                free(runs[i].argv);
                free((char *) runs[i].log);
                ctl_criu_run_free(&runs[i]);
        }
        free(runs);
}
