/* describe.h: daemon errors and daemon text in cudackptctl's words,
 * sanitised for a terminal, and the cells of its tables. */
#ifndef CUDACKPT_CTL_DESCRIBE_H
#define CUDACKPT_CTL_DESCRIBE_H

#include <cudackpt/client.h>

#include <stddef.h>
#include <stdio.h>

/* Replace terminal control bytes (C0, DEL, UTF-8 encoded C1) in s with '?',
 * so that text from the daemon cannot drive the terminal. */
void ctl_sanitize(char *s);

/* Write s to f sanitised. */
void ctl_fputs_safe(const char *s, FILE *f);

/* "Name: sentence" for the error of r (r->error not NULL), from its
 * parameters; e.g. "InvalidState: process is locked".  Sanitised; the
 * caller frees it.  NULL when out of memory. */
char *ctl_describe_error(const cudackpt_reply *r);

/* What failed when a call returned r < 0 ("no reply from cudackptd: ...").
 * Static storage, valid until the next call. */
const char *ctl_describe_call_failure(int r);

/* Exit status for a call that returned r < 0: CUDACKPT_EXIT_UNREACHABLE
 * when the daemon went away or did not answer in time, else
 * CUDACKPT_EXIT_FAILURE. */
int ctl_call_failure_exit_code(int r);

/* Columns a sanitised s takes: one per UTF-8 code point (0 for NULL). */
size_t ctl_text_width(const char *s);

/* s sanitised, then padded with spaces to width columns: a table's cell. */
void ctl_put_cell(FILE *f, const char *s, size_t width);

/* {"error": NAME, "parameters": {...}} for r, as one line of JSON; the
 * caller frees it.  NULL when out of memory. */
char *ctl_error_json(const cudackpt_reply *r);

#endif
