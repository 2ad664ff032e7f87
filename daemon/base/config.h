/* config.h: the daemon's settings, from built-in defaults, the
 * configuration file and the command line, in that order.
 *
 * Every limit the daemon enforces lives here, so that each one is explicit,
 * configurable and documented (docs/configuration.md lists them). */
#ifndef CUDACKPT_CONFIG_H
#define CUDACKPT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CONFIG_DEFAULT_PATH "/etc/cudackpt/cudackptd.json"
#define CONFIG_MAX_GROUPS 64

struct config {
        char *socket_path;            /* where to bind when no socket is passed */
        unsigned socket_mode;         /* permission bits of a socket we bind */
        char *driver_path;            /* libcuda.so.1 or a compatible library */
        char *nvml_path;              /* libnvidia-ml.so.1, for ListProcesses's GPU use; "" = none */
        unsigned workers;             /* worker threads running driver calls */
        unsigned workers_per_uid;     /* ... that one unprivileged uid's operations may hold */
        unsigned workers_reserved;    /* ... that only privileged callers may hold */
        size_t max_message_bytes;     /* largest request accepted, NUL included */
        size_t max_write_queue_bytes; /* unread replies before a slow reader is cut */
        unsigned max_connections;     /* connections in total */
        unsigned max_connections_per_uid;
        unsigned max_connections_reserved; /* of max_connections, for privileged callers */
        uint64_t idle_timeout_ms;     /* close connections idle this long; 0 = never */
        uint64_t accept_retry_ms;     /* after accept failed (out of descriptors), accept again this late */
        unsigned max_queue_per_pid;   /* operations queued or running for one pid */
        unsigned max_queue_total;     /* operations queued or running in all */
        unsigned max_queue_per_uid;   /* ... for one unprivileged uid */
        unsigned max_queue_reserved;  /* ... of max_queue_total, for privileged callers */
        uint32_t default_lock_timeout_ms; /* Lock/Suspend without timeout_ms; 0 = no limit */
        uint64_t exit_wait_ms;        /* after a failed call, wait this long for an exiting target */
        unsigned max_gpu_pairs;       /* entries of a gpu_mapping */
        uint64_t restore_gpu_margin_mib; /* a restore's need on a GPU beyond what its process held (fit.h) */
        unsigned max_gpu_records;     /* processes whose GPU memory is kept for their restore (fit.h) */
        unsigned max_gpu_records_per_uid; /* ... owned by one uid */
        unsigned max_cached_targets;  /* idle targets kept pinned for reuse; 0 = none */
        uint64_t cached_target_idle_ms; /* how long an idle target stays cached */
        uint64_t stall_warning_ms;    /* warn about an operation running this long; 0 = never */
        unsigned max_group_members;   /* processes in one group operation */
        unsigned max_groups_in_flight; /* group operations and ListProcesses at once */
        unsigned max_groups_per_uid;  /* ... for one unprivileged uid */
        unsigned max_groups_reserved; /* ... of max_groups_in_flight, for privileged callers */
        unsigned max_leases;          /* leases held in all */
        unsigned max_leases_per_uid;  /* ... taken by one unprivileged uid */
        unsigned max_leases_reserved; /* ... of max_leases, for privileged callers */
        uint32_t lease_claim_grace_ms; /* after a restart, how long an on-close lease waits for ClaimLease */
        unsigned max_watchers;        /* Watch streams in all */
        unsigned max_watchers_per_uid; /* ... for one unprivileged uid */
        unsigned max_watchers_reserved; /* ... of max_watchers, for privileged callers */
        size_t max_watcher_bytes;     /* memory one watcher's unsent events may take */
        size_t max_watch_bytes;       /* memory all watchers' unsent events may take */
        uint64_t watch_scan_ms;       /* while watchers exist, look for CUDA processes this often; 0 = never */
        uint64_t progress_interval_ms; /* while watchers exist, sample checkpoints this often; 0 = never */
        unsigned process_index_max;   /* processes the BPF process index holds; 0 = no index */
        bool process_index_tracepoint; /* where fentry is not available, index through the
                                        * sys_enter_mmap tracepoint (a cost on every system call
                                        * of the node) rather than scan /proc */
        int log_level;                /* syslog level */

        /* Jobs the daemon runs for its callers, and their saves (saves.h). */
        char *saves_dir;              /* where saves are kept (root's, 0700); NULL = no saves */
        char *ctl_path;               /* the cudackptctl run as root; NULL = the one beside the daemon */
        unsigned max_jobs;            /* jobs run for callers, in all */
        unsigned max_jobs_per_uid;    /* ... for one uid (root's too) */
        unsigned max_job_argv;        /* entries of a job's argv, and of its environment */
        uint64_t job_stop_ms;         /* a job whose call closed: SIGTERM, then killed this late */
        unsigned max_saves;           /* saves on disk, in all */
        unsigned max_saves_per_uid;   /* ... of one uid */
        uint64_t max_save_bytes_per_uid; /* a uid's saves' size past which a new save is refused */
        unsigned max_save_operations; /* dumps and restores running at once, in all */
        unsigned max_save_operations_per_uid; /* ... for one uid */
        bool save_tcp_established;    /* saves dump and restore the jobs' TCP connections */
        const char *save_network_lock; /* criu's --network-lock for them: "skip", "iptables", "nftables" */
        const char *save_parts_network_lock; /* ... for a part held at a barrier: "iptables", "nftables"; "off": none held */
        uint64_t barrier_timeout_ms;  /* a part held at its barrier rolls back this late */
        unsigned max_locked_connections; /* connections under the lock rules of held saves on this node */
        unsigned max_locked_connections_per_uid; /* ... of one uid's */

        /* Policy, on top of "root acts on any process, others on their own". */
        gid_t operator_gids[CONFIG_MAX_GROUPS]; /* members may act on others' processes */
        size_t n_operator_gids;
        bool operators_may_act_on_root; /* ... including processes with a uid of 0 */
        bool read_only_unrestricted;    /* GetState/GetRestoreThreadId open to all */

        bool read_only_lane;          /* a warm thread of its own for read-only calls */
        unsigned lane_spin_us;        /* after a read-only call, the lane thread and the loop
                                       * stay awake this long for the next one; 0 = sleep */
};

void config_init(struct config *c);
void config_free(struct config *c);

/* Reads the JSON file at path into c.  A missing file at the default path is
 * not an error (required=false); anything malformed is, with a message
 * naming the line and the reason in *ret_error (free() it). */
int config_load_file(struct config *c, const char *path, bool required, char **ret_error);

int config_set_string(char **field, const char *value);

/* Where the daemon keeps its state (the lease store, the GPU records):
 * systemd's $RUNTIME_DIRECTORY (its first entry), else the directory of
 * the socket it binds.  NULL when out of memory (free() it). */
char *config_runtime_dir(const struct config *c);

#endif
