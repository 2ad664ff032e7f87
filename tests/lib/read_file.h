/* read_file.h: a whole file read into memory, for the test programs of
 * several suites (the integration harness, the systemd tests). */
#ifndef CUDACKPT_TEST_READ_FILE_H
#define CUDACKPT_TEST_READ_FILE_H

#include <sys/types.h>

/* Reads path whole into a NUL-terminated buffer, *ret_buf (free() it), and
 * returns its length (the file's own NULs count); a read error ends the
 * file there.  -errno where it cannot be opened, -ENOMEM; *ret_buf is then
 * untouched. */
ssize_t test_read_file(const char *path, char **ret_buf);

#endif
