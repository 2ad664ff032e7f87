/* savelockrules.h: the iptables rules CRIU's network lock leaves on this
 * node after a dump that ends a part of a job held at a barrier
 * (save_parts_network_lock "iptables"), read from the dump's own log and
 * deleted again.
 *
 * CRIU 4.2 (criu/netfilter.c) locks each TCP connection of the dump with
 * two rules, `iptables -w -t filter -I INPUT|OUTPUT --protocol tcp -m mark
 * ! --mark M --source S --sport SP --destination D --dport DP -j DROP`
 * (ip6tables for IPv6), logging each command at -v4 as "\tRunning iptables
 * [COMMAND]" and, once it succeeded, "Locked D:DP - S:SP connection" on
 * the next line of its own (the command's output, which goes to the log
 * too, may come between).  Only such a pair of lines of the criu process
 * itself ("(SECONDS) " and the text, no pid) is taken, every word checked (the
 * addresses by inet_pton, kept in inet_ntop's form; the mark CRIU's own,
 * SAVELOCKRULES_MARK); no "Unlocked" line is taken (a dump at its barrier
 * lifted none of its locks).  A rule counts only
 * for a TCP connection the dump's images hold (one rule of each chain a
 * connection): a line a job could shape names no other.  The log is root's,
 * written by criu into the images directory; its lines are read at most
 * SAVELOCKRULES_LINE_MAX bytes long, longer ones skipped.
 *
 * A rule is deleted by the same words with -D, run as argv (no shell)
 * with the PATH of SAVELOCKRULES_PATH: a worker thread waits for it, a
 * bounded time (SAVELOCKRULES_TIMEOUT_MS).
 * Worker threads only. */
#ifndef CUDACKPT_SAVELOCKRULES_H
#define CUDACKPT_SAVELOCKRULES_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "saves/saveinetsk.h"

#define SAVELOCKRULES_LINE_MAX 1024
#define SAVELOCKRULES_PATH "/usr/sbin:/usr/bin:/sbin:/bin"
/* How long iptables may wait for xtables' lock (its -w), and how long
 * it may run at all before it is killed. */
#define SAVELOCKRULES_LOCK_WAIT_S "5"
#define SAVELOCKRULES_TIMEOUT_MS 10000
#define SAVELOCKRULES_MARK "0xC114"     /* soccr.h's SOCCR_MARK, as CRIU's rules spell it */

struct savelockrule {
        bool v6;                        /* ip6tables, else iptables */
        bool output;                    /* the OUTPUT chain, else INPUT */
        char mark[12];                  /* SAVELOCKRULES_MARK */
        char src[INET6_ADDRSTRLEN], dst[INET6_ADDRSTRLEN];
        uint16_t sport, dport;
};

struct savelockrules {
        struct savelockrule *v;
        size_t n, cap;
};

/* Whether r's words are those a rule of CRIU's may have. */
bool savelockrules_valid(const struct savelockrule *r);
/* Appends r: 0 or -ENOMEM. */
int savelockrules_add(struct savelockrules *s, const struct savelockrule *r);
void savelockrules_free(struct savelockrules *s);
/* The connections s locks: one for each pair of rules (a rule alone
 * counts as one). */
size_t savelockrules_connections(const struct savelockrules *s);
/* The rules that the dump in images (a directory below uidfd, one
 * tree-ROOT/ for each process tree, its dump.log and files.img) left
 * locked, at most max (more: -E2BIG with the first max in *ret), each of
 * a connection of its tree's images (saveinetsk.h), one rule of each
 * chain a connection: *ret_unmatched counts the log's other rules.  0, or
 * -errno (a tree without both files, or either refused). */
int savelockrules_read(int uidfd, const char *images, size_t max, size_t *ret_unmatched, struct savelockrules *ret);
/* `iptables -w 5 ... -D ...` of r: 0 when the rule is gone (deleted, or
 * none was there: iptables exits 1), else -errno (-ECHILD: iptables
 * exited otherwise; -ETIMEDOUT: it ran past SAVELOCKRULES_TIMEOUT_MS and
 * was killed).  Run again, a few times, while it exits 4 (nf_tables
 * changed under it). */
int savelockrules_delete(const struct savelockrule *r);
/* `iptables -w 5 ... -C ...` of r: 1 when the rule is there, 0 when not
 * (iptables exits 1), else -errno as savelockrules_delete(). */
int savelockrules_present(const struct savelockrule *r);

#endif
