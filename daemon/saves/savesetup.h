/* savesetup.h: the saves feature's table built at start (savejobs.h's
 * struct saves): the cudackptctl the daemon runs as root (ctl_path, else
 * the one installed beside the daemon: the same directory, ../bin, or the
 * build tree's ../client), checked to be a file only root may change; the
 * commands' environment (the daemon's own, CUDACKPT_SOCKET set to the
 * daemon's socket, so that they talk to this daemon); the saves directory
 * (saves_dir: made 0700 when missing, opened and checked once, privdir.h);
 * and the bounds. */
#ifndef CUDACKPT_SAVESETUP_H
#define CUDACKPT_SAVESETUP_H

#include <stddef.h>

#include "saves/savejobs.h"

/* 0, or -errno with why (a saves_dir that cannot be used: the daemon does
 * not start).  No usable cudackptctl is no error: the jobs' calls answer
 * CommandFailed saying why. */
int savesetup_init(struct saves *t, const struct saves_deps *deps, char *why, size_t whylen);
void savesetup_free(struct saves *t);

#endif
