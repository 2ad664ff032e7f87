/* log.c: stderr or journal output with a level filter.
 *
 * Under systemd the journal gets structured fields (sd_journal_send); when
 * run by hand each message is one line on stderr.  Whether stderr is the
 * journal is decided once, the way systemd documents it: JOURNAL_STREAM
 * names the device and inode of the stream it connected. */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <systemd/sd-journal.h>

static int log_max_level = LOG_INFO;
static bool log_journal;

static bool stderr_is_journal(void)
{
        const char *e = secure_getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;

        if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
                return false;
        if (fstat(STDERR_FILENO, &st) < 0)
                return false;
        return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void log_setup(int max_level)
{
        log_max_level = max_level;
        log_journal = stderr_is_journal();
}

bool log_to_journal(void)
{
        return log_journal;
}

int log_level_from_string(const char *s)
{
        static const struct {
                const char *name;
                int level;
        } levels[] = {
                { "debug", LOG_DEBUG }, { "info", LOG_INFO },   { "notice", LOG_NOTICE },
                { "warning", LOG_WARNING }, { "err", LOG_ERR }, { "error", LOG_ERR },
        };
        for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
                if (strcmp(s, levels[i].name) == 0)
                        return levels[i].level;
        return -1;
}

static const char *level_word(int level)
{
        switch (level) {
        case LOG_DEBUG:
                return "debug";
        case LOG_INFO:
                return "info";
        case LOG_NOTICE:
                return "notice";
        case LOG_WARNING:
                return "warning";
        default:
                return "error";
        }
}

void log_msg(int level, const char *fmt, ...)
{
        char buf[2048];
        va_list ap;

        if (level > log_max_level)
                return;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);

        if (log_journal)
                sd_journal_send("MESSAGE=%s", buf, "PRIORITY=%i", level,
                                "SYSLOG_IDENTIFIER=cudackptd", NULL);
        else
                fprintf(stderr, "cudackptd: %s: %s\n", level_word(level), buf);
}

void log_audit(const struct log_audit *a)
{
        bool ok = strcmp(a->result, "ok") == 0;
        int level = ok ? LOG_INFO : LOG_NOTICE;

        /* The audit trail is not chatter: log_level does not filter it. */
        if (log_journal) {
                sd_journal_send("MESSAGE=audit: uid=%u pid=%d %s(%d) -> %s%s%s (%.3f ms)",
                                a->caller_uid, a->caller_pid, a->method, a->target_pid, a->result,
                                a->detail ? ": " : "", a->detail ? a->detail : "", a->duration_ms,
                                "PRIORITY=%i", level, "SYSLOG_IDENTIFIER=cudackptd",
                                "CUDACKPT_AUDIT=1", "CUDACKPT_CALLER_UID=%u", a->caller_uid,
                                "CUDACKPT_CALLER_PID=%d", a->caller_pid,
                                "CUDACKPT_TARGET_PID=%d", a->target_pid,
                                "CUDACKPT_METHOD=%s", a->method, "CUDACKPT_RESULT=%s", a->result,
                                "CUDACKPT_DURATION_MS=%.3f", a->duration_ms, NULL);
                return;
        }
        fprintf(stderr, "cudackptd: audit: caller_uid=%u caller_pid=%d method=%s target_pid=%d result=%s%s%s%s duration_ms=%.3f\n",
                a->caller_uid, a->caller_pid, a->method, a->target_pid, a->result,
                a->detail ? " detail=\"" : "", a->detail ? a->detail : "", a->detail ? "\"" : "", a->duration_ms);
}
