#!/usr/bin/python3
"""test_parts.py: integration.jobparts, the daemon's side of a job saved
and restored across nodes: SaveJob and RestoreJob held at a barrier
(barrier: true), PassBarrier, save_parts_network_lock and
barrier_timeout_ms (daemon/saves/savebarrier.h), with the real daemon on
the simulator, real CRIU and a real TCP connection between two parts:
two daemons sharing one saves_dir (two nodes), a job on each (`cudackptctl
job start --name=part --save=s-nN`), a server part on the first streaming
lines in from a client part on the second, the server checking that no
line is lost or repeated.  The barrier calls are spoken in Varlink here.
  (0) a daemon with the default configuration (save_parts_network_lock
      "off") refuses a held SaveJob and RestoreJob: SavesDisabled, its
      reason naming the key; the others below turn it to "iptables";
  (a) both parts saved held at a barrier: each call says ready (continues
      {"barrier": "ready"}) with its part frozen under criu's iptables lock
      (save_parts_network_lock, though save_network_lock is "skip");
      another uid's PassBarrier of the job is NoSuchJob and lets nothing
      go; PassBarrier go:false on the first node, the held call's
      connection closed on the second: both saves fail, both jobs run on
      with their connection (no line lost), no save and no lock rule of
      theirs left;
  (b) both held again and passed (go): both saved (job start exits 0, the
      saves listed), the lock rules kept; both restored held at a barrier
      and let go by none (go:false, the call closed): neither runs, the
      saves and rules intact; both restored held again, each ready before
      "started", passed one a second after the other: the stream goes on
      from where it was saved, no line lost or repeated, the rules gone,
      and each node's record of them (save-locks.json) with them;
  (c) a daemon with barrier_timeout_ms 5000: a held save that nobody
      passes rolls back by itself after 5 s, the job running on; another
      SaveJob of the job while it is held (held too or not) is SaveBusy;
      PassBarrier with odd bytes or wrong types is InvalidParameter;
      SaveJob barrier: true without more is InvalidParameter (barrier);
      PassBarrier of a job at no barrier is NoSuchJob;
  (d) both restored parts held again and their daemons stopped meanwhile
      (SIGKILL, SIGTERM): each part rolls back, no lock rule or save left.
The jobs are nobody's, or root's where root lacks CAP_SYS_RESOURCE (CI).
Skips (77) without root, a usable criu or iptables.
Exit 0 passed, 1 failed, 77 skipped."""
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from savejobs import NOBODY, await_true, check, saves_owner  # noqa: E402
from simdaemon import SimDaemon  # noqa: E402
from tcpstream import CLIENT, SERVER, count, cut_criu, drop_lock_rules, lock_rules, read  # noqa: E402

LIMIT_S = 30
TIMEOUT_MS = 5000  # room for the calls made while it waits
IFACE = "io.cudackpt.Process."
READY = {"parameters": {"barrier": "ready"}, "continues": True}


class Varlink:
    """One connection to a daemon, as uid (None: root): JSON objects, each
    ended by a NUL."""

    def __init__(self, d, uid):
        self.buf = b""
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if uid is not None:  # SO_PEERCRED is the effective ids at connect()
            os.setegid(uid)
            os.seteuid(uid)
        try:
            self.s.connect(d.socket)
        finally:
            os.seteuid(0)
            os.setegid(0)

    def send(self, method, params, more=False):
        msg = {"method": IFACE + method, "parameters": params}
        if more:
            msg["more"] = True
        self.s.sendall(json.dumps(msg).encode() + b"\0")

    def reply(self, timeout=LIMIT_S):
        self.s.settimeout(timeout)
        while b"\0" not in self.buf:
            try:
                data = self.s.recv(65536)
            except socket.timeout:
                raise AssertionError("no reply in %.0f s" % timeout)
            if not data:
                raise AssertionError("the daemon closed the connection")
            self.buf += data
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params):
        self.send(method, params)
        return self.reply()

    def close(self):
        self.s.close()


class Node:
    """One node: its daemon, its part's `job start`, its save's name."""

    def __init__(self, t, d, save):
        self.t, self.d, self.save, self.job = t, d, save, None

    def varlink(self, uid=-1):
        return Varlink(self.d, self.t.uid if uid == -1 else uid)

    def start(self, args):
        self.job = subprocess.Popen([self.t.ctl, "job", "--socket=" + self.d.socket, "start", "--name=part",
                                     "--save=" + self.save, "--"] + args, preexec_fn=self.t.as_user,
                                    cwd=self.t.work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def running(self):
        return [j for j in self.varlink().call("ListJobs", {})["parameters"]["jobs"] if j["name"] == "part"]

    def saves(self):
        return [s["save"] for s in self.varlink().call("ListSaves", {})["parameters"]["saves"]]

    def hold(self, method, params):
        """method (SaveJob, RestoreJob) held at the barrier: its connection
        once the call said ready."""
        v = self.varlink()
        v.send(method, dict(params, barrier=True), more=True)
        r = v.reply()
        check(r == READY, "%s on %s: held at its barrier, ready (%r)" % (method, self.save, r))
        return v

    def pass_barrier(self, go, uid=-1):
        return self.varlink(uid).call("PassBarrier", {"job": "part", "go": go})


class Parts:
    def __init__(self, ctl, uid, top):
        self.ctl, self.uid, self.top = ctl, uid, top
        self.work = os.path.join(top, "work")
        self.port, self.out, self.stop = (os.path.join(self.work, n) for n in ("port", "out", "stop"))

    def as_user(self):
        if self.uid is not None:
            os.setgroups([])
            os.setgid(self.uid)
            os.setuid(self.uid)

    def start(self, n1, n2):
        for name, code in (("srv", SERVER), ("cli", CLIENT)):
            with open(os.path.join(self.top, name + ".py"), "w") as f:
                f.write(code)
        n1.start([sys.executable, os.path.join(self.top, "srv.py"), self.port, self.out])
        await_true("the server's port", lambda: read(self.port))
        n2.start([sys.executable, os.path.join(self.top, "cli.py"), self.port, self.stop])
        await_true("the stream", lambda: count(self.out) >= 100)
        return int(read(self.port))

    def flowing(self, what, beyond):
        n = await_true(what, lambda: count(self.out) < 0 or count(self.out) > beyond + 200)
        check(n > 0 and count(self.out) > 0, "%s: %s (from %d)" % (what, read(self.out), beyond))


def recorded(n):
    """Whether n's daemon records lock rules of its save (savelocks.h)."""
    try:
        with open(os.path.join(n.d.dir, "save-locks.json")) as f:
            return any(r["save"] == n.save for r in json.load(f)["records"])
    except FileNotFoundError:
        return False


def case_none_go(t, n1, n2, port):
    held = [n.hold("SaveJob", {"name": "part", "save": n.save}) for n in (n1, n2)]
    rules = lock_rules(port)
    check(len(rules) == 4, "both parts frozen under criu's iptables lock, save_parts_network_lock (%r)" % rules)
    other = NOBODY if t.uid is None else 0
    r = n1.pass_barrier(True, uid=other)
    check(r.get("error") == IFACE + "NoSuchJob", "another uid's PassBarrier of the job: NoSuchJob (%r)" % r)
    n = count(t.out)
    r = n1.pass_barrier(False)
    check(r == {"parameters": {}}, "PassBarrier go:false on the first node: {} (%r)" % r)
    held[1].close()
    r = held[0].reply()
    check(r.get("error") == IFACE + "CommandFailed" and not r.get("continues"),
          "the first node's save let go by none: CommandFailed (%r)" % r)
    held[0].close()
    t.flowing("both parts running on with their connection, no line lost", n)
    check(n1.running() and n2.running() and n1.job.poll() is None and n2.job.poll() is None,
          "both jobs run on, their job start waiting")
    check(not lock_rules(port), "no lock rule of theirs left")
    check(not set(n1.saves()) & {"s-n1", "s-n2"}, "no save made (%r)" % n1.saves())


def restore_none_go(n1, n2, port):
    """Both restored and held, let go by none (PassBarrier go:false, the
    call closed): neither runs, both saves and the lock rules intact."""
    held = [n.hold("RestoreJob", {"save": n.save}) for n in (n1, n2)]
    r = n1.pass_barrier(False)
    held[1].close()
    r1 = held[0].reply()
    held[0].close()
    check(r == {"parameters": {}} and r1.get("error") == IFACE + "CommandFailed" and
          r1["parameters"]["command"] == "restore", "a restore let go by none: CommandFailed (%r, %r)" % (r, r1))
    await_true("the other node's restore ended with its call", lambda: not n2.running())
    check(not n1.running() and {"s-n1", "s-n2"} <= set(n1.saves()) and len(lock_rules(port)) == 4,
          "neither part runs; both saves and the lock rules intact (%r)" % lock_rules(port))


def case_all_go(t, n1, n2, port):
    held = [n.hold("SaveJob", {"name": "part", "save": n.save}) for n in (n1, n2)]
    for n in (n1, n2):
        r = n.pass_barrier(True)
        check(r == {"parameters": {}}, "PassBarrier go on %s: {} (%r)" % (n.save, r))
    for n, v in zip((n1, n2), held):
        r = v.reply()
        check(r.get("parameters", {}).get("save", {}).get("save") == n.save and not r.get("continues"),
              "the save into %s done, on stable storage (%r)" % (n.save, r))
        v.close()
        _, err = n.job.communicate(timeout=LIMIT_S)
        check(n.job.returncode == 0, "its job start exits 0, the job saved (%r)" % err)
    n = count(t.out)
    check({"s-n1", "s-n2"} <= set(n1.saves()), "both saves listed (%r)" % n1.saves())
    check(len(lock_rules(port)) == 4, "their connection's lock rules kept for the restore (%r)" % lock_rules(port))
    check(recorded(n1) and recorded(n2), "each node records its save's lock rules")
    restore_none_go(n1, n2, port)
    held = [node.hold("RestoreJob", {"save": node.save}) for node in (n1, n2)]
    check(count(t.out) == n, "nothing flows while both restored parts wait at their barrier")
    r = n1.pass_barrier(True)
    time.sleep(1)  # the server runs alone: the client's side still locked
    r2 = n2.pass_barrier(True)
    check(r == r2 == {"parameters": {}}, "PassBarrier go on both, a second apart (%r, %r)" % (r, r2))
    for v in held:
        r = v.reply()
        check(r.get("continues") and r["parameters"]["job"]["event"] == "started", "the job started (%r)" % r)
    t.flowing("the stream going on from where it was saved, no line lost or repeated", n)
    check(not lock_rules(port), "the lock rules gone with the restore")
    await_true("each node's record dropped with the restore", lambda: not recorded(n1) and not recorded(n2))
    return held


def held_only_dump(n):
    """A part held at its barrier is its job's only dump, though the uid may
    run 3: another SaveJob of it, held or not, is SaveBusy (name) at once,
    and PassBarrier names one barrier."""
    v = n.varlink()
    v.send("SaveJob", {"name": "part", "save": "s-t2", "barrier": True}, more=True)
    r = v.reply()
    v.close()
    check(r.get("error") == IFACE + "SaveBusy" and r["parameters"] == {"save": "s-t2", "name": "part"},
          "another SaveJob held of a job held at its barrier: SaveBusy name (%r)" % r)
    p = subprocess.run([n.t.ctl, "job", "--socket=" + n.d.socket, "save", "part", "s-t3"], preexec_fn=n.t.as_user,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=LIMIT_S)
    check(p.returncode == 31 and "held at a barrier is its job's only dump, and one runs: job part" in p.stderr,
          "`job save` of a job held at its barrier: SaveBusy, exit 31 (%d, %r)" % (p.returncode, p.stderr))


def hostile_pass(n):
    """PassBarrier with a job name of odd bytes, too long or no string, a go
    that is no boolean, a key too many or missing: InvalidParameter, the
    part still held (its timeout follows)."""
    for params, bad in (({"job": "part\n", "go": True}, "job"), ({"job": "../part", "go": True}, "job"),
                        ({"job": "", "go": True}, "job"), ({"job": "p" * 300, "go": True}, "job"),
                        ({"job": 5, "go": True}, "job"), ({"job": "part", "go": "yes"}, "go"),
                        ({"job": "part", "go": True, "save": "s-t"}, "save"), ({"job": "part"}, "go")):
        r = n.varlink().call("PassBarrier", params)
        check(r.get("error") == "org.varlink.service.InvalidParameter" and r["parameters"].get("parameter") == bad,
              "PassBarrier %r: InvalidParameter %s (%r)" % (params, bad, r))


def case_timeout(t, ctl, sim, env):
    """barrier_timeout_ms: a held save nobody passes rolls back by itself."""
    config = {"nvml": sim, "saves_dir": os.path.join(t.top, "saves3"), "ctl_path": ctl, "socket_mode": "0666",
              "barrier_timeout_ms": TIMEOUT_MS, "max_save_operations_per_uid": 3,
              "save_parts_network_lock": "iptables"}
    with SimDaemon(os.environ["CUDACKPT_TEST_DAEMON"], sim, config, dict(env, CUDACKPT_RUN_DIR=os.path.join(
            t.top, "jobs3"))) as d:
        n = Node(t, d, "s-t")
        r = n.pass_barrier(False)
        check(r.get("error") == IFACE + "NoSuchJob", "PassBarrier of a job at no barrier: NoSuchJob (%r)" % r)
        n.start(["/bin/sleep", "300"])
        try:
            await_true("the job", n.running)
            r = n.varlink().call("SaveJob", {"name": "part", "save": "s-t", "barrier": True})
            check(r.get("error") == "org.varlink.service.InvalidParameter" and
                  r["parameters"].get("parameter") == "barrier",
                  "SaveJob barrier: true without more: InvalidParameter barrier (%r)" % r)
            v = n.hold("SaveJob", {"name": "part", "save": "s-t"})
            t0 = time.monotonic()
            held_only_dump(n)
            hostile_pass(n)
            r = v.reply(timeout=TIMEOUT_MS / 1000 + LIMIT_S)
            took = time.monotonic() - t0
            check(r.get("error") == IFACE + "CommandFailed" and TIMEOUT_MS / 1000 - 0.2 <= took < TIMEOUT_MS / 1000 + 15,
                  "nobody passes it: the save rolls back by itself after barrier_timeout_ms (%.1f s, %r)" % (took, r))
            check(n.running() and n.job.poll() is None and "s-t" not in n.saves(), "the job runs on, no save made")
            check("method=Barrier" in d.log() and "result=timeout" in d.log(), "the timeout is in the audit lines")
        finally:
            n.job.kill()
            n.job.communicate()


def case_stop(t, n1, n2, port):
    """Both restored parts saved held again, then each node's daemon stopped
    while its part waits at the barrier: SIGKILL (the second node) and
    SIGTERM (the first, out in seconds) each roll their part back, its
    command seeing the daemon's end close: no lock rule of it left, no save
    made."""
    held = [n.hold("SaveJob", {"name": "part", "save": n.save + "-stop"}) for n in (n1, n2)]
    check(len(lock_rules(port)) == 4, "both parts held, locked (%r)" % lock_rules(port))
    n2.d.kill()
    await_true("the killed daemon's part rolled back, its lock rules gone", lambda: len(lock_rules(port)) == 2)
    t0 = time.monotonic()
    rc = n1.d.terminate()
    took = time.monotonic() - t0
    check(rc == 0 and took < 10, "SIGTERM with a part held: the daemon exits 0 at once (%r, %.1f s)" % (rc, took))
    await_true("the stopped daemon's part rolled back, its lock rules gone", lambda: not lock_rules(port))
    saves = os.listdir(os.path.join(t.top, "saves", str(0 if t.uid is None else t.uid)))
    for v in held:
        v.close()
    check(not set(saves) & {"s-n1-stop", "s-n2-stop"}, "no save made (%r)" % saves)


def run(t, ctl, sim, env):
    """Two nodes: two daemons sharing one saves_dir, each with a run
    directory of its own, as /run is a node's."""
    config = {"nvml": sim, "saves_dir": os.path.join(t.top, "saves"), "ctl_path": ctl, "socket_mode": "0666"}
    with SimDaemon(os.environ["CUDACKPT_TEST_DAEMON"], sim, config, dict(
            env, CUDACKPT_RUN_DIR=os.path.join(t.top, "jobs0"))) as d:
        for method, params in (("SaveJob", {"name": "part", "save": "s"}), ("RestoreJob", {"save": "s"})):
            r = Varlink(d, t.uid).call(method, dict(params, barrier=True))
            check(r.get("error") == IFACE + "SavesDisabled" and "save_parts_network_lock is off"
                  in r.get("parameters", {}).get("reason", ""),
                  "by default (save_parts_network_lock off) a held %s is refused: SavesDisabled (%r)" % (method, r))
    config["save_parts_network_lock"] = "iptables"
    with contextlib.ExitStack() as stack:
        ds = [stack.enter_context(SimDaemon(os.environ["CUDACKPT_TEST_DAEMON"], sim, config, dict(
              env, CUDACKPT_RUN_DIR=os.path.join(t.top, "jobs%d" % k)))) for k in (1, 2)]
        run_parts(t, ctl, sim, env, Node(t, ds[0], "s-n1"), Node(t, ds[1], "s-n2"))


def run_parts(t, ctl, sim, env, n1, n2):
    port, held = None, []
    try:
        port = t.start(n1, n2)
        case_none_go(t, n1, n2, port)
        held = case_all_go(t, n1, n2, port)
        case_timeout(t, ctl, sim, env)
        case_stop(t, n1, n2, port)
    finally:
        open(t.stop, "w").close()
        for v in held:
            v.close()
        for n in (n1, n2):
            if n.job and n.job.poll() is None:
                n.job.kill()
                n.job.communicate()
        if port:
            drop_lock_rules(port)


def prepare(cls, prefix):
    """The set-up of a test of held parts (this one, test_locks.py): root
    and a criu that cuts connections, or an exit status (77: skipped); else
    (t, sim, criu): t = cls(None, the saves' owner, a top directory), its
    work directory open to every uid, cudackptctl (t.ctl) and the simulator
    copied where the owner reaches them."""
    if os.geteuid() != 0:
        print("SKIP: root only (the daemon's jobs run as root's cudackptctl)")
        return 77
    criu = cut_criu()
    if not criu:
        return 77
    top = tempfile.mkdtemp(prefix=prefix)
    os.chmod(top, 0o755)
    t = cls(None, saves_owner(), top)
    os.mkdir(t.work)
    os.chmod(t.work, 0o1777)
    bins = os.path.join(top, "bin")
    os.mkdir(bins)
    t.ctl, sim = (shutil.copy(os.environ[v], bins) for v in ("CUDACKPT_TEST_CTL", "CUDACKPT_TEST_SIM"))
    for f in os.listdir(bins):
        os.chmod(os.path.join(bins, f), 0o755)
    return t, sim, criu


def main():
    ready = prepare(Parts, "cudackpt-parts.")
    if isinstance(ready, int):
        return ready
    t, sim, criu = ready
    top = t.top
    env = {"CUDACKPT_CRIU": criu}
    try:
        run(t, os.environ["CUDACKPT_TEST_CTL"], sim, env)
    except (AssertionError, subprocess.TimeoutExpired, OSError) as e:
        print("FAIL: %s" % e)
        return 1
    finally:
        time.sleep(0.5)
        shutil.rmtree(top, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
