/* criulog.h: what criu said, shown to people: its output and the end of
 * its log, each line indented and sanitised. */
#ifndef CUDACKPT_CTL_CRIULOG_H
#define CUDACKPT_CTL_CRIULOG_H

/* Writes the last lines of the criu log name in dir_fd to stderr, indented. */
void ctl_criu_print_log_tail(int dir_fd, const char *name, int lines);
/* Writes text from criu to stderr line by line, indented, each line
 * sanitised. */
void ctl_criu_print_lines(const char *text);

#endif
