#!/usr/bin/python3
"""test_transport.py: slurm.transport, cudackptctl's line to the nodes of a
job (client/ctl/nodes: link.c over slurm.c) through the real test cluster,
driven by cudackpt-nodes-probe (nodes_probe.c) as the job's user (nobody).

A running 3-node batch job of nobody's; the node part is a shell script
(the transport knows nothing of what runs there) that says hello, answers
a ping with a pong and ends when its input ends.
  - one step reaches the three nodes: three hellos (the coordinator's
    $CUDACKPT_SOCKET not among what they are given), one line sent to all,
    three pongs, the step ends 0 once the link is closed, within
    STEP_LIMIT_S; it prints the time of each;
  - a node's part that fails (n2 exits 3 on the ping) ends the step: every
    node's part gone, the link ends with the failure's status;
  - the coordinator killed (SIGKILL) after the hellos: every node's part
    has ended within END_LIMIT_S (their input ended);
  - another user (daemon, uid 1) is refused by Slurm: the step ends
    without a line;
  - a node's line that is no JSON object naming its node ends the link
    (-EPROTO), so does one longer than the limit (-EMSGSIZE, or -EPROTO
    when srun cut it into pieces between other nodes' lines);
  - a node unreachable (its slurmd killed): the step ends, with no three
    hellos (the coordinator starts nothing before all said hello), and the
    other nodes' parts are gone, within a few MessageTimeouts.
Exit 0 passed, 1 failed, 77 skipped (as test_cluster.py)."""
import errno
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slurmcluster  # noqa: E402
from test_cluster import NOBODY, OTHER, check, skip_reason  # noqa: E402

STEP_LIMIT_S = 10
END_LIMIT_S = 5
# srun gives up on a node after the cluster's MessageTimeout.
UNREACHABLE_LIMIT_S = slurmcluster.MESSAGE_TIMEOUT_S * 3
TIMEOUT_MS = 15000

# The node's part: hello, then a pong for each ping until its input ends;
# $FAIL_ON names a node whose part exits 3 on the ping instead, $SAY a line
# to say first.
NODE_PART = r'''
n=$SLURMD_NODENAME
[ -n "$SAY" ] && [ "$SAY_ON" = "$n" ] && printf '%s\n' "$SAY"
echo "{\"node\":\"$n\",\"hello\":$SLURM_STEP_NUM_NODES,\"socket\":\"$CUDACKPT_SOCKET\"}"
while read -r l; do
  [ "$FAIL_ON" = "$n" ] && exit 3
  echo "{\"node\":\"$n\",\"pong\":1}"
done
'''


def probe(c, job, mode, uid=NOBODY, env=None, popen=False):
    argv = [c.probe, job, str(TIMEOUT_MS), mode, "sh", "-c", NODE_PART]
    if popen:
        return c.popen(argv, uid=uid, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return c.run(argv, uid=uid, env=env, check=False, timeout=60)


def lines(out, word):
    return [ln.split(" ", 2)[1:] for ln in out.splitlines() if ln.startswith(word + " ")]


def ended_failed(out):
    """The step ended by itself (-ENODATA), and closing said a failure."""
    closed = [int(x[0].split()[0]) for x in lines(out, "close")]
    return "error %d" % -errno.ENODATA in out and closed and closed[0] > 0


def node_parts(c):
    """The node parts' shells running in the nodes' namespaces."""
    def is_part(pid):
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                return b"SLURMD_NODENAME" in f.read()
        except OSError:
            return False
    return [p for p in c.pids() if is_part(p)]


def case_round_trip(c, job):
    t = time.monotonic()
    r = probe(c, job, "ping", env={"CUDACKPT_SOCKET": "/coordinator/io.cudackpt.Process"})
    s = time.monotonic() - t
    hellos = sorted(n for n, j in lines(r.stdout, "line") if '"hello"' in j and '"socket":""' in j)
    pongs = sorted(n for n, _ in lines(r.stdout, "line") if '"pong"' in _)
    check(r.returncode == 0 and "nodes 3" in r.stdout and hellos == ["n1", "n2", "n3"]
          and "sent 0" in r.stdout and pongs == ["n1", "n2", "n3"] and "close 0" in r.stdout,
          "one step: three hellos, a line to all, three pongs, closed 0 (%r, %r)" % (r.stdout, r.stderr))
    check(s < STEP_LIMIT_S, "the round trip, start to close, in %.2fs < %ds" % (s, STEP_LIMIT_S))
    print("MEASURED: nodes_link: squeue, srun step, hello, ping, pong from 3 nodes, close: %.3fs" % s)


def case_node_fails(c, job):
    r = probe(c, job, "ping", env={"FAIL_ON": "n2"})
    check("hellos 3" in r.stdout and ended_failed(r.stdout)
          and not node_parts(c),
          "n2's part failing ends the step and every node's part (%r, %r)" % (r.stdout, r.stderr))


def case_coordinator_killed(c, job):
    p = probe(c, job, "hang", popen=True)
    slurmcluster.await_true("three node parts", lambda: len(node_parts(c)) == 3, 15)
    # The probe said its hellos: every part is past its hello.
    out = ""
    while "hellos 3" not in out:
        out += p.stdout.readline()
    check(len(node_parts(c)) == 3, "three node parts run before the coordinator is killed")
    t = time.monotonic()
    p.send_signal(signal.SIGKILL)
    p.wait()
    slurmcluster.await_true("the node parts to end", lambda: not node_parts(c), END_LIMIT_S)
    check(True, "the coordinator SIGKILLed: every node's part ended in %.2fs" % (time.monotonic() - t))


def case_other_user(c, job):
    r = probe(c, job, "ping", uid=OTHER)
    check(not lines(r.stdout, "line") and "error %d" % -errno.ENODATA in r.stdout
          and "denied" in r.stderr.lower(),
          "another user's step is refused by Slurm, no line (%r, %r)" % (r.stdout, r.stderr.strip()))


def case_hostile(c, job):
    # srun may pass a long line on in pieces, between other nodes' lines:
    # the link then finds a line that is no object before the limit.
    for say, errs, what in (('not json', (errno.EPROTO,), "no JSON"),
                            ('{"hello":1}', (errno.EPROTO,), "no node"),
                            ('{"node":"' + "x" * 70000 + '"}', (errno.EMSGSIZE, errno.EPROTO), "too long")):
        r = probe(c, job, "ping", env={"SAY": say, "SAY_ON": "n3"})
        check(any("error %d" % -e in r.stdout for e in errs) and "close" in r.stdout,
              "a node's line with %s ends the link (-%s) (%r)"
              % (what, "/-".join(errno.errorcode[e] for e in errs), r.stdout[-300:]))
        slurmcluster.await_true("the node parts to end", lambda: not node_parts(c), END_LIMIT_S)


def case_node_unreachable(c, job):
    """Last: n3's slurmd is killed (the job's tasks there run on)."""
    c.procs["slurmd-n3"].send_signal(signal.SIGKILL)
    c.procs["slurmd-n3"].wait()
    t = time.monotonic()
    r = probe(c, job, "ping")
    s = time.monotonic() - t
    check("hellos" not in r.stdout and ended_failed(r.stdout)
          and not node_parts(c) and s < UNREACHABLE_LIMIT_S,
          "n3 unreachable: the step ends in %.2fs without three hellos, every part gone (%r, %r)"
          % (s, r.stdout, r.stderr))
    print("MEASURED: the step's end with a node unreachable (MessageTimeout=%d): %.3fs"
          % (slurmcluster.MESSAGE_TIMEOUT_S, s))


def main():
    why = skip_reason()
    if why:
        print(why)
        return 77 if why.startswith("SKIP") else 1
    c = slurmcluster.Cluster(nodes=3)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: sys.exit(1))
    with c:
        c.probe = c.share(os.environ["CUDACKPT_TEST_NODES_PROBE"])
        r = c.run(["sbatch", "--parsable", "-N3", "--ntasks-per-node=1", "--time=5", "-o", "/dev/null",
                   "--wrap", "srun sleep 300"], uid=NOBODY)
        job = r.stdout.strip().split(";")[0]
        slurmcluster.await_true("job %s running" % job, lambda: c.run(
            ["squeue", "-h", "-j", job, "-o", "%T"], check=False).stdout.strip() == "RUNNING", 20)
        for case in (case_round_trip, case_node_fails, case_coordinator_killed, case_other_user, case_hostile,
                     case_node_unreachable):
            case(c, job)
    return 0


if __name__ == "__main__":
    slurmcluster.run_main(main)
