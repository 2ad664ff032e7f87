/* test_socket_activation.c: cudackptd serves the socket systemd passes it.
 *
 * The daemon is started the way cudackptd.socket starts it, through
 * systemd-socket-activate (LISTEN_FDS=1, LISTEN_FDNAMES=varlink), on the
 * simulated driver.  It must answer org.varlink.service.GetInfo and
 * io.cudackpt.Process.GetState on that socket, listen on nothing else
 * (its own --socket path is never created), leave the passed socket file
 * alone when it exits (it belongs to systemd), and exit 0 on SIGTERM.
 *
 * Usage: test-sd-socket-activation DAEMON SIM SYSTEMD-SOCKET-ACTIVATE */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sdtest.h"

#define TIMEOUT_MS 10000
#define SO_ACCEPTCON_FLAG 0x10000 /* __SO_ACCEPTCON in /proc/net/unix "Flags" */

/* Counts the listening AF_UNIX sockets held by pid, and those of them bound
 * to a path other than expected. */
static void count_listeners(pid_t pid, const char *expected, int *ret_total, int *ret_other)
{
        unsigned long inodes[256];
        size_t n_inodes = 0;
        char path[PATH_MAX], link[PATH_MAX], *text, *line, *save = NULL;
        struct dirent *de;
        DIR *d;
        int total = 0, other = 0;

        snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
        d = opendir(path);
        SDT_CHECK(d != NULL, "opendir %s: %s", path, strerror(errno));
        while ((de = readdir(d)) && n_inodes < sizeof(inodes) / sizeof(inodes[0])) {
                char fdpath[PATH_MAX + 300];
                ssize_t n;
                unsigned long ino;
                snprintf(fdpath, sizeof(fdpath), "%s/%s", path, de->d_name);
                n = readlink(fdpath, link, sizeof(link) - 1);
                if (n <= 0)
                        continue;
                link[n] = '\0';
                if (sscanf(link, "socket:[%lu]", &ino) == 1)
                        inodes[n_inodes++] = ino;
        }
        closedir(d);

        text = sdt_read_file("/proc/net/unix");
        SDT_CHECK(text != NULL, "cannot read /proc/net/unix");
        for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                unsigned flags, type, st;
                unsigned long ino;
                int off = 0;
                if (sscanf(line, "%*s %*s %*s %x %x %x %lu%n", &flags, &type, &st, &ino, &off) != 4)
                        continue; /* the header */
                bool ours = false;
                for (size_t i = 0; i < n_inodes; i++)
                        if (inodes[i] == ino)
                                ours = true;
                if (!ours || !(flags & SO_ACCEPTCON_FLAG))
                        continue;
                const char *p = line + off;
                while (*p == ' ')
                        p++;
                total++;
                if (strcmp(p, expected) != 0) {
                        fprintf(stderr, "daemon also listens on \"%s\"\n", p);
                        other++;
                }
        }
        free(text);
        *ret_total = total;
        *ret_other = other;
}

/* The parameters of a successful reply to method (checked so). */
static cJSON *reply_parameters(const cJSON *reply, const char *method)
{
        SDT_CHECK(!cJSON_GetObjectItemCaseSensitive(reply, "error"), "%s failed: %s", method,
                  cJSON_PrintUnformatted(reply));
        return cJSON_GetObjectItemCaseSensitive(reply, "parameters");
}

/* GetInfo names cudackptd and our interfaces; GetState of target (a
 * simulated CUDA process) says running, of this process NotCudaProcess. */
static void check_calls(int fd, pid_t target)
{
        char params[64];
        cJSON *reply, *p, *ifaces, *it;
        bool has_process = false, has_service = false;

        reply = sdt_call(fd, "org.varlink.service.GetInfo", NULL, TIMEOUT_MS);
        p = reply_parameters(reply, "GetInfo");
        it = cJSON_GetObjectItemCaseSensitive(p, "product");
        SDT_CHECK(cJSON_IsString(it) && strcmp(it->valuestring, "cudackptd") == 0,
                  "GetInfo product is not cudackptd");
        ifaces = cJSON_GetObjectItemCaseSensitive(p, "interfaces");
        SDT_CHECK(cJSON_IsArray(ifaces), "GetInfo has no interfaces array");
        cJSON_ArrayForEach(it, ifaces) {
                if (cJSON_IsString(it) && strcmp(it->valuestring, "io.cudackpt.Process") == 0)
                        has_process = true;
                if (cJSON_IsString(it) && strcmp(it->valuestring, "org.varlink.service") == 0)
                        has_service = true;
        }
        SDT_CHECK(has_process && has_service, "GetInfo interfaces lack one of ours");
        cJSON_Delete(reply);

        snprintf(params, sizeof(params), "{\"pid\":%d}", (int)target);
        reply = sdt_call(fd, "io.cudackpt.Process.GetState", params, TIMEOUT_MS);
        p = reply_parameters(reply, "GetState");
        it = cJSON_GetObjectItemCaseSensitive(p, "state");
        SDT_CHECK(cJSON_IsString(it) && strcmp(it->valuestring, "running") == 0,
                  "GetState state is not \"running\"");
        it = cJSON_GetObjectItemCaseSensitive(p, "pid");
        SDT_CHECK(cJSON_IsNumber(it) && it->valuedouble == (double)target, "GetState pid differs");
        cJSON_Delete(reply);

        /* The test process itself never touched CUDA: the simulated driver
         * must say so, proving the call went through the driver. */
        snprintf(params, sizeof(params), "{\"pid\":%d}", (int)getpid());
        reply = sdt_call(fd, "io.cudackpt.Process.GetState", params, TIMEOUT_MS);
        it = cJSON_GetObjectItemCaseSensitive(reply, "error");
        SDT_CHECK(cJSON_IsString(it) && strcmp(it->valuestring, "io.cudackpt.Process.NotCudaProcess") == 0,
                  "GetState of a non-CUDA process did not fail with NotCudaProcess");
        cJSON_Delete(reply);
}

/* The process serving us (pid) is the daemon itself (exec in place, so
 * LISTEN_PID matched), and it listens on the passed socket (sock) only,
 * making no socket of its own in own_dir. */
static void check_served_by(pid_t pid, const char *sock, const char *own_dir)
{
        char path[64], comm[64], *text;
        struct stat st;
        int total, other;

        snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
        text = sdt_read_file(path);
        SDT_CHECK(text != NULL, "cannot read %s", path);
        snprintf(comm, sizeof(comm), "%s", text);
        free(text);
        SDT_CHECK(strncmp(comm, "cudackptd", 9) == 0, "pid %d runs \"%s\", not cudackptd",
                  (int)pid, comm);
        count_listeners(pid, sock, &total, &other);
        SDT_CHECK(total == 1 && other == 0,
                  "daemon listens on %d sockets, %d of them not the passed one", total, other);
        SDT_CHECK(stat(own_dir, &st) < 0 && errno == ENOENT,
                  "the daemon created %s although a socket was passed", own_dir);
}

int main(int argc, char **argv)
{
        char sock[PATH_MAX], own_dir[PATH_MAX], own[PATH_MAX + 8], logp[PATH_MAX], *text;
        struct sdt_child target, daemon_;
        struct stat st;
        int fd, status;

        if (argc != 4) {
                fprintf(stderr, "usage: %s DAEMON SIM SYSTEMD-SOCKET-ACTIVATE\n", argv[0]);
                return 2;
        }
        if (argv[3][0] == '\0' || strstr(argv[3], "NOTFOUND") || access(argv[3], X_OK) != 0)
                sdt_skip("systemd-socket-activate is not installed (Debian package systemd)");

        const char *dir = sdt_tmpdir();
        snprintf(sock, sizeof(sock), "%s/io.cudackpt.Process", dir);
        snprintf(own_dir, sizeof(own_dir), "%s/own", dir);
        snprintf(own, sizeof(own), "%s/sock", own_dir);
        snprintf(logp, sizeof(logp), "%s/daemon.log", dir);

        /* The target: a process the simulated driver treats as a CUDA one
         * (sdt_spawn returns once its exec began: sdt_environ_has waits
         * for the new image's environment). */
        const char *target_argv[] = { "sleep", "100", NULL };
        const char *target_env[] = { "CUDACKPT_SIM=1", NULL };
        sdt_spawn(target_argv, &(struct sdt_spawn_opts){ .setenv = target_env }, &target);
        SDT_CHECK(sdt_environ_has(target.pid, "CUDACKPT_SIM=1"),
                  "target %d lacks CUDACKPT_SIM=1 in /proc/PID/environ", (int)target.pid);

        char driver_opt[PATH_MAX + 16], socket_opt[PATH_MAX + 32];
        snprintf(driver_opt, sizeof(driver_opt), "--driver=%s", argv[2]);
        snprintf(socket_opt, sizeof(socket_opt), "--socket=%s", own);
        const char *daemon_argv[] = { argv[3], "-l", sock, "--fdname=varlink", argv[1],
                                      driver_opt, socket_opt, NULL };
        sdt_spawn(daemon_argv, &(struct sdt_spawn_opts){ .log_path = logp }, &daemon_);

        /* systemd-socket-activate binds and listens, then execs the daemon in place on the
         * first connection, as systemd does for an Accept=no socket. */
        sdt_wait_socket_file(sock, TIMEOUT_MS);
        fd = sdt_connect(sock);

        check_calls(fd, target.pid);
        check_served_by(daemon_.pid, sock, own_dir);

        close(fd);
        SDT_CHECK(kill(daemon_.pid, SIGTERM) == 0, "kill: %s", strerror(errno));
        status = sdt_wait_exit(&daemon_, TIMEOUT_MS);
        SDT_CHECK(status >= 0, "daemon did not exit within %d ms of SIGTERM", TIMEOUT_MS);
        SDT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "daemon exit status 0x%x", status);
        /* The socket file is systemd's (RemoveOnStop= of the socket unit). */
        SDT_CHECK(stat(sock, &st) == 0 && S_ISSOCK(st.st_mode),
                  "the daemon removed the socket file it was passed");

        text = sdt_read_file(logp);
        SDT_CHECK(text && strstr(text, "socket-activated socket 3 (varlink)"),
                  "the log does not say the passed socket is served:\n%s", text ? text : "");
        free(text);
        sdt_kill(&target);
        printf("ok: socket-activated daemon served GetInfo and GetState on %s and nothing else\n", sock);
        return 0;
}
