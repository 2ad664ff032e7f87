/* jobenv.c: what job start takes from where it runs (jobenv.h). */
#include "jobenv.h"

#include "describe.h"
#include "fdio.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The job's output: --output, else this command's standard output when it
 * is a file or a terminal (the job opens it as the user), else none. */
const char *ctl_job_output(const char *output, bool file_only, const char *prefix, char *buf, size_t size) {
        struct stat st;
        ssize_t n;

        if (output)
                return output;
        /* --slurm: a file every node may open (not this terminal). */
        if (fstat(STDOUT_FILENO, &st) < 0 || !(S_ISREG(st.st_mode) || (S_ISCHR(st.st_mode) && !file_only)))
                goto none;
        n = readlink("/proc/self/fd/1", buf, size - 1);
        if (n <= 0 || (size_t) n >= size - 1 || buf[0] != '/')
                goto none;
        buf[n] = '\0';
        return buf;
none:
        fprintf(stderr, "%sthe job's output goes nowhere (standard output is no file%s): give --output\n", prefix,
                file_only ? "" : " or terminal");
        return NULL;
}

/* Under Slurm, a save on its signals works only where this command is
 * the batch script's (or a step's) task itself: Slurm sends SIGTERM to
 * slurmstepd's children only, then SIGKILLs the rest of the step as soon
 * as they are gone, well before a dump could end. */
void ctl_job_check_slurm_task(const char *prefix) {
        char path[64], comm[32] = "";

        if (!getenv("SLURM_JOB_ID"))
                return;
        snprintf(path, sizeof(path), "/proc/%d/comm", (int) getppid());
        if (fdio_read_at(AT_FDCWD, path, comm, sizeof(comm)) > 0 && strcmp(comm, "slurmstepd\n") == 0)
                return;
        comm[strcspn(comm, "\n")] = '\0';
        ctl_sanitize(comm);
        fprintf(stderr, "%swarning: started by %s, not by Slurm's slurmstepd: a requeue or scancel would signal that "
                "parent only, then SIGKILL this command before the job is saved; make it the task itself (exec "
                "cudackptctl job ...)\n", prefix, comm[0] ? comm : "an unknown process");
}
