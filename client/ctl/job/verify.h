/* verify.h: the images' digests in the commands: computed by dump before
 * the sync and the manifest, checked by restore --images before anything
 * is restored, and cudackptctl verify (--images DIR | --archive FILE|-),
 * which checks a copy and changes nothing. */
#ifndef CUDACKPT_CTL_VERIFY_H
#define CUDACKPT_CTL_VERIFY_H

#include "criu.h"
#include "jobstep.h"
#include "manifest.h"

/* dump: the digests of every tree's files (runs[i].dir_fd for tree i)
 * into m; 0 or -errno, said on stderr. */
int ctl_verify_digest_dump(const ctl_job_args *a, ctl_manifest *m, const ctl_criu_run *runs);

/* restore --images, before criu: every tree's directory (runs[i].dir_fd)
 * as m's digests say, nothing missing, changed or added.  A manifest
 * without digests is refused unless --no-verify.  The exit status
 * (CUDACKPT_EXIT_IMAGES_DAMAGED for damaged images), said on stderr. */
int ctl_verify_before_restore(const ctl_job_args *a, const ctl_manifest *m, const ctl_criu_run *runs);

/* cudackptctl verify: the exit status. */
int ctl_job_verify(const ctl_job_args *a);

#endif
