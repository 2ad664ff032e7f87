/* The process table: the checkpoint state of every target the sim has
 * met, and the begin and end of a state-changing call on one. */

#include "sim.h"

#include <ctype.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t sim_table_lock = PTHREAD_MUTEX_INITIALIZER;
/* Signalled when an entry stops being busy. */
static pthread_cond_t sim_table_cond = PTHREAD_COND_INITIALIZER;
static struct sim_proc *sim_table;
static unsigned sim_table_size;

static struct sim_proc *sim_table_find(int pid, unsigned long long start_time) {
        for (struct sim_proc *p = sim_table; p; p = p->next)
                if (p->pid == pid && p->start_time == start_time)
                        return p;
        return NULL;
}

/* Whether the process an entry names is gone.  Reading /proc/PID/stat does
 * not block on the target, so this is done with the table lock held. */
static bool sim_proc_dead(const struct sim_proc *p, int live_pid, unsigned long long live_start) {
        char path[48], state;
        unsigned long long start;
        int fd;
        bool dead;

        if (p->pid == live_pid)
                return p->start_time != live_start; /* the pid now names another process */
        (void) snprintf(path, sizeof(path), "/proc/%d", p->pid);
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return true;
        dead = sim_read_stat(fd, &state, &start) < 0 || state == 'Z' || state == 'X' || start != p->start_time;
        close(fd);
        return dead;
}

/* Drops the entries of dead processes that no thread uses. */
static void sim_table_prune(int live_pid, unsigned long long live_start) {
        for (struct sim_proc **pp = &sim_table; *pp;) {
                struct sim_proc *p = *pp;

                if (p->refs == 0 && sim_proc_dead(p, live_pid, live_start)) {
                        *pp = p->next;
                        free(p);
                        sim_table_size--;
                } else {
                        pp = &p->next;
                }
        }
}

/* Takes the entry of t for one state-changing operation: waits until no
 * other operation on the same process works, then marks it busy.  Returns
 * with the table unlocked. */
static CUresult sim_proc_acquire(const struct sim_target *t, struct sim_proc **ret_proc) {
        struct sim_proc *p;

        pthread_mutex_lock(&sim_table_lock);
        p = sim_table_find(t->pid, t->start_time);
        if (!p) {
                /* A new process: the moment to forget the dead ones. */
                sim_table_prune(t->pid, t->start_time);
                if (sim_table_size >= SIM_MAX_PROCS || !(p = calloc(1, sizeof(*p)))) {
                        pthread_mutex_unlock(&sim_table_lock);
                        return CUDA_ERROR_OUT_OF_MEMORY;
                }
                p->pid = t->pid;
                p->start_time = t->start_time;
                /* A process the sim has not seen: as its slot says, running
                 * without one (or one restored by CRIU: as it was dumped). */
                p->state = t->cfg.slot_set ? t->cfg.slot_state : CU_PROCESS_STATE_RUNNING;
                p->next = sim_table;
                sim_table = p;
                sim_table_size++;
        }
        p->refs++;
        while (p->busy)
                pthread_cond_wait(&sim_table_cond, &sim_table_lock);
        p->busy = true;
        pthread_mutex_unlock(&sim_table_lock);
        *ret_proc = p;
        return CUDA_SUCCESS;
}

/* Ends the operation begun by sim_proc_acquire and sets the entry's state,
 * in the target's slot too (first, while the entry is still ours: the next
 * operation on the process must find the slot written). */
static void sim_proc_release(const struct sim_target *t, struct sim_proc *p, CUprocessState state) {
        sim_step_write(t, SIM_STEP_IDLE);
        sim_slot_write(t, state);
        pthread_mutex_lock(&sim_table_lock);
        p->state = state;
        p->busy = false;
        p->refs--;
        pthread_cond_broadcast(&sim_table_cond);
        pthread_mutex_unlock(&sim_table_lock);
}

/* Ends a state-changing operation, leaving the process in c->state;
 * returns its result, c->r. */
CUresult sim_op_end(struct sim_call *c) {
        sim_proc_release(&c->t, c->p, c->state);
        sim_target_close(&c->t);
        return c->r;
}

/* Begins the state-changing operation op on pid, whose arguments are valid
 * where args_ok (else CUDA_ERROR_INVALID_VALUE): opens its target into c->t
 * and takes its entry into c->p, then (after CUDACKPT_SIM_PRE_WAIT_MS) waits
 * until the process runs, with op's upper-case letter in the target's step
 * slot meanwhile.  Returns true, sim_op_end to end the operation, with the
 * entry's state in c->state, CUDA_SUCCESS in c->r when that state is want,
 * and op's lower-case letter in the step slot.  Else false, with
 * nothing left open and the error in c->r: the target's or the entry's,
 * the wait's where the process died while stopped, or
 * CUDA_ERROR_ILLEGAL_STATE where the process is not in the state the
 * operation needs. */
bool sim_op_begin(int pid, enum sim_op op, bool args_ok, CUprocessState want, struct sim_call *c) {
        c->r = CUDA_ERROR_INVALID_VALUE;
        if (!args_ok)
                return false;
        c->r = sim_target_open(pid, &c->t);
        if (c->r != CUDA_SUCCESS)
                return false;
        c->r = sim_proc_acquire(&c->t, &c->p);
        if (c->r != CUDA_SUCCESS) {
                sim_target_close(&c->t);
                return false;
        }
        sim_step_write(&c->t, (char) toupper((unsigned char) sim_op_name(op)[0]));
        sim_sleep_ns(c->t.cfg.pre_wait_ms * 1000000ull);
        c->r = sim_target_wait_running(&c->t);
        c->state = c->p->state;
        if (c->r == CUDA_SUCCESS && c->state != want)
                c->r = CUDA_ERROR_ILLEGAL_STATE;
        if (c->r != CUDA_SUCCESS) {
                sim_op_end(c);
                return false;
        }
        sim_step_write(&c->t, sim_op_name(op)[0]);
        return true;
}

/* The state GetState reports: while an operation works, the state before it;
 * for a process the table does not know, its slot's. */
CUprocessState sim_proc_peek_state(const struct sim_target *t) {
        CUprocessState s = t->cfg.slot_set ? t->cfg.slot_state : CU_PROCESS_STATE_RUNNING;
        struct sim_proc *p;

        pthread_mutex_lock(&sim_table_lock);
        p = sim_table_find(t->pid, t->start_time);
        if (p)
                s = p->state;
        pthread_mutex_unlock(&sim_table_lock);
        return s;
}


/* Where a restore moved the process t names, the GPUs it moved it to
 * replace those of its CUDACKPT_SIM_GPUS in t->cfg. */
void sim_proc_moved_gpus(struct sim_target *t) {
        struct sim_proc *p;

        pthread_mutex_lock(&sim_table_lock);
        p = sim_table_find(t->pid, t->start_time);
        if (p && p->gpus_remapped) {
                t->cfg.n_gpus = p->n_gpus;
                memcpy(t->cfg.gpus, p->gpus, sizeof(p->gpus[0]) * (size_t) p->n_gpus);
        }
        pthread_mutex_unlock(&sim_table_lock);
}
