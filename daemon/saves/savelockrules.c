/* savelockrules.c: CRIU's lock rules, read from a dump's log and deleted
 * (savelockrules.h). */
#include "saves/savelockrules.h"

#include "fdio.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* CRIU's IPTABLES_CONN_CMD after the command and its -w; NULL: a word of
 * the rule's own (the operation, the chain, the mark, the addresses and
 * ports). */
enum { W_OP = 2, W_CHAIN = 3, W_MARK = 10, W_SRC = 12, W_SPORT = 14, W_DST = 16, W_DPORT = 18, W_N = 21 };
static const char *const rule_words[W_N] = { "-t", "filter", NULL, NULL, "--protocol", "tcp", "-m", "mark", "!",
                                              "--mark", NULL, "--source", NULL, "--sport", NULL, "--destination",
                                              NULL, "--dport", NULL, "-j", "DROP" };

#define RUNNING "\tRunning iptables ["
#define DELETE_ATTEMPTS 5
#define WAIT_STEP_MS 10
#define MAX_WORDS 32

static bool port_of(const char *s, uint16_t *ret)
{
        unsigned long v = 0;
        size_t n = strspn(s, "0123456789");

        if (n < 1 || n > 5 || s[n] != '\0' || s[0] == '0')
                return false;
        v = strtoul(s, NULL, 10);
        if (v > 65535)
                return false;
        *ret = (uint16_t)v;
        return true;
}

/* CRIU's own mark (soccr's SOCCR_MARK, as its rules spell it): a rule
 * naming another is none of CRIU's, and no line of the log that names one
 * may take the place of CRIU's rule of that connection. */
static bool mark_ok(const char *s)
{
        return strcmp(s, SAVELOCKRULES_MARK) == 0;
}

/* s as an address of the rule's family, in inet_ntop's form into out. */
static bool addr_of(bool v6, const char *s, char out[INET6_ADDRSTRLEN])
{
        unsigned char a[sizeof(struct in6_addr)];
        int af = v6 ? AF_INET6 : AF_INET;

        return inet_pton(af, s, a) == 1 && inet_ntop(af, a, out, INET6_ADDRSTRLEN) != NULL;
}

bool savelockrules_valid(const struct savelockrule *r)
{
        char a[INET6_ADDRSTRLEN];

        return mark_ok(r->mark) && r->sport > 0 && r->dport > 0 && addr_of(r->v6, r->src, a) &&
               strcmp(a, r->src) == 0 && addr_of(r->v6, r->dst, a) && strcmp(a, r->dst) == 0;
}

int savelockrules_add(struct savelockrules *s, const struct savelockrule *r)
{
        if (s->n == s->cap) {
                size_t cap = s->cap ? 2 * s->cap : 8;
                struct savelockrule *v = reallocarray(s->v, cap, sizeof(*v));

                if (!v)
                        return -ENOMEM;
                s->v = v;
                s->cap = cap;
        }
        s->v[s->n++] = *r;
        return 0;
}

void savelockrules_free(struct savelockrules *s)
{
        free(s->v);
        *s = (struct savelockrules){ 0 };
}

size_t savelockrules_connections(const struct savelockrules *s)
{
        return (s->n + 1) / 2;
}

/* The words of one command CRIU ran to lock a connection ("iptables -w
 * -t filter -I ..."), into r: whether they are one. */
static bool parse_command(char *cmd, struct savelockrule *r)
{
        char *w[MAX_WORDS], *save = NULL;
        size_t n = 0, k;

        for (char *t = strtok_r(cmd, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
                if (n == MAX_WORDS)
                        return false;
                w[n++] = t;
        }
        k = n > 1 && strcmp(w[1], "-w") == 0 ? 2 : 1; /* -w: CRIU's kerndat found xtables' lock */
        if (n != k + W_N || (strcmp(w[0], "iptables") != 0 && strcmp(w[0], "ip6tables") != 0))
                return false;
        for (size_t i = 0; i < W_N; i++)
                if (rule_words[i] && strcmp(w[k + i], rule_words[i]) != 0)
                        return false;
        *r = (struct savelockrule){ .v6 = w[0][2] == '6', .output = strcmp(w[k + W_CHAIN], "OUTPUT") == 0 };
        if (strcmp(w[k + W_OP], "-I") != 0 ||
            (!r->output && strcmp(w[k + W_CHAIN], "INPUT") != 0) || !mark_ok(w[k + W_MARK]))
                return false;
        snprintf(r->mark, sizeof(r->mark), "%s", w[k + W_MARK]);
        return addr_of(r->v6, w[k + W_SRC], r->src) && addr_of(r->v6, w[k + W_DST], r->dst) &&
               port_of(w[k + W_SPORT], &r->sport) && port_of(w[k + W_DPORT], &r->dport);
}

/* "ADDR:PORT" (the port after the last ':') of r's family into addr and
 * *port. */
static bool endpoint_of(const struct savelockrule *r, char *s, char addr[INET6_ADDRSTRLEN], uint16_t *port)
{
        char *colon = strrchr(s, ':');

        if (!colon)
                return false;
        *colon = '\0';
        return addr_of(r->v6, s, addr) && port_of(colon + 1, port);
}

/* Whether the text after "Locked " ("D:DP - S:SP
 * connection") names r's connection. */
static bool confirms(const struct savelockrule *r, char *text)
{
        char *sep = strstr(text, " - "), *end = strstr(text, " connection"), a[INET6_ADDRSTRLEN],
             b[INET6_ADDRSTRLEN];
        uint16_t ap, bp;

        if (!sep || !end || end[strlen(" connection")] != '\0' || end < sep)
                return false;
        *sep = *end = '\0';
        return endpoint_of(r, text, a, &ap) && endpoint_of(r, sep + 3, b, &bp) && strcmp(a, r->dst) == 0 &&
               ap == r->dport && strcmp(b, r->src) == 0 && bp == r->sport;
}

/* The line's text after criu's "(SECONDS) ", or NULL when it is none of
 * the criu process's own (a child's carries its pid). */
static char *text_of(char *line)
{
        char *close = line[0] == '(' ? strchr(line, ')') : NULL;

        if (!close || close[1] != ' ' || strspn(line + 1, "0123456789.") != (size_t)(close - line - 1))
                return NULL;
        return close + 2;
}

struct reading {
        struct savelockrules *out;
        size_t max;
        struct saveinetsk_conns conns;  /* the tree's connections, from its images */
        size_t unmatched;               /* rules of the log naming none of them */
        struct savelockrule pending;    /* the command of the line before */
        bool pending_set;               /* a command is pending */
};

/* The flag of r's chain of the images' connection that r locks (or
 * unlocks, taken set); NULL when there is none. */
static bool *conn_flag(struct reading *x, const struct savelockrule *r, bool taken)
{
        for (size_t i = 0; i < x->conns.n; i++) {
                struct saveinetsk_conn *c = &x->conns.v[i];
                const char *src = r->output ? c->local : c->remote, *dst = r->output ? c->remote : c->local;
                uint16_t sport = r->output ? c->lport : c->rport, dport = r->output ? c->rport : c->lport;
                bool *flag = r->output ? &c->output_taken : &c->input_taken;

                if (c->v6 == r->v6 && *flag == taken && sport == r->sport && dport == r->dport &&
                    strcmp(src, r->src) == 0 && strcmp(dst, r->dst) == 0)
                        return flag;
        }
        return NULL;
}

/* One whole line of a log: 0, or -E2BIG / -ENOMEM. */
static int take_line(struct reading *x, char *line)
{
        char *text = text_of(line);
        bool pending = x->pending_set;
        size_t len = text ? strlen(text) : 0;

        /* Not a line of criu's: the output of the command it ran, which
         * goes to the log too (iptables -w waiting for xtables' lock says
         * so there), and keeps the command pending. */
        if (!text)
                return 0;
        x->pending_set = false;
        if (strncmp(text, RUNNING, strlen(RUNNING)) == 0 && len > strlen(RUNNING) && text[len - 1] == ']') {
                text[len - 1] = '\0';
                x->pending_set = parse_command(text + strlen(RUNNING), &x->pending);
                return 0;
        }
        /* CRIU's "Unlocked" lines are not taken: a dump at its barrier has
         * lifted none of its locks (it does so only when it fails, or is
         * rolled back after this count), and such lines, which a job can
         * shape like any other, would otherwise make the daemon forget
         * rules that stay. */
        if (pending && strncmp(text, "Locked ", 7) == 0 && confirms(&x->pending, text + 7)) {
                bool *flag = conn_flag(x, &x->pending, false);

                if (!flag) {
                        x->unmatched++;
                        return 0;
                }
                if (x->out->n >= x->max)
                        return -E2BIG;
                *flag = true;
                return savelockrules_add(x->out, &x->pending);
        }
        return 0;
}

/* One tree's dump.log (fd, which this closes). */
static int read_log(int fd, struct reading *x)
{
        char line[SAVELOCKRULES_LINE_MAX];
        struct stat st;
        FILE *f;
        int r = 0;

        if (fstat(fd, &st) < 0)
                r = -errno;
        else if (!S_ISREG(st.st_mode) || st.st_uid != geteuid()) /* criu's, as the daemon's root */
                r = -EPERM;
        else if ((f = fdopen(fd, "r")) == NULL)
                r = -errno;
        if (r < 0) {
                close(fd);
                return r;
        }
        while (r == 0 && fgets(line, sizeof(line), f)) {
                size_t n = strlen(line);

                if (n == 0 || line[n - 1] != '\n') { /* longer than a line may be: skipped whole */
                        int c;

                        while ((c = fgetc(f)) != EOF && c != '\n')
                                ;
                        x->pending_set = false;
                        continue;
                }
                line[n - 1] = '\0';
                r = take_line(x, line);
        }
        fclose(f);
        return r;
}

/* Takes out of x's connections those of a net namespace CRIU dumped (a
 * netns-ID.img among tree's images, ID the socket's ns_id; one without an
 * ns_id once any was dumped): 0 or -errno.  CRIU locked a dump whose root
 * has a net namespace of its own (a job in a rootless container, say)
 * inside that namespace, which goes with it, and made no rule of this
 * node's for it: a rule its log names for such a connection is a line the
 * job shaped, with addresses it chose there (another save's, say).  A
 * nested namespace's connections (a privileged job's) are not taken
 * either: CRIU's rules for them in this node's namespace name addresses
 * the job chose there. */
static int drop_dumped_netns(int tree, struct saveinetsk_conns *conns)
{
        struct dirent *e;
        DIR *d;
        int r = fdio_opendir(tree, &d);

        if (r < 0)
                return r;
        while ((e = readdir(d)) != NULL) {
                unsigned long id = 0;
                int end = 0;
                size_t kept = 0;

                if (sscanf(e->d_name, "netns-%lu.img%n", &id, &end) != 1 || e->d_name[end] != '\0')
                        continue;
                for (size_t i = 0; i < conns->n; i++)
                        if (conns->v[i].has_ns_id && conns->v[i].ns_id != id)
                                conns->v[kept++] = conns->v[i];
                conns->n = kept;
        }
        closedir(d);
        return r;
}

/* One tree of the dump (tree, which this closes): its connections (but
 * those of a net namespace it dumped), then its log's rules. */
static int read_tree(int tree, struct reading *x)
{
        int fd, r = saveinetsk_read(tree, &x->conns);

        if (r == 0)
                r = drop_dumped_netns(tree, &x->conns);
        fd = r == 0 ? openat(tree, "dump.log", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK) : -1;
        if (r == 0 && fd < 0)
                r = -errno;
        close(tree);
        if (r == 0) {
                x->pending_set = false;
                r = read_log(fd, x);
        }
        saveinetsk_free(&x->conns);
        return r;
}

int savelockrules_read(int uidfd, const char *images, size_t max, size_t *ret_unmatched, struct savelockrules *ret)
{
        struct reading x = { .out = ret, .max = max };
        int dfd = openat(uidfd, images, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), r = 0;
        struct dirent *e;
        DIR *d = NULL;

        *ret = (struct savelockrules){ 0 };
        if (dfd < 0)
                return -errno;
        r = fdio_opendir(dfd, &d);
        while (r == 0 && (e = readdir(d)) != NULL) {
                int tree;

                if (strncmp(e->d_name, "tree-", 5) != 0)
                        continue;
                tree = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                r = tree < 0 ? -errno : read_tree(tree, &x);
        }
        if (d)
                closedir(d);
        close(dfd);
        *ret_unmatched = x.unmatched;
        return r;
}

/* The program of r's command along SAVELOCKRULES_PATH into path. */
static int find_program(const struct savelockrule *r, char *path, size_t size)
{
        char dirs[] = SAVELOCKRULES_PATH, *save = NULL;

        for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
                snprintf(path, size, "%s/%s", d, r->v6 ? "ip6tables" : "iptables");
                if (access(path, X_OK) == 0)
                        return 0;
        }
        return -ENOENT;
}

/* Waits for pid, at most SAVELOCKRULES_TIMEOUT_MS, then kills it: 0 and
 * *st, -ETIMEDOUT (killed and reaped), or -errno. */
static int wait_bounded(pid_t pid, int *st)
{
        for (int waited = 0;; waited += WAIT_STEP_MS) {
                pid_t w = waitpid(pid, st, WNOHANG);

                if (w == pid)
                        return 0;
                if (w < 0 && errno != EINTR)
                        return -errno;
                if (waited >= SAVELOCKRULES_TIMEOUT_MS) {
                        (void)kill(pid, SIGKILL);
                        while (waitpid(pid, st, 0) < 0 && errno == EINTR)
                                ;
                        return -ETIMEDOUT;
                }
                nanosleep(&(struct timespec){ .tv_nsec = WAIT_STEP_MS * 1000000L }, NULL);
        }
}

/* `iptables -w 5 ... OP ...` of r: its exit status (0 or 1, else -ECHILD),
 * or -errno. */
static int run_rule(const struct savelockrule *r, const char *op)
{
        char path[64], sport[8], dport[8];
        /* -w with seconds: iptables waits for xtables' lock no longer. */
        const char *argv[W_N + 4] = { path, "-w", SAVELOCKRULES_LOCK_WAIT_S };
        char *const envp[] = { "PATH=" SAVELOCKRULES_PATH, NULL };
        posix_spawn_file_actions_t fa;
        pid_t pid;
        int st = 0, e;

        if (find_program(r, path, sizeof(path)) < 0)
                return -ENOENT;
        snprintf(sport, sizeof(sport), "%u", (unsigned)r->sport);
        snprintf(dport, sizeof(dport), "%u", (unsigned)r->dport);
        for (size_t i = 0; i < W_N; i++)
                argv[3 + i] = rule_words[i];
        argv[3 + W_OP] = op;
        argv[3 + W_CHAIN] = r->output ? "OUTPUT" : "INPUT";
        argv[3 + W_MARK] = r->mark;
        argv[3 + W_SRC] = r->src;
        argv[3 + W_SPORT] = sport;
        argv[3 + W_DST] = r->dst;
        argv[3 + W_DPORT] = dport;
        /* nf_tables' iptables may find the table changed under it by
         * another command (exit 4, "Resource temporarily unavailable"):
         * it is run again, a few times. */
        for (int attempt = 0; attempt < DELETE_ATTEMPTS; attempt++) {
                if (attempt)
                        nanosleep(&(struct timespec){ .tv_nsec = 50000000L * attempt }, NULL);
                posix_spawn_file_actions_init(&fa);
                for (int fd = 0; fd < 3; fd++)
                        posix_spawn_file_actions_addopen(&fa, fd, "/dev/null", fd ? O_WRONLY : O_RDONLY, 0);
                e = posix_spawn(&pid, path, &fa, NULL, (char *const *)argv, envp);
                posix_spawn_file_actions_destroy(&fa);
                if (e != 0)
                        return -e;
                e = wait_bounded(pid, &st);
                if (e < 0)
                        return e;
                if (!WIFEXITED(st) || WEXITSTATUS(st) != 4)
                        break;
        }
        return WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 1) ? WEXITSTATUS(st) : -ECHILD;
}

int savelockrules_delete(const struct savelockrule *r)
{
        int e = run_rule(r, "-D");

        return e < 0 ? e : 0;
}

int savelockrules_present(const struct savelockrule *r)
{
        int e = run_rule(r, "-C");

        return e < 0 ? e : e == 0;
}
