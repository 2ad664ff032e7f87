#!/usr/bin/python3
"""test_jobset.py: slurm.jobset, a multi-node job saved and restored whole
through Slurm (`cudackptctl job start --slurm`, docs/slurm.md) on the real
test cluster (two nodes, one daemon each on one shared saves directory, with
save_parts_network_lock "iptables") with real CRIU.  The batch job (sbatch
-N2 --requeue) is `exec cudackptctl job start --slurm --name=train
--save=set-$SLURM_JOB_ID -- sh -c ...`, whose command runs once per node:
on node 0 (SLURM_NODEID) a server that checks every numbered line that the
client on node 1 streams to it over TCP (tests/lib/tcpstream.py), writing
how far it got, or BAD at a line lost or repeated.
  1. the first start: each node's daemon runs one job train, its part; the
     stream flows from node 1 to node 0;
  2. `scontrol requeue J`: both parts saved as set-J.g00000001.nHASH (HASH:
     FNV-1a of the node's name), one per node, the connection's lock rules
     kept, both jobs gone; then, the job held (cases 4 and 4b meanwhile),
     released and started again by Slurm on the same two nodes: both parts
     restored, the stream going on with no line lost or repeated, the rules
     gone;
  4. (the job held after 2) n2's part save moved aside, no generation
     whole: another 2-node job with that --save exits 33 and starts
     nothing, n1's part save kept;
  4b. n2's part save missing its CRIU inventory (its restore refused before
     its barrier): another 2-node job with that --save restores neither
     part (n1's held restore never let go) and exits non-zero, the saves
     and lock rules kept (the held job restores from them after);
  3. n2's part unable to be saved (its client holds a unix connection to
     this test, which CRIU cannot dump), the batch script sent USR1, twice:
     with n1's part slow to dump (FAT_MB more memory), so that n2 fails
     before n1's part is ready, then with n2's slow, so that n1's part is
     held at its barrier before n2 fails: each time no generation 2 saved on
     either node (n1's part rolled back, not let go), both jobs running on
     with their stream, the same processes, no lock rule left, the command
     waiting on;
  5. the stream stopped: both parts exit 0, every part save of the set is
     removed, the batch job completes with exit 0.
Prints MEASURED: the time from the requeue to both part saves on disk, and
from the second start to the stream flowing again.  The jobs are nobody's,
or root's where root lacks CAP_SYS_RESOURCE (CI).
Exit 0 passed, 1 failed, 77 skipped (as test_cluster.py; also without a
usable criu or iptables)."""
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slurmcluster  # noqa: E402
from nodedaemons import NodeDaemons  # noqa: E402
from test_cluster import check, run_on_cluster, skip_reason  # noqa: E402
from test_saves import ctl, job_field  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from savejobs import cmdline, saves_owner  # noqa: E402
from tcpstream import CLIENT, SERVER, count, cut_criu, drop_lock_rules, lock_rules, read  # noqa: E402

EXIT_INCOMPLETE_SAVE = 33
# Slurm's SIGKILL after its SIGTERM: room for the parts' dumps on a loaded
# machine.
KILL_WAIT_S = 30
LIMIT_S = 60
NODES = ("n1", "n2")
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
         "PREEMPTED")

# Before SERVER and CLIENT (python3 srv.py|cli.py A B SOCKET HOLD FAT): a
# thread that, while the file HOLD exists, holds a connection to the unix
# socket SOCKET, outside the job, which makes CRIU refuse to dump the
# process (once it dumped its memory); and while FAT exists, FAT_MB of
# memory more, which makes its dump slower.
FAT_MB = 256
HELPER = r"""
import os, socket, sys, threading, time
def helper(path, hold, fat):
    s = buf = None
    while True:
        if s is None and os.path.exists(hold):
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(path)
            except OSError:
                s.close()
                s = None
        elif s is not None and not os.path.exists(hold):
            s.close()
            s = None
        if buf is None and os.path.exists(fat):
            buf = bytearray(b"x") * (%d << 20)
        elif buf is not None and not os.path.exists(fat):
            buf = None
        time.sleep(0.05)
threading.Thread(target=helper, args=sys.argv[3:6], daemon=True).start()
""" % FAT_MB


def fnv1a(name):
    """FNV-1a, 32 bits, of name: a part save's node hash."""
    h = 0x811c9dc5
    for b in name.encode():
        h = (h ^ b) * 0x01000193 & 0xffffffff
    return h


class JobSet:
    def __init__(self, c, out, daemons):
        self.c, self.out, self.daemons = c, out, daemons
        self.job = self.port = None
        self.aside = None  # (where a part save was moved, where it goes back)

    def p(self, name):
        return os.path.join(self.out, name)

    def part(self, gen, node):
        return "set-%s.g%08x.n%08x" % (self.job, gen, fnv1a(node))

    def saves(self, node):
        """The part saves of the set that node's daemon lists (the saves
        directory is shared: every node's)."""
        r = ctl(self.c, node, ["saves", "--json"])
        names = [json.loads(line)["save"] for line in r.stdout.splitlines() if line.strip()]
        return sorted(s for s in names if s.startswith("set-%s." % self.job))

    def jobs(self, node):
        """name -> pid of the jobs node's daemon runs for the job's user."""
        r = ctl(self.c, node, ["list", "--json"])
        return {j["name"]: j["pid"] for j in map(json.loads, filter(str.strip, r.stdout.splitlines()))}

    def running(self):
        return {n: self.jobs(n).get("train") for n in NODES}

    def audits(self, node, method):
        """The results of node's daemon's audit lines for method so far."""
        return [line.split(" result=")[1].split()[0] for line in self.daemons[node].log().splitlines()
                if " method=%s " % method in line and " result=" in line]

    def said(self, name="slurm.out"):
        return read(self.p(name))

    def flowing(self, what, beyond):
        """The server's count past beyond + 200, or BAD: checked."""
        n = slurmcluster.await_true(what, lambda: count(self.p("count")) < 0 or count(self.p("count")) > beyond + 200,
                                    LIMIT_S)
        check(n and count(self.p("count")) > 0, "%s: %s (from %d)" % (what, read(self.p("count")), beyond))

    def write(self, name, text, mode=0o644):
        with open(self.p(name), "w") as f:
            f.write(text)
        os.chmod(self.p(name), mode)
        return self.p(name)

    def sbatch(self, script, output, requeue):
        argv = ["sbatch", "--parsable", "-N2", "--time=10", "--open-mode=append", "-o", self.p(output)]
        r = self.c.run(argv + (["--requeue"] if requeue else []) + [script], uid=self.c.owner, cwd=self.out)
        return r.stdout.strip().split(";")[0]

    # -- 1 ---------------------------------------------------------------
    def case_first_start(self):
        self.write("srv.py", HELPER + SERVER)
        self.write("cli.py", HELPER + CLIENT)
        py, p = sys.executable, self.p
        helper = "%s %s/$SLURM_NODEID.hold %s/$SLURM_NODEID.fat" % (p("ext.sock"), self.out, self.out)
        inner = ('if [ "$SLURM_NODEID" = 0 ]; then exec %s %s %s %s %s; fi; '
                 'while [ ! -e %s ]; do sleep 0.1; done; exec %s %s %s %s %s'
                 % (py, p("srv.py"), p("port"), p("count"), helper,
                    p("port"), py, p("cli.py"), p("port"), p("stop"), helper))
        script = self.write("job.sh", "#!/bin/sh\nexec %s job start --slurm --name=train --save=set-$SLURM_JOB_ID "
                            "--output=%s -- /bin/sh -c '%s'\n" % (self.c.ctl, p("log"), inner), 0o755)
        self.job = self.sbatch(script, "slurm.out", True)

        def streaming():
            state = job_field(self.c, self.job, "JobState")
            if state in ENDED:
                raise AssertionError("the batch job ended before its stream flowed (%s: %r)" % (state, self.said()))
            return count(p("count")) >= 100 or count(p("count")) < 0
        slurmcluster.await_true("job %s's stream" % self.job, streaming, LIMIT_S)
        self.port = int(read(p("port")))
        pids = self.running()
        check(all(pids.values()), "each node's daemon runs the job's part as job train (%r)" % pids)
        self.flowing("the stream flows from node 1's part into node 0's", 0)
        said = self.said()
        check("started" in said, "the command says the job started (%r)" % said)

    # -- 2 (and 4 while the job is held) -----------------------------------
    def case_requeue(self):
        c, job = self.c, self.job
        want = [self.part(1, n) for n in NODES]
        t0 = time.monotonic()
        c.run(["scontrol", "requeue", job])
        slurmcluster.await_true("both part saves of generation 1",
                                lambda: all(set(want) <= set(self.saves(n)) for n in NODES), KILL_WAIT_S)
        t_saved = time.monotonic() - t0
        got = {n: self.saves(n) for n in NODES}
        check(all(g == want for g in got.values()), "the requeue saved both parts whole, one per node: %s (%r)"
              % (" ".join(want), got))
        slurmcluster.await_true("the job requeued", lambda: job_field(c, job, "JobState") == "PENDING", LIMIT_S)
        # Held at once (Slurm delays a requeued job's start anyway): the
        # partial set of case 4 must not meet it.
        c.run(["scontrol", "hold", job])
        slurmcluster.await_true("both parts' jobs gone", lambda: not any(self.running().values()), 20)
        n = count(self.p("count"))
        rules = lock_rules(self.port)
        check(len(rules) == 4, "the saved parts' connection keeps its lock rules for the restore (%r)" % rules)
        check(any("saved" in line and "set-" + job in line for line in self.said().splitlines()),
              "the command says the set saved (%r)" % self.said()[-1000:])
        check(job_field(c, job, "JobState") == "PENDING", "the job requeued, held")
        pinned = slurmcluster.await_true("the job held to its nodes",
                                         lambda: job_field(c, job, "ReqNodeList") == "n[1-2]", 20)
        check(pinned and "held to nodes n[1-2]" in self.said(),
              "the requeued job is held to the nodes of its saved parts (ReqNodeList=%s)"
              % job_field(c, job, "ReqNodeList"))

        self.case_partial_refused()
        self.case_restore_fails()

        c.run(["scontrol", "release", job])
        t1 = time.monotonic()

        def restarted():
            if job_field(c, job, "JobState") == "PENDING" and job_field(c, job, "Reason") == "BeginTime":
                c.run(["scontrol", "update", "JobId=" + job, "StartTime=now"], check=False)
            return count(self.p("count")) < 0 or count(self.p("count")) > n + 200
        slurmcluster.await_true("the job started again, its stream flowing", restarted, LIMIT_S)
        t_flow = time.monotonic() - t1
        self.flowing("both parts restored: the stream goes on where it was saved, no line lost or repeated", n)
        nodes = job_field(c, job, "NodeList")
        pids = self.running()
        check(nodes == "n[1-2]" and all(pids.values()),
              "Slurm started the job again on the same two nodes, each running its part (%s, %r)" % (nodes, pids))
        check(not lock_rules(self.port), "the lock rules gone with the restore (%r)" % lock_rules(self.port))
        said = self.said()
        check(any("restored" in line and "set-" + job in line for line in said.splitlines()),
              "the command says the job restored from the set (%r)" % said[-1000:])
        print("MEASURED: requeue to both part saves on disk %.3fs; second start to the stream flowing again %.3fs"
              % (t_saved, t_flow))

    def other_job(self, tag):
        """Another 2-node batch job, `job start --slurm` of the held job's
        set (its command, should it start, leaves a file STARTED-TAG.N):
        its exit code and output once it ended, and the files."""
        c = self.c
        script = self.write("job-%s.sh" % tag, "#!/bin/sh\nexec %s job start --slurm --name=train --save=set-%s "
                            "--output=%s -- /bin/sh -c 'touch %s.$SLURM_NODEID; exec sleep 100'\n"
                            % (c.ctl, self.job, self.p("log-" + tag), self.p("started-" + tag)), 0o755)
        other = self.sbatch(script, "slurm-%s.out" % tag, False)

        def started():
            return [f for f in os.listdir(self.out) if f.startswith("started-" + tag)]
        slurmcluster.await_true("job %s ended or started" % other,
                                lambda: job_field(c, other, "JobState") in ENDED or started(), LIMIT_S)
        said = self.said("slurm-%s.out" % tag)
        print("--- job %s said ---\n%s" % (other, said))
        return job_field(c, other, "ExitCode"), said, started()

    def move_aside(self, path):
        self.aside = (self.c.path("aside"), path)
        os.rename(path, self.aside[0])

    def put_back(self):
        os.rename(*self.aside)
        self.aside = None

    def case_partial_refused(self):
        """n2's part save moved aside (as if the job had come back on other
        nodes): another 2-node job with --save of the set finds a part save
        on n1 only, no generation whole: exit 33, nothing started, n1's part
        save kept."""
        self.move_aside(os.path.join(self.c.path("saves", str(self.c.owner or 0)), self.part(1, "n2")))
        code, said, started = self.other_job("partial")
        check(code == "%d:0" % EXIT_INCOMPLETE_SAVE,
              "a part save on one node only, no generation whole: refused, exit 33 (%s, %r)" % (code, said))
        pids = self.running()
        check(not started and not any(pids.values()), "nothing started on any node (%r, %r)" % (started, pids))
        check(self.saves("n1") == [self.part(1, "n1")], "n1's part save kept (%r)" % self.saves("n1"))
        self.put_back()

    def case_restore_fails(self):
        """n2's part save missing its CRIU inventory (its restore refused
        before its barrier, its digests checked): another 2-node job with
        --save of the set restores neither part (n1's held restore rolled
        back, never let go: no job started on either daemon), exits non-zero;
        both part saves and the lock rules kept."""
        top = os.path.join(self.c.path("saves", str(self.c.owner or 0)), self.part(1, "n2"))
        inventory = [os.path.join(d, "inventory.img") for d, _, files in os.walk(top) if "inventory.img" in files]
        check(len(inventory) == 1, "n2's part save holds one CRIU inventory (%r)" % inventory)
        self.move_aside(inventory[0])
        before = {n: self.audits(n, "Job").count("started") for n in NODES}
        code, said, started = self.other_job("broken")
        after = {n: self.audits(n, "Job").count("started") for n in NODES}
        check(code not in ("0:0", None) and not started and before == after and not any(self.running().values()),
              "one node's part cannot be restored: no node's part let go, the command exits non-zero (%s, %r, "
              "jobs started before %r, after %r)" % (code, said, before, after))
        self.put_back()
        want = [self.part(1, n) for n in NODES]
        check(self.saves("n1") == want and len(lock_rules(self.port)) == 4,
              "both part saves and the lock rules kept (%r, %r)" % (self.saves("n1"), lock_rules(self.port)))

    # -- 3 ---------------------------------------------------------------
    def case_save_fails(self):
        """n2's part cannot be dumped; the batch script sent USR1: first
        with n1's part slow to dump (FAT_MB more), so that n2 fails before
        n1's part is ready; then with n2's slow, so that n1's is ready
        (held at its barrier) before n2 fails."""
        ext = socket.socket(socket.AF_UNIX)
        try:
            ext.bind(self.p("ext.sock"))
            os.chmod(self.p("ext.sock"), 0o777)
            ext.listen(1)
            ext.settimeout(20)
            self.save_fails(ext, "srv.py", "0.fat", "n2 fails before n1's part is ready")
            self.save_fails(ext, "cli.py", "1.fat", "n1's part is ready before n2 fails")
        finally:
            ext.close()

    def rss_mb(self, script):
        """The resident memory of the job's process running script, MB."""
        for pid in (int(d) for d in os.listdir("/proc") if d.isdigit()):
            argv = cmdline(pid)
            if len(argv) > 1 and argv[1] == self.p(script).encode():
                with open("/proc/%d/status" % pid) as f:
                    return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) // 1024
        return 0

    def save_fails(self, ext, script, fat, what):
        open(self.p(fat), "w").close()
        slurmcluster.await_true("%s's memory" % script, lambda: self.rss_mb(script) >= FAT_MB, 20)
        open(self.p("1.hold"), "w").close()
        conn = ext.accept()[0]
        try:
            self.save_refused(what)
        finally:
            os.unlink(self.p("1.hold"))
            os.unlink(self.p(fat))
            conn.settimeout(10)
            conn.recv(1)
            conn.close()
        slurmcluster.await_true("%s's memory back" % script, lambda: self.rss_mb(script) < FAT_MB // 2, 20)

    def save_refused(self, what):
        c, job = self.c, self.job
        before = {n: len(self.audits(n, "SaveJob")) for n in NODES}
        pids, said = self.running(), self.said()
        c.run(["scancel", "--batch", "--signal=USR1", job])
        slurmcluster.await_true("both nodes' SaveJob ended (%s)" % what,
                                lambda: all(len(self.audits(n, "SaveJob")) > before[n] for n in NODES), LIMIT_S)
        results = {n: self.audits(n, "SaveJob")[before[n]:] for n in NODES}
        check(all(r and "ok" not in r for r in results.values()),
              "%s: neither node's save of generation 2 done (%r)" % (what, results))
        n = count(self.p("count"))
        self.flowing("both jobs run on with their stream, no line lost or repeated", n)
        check(self.running() == pids and job_field(c, job, "JobState") == "RUNNING",
              "the same processes run on both nodes, the batch job running (%r)" % self.running())
        for node in NODES:
            check(self.saves(node) == [self.part(1, m) for m in NODES],
                  "no generation 2 on disk, generation 1 whole (%s lists %r)" % (node, self.saves(node)))
        check(not lock_rules(self.port), "no lock rule left (%r)" % lock_rules(self.port))
        new = self.said()[len(said):]
        check(any("n2" in line for line in new.splitlines()), "the command says n2's failure (%r)" % new)

    # -- 5 ---------------------------------------------------------------
    def case_exit_zero(self):
        c, job = self.c, self.job
        open(self.p("stop"), "w").close()
        slurmcluster.await_true("the batch job ended", lambda: job_field(c, job, "JobState") in ENDED, LIMIT_S)
        state, code = job_field(c, job, "JobState"), job_field(c, job, "ExitCode")
        check(state == "COMPLETED" and code == "0:0", "every part exited 0: the batch job completed, exit 0 (%s %s)"
              % (state, code))
        check(not self.saves("n1") and not self.saves("n2"), "every part save of the set removed (%r, %r)"
              % (self.saves("n1"), self.saves("n2")))
        check(not any(self.running().values()), "no job left on any node")

    def cleanup(self):
        open(self.p("stop"), "w").close()
        if self.aside:
            self.put_back()
        if self.port:
            drop_lock_rules(self.port)


def show_logs(t, daemons):
    for n, d in daemons.items():
        with open(d.log_path, errors="replace") as f:
            print("--- %s's daemon (the end of its log) ---\n%s" % (n, f.read()[-6000:]))
    for name in sorted(os.listdir(t.out)):
        if name.startswith(("slurm", "log")):
            print("--- %s ---\n%s" % (name, t.said(name)[-3000:]))


def main():
    criu = cut_criu()
    if skip_reason() is None and not criu:
        return 77

    def cases(c, sim):
        c.owner = saves_owner()
        out = c.path("out")
        os.makedirs(out)
        os.chmod(out, 0o1777)
        if c.owner is None:
            print("NOTE: root lacks CAP_SYS_RESOURCE here: the job is root's (CRIU cannot dump another user's)")
        config = {"nvml": sim, "saves_dir": c.path("saves"), "ctl_path": os.environ["CUDACKPT_TEST_CTL"],
                  "save_parts_network_lock": "iptables"}
        with NodeDaemons(c, config=config, env={"CUDACKPT_CRIU": criu},
                         node_env=lambda n: {"CUDACKPT_RUN_DIR": c.path(n, "jobs")}) as daemons:
            t = JobSet(c, out, daemons)
            try:
                t.case_first_start()
                t.case_requeue()
                t.case_save_fails()
                t.case_exit_zero()
            except (AssertionError, TimeoutError):
                show_logs(t, daemons)
                raise
            finally:
                t.cleanup()
    return run_on_cluster(cases, nodes=2, kill_wait=KILL_WAIT_S)


if __name__ == "__main__":
    sys.exit(main())
