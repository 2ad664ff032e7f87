/* compat.h: the cuda-checkpoint compatible command line, the row of the
 * verb table that the program name "cuda-checkpoint" selects. */
#ifndef CUDACKPT_CTL_COMPAT_H
#define CUDACKPT_CTL_COMPAT_H

/* main() of the cuda-checkpoint compatible mode. */
int compat_main(int argc, char **argv);

#endif
