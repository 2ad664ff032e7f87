/* slurm.h: the Slurm transport: the one command that starts a node part on
 * every node of a job, `srun --jobid=J --overlap --nodes=N
 * --ntasks-per-node=1 ... -- NODE-ARGV`, run as the calling user (Slurm
 * decides whether that user may reach J; the node's daemon decides, by
 * SO_PEERCRED, what that user may act on).  srun hands the coordinator's
 * lines to every task and their lines back; link.h carries them.  Another
 * engine (a Kubernetes `kubectl exec -i` into each node agent's pod) is
 * another such file giving one command per node.  Private to cudackptctl. */
#ifndef CUDACKPT_CTL_NODES_SLURM_H
#define CUDACKPT_CTL_NODES_SLURM_H

#include <stdbool.h>
#include <stddef.h>

/* The programs run: $CUDACKPT_SRUN, $CUDACKPT_SQUEUE and
 * $CUDACKPT_SCONTROL when set and not empty, else srun, squeue and
 * scontrol on $PATH. */
#define NODES_SLURM_SRUN_ENV "CUDACKPT_SRUN"
#define NODES_SLURM_SQUEUE_ENV "CUDACKPT_SQUEUE"
#define NODES_SLURM_SCONTROL_ENV "CUDACKPT_SCONTROL"
/* How long squeue may take to say the job's node count. */
#define NODES_SLURM_QUERY_TIMEOUT_MS 10000

/* Whether job is a job id srun and squeue take as one job and nothing
 * else: digits, or digits '_' digits (an array task). */
bool nodes_slurm_job_valid(const char *job);

/* How many nodes job J runs on now, and its owner's uid (squeue -h -j J
 * -o "%D %U", as this user): 0 with *ret_nodes and *ret_uid, -EINVAL a job
 * id that is none, -ESRCH squeue knows no running job J, -ETIMEDOUT,
 * -ENOENT no squeue, -EPROTO an answer that is no count and uid. */
int nodes_slurm_job_nodes(const char *job, unsigned *ret_nodes, unsigned *ret_uid);

/* `scontrol requeue J` (a job that saved itself before its time limit
 * asks Slurm to start it again): 0, -EINVAL a job id that is none,
 * -ENOENT no scontrol, -ETIMEDOUT, -EPERM scontrol refused (its words
 * are not kept: a job not requeueable, --no-requeue). */
int nodes_slurm_requeue(const char *job);

/* `scontrol update JobId=J ReqNodeList=NODES`: a requeued job held to the
 * nodes its saved parts are on (Slurm lets the job's user change a job
 * that is not running).  0, -EINVAL (NODES no host list), or as
 * nodes_slurm_requeue(). */
int nodes_slurm_pin(const char *job, const char *nodes);

/* The step's command: srun into J on its n_nodes nodes, one task each,
 * running node_argv (NULL-terminated).  --kill-on-bad-exit=1: a node's part
 * that fails ends every node's part, whose leases (held on the step's
 * connections) then undo each node's work.  owner: the job's user (from
 * nodes_slurm_job_nodes()); root runs srun as that user (setpriv), since
 * Slurm creates a step of J only as J's user, and the nodes' daemons then
 * act only on that user's processes.  0 with *ret_argv (free it with
 * nodes_slurm_argv_free()), or -errno (-EPERM: the owner is no user here, -ENOENT:
 * no srun or setpriv). */
int nodes_slurm_step_argv(const char *job, unsigned n_nodes, unsigned owner, char *const *node_argv,
                          char ***ret_argv);
void nodes_slurm_argv_free(char **argv);

/* The step's environment (srun hands it to every task): this process's,
 * less $CUDACKPT_SOCKET, as the socket of this machine's daemon is not a
 * node's (a node's part uses the default path, or what the node's own
 * set-up, a TaskProlog, exports).  Root's srun runs as the job's owner
 * (owner, nodes_slurm_step_argv()), who may read its environment and its
 * tasks': it gets only PATH, locale, SLURM_*, CUDACKPT_* and the
 * sanitizers' options of root's.  0 with *ret_env, whose strings are
 * environ's (free() the array only), or -ENOMEM. */
int nodes_slurm_step_env(unsigned owner, char ***ret_env);

#endif
