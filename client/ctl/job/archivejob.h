/* archivejob.h: dump --archive, restore --archive and verify --archive:
 * dump and restore --images through a private image directory
 * (workdir.c) streamed from or into one archive (archivewrite.c,
 * archiveread.c). */
#ifndef CUDACKPT_CTL_ARCHIVEJOB_H
#define CUDACKPT_CTL_ARCHIVEJOB_H

#include "jobstep.h"

/* Where the private image directory goes without --work-dir. */
#define CTL_ARCHIVE_WORK_DIR "/var/tmp"

/* dump --archive FILE|-: the exit status. */
int ctl_archive_dump(const ctl_job_args *a);
/* restore --archive FILE|-: the exit status. */
int ctl_archive_restore(const ctl_job_args *a);
/* verify --archive FILE|-: the archive unpacked and checked, then removed;
 * the exit status. */
int ctl_archive_verify(const ctl_job_args *a);

#endif
