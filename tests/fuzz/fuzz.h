/* fuzz.h: what the request fuzz target (fuzz_request.c, fuzz_harness.c)
 * offers to the programs that run it:
 * libFuzzer's entry point, and a clean stop for the standalone runner
 * (replay.c).  See fuzz_request.c for the input format. */
#ifndef CUDACKPT_FUZZ_H
#define CUDACKPT_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* Called by libFuzzer before anything else: keeps a copy of stderr for
 * reports.  The standalone runner need not call it. */
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Runs one input against the in-process daemon (set up on the first call). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Stops the daemon the way SIGTERM does, waits for it, kills the targets and
 * removes the temporary directory.  Also registered with atexit(); calling
 * it twice, or before any input, does nothing. */
void fuzz_request_teardown(void);

#endif
