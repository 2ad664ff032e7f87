/* runrestore.c: a run job's name back with the job (runrestore.h).  The
 * record is the one dump --run read (the manifest's "run"), but for its
 * init: the restored one, known by the pin taken while criu held it. */
#include "runrestore.h"

#include "runreg.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int ctl_run_restored(const char *prefix, const ctl_manifest *m, const ctl_pins *pins, ctl_run_record *ret) {
        char err[PATH_MAX + 256];
        ctl_run_record rec;
        const ctl_pin *p;
        long limit = 0;
        bool per_uid = false;
        int fd = -1, r;

        if (!m->run || m->n_trees != 1 || !m->trees[0].pid_ns)
                return -ENOENT;
        p = ctl_pins_find(pins, m->trees[0].root);
        if (ctl_run_record_from_json(m->run, &rec) < 0 || !p || !ctl_pin_alive(p)) {
                fprintf(stderr, "%sthe manifest's job name is not one dump --run wrote: the job runs without a "
                        "name\n", prefix);
                return -ENOENT;
        }
        rec.init_pid = p->pid;
        rec.init_start_time = p->start_time;
        r = ctl_run_dir_open(true, &fd, err, sizeof(err));
        if (r == 0) {
                r = ctl_run_record_add(fd, &rec, &limit, &per_uid);
                close(fd);
        } else
                fprintf(stderr, "%sthe names' directory: %s\n", prefix, err);
        if (r == -EEXIST)
                fprintf(stderr, "%sthe name %s is another running job's here: the job (init pid %d) runs without "
                        "a name\n", prefix, rec.name, rec.init_pid);
        else if (r == -EUSERS)
                fprintf(stderr, "%s%ld jobs have a name already%s: the job (init pid %d) runs without one\n", prefix,
                        limit, per_uid ? " for its user" : "", rec.init_pid);
        else if (r < 0)
                fprintf(stderr, "%scannot record the name %s: %s\n", prefix, rec.name, strerror(-r));
        if (ret)
                *ret = rec;
        return r;
}
