/* archiveread.h: restore --archive's reader: a stream of archivewrite.h's
 * form unpacked into a private directory, checked entry by entry as
 * archivewrite.h says (the stream is hostile input to root). */
#ifndef CUDACKPT_CTL_ARCHIVEREAD_H
#define CUDACKPT_CTL_ARCHIVEREAD_H

#include "archivewrite.h"
#include "manifest.h"

/* The stream of in_fd unpacked into dir_fd (an empty private directory)
 * as archivewrite.h says, its manifest read into *ret.  0; -EBADMSG when the
 * archive is damaged or not as dump writes it (err names the entry and
 * what is wrong); -E2BIG past a limit; another -errno. */
int ctl_archive_read(int in_fd, int dir_fd, const ctl_archive_limits *lim, ctl_manifest *ret, ctl_archive_stats *st,
                     char *err, size_t err_size);

#endif
