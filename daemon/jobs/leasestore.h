/* leasestore.h: the leases on disk, so that they outlive the daemon.
 *
 * One small JSON file, LEASESTORE_FILE in the runtime directory
 * ($RUNTIME_DIRECTORY, else the socket's directory), reached only through
 * that directory's descriptor, checked by the caller to be one only root
 * may change (privdir.h), holds every lease
 * (leasedata.h): its id, taker, method, members pinned by start time with
 * their owners' uids, on_close, the deadline in CLOCK_BOOTTIME
 * milliseconds (with the boot id it counts from), an undo that had begun, whether it is
 * pending (written before its call's first driver step, not granted yet),
 * and an on-close lease's secret.  lease.c writes it whole after every
 * change of the table, before the reply that made the change: a
 * temporary file of mode 0600 under a random name, every write checked,
 * fsync, rename over the old one only then, fsync of the directory.  It
 * is read back once, at start (temporary files a daemon that died left
 * are removed then).
 *
 * The file is read as root, so it is never trusted: it must be a regular
 * file (not a symbolic link: O_NOFOLLOW), owned by the daemon's user, of
 * mode 0600, with one link, at most LEASESTORE_MAX_BYTES long, and every
 * key and value is checked (unknown keys, a pid in two leases, a lease
 * with neither deadline nor holder, ... refuse the whole file).  Nothing
 * here logs: the caller says what happened. */
#ifndef CUDACKPT_LEASESTORE_H
#define CUDACKPT_LEASESTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "jobs/leasedata.h"

#define LEASESTORE_FILE "leases.json"
#define LEASESTORE_MAX_BYTES (16u * 1024u * 1024u)
#define LEASESTORE_VERSION 1

/* The store's text for the leases of the list head and next_id
 * (*ret_text, a line to free(), and *ret_len): 0, or -errno with
 * why set (out of memory, or more than LEASESTORE_MAX_BYTES). */
int leasestore_encode(const struct lease *head, uint64_t next_id, char **ret_text, size_t *ret_len, char *why,
                      size_t whylen);
/* Writes text (len bytes) as the store in dirfd, atomically and durably;
 * any thread.  0, or -errno with why set: a failure before the rename
 * leaves the store as it was; only the directory's fsync comes after it. */
int leasestore_write(int dirfd, const char *text, size_t len, char *why, size_t whylen);

/* Reads the store in dirfd.  -ENOENT: there is none.  Any other -errno: refused, with
 * why set.  0: *ret_head is a list of leases (malloc'ed, srv and conn
 * unset, expires 0; leasestore_free() them), *ret_next_id the next id
 * (above each id read), *ret_same_boot whether it was written since the
 * machine last booted (its deadlines and start times count from then). */
int leasestore_load(int dirfd, struct lease **ret_head, uint64_t *ret_next_id, bool *ret_same_boot,
                    char *why, size_t whylen);

void leasestore_free(struct lease *head);

/* CLOCK_BOOTTIME in milliseconds. */
uint64_t leasestore_boottime_ms(void);

/* The start time of pid now (/proc/PID/stat field 22); 0 when no process
 * has pid. */
uint64_t leasestore_start_time(pid_t pid);

/* A secret as 2n lowercase hex digits (out holds 2n+1), and back: 0, or
 * -EINVAL unless s is exactly 2n hex digits. */
void leasestore_hex(const uint8_t *b, size_t n, char *out);
int leasestore_unhex(const char *s, uint8_t *out, size_t n);

#endif
