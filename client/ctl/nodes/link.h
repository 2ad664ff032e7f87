/* link.h: the coordinator's line to the nodes of a job: the commands a
 * transport gives (slurm.h: one srun step reaching every node; another
 * engine, one `kubectl exec -i` per node), each started with its stdin and
 * stdout on a socket of this process, its stderr this process's.  What is
 * written goes to every command (srun hands its stdin to every task); what
 * comes back is one JSON object a line, naming its node ("node"), from any
 * of them.  The link knows nothing of the phases said over it.  Private to
 * cudackptctl. */
#ifndef CUDACKPT_CTL_NODES_LINK_H
#define CUDACKPT_CTL_NODES_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <cJSON.h>

/* The longest line a node may send, its newline included: a longer one
 * ends the link (-EMSGSIZE), as every byte from the nodes is untrusted. */
#define NODES_LINK_MAX_LINE (64u * 1024u)
/* How many commands one link starts at most (one per node at most). */
#define NODES_LINK_MAX_COMMANDS 4096u

typedef struct nodes_link nodes_link;

/* One thing the nodes said (nodes_link_recv()): a line (json, an object
 * whose "node" is a string: node points into it), or the end of a command
 * (json NULL, ended true, status its wait status). */
typedef struct nodes_msg {
        cJSON *json;
        const char *node;
        bool ended;
        size_t command;
        int status;
} nodes_msg;

/* Starts the n commands (each a NULL-terminated argv; argv[0] found on
 * $PATH) on sockets of their own, with the environment env (NULL: this
 * process's).  0 with *ret_link, or -errno (nothing left running). */
int nodes_link_start(char *const *const *commands, size_t n, char *const *env, nodes_link **ret_link);

/* line (no newline in it) and a newline to every command still running,
 * within timeout_ms.  0, or -errno: -EPIPE none is running, -ETIMEDOUT. */
int nodes_link_send(nodes_link *l, const char *line, int timeout_ms);

/* The next thing said, waiting up to timeout_ms: 0 with *ret_msg (its json
 * the caller's, cJSON_Delete()), -ETIMEDOUT, -ENODATA every command has
 * ended and said all, or -EPROTO (a line that is no object with a string
 * "node") / -EMSGSIZE (a line too long): the link is then unusable but
 * for nodes_link_close(). */
int nodes_link_recv(nodes_link *l, int timeout_ms, nodes_msg *ret_msg);

/* Ends the link: closes what the commands read (the nodes' parts see the
 * end), waits up to timeout_ms for them to end, then SIGTERM, then after
 * another timeout_ms SIGKILL.  Returns 0 when every command exited 0, else
 * the first other wait status found (> 0), or -ETIMEDOUT when one had to
 * be killed.  Frees l (NULL: 0). */
int nodes_link_close(nodes_link *l, int timeout_ms);

#endif
