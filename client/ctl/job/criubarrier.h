/* criubarrier.h: the action script that holds every criu run at
 * post-dump or post-restore until all are there. */
#ifndef CUDACKPT_CTL_CRIUBARRIER_H
#define CUDACKPT_CTL_CRIUBARRIER_H

#include <stdbool.h>
#include <stddef.h>

/* The barrier's side in the action script: "criu-barrier SOCKET"; it waits
 * at post-dump and post-restore. */
int ctl_criu_barrier_main(const char *sock);
/* The barrier's action script DIR/barrier.sh (DIR: a private directory of
 * this process), which runs the user's --action-script options of
 * criu_argv first, then waits at the barrier sock; its path, to free(), or
 * NULL with errno set (said on stderr with prefix). */
char *ctl_criu_barrier_script(const char *prefix, const char *dir, const char *sock, char **criu_argv);
/* Whether criu_argv[k] is an --action-script option (*ret_skip: words it takes). */
bool ctl_criu_is_action_script(char **criu_argv, size_t k, size_t *ret_skip);

#endif
