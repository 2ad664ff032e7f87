/* nodes_probe.c: cudackpt-nodes-probe, the transport rooms of cudackptctl
 * (client/ctl/nodes: link.c over slurm.c) driven alone, for
 * test_transport.py.
 *
 * Usage: cudackpt-nodes-probe JOB TIMEOUT_MS hang|ping NODE-ARGV...
 * Asks squeue for JOB's node count N ("nodes N"), starts NODE-ARGV on
 * every node through srun ("started"), then prints what comes back: "line
 * NODE JSON" for each line, "end COMMAND STATUS" for the step's end.  Once
 * N nodes have said hello it prints "hellos N" and, with ping, sends
 * {"ping":1} to them all ("sent"); once N have answered "pong" it closes
 * the link ("close R": 0, a wait status, or -errno); with hang it then
 * waits to be killed.  Any other end is "error -ERRNO" (-ENODATA: the
 * step ended), then the link closed.  Exit 0 unless it could not start (1)
 * or the usage is wrong (2). */
#include "link.h"
#include "slurm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Says the next line or end; counts hellos and pongs. */
static void probe_print(const nodes_msg *m, unsigned *hellos, unsigned *pongs) {
        char *s;

        if (m->ended) {
                printf("end %zu %d\n", m->command, m->status);
                return;
        }
        s = cJSON_PrintUnformatted(m->json);
        printf("line %s %s\n", m->node, s ? s : "?");
        free(s);
        *hellos += cJSON_HasObjectItem(m->json, "hello");
        *pongs += cJSON_HasObjectItem(m->json, "pong");
        cJSON_Delete(m->json);
}

static int probe_loop(nodes_link *l, unsigned n, int timeout_ms, bool ping) {
        unsigned hellos = 0, pongs = 0;
        bool sent = false;
        nodes_msg m;
        int r;

        while ((r = nodes_link_recv(l, timeout_ms, &m)) == 0) {
                probe_print(&m, &hellos, &pongs);
                if (hellos == n && !sent) {
                        printf("hellos %u\n", n);
                        if (!ping)
                                for (;;)
                                        pause();
                        printf("sent %d\n", nodes_link_send(l, "{\"ping\":1}", timeout_ms));
                        sent = true;
                }
                if (pongs == n)
                        return 0;
        }
        printf("error %d\n", r);
        return r;
}

int main(int argc, char **argv) {
        unsigned n = 0, uid = 0;
        char **step = NULL, **env = NULL;
        nodes_link *l = NULL;
        int r, timeout_ms;

        if (argc < 5 || (strcmp(argv[3], "hang") && strcmp(argv[3], "ping"))) {
                fprintf(stderr, "usage: %s JOB TIMEOUT_MS hang|ping NODE-ARGV...\n", argv[0]);
                return 2;
        }
        timeout_ms = atoi(argv[2]);
        setvbuf(stdout, NULL, _IOLBF, 0);
        if ((r = nodes_slurm_job_nodes(argv[1], &n, &uid)) < 0) {
                printf("nodes error %d\n", r);
                return 1;
        }
        printf("nodes %u\n", n);
        if ((r = nodes_slurm_step_argv(argv[1], n, uid, argv + 4, &step)) < 0 ||
            (r = nodes_slurm_step_env(uid, &env)) < 0 ||
            (r = nodes_link_start((char *const *const *)&step, 1, env, &l)) < 0) {
                printf("start error %d\n", r);
                nodes_slurm_argv_free(step);
                free(env);
                return 1;
        }
        printf("started\n");
        probe_loop(l, n, timeout_ms, strcmp(argv[3], "ping") == 0);
        printf("close %d\n", nodes_link_close(l, timeout_ms));
        nodes_slurm_argv_free(step);
        free(env);
        return 0;
}
