/* log.h: the daemon's one way to say things.
 *
 * Messages go to stderr, or to the journal with structured fields when
 * stderr is connected to it (systemd sets JOURNAL_STREAM).  Levels are the
 * syslog ones.  log_msg() and log_audit() may be called from any thread
 * and are: each message is formatted in a buffer of its own and written in
 * one call, so lines of two threads never mix.  Most messages come from
 * the loop thread, but worker threads log too (libbpf's messages while
 * the process index opens, procindex.c).  log_setup() runs before any
 * thread starts. */
#ifndef CUDACKPT_LOG_H
#define CUDACKPT_LOG_H

#include <stdbool.h>
#include <syslog.h>

void log_setup(int max_level);
int log_level_from_string(const char *s);
bool log_to_journal(void);

void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_notice(...) log_msg(LOG_NOTICE, __VA_ARGS__)
#define log_warning(...) log_msg(LOG_WARNING, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERR, __VA_ARGS__)

/* One audit record: a call that changed a process, or a refusal.  Written
 * once, whatever the log level, as one line on stderr or one journal entry with fields
 * CUDACKPT_CALLER_UID, CUDACKPT_CALLER_PID, CUDACKPT_TARGET_PID,
 * CUDACKPT_METHOD, CUDACKPT_RESULT and CUDACKPT_DURATION_MS. */
struct log_audit {
        unsigned caller_uid;
        int caller_pid;
        int target_pid;
        const char *method;
        const char *result; /* "ok" or the short error name */
        const char *detail; /* NULL or a few words */
        double duration_ms;
};
void log_audit(const struct log_audit *a);

#endif
