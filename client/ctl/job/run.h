/* run.h: cudackptctl run, a command started as a job that can be dumped
 * and restored anywhere: its own pid namespace, whose init is ours
 * (runinit.h), its own cgroup where cgroup v2 can be written
 * (runcgroup.h), and a name (runreg.h) that dump --run takes. */
#ifndef CUDACKPT_CTL_RUN_H
#define CUDACKPT_CTL_RUN_H

/* The row "run" of the verb table: argv whole. */
int ctl_run_main(int argc, char **argv);

#endif
