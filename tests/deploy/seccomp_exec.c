/* seccomp_exec.c: cudackpt-seccomp-exec, run a program under a seccomp
 * profile in the OCI/Kubernetes JSON format (deploy/kubernetes/seccomp/
 * cudackptd.json), as a container runtime would, outside a container: for
 * the GPU suites, whose machine runs no Kubernetes, and for the tests here.
 *
 *   cudackpt-seccomp-exec --profile=FILE [--report=FILE] -- PROGRAM [ARG...]
 *
 * Without --report the profile is enforced: libseccomp loads it as it
 * stands (defaultAction, defaultErrnoRet, architectures, each rule's names,
 * action, errnoRet and args, the args of one rule all holding together) and
 * PROGRAM replaces this process, keeping its pid.  Names this libseccomp
 * does not know are left out, as runc leaves them out.
 *
 * With --report, every action but SCMP_ACT_ALLOW becomes a user
 * notification, received by a supervisor process forked before the filter
 * is loaded: PROGRAM keeps this pid, and has the supervisor as a child (a
 * grandchild would be an orphan, which test harnesses that are subreapers
 * kill; the daemon neither waits for children nor counts them).  For each system call the profile would have
 * refused, the supervisor writes its name to the report once, the first
 * time it is made, and lets it go on (SECCOMP_USER_NOTIF_FLAG_CONTINUE):
 * PROGRAM runs as it would without the profile, and the report lists every
 * call the profile lacks for what PROGRAM did.  The kernel's own log of
 * refused calls (SCMP_ACT_LOG) needs an audit daemon and dmesg, which the
 * GPU machine does not give; notifications need neither (Linux 5.5).  The
 * supervisor exits once PROGRAM and everything it started have.
 *
 * Exit: PROGRAM's own (it replaces this process); 2 on a usage error or a
 * profile it cannot load; 127 when PROGRAM cannot be executed. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define SE_NAME "cudackpt-seccomp-exec"
#define SE_MAX_PROFILE (1u << 20)       /* bytes of JSON read at most */
#define SE_MAX_SEEN 1024u               /* distinct refused calls reported */

/* The system calls this program may make between loading the filter and
 * handing the listener to the supervisor, with --report (handing it over,
 * and libc freeing memory): one of them refused would wait for an answer
 * for ever. */
static const char *const se_needed_after_load[] = { "sendmsg", "brk", "munmap" };

static void se_usage(void) {
        fputs("usage: " SE_NAME " --profile=FILE [--report=FILE] -- PROGRAM [ARG...]\n"
              "  --profile=FILE  an OCI/Kubernetes seccomp profile (JSON)\n"
              "  --report=FILE   do not refuse: write to FILE, once each, the names of the\n"
              "                  system calls the profile would refuse, and let them run\n",
              stderr);
}

static char *se_read_file(const char *path) {
        FILE *f = fopen(path, "re");
        char *buf = NULL;
        size_t n;

        if (!f)
                return NULL;
        buf = malloc(SE_MAX_PROFILE + 1);
        if (buf) {
                n = fread(buf, 1, SE_MAX_PROFILE + 1, f);
                if (n > SE_MAX_PROFILE || ferror(f)) {
                        free(buf);
                        buf = NULL;
                        errno = EFBIG;
                } else
                        buf[n] = '\0';
        }
        fclose(f);
        return buf;
}

/* An action's name ("SCMP_ACT_ERRNO") and errno into *ret_action; with
 * report, every action but ALLOW is a notification.  -EINVAL when unknown. */
static int se_action(const char *name, int errno_ret, bool report, uint32_t *ret_action) {
        uint32_t a;

        if (!name)
                return -EINVAL;
        if (strcmp(name, "SCMP_ACT_ALLOW") == 0)
                a = SCMP_ACT_ALLOW;
        else if (strcmp(name, "SCMP_ACT_ERRNO") == 0)
                a = SCMP_ACT_ERRNO((uint32_t) errno_ret);
        else if (strcmp(name, "SCMP_ACT_KILL") == 0 || strcmp(name, "SCMP_ACT_KILL_THREAD") == 0)
                a = SCMP_ACT_KILL_THREAD;
        else if (strcmp(name, "SCMP_ACT_KILL_PROCESS") == 0)
                a = SCMP_ACT_KILL_PROCESS;
        else if (strcmp(name, "SCMP_ACT_TRAP") == 0)
                a = SCMP_ACT_TRAP;
        else if (strcmp(name, "SCMP_ACT_LOG") == 0)
                a = SCMP_ACT_LOG;
        else if (strcmp(name, "SCMP_ACT_TRACE") == 0)
                a = SCMP_ACT_TRACE((uint32_t) errno_ret);
        else
                return -EINVAL;
        *ret_action = report && a != SCMP_ACT_ALLOW ? SCMP_ACT_NOTIFY : a;
        return 0;
}

static int se_errno_ret(const cJSON *o, int dflt) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "errnoRet");

        return cJSON_IsNumber(e) && e->valuedouble >= 0 && e->valuedouble < 4096 ? e->valueint : dflt;
}

/* A rule's "args": at most 6 comparisons, all of which must hold. */
static int se_args(const cJSON *args, struct scmp_arg_cmp *ret_cmp, unsigned *ret_n) {
        static const struct { const char *name; enum scmp_compare op; } ops[] = {
                { "SCMP_CMP_NE", SCMP_CMP_NE }, { "SCMP_CMP_LT", SCMP_CMP_LT },
                { "SCMP_CMP_LE", SCMP_CMP_LE }, { "SCMP_CMP_EQ", SCMP_CMP_EQ },
                { "SCMP_CMP_GE", SCMP_CMP_GE }, { "SCMP_CMP_GT", SCMP_CMP_GT },
                { "SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ },
        };
        const cJSON *a;
        unsigned n = 0;

        cJSON_ArrayForEach(a, args) {
                const cJSON *index = cJSON_GetObjectItemCaseSensitive(a, "index");
                const cJSON *value = cJSON_GetObjectItemCaseSensitive(a, "value");
                const cJSON *two = cJSON_GetObjectItemCaseSensitive(a, "valueTwo");
                const char *op = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(a, "op"));
                size_t k;

                if (n == 6 || !cJSON_IsNumber(index) || index->valuedouble < 0 || index->valuedouble > 5 ||
                    !cJSON_IsNumber(value) || !op)
                        return -EINVAL;
                for (k = 0; k < sizeof(ops) / sizeof(ops[0]) && strcmp(ops[k].name, op) != 0; k++)
                        ;
                if (k == sizeof(ops) / sizeof(ops[0]))
                        return -EINVAL;
                ret_cmp[n++] = (struct scmp_arg_cmp) {
                        .arg = (unsigned) index->valueint, .op = ops[k].op,
                        .datum_a = (scmp_datum_t) value->valuedouble,
                        .datum_b = cJSON_IsNumber(two) ? (scmp_datum_t) two->valuedouble : 0,
                };
        }
        *ret_n = n;
        return 0;
}

/* One entry of "syscalls" into ctx. */
static int se_rule(scmp_filter_ctx ctx, const cJSON *rule, uint32_t dflt, int dflt_errno, bool report) {
        const cJSON *name;
        struct scmp_arg_cmp cmp[6];
        uint32_t action;
        unsigned n_cmp;
        int r;

        r = se_action(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rule, "action")),
                      se_errno_ret(rule, dflt_errno), report, &action);
        if (r < 0 || se_args(cJSON_GetObjectItemCaseSensitive(rule, "args"), cmp, &n_cmp) < 0)
                return -EINVAL;
        if (action == dflt)
                return 0; /* libseccomp refuses a rule that says what the default says */
        cJSON_ArrayForEach(name, cJSON_GetObjectItemCaseSensitive(rule, "names")) {
                int nr = cJSON_IsString(name) ? seccomp_syscall_resolve_name(name->valuestring) : __NR_SCMP_ERROR;

                if (nr == __NR_SCMP_ERROR)
                        continue; /* unknown to this libseccomp: left out, as runc does */
                r = seccomp_rule_add_array(ctx, action, nr, n_cmp, cmp);
                if (r < 0) {
                        fprintf(stderr, SE_NAME ": cannot add %s: %s\n", name->valuestring, strerror(-r));
                        return r;
                }
        }
        return 0;
}

/* "architectures": "SCMP_ARCH_X86_64" is libseccomp's "x86_64". */
static int se_arches(scmp_filter_ctx ctx, const cJSON *arches) {
        const cJSON *a;

        cJSON_ArrayForEach(a, arches) {
                char name[32];
                const char *s = cJSON_GetStringValue(a);
                size_t i;
                uint32_t token;
                int r;

                if (!s || strncmp(s, "SCMP_ARCH_", 10) != 0 || strlen(s + 10) >= sizeof(name))
                        return -EINVAL;
                for (i = 0; s[10 + i]; i++)
                        name[i] = (char) tolower((unsigned char) s[10 + i]);
                name[i] = '\0';
                token = seccomp_arch_resolve_name(name);
                if (token == 0)
                        return -EINVAL;
                r = seccomp_arch_add(ctx, token);
                if (r < 0 && r != -EEXIST)
                        return r;
        }
        return 0;
}

/* The profile's JSON into a filter. */
static int se_build(const cJSON *p, bool report, scmp_filter_ctx *ret_ctx) {
        const cJSON *rule, *flags = cJSON_GetObjectItemCaseSensitive(p, "flags");
        const cJSON *de = cJSON_GetObjectItemCaseSensitive(p, "defaultErrnoRet");
        int dflt_errno = cJSON_IsNumber(de) && de->valuedouble >= 0 && de->valuedouble < 4096 ? de->valueint : EPERM;
        scmp_filter_ctx ctx;
        uint32_t dflt;
        int r;

        if (cJSON_GetArraySize(flags) > 0 || cJSON_GetObjectItemCaseSensitive(p, "listenerPath"))
                return -EOPNOTSUPP;
        r = se_action(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "defaultAction")), dflt_errno,
                      report, &dflt);
        if (r < 0)
                return r;
        ctx = seccomp_init(dflt);
        if (!ctx)
                return -ENOMEM;
        r = se_arches(ctx, cJSON_GetObjectItemCaseSensitive(p, "architectures"));
        cJSON_ArrayForEach(rule, cJSON_GetObjectItemCaseSensitive(p, "syscalls")) {
                if (r < 0)
                        break;
                r = se_rule(ctx, rule, dflt, dflt_errno, report);
        }
        if (r < 0) {
                seccomp_release(ctx);
                return r;
        }
        *ret_ctx = ctx;
        return 0;
}

/* Whether a rule of p allows name whatever its arguments. */
static bool se_allows(const cJSON *p, const char *name) {
        const cJSON *rule, *n;

        cJSON_ArrayForEach(rule, cJSON_GetObjectItemCaseSensitive(p, "syscalls")) {
                const char *action = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rule, "action"));

                if (!action || strcmp(action, "SCMP_ACT_ALLOW") != 0 ||
                    cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(rule, "args")) > 0)
                        continue;
                cJSON_ArrayForEach(n, cJSON_GetObjectItemCaseSensitive(rule, "names"))
                        if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0)
                                return true;
        }
        return false;
}

/* One notification: its call reported once, then let through. */
static void se_report_one(int fd, struct seccomp_notif *req, struct seccomp_notif_resp *resp, FILE *report,
                          uint64_t *seen, unsigned *n_seen) {
        uint64_t key = (uint64_t) req->data.arch << 32 | (uint32_t) req->data.nr;
        unsigned i;

        for (i = 0; i < *n_seen && seen[i] != key; i++)
                ;
        if (i == *n_seen && *n_seen < SE_MAX_SEEN) {
                char *name = seccomp_syscall_resolve_num_arch(req->data.arch, req->data.nr);

                seen[(*n_seen)++] = key;
                fprintf(report, "%s\n", name ? name : "?");
                fflush(report);
                fprintf(stderr, SE_NAME ": the profile refuses %s (nr %d), first made by pid %u; let through\n",
                        name ? name : "?", req->data.nr, req->pid);
                free(name);
        }
        memset(resp, 0, sizeof(*resp));
        resp->id = req->id;
        resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        /* ENOENT: the caller died meanwhile, nothing to answer. */
        (void) seccomp_notify_respond(fd, resp);
}

/* The supervisor: takes the listener from sock, reports until every
 * process under the filter has exited (POLLHUP). */
static int se_supervise(int sock, FILE *report) {
        char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
        char byte;
        struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
        struct seccomp_notif *req = NULL;
        struct seccomp_notif_resp *resp = NULL;
        static uint64_t seen[SE_MAX_SEEN];
        unsigned n_seen = 0;
        struct cmsghdr *c;
        int fd = -1;

        if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) == 1 && (c = CMSG_FIRSTHDR(&msg)) && c->cmsg_type == SCM_RIGHTS)
                memcpy(&fd, CMSG_DATA(c), sizeof(fd));
        close(sock);
        if (fd < 0 || seccomp_notify_alloc(&req, &resp) < 0) {
                fprintf(stderr, SE_NAME ": no seccomp listener from the program\n");
                fclose(report);
                return 2;
        }
        for (;;) {
                struct pollfd pf = { .fd = fd, .events = POLLIN };

                if (poll(&pf, 1, -1) < 0 && errno != EINTR)
                        break;
                if (pf.revents & POLLIN) {
                        memset(req, 0, sizeof(*req));
                        if (seccomp_notify_receive(fd, req) == 0)
                                se_report_one(fd, req, resp, report, seen, &n_seen);
                } else if (pf.revents & (POLLHUP | POLLERR | POLLNVAL))
                        break;
        }
        fprintf(stderr, SE_NAME ": the program has exited; the profile refused %u system call(s) it made\n",
                n_seen);
        seccomp_notify_free(req, resp);
        fclose(report);
        return 0;
}

/* With --report: a supervisor in a child, handed the listener once the
 * filter is loaded. */
static int se_load_reporting(scmp_filter_ctx ctx, const char *report_path) {
        int sv[2], fd;
        char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
        char byte = 'L';
        struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
        struct cmsghdr *c;
        /* Appended to: a suite may start the program more than once. */
        FILE *report = fopen(report_path, "ae");
        pid_t child;
        int r;

        if (!report)
                return -errno;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
                r = -errno;
                fclose(report);
                return r;
        }
        child = fork();
        if (child < 0)
                return -errno;
        if (child == 0) {
                close(sv[0]);
                _exit(se_supervise(sv[1], report));
        }
        close(sv[1]);
        fclose(report);
        r = seccomp_load(ctx);
        if (r < 0)
                return r;
        fd = seccomp_notify_fd(ctx);
        if (fd < 0)
                return fd;
        c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(fd));
        r = sendmsg(sv[0], &msg, 0) == 1 ? 0 : -errno;
        close(sv[0]);
        close(fd);
        return r;
}

int main(int argc, char **argv) {
        static const struct option options[] = {
                { "profile", required_argument, NULL, 'p' },
                { "report", required_argument, NULL, 'r' },
                { "help", no_argument, NULL, 'h' },
                { NULL, 0, NULL, 0 },
        };
        const char *profile = NULL, *report = NULL;
        scmp_filter_ctx ctx;
        cJSON *p;
        char *text;
        int c, r;

        while ((c = getopt_long(argc, argv, "+h", options, NULL)) != -1) {
                if (c == 'p')
                        profile = optarg;
                else if (c == 'r')
                        report = optarg;
                else {
                        se_usage();
                        return c == 'h' ? 0 : 2;
                }
        }
        if (!profile || optind >= argc) {
                se_usage();
                return 2;
        }
        text = se_read_file(profile);
        p = text ? cJSON_Parse(text) : NULL;
        free(text);
        if (!cJSON_IsObject(p)) {
                fprintf(stderr, SE_NAME ": %s: not a readable JSON profile\n", profile);
                return 2;
        }
        for (size_t i = 0; report && i < sizeof(se_needed_after_load) / sizeof(se_needed_after_load[0]); i++)
                if (!se_allows(p, se_needed_after_load[i])) {
                        fprintf(stderr, SE_NAME ": %s does not allow %s, which --report needs after loading it\n",
                                profile, se_needed_after_load[i]);
                        return 2;
                }
        r = se_build(p, report != NULL, &ctx);
        cJSON_Delete(p);
        if (r < 0) {
                fprintf(stderr, SE_NAME ": %s: cannot build a filter: %s\n", profile, strerror(-r));
                return 2;
        }
        fflush(NULL);
        r = report ? se_load_reporting(ctx, report) : seccomp_load(ctx);
        seccomp_release(ctx);
        if (r < 0) {
                fprintf(stderr, SE_NAME ": cannot load %s: %s\n", profile, strerror(-r));
                return 2;
        }
        execvp(argv[optind], argv + optind);
        fprintf(stderr, SE_NAME ": cannot execute %s: %m\n", argv[optind]);
        return 127;
}
