#!/usr/bin/python3
"""test_locks.py: integration.joblocks, the lock rules that a part of a job
saved held at a barrier leaves on its node (daemon/saves/savelocks.h),
with the real daemon on the simulator, real CRIU and real iptables: a job
(`cudackptctl job start`) holding TCP connections to this test, saved with
SaveJob barrier: true under save_parts_network_lock "iptables", with
max_locked_connections_per_uid 2:
  (a) a part with 3 connections is refused at its barrier, before any go:
      the call fails QueueFull {resource: "locked_connections", limit: 2}
      with no ready reply, the job runs on, no save made, no rule of its
      connections left, and its connections still carry bytes;
  (b) a part with 1 connection, held and passed (go): saved, its 2 rules
      kept and recorded in the daemon's runtime directory; RemoveSave of
      the save deletes them; a save replaced by another held part's has
      its rules deleted, the new one's kept; one removed on another node
      sharing the saves keeps its rules until RemoveSave of its name on
      this one (NoSuchSave) deletes them; one removed there and made
      again under its name, then restored here, keeps its rules recorded
      (still there: that restore lifted none of them);
  (c) again, then the daemon stopped and started again: the record read
      back, RemoveSave deletes the rules.
The jobs are nobody's, or root's where root lacks CAP_SYS_RESOURCE (CI).
Skips (77) without root, a usable criu or iptables.
Exit 0 passed, 1 failed, 77 skipped."""
import os
import shutil
import socket
import subprocess
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from savejobs import await_true, check  # noqa: E402
from simdaemon import SimDaemon  # noqa: E402
from tcpstream import drop_lock_rules, lock_rules  # noqa: E402
from test_parts import IFACE, LIMIT_S, Node, prepare, recorded  # noqa: E402

# python3 JOB PORT N UPFILE: N connections to the test's port, each
# echoing what it gets; UPFILE written once all are up.
JOB = r"""
import selectors, socket, sys
socks = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(int(sys.argv[2]))]
open(sys.argv[3], "w").write("up")
sel = selectors.DefaultSelector()
for s in socks:
    sel.register(s, selectors.EVENT_READ)
while True:
    for key, _ in sel.select():
        data = key.fileobj.recv(4096)
        if data:
            key.fileobj.sendall(data)
"""


class Locks:
    """The test's side: its listening port and the connections accepted."""

    def __init__(self, ctl, uid, top):
        self.ctl, self.uid, self.top = ctl, uid, top
        self.work = os.path.join(top, "work")
        self.job_py = os.path.join(top, "job.py")
        with open(self.job_py, "w") as f:
            f.write(JOB)
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.port = self.lsock.getsockname()[1]
        self.conns = []
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                self.conns.append(self.lsock.accept()[0])
            except OSError:
                return

    def as_user(self):
        if self.uid is not None:
            os.setgroups([])
            os.setgid(self.uid)
            os.setuid(self.uid)

    def start(self, node, n):
        """node's job 'part' with n connections to the test, up."""
        up = os.path.join(self.work, "up-%s" % node.save)
        before = len(self.conns)
        node.start([sys.executable, self.job_py, str(self.port), str(n), up])
        await_true("the job's %d connection(s)" % n, lambda: os.path.exists(up) and len(self.conns) == before + n)
        return self.conns[before:]


def echoes(conns):
    """Whether each connection carries bytes both ways."""
    for c in conns:
        c.settimeout(LIMIT_S)
        c.sendall(b"ping")
        if c.recv(16) != b"ping":
            return False
    return True


def save_go(t, n):
    """n's job saved held at its barrier and passed: the save made, the job
    ended by it."""
    v = n.hold("SaveJob", {"name": "part", "save": n.save})
    r = n.pass_barrier(True)
    check(r == {"parameters": {}}, "PassBarrier go: {} (%r)" % r)
    r = v.reply()
    v.close()
    check(r.get("parameters", {}).get("save", {}).get("save") == n.save, "the save %s made (%r)" % (n.save, r))
    n.job.communicate(timeout=LIMIT_S)
    check(n.job.returncode == 0, "its job start exits 0, the job saved")
    check(len(lock_rules(t.port)) == 2, "its connection's 2 lock rules kept (%r)" % lock_rules(t.port))


def said(d):
    """The daemon's lines on lock rules (why one was not deleted)."""
    return [line for line in d.log().splitlines() if "lock rule" in line]


def remove(t, n, what):
    r = n.varlink().call("RemoveSave", {"save": n.save})
    check(r == {"parameters": {"save": n.save}}, "RemoveSave %s: done (%r)" % (n.save, r))
    check(not lock_rules(t.port), "RemoveSave %s deletes its lock rules%s (%r, %r)" % (
        n.save, what, lock_rules(t.port), said(n.d)))


def case_replace(t, d):
    """A save replaced by another held part's: the first one's rules go,
    the second one's stay (until its RemoveSave)."""
    n = Node(t, d, "s-rep")
    first = t.start(n, 1)[0].getpeername()[1]
    save_go(t, n)
    n2 = Node(t, d, "s-rep2")  # its job start restores no save
    second = t.start(n2, 1)[0].getpeername()[1]
    v = n2.hold("SaveJob", {"name": "part", "save": n.save, "replace": True})
    check(n2.pass_barrier(True) == {"parameters": {}} and "save" in v.reply().get("parameters", {}),
          "the save replaced by another part's")
    v.close()
    n2.job.communicate(timeout=LIMIT_S)
    rules = lock_rules(t.port)
    check(len(rules) == 2 and all(str(second) in r.split() and str(first) not in r.split() for r in rules),
          "the replaced save's lock rules deleted, the new one's kept (%r)" % rules)
    remove(t, n, ", the replacing save's")


def case_other_node(t, d, d2):
    """A save removed from another node sharing the saves: its rules stay on
    the node that dumped it, until a RemoveSave of that name there (which
    answers NoSuchSave)."""
    n = Node(t, d, "s-other")
    t.start(n, 1)
    save_go(t, n)
    r = Node(t, d2, n.save).varlink().call("RemoveSave", {"save": n.save})
    check(r == {"parameters": {"save": n.save}} and len(lock_rules(t.port)) == 2,
          "RemoveSave on another node: done, the rules left on the first (%r)" % r)
    r = n.varlink().call("RemoveSave", {"save": n.save})
    check(r.get("error") == IFACE + "NoSuchSave" and not lock_rules(t.port),
          "RemoveSave on the first node: NoSuchSave, its rules deleted (%r, %r, %r)" % (
              r, lock_rules(t.port), said(d)))


def case_made_again(t, d, d2):
    """A save removed on another node sharing the saves and made again there
    under its name, then restored on the first node: that restore lifted
    none of the first save's rules, which stay recorded there (a record
    dropped would leave them for ever, past the bound) until RemoveSave of
    the name there deletes them."""
    n = Node(t, d, "s-again")
    t.start(n, 1)
    save_go(t, n)
    r = Node(t, d2, n.save).varlink().call("RemoveSave", {"save": n.save})
    check(r == {"parameters": {"save": n.save}}, "RemoveSave on another node: done (%r)" % r)
    os.unlink(os.path.join(t.work, "up-%s" % n.save))
    n2 = Node(t, d2, n.save)  # no save of that name now: its job starts afresh
    t.start(n2, 0)
    v = n2.hold("SaveJob", {"name": "part", "save": n.save})
    check(n2.pass_barrier(True) == {"parameters": {}} and "save" in v.reply().get("parameters", {}),
          "the save made again on the other node, of a part with no connection")
    v.close()
    n2.job.communicate(timeout=LIMIT_S)
    n3 = Node(t, d, n.save)
    v = n3.hold("RestoreJob", {"save": n.save})
    check(n3.pass_barrier(True) == {"parameters": {}}, "its restore on the first node let go")
    r = v.reply()
    check(r.get("continues") and r["parameters"]["job"]["event"] == "started", "the job restored (%r)" % r)
    await_true("the restore's record looked at", lambda: not recorded(n) or "kept recorded" in d.log())
    v.close()
    await_true("the restored job ended with its call", lambda: not n3.running())
    check(recorded(n) and len(lock_rules(t.port)) == 2,
          "the first save's rules, still there, still recorded (%r, %r)" % (lock_rules(t.port), said(d)))
    remove(t, n, ", the first save's, after a restore of the one made again")


def case_bound(t, d):
    n = Node(t, d, "s-over")
    conns = t.start(n, 3)
    v = n.varlink()
    v.send("SaveJob", {"name": "part", "save": n.save, "barrier": True}, more=True)
    r = v.reply()
    v.close()
    check(r.get("error") == IFACE + "QueueFull" and not r.get("continues") and
          r.get("parameters") == {"resource": "locked_connections", "limit": 2},
          "3 connections past max_locked_connections_per_uid 2: QueueFull at the barrier, no ready (%r)" % r)
    check(n.running() and n.job.poll() is None, "the job runs on")
    check(not lock_rules(t.port), "no lock rule of its connections left (%r)" % lock_rules(t.port))
    check(echoes(conns), "its connections still carry bytes")
    check(n.save not in n.saves(), "no save made")
    check("locked_connections" in d.log(), "the refusal is in the daemon's log")
    n.job.kill()
    n.job.communicate()
    await_true("the job stopped with its call", lambda: not n.running())


def run(t, ctl, sim, env):
    config = {"nvml": sim, "saves_dir": os.path.join(t.top, "saves"), "ctl_path": ctl, "socket_mode": "0666",
              "save_parts_network_lock": "iptables", "max_locked_connections_per_uid": 2}
    with SimDaemon(os.environ["CUDACKPT_TEST_DAEMON"], sim, config, dict(
            env, CUDACKPT_RUN_DIR=os.path.join(t.top, "jobs"))) as d:
        case_bound(t, d)
        n = Node(t, d, "s-go")
        t.start(n, 1)
        save_go(t, n)
        with open(os.path.join(d.dir, "save-locks.json")) as f:
            check('"s-go"' in f.read(), "the rules recorded in the runtime directory")
        remove(t, n, "")
        case_replace(t, d)
        with SimDaemon(os.environ["CUDACKPT_TEST_DAEMON"], sim, config, dict(
                env, CUDACKPT_RUN_DIR=os.path.join(t.top, "jobs2"))) as d2:
            case_other_node(t, d, d2)
            case_made_again(t, d, d2)
        n = Node(t, d, "s-restart")
        t.start(n, 1)
        save_go(t, n)
        check(d.terminate() == 0, "the daemon stops")
        d.restart()
        remove(t, n, ", after a restart of the daemon")


def main():
    ready = prepare(Locks, "cudackpt-locks.")
    if isinstance(ready, int):
        return ready
    t, sim, criu = ready
    top = t.top
    try:
        run(t, os.environ["CUDACKPT_TEST_CTL"], sim, {"CUDACKPT_CRIU": criu})
    except (AssertionError, subprocess.TimeoutExpired, OSError) as e:
        print("FAIL: %s" % e)
        return 1
    finally:
        drop_lock_rules(t.port)
        t.lsock.close()
        shutil.rmtree(top, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
