#!/usr/bin/python3
"""test_cut.py: integration.criu_cut, the barrier across a job's parts
(`cudackptctl dump|restore --barrier-fd`, client/ctl/job/crossbarrier.h)
with real CRIU and a real TCP connection between two parts that separate
commands dump and restore, as a job's parts on two nodes are:
  - a client job streaming numbered lines to a server job (each a
    `cudackptctl run` job of its own, in its own pid namespace), the server
    checking that no line is lost or repeated;
  - both dumped at once (--tcp-established, criu's iptables network lock;
    the client's barrier descriptor non-blocking, as its giver may leave it),
    each waiting at the barrier with its images on disk: when the barrier
    is let go by none (the coordinator's ends closed), both dumps fail,
    both jobs run on with their connection (no line lost), no lock rule
    of theirs is left, and neither the server's manifest nor the client's
    archive (the client dumped with --archive) is left claiming a dump;
  - dumped again, both commands sent SIGTERM at the barrier: both fail,
    their manifests taken back, both jobs run on with their connection;
  - dumped again and let go (a few seconds after both got there): both
    ended, their connection's lock rules kept, criu's times (--json)
    without that wait; restored and let go by none: both fail, the rules
    kept, the images intact; restored again, each waiting at the barrier,
    and let go one after the other (the server a second before the client;
    criu's times without the wait): the stream goes on from where it was
    dumped, no line lost or repeated, and the rules are gone.
Skips (77) without root, a usable criu or iptables.
Exit 0 passed, 1 failed, 77 skipped."""
import json
import os
import shutil
import socket
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from savejobs import await_true, check  # noqa: E402
from simdaemon import SimDaemon  # noqa: E402
from tcpstream import CLIENT, SERVER, count, cut_criu, drop_lock_rules, lock_rules, read  # noqa: E402

LIMIT_S = 20
WAIT_S = 3  # at the barrier before the go, once for the dumps, once for the restores
CRIU_TCP = ["--", "--tcp-established", "--network-lock", "iptables"]


class Part:
    """One command (dump or restore) of one part, its barrier's end ours."""

    def __init__(self, t, args, nonblocking=False):
        self.ours, theirs = socket.socketpair()
        # What the command is given may be non-blocking (a file status
        # flag its giver set): it still waits for the go.
        theirs.setblocking(not nonblocking)
        self.p = subprocess.Popen([t.ctl] + args[:1] + ["--socket=" + t.d.socket, "--barrier-fd=%d" % theirs.fileno()]
                                  + args[1:], pass_fds=(theirs.fileno(),), env=t.env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        theirs.close()
        self.ours.settimeout(LIMIT_S)

    def ready(self):
        return self.ours.recv(64) == b'{"barrier":"ready"}\n'

    def end(self, go):
        if go:
            self.ours.sendall(b"g")
        self.ours.close()
        self.out, err = self.p.communicate(timeout=LIMIT_S)
        return self.p.returncode, err


class Cut:
    def __init__(self, ctl, d, top, env):
        self.ctl, self.d, self.top, self.env = ctl, d, top, env
        self.port, self.out, self.stop = (os.path.join(top, n) for n in ("port", "out", "stop"))

    def start(self):
        for name, code in (("srv", SERVER), ("cli", CLIENT)):
            with open(os.path.join(self.top, name + ".py"), "w") as f:
                f.write(code)
        self.jobs = [subprocess.Popen([self.ctl, "run", "--name=cut-srv", "--", sys.executable,
                                       os.path.join(self.top, "srv.py"), self.port, self.out], env=self.env)]
        await_true("the server's port", lambda: read(self.port))
        self.jobs.append(subprocess.Popen([self.ctl, "run", "--name=cut-cli", "--", sys.executable,
                                           os.path.join(self.top, "cli.py"), self.port, self.stop], env=self.env))
        await_true("the stream", lambda: count(self.out) >= 100)

    def flowing(self, what, beyond):
        n = await_true(what, lambda: count(self.out) < 0 or count(self.out) > beyond + 200)
        check(n > 0 and count(self.out) > 0, "%s: %s (from %d)" % (what, read(self.out), beyond))

    def dump(self, tag, archive=False, json=False):
        """The client's part into an archive with archive, else a directory;
        the client's barrier descriptor non-blocking."""
        return [Part(self, ["dump", "--run=cut-" + n, ("--archive=%s.tar.zst" if archive and n == "cli" else
                                                       "--images=%s") % os.path.join(self.top, tag + n)]
                     + (["--json"] if json else []) + CRIU_TCP, nonblocking=n == "cli")
                for n in ("srv", "cli")]


def case_aborted(t):
    parts = t.dump("a-", archive=True)
    check(all(p.ready() for p in parts), "both dumps wait at the barrier, images (and archive) on disk")
    n = count(t.out)
    ends = [p.end(go=False) for p in parts]
    check(all(rc == 1 and "other parts did not all get there" in err for rc, err in ends),
          "the barrier let go by none: both dumps fail (%r)" % [e[1][-300:] for e in ends])
    check(not os.path.exists(os.path.join(t.top, "a-srv", "manifest.json"))
          and not os.path.exists(os.path.join(t.top, "a-cli.tar.zst")),
          "... and take back what claims a good dump: the manifest, the archive (%r)" % os.listdir(t.top))
    t.flowing("both jobs running on with their connection, no line lost", n)
    port = int(read(t.port))
    check(not lock_rules(port), "no lock rule of theirs left")
    return port


def case_signalled(t):
    """SIGTERM to both commands waiting at the barrier (a scheduler's stop):
    none waits on for a SIGKILL that would leave its manifest behind."""
    parts = t.dump("s-")
    check(all(p.ready() for p in parts), "dumped, both at the barrier")
    n = count(t.out)
    for p in parts:
        p.p.send_signal(signal.SIGTERM)
    ends = [p.p.communicate(timeout=LIMIT_S) + (p.p.returncode,) for p in parts]
    for p in parts:
        p.ours.close()
    check(all(rc == 1 and "got signal 15 at the barrier" in err for _, err, rc in ends),
          "SIGTERM at the barrier: both dumps fail (%r)" % [e[1][-300:] for e in ends])
    check(not any(os.path.exists(os.path.join(t.top, "s-" + n, "manifest.json")) for n in ("srv", "cli")),
          "... their manifests taken back")
    t.flowing("both jobs running on with their connection after the SIGTERM", n)


def criu_times(parts, verb):
    """criu's time (--json), the whole and each tree's, leaves out what the
    command did while every criu waited: step 3, the other parts' wait."""
    times = [json.loads(p.out) for p in parts]
    check(all(o["criu_ms"] < WAIT_S * 1000 and all(tr["criu_ms"] < WAIT_S * 1000 for tr in o["trees"])
              and o["duration_ms"] > WAIT_S * 1000 for o in times),
          "%s: criu's times leave out the %d s at the barrier (%r)" % (verb, WAIT_S, times))


def case_moved(t, port):
    parts = t.dump("m-", json=True)
    check(all(p.ready() for p in parts), "dumped again, both at the barrier")
    time.sleep(WAIT_S)
    ends = [p.end(go=True) for p in parts]
    check(all(rc == 0 for rc, _ in ends), "let go: both dumps end their part (%r)" % [e[1][-300:] for e in ends])
    criu_times(parts, "dump")
    for j in t.jobs:
        j.wait(timeout=LIMIT_S)
    n = count(t.out)
    check(len(lock_rules(port)) == 4, "their connection's lock rules kept for the restore (%r)" % lock_rules(port))

    def restore():
        return [Part(t, ["restore", "--images=" + os.path.join(t.top, "m-" + n), "--json", "--",
                         "--tcp-established"]) for n in ("srv", "cli")]
    parts = restore()
    check(all(p.ready() for p in parts), "restored, both at the barrier")
    ends = [p.end(go=False) for p in parts]
    check(all(rc == 1 for rc, _ in ends) and len(lock_rules(port)) == 4 and count(t.out) == n,
          "a restore let go by none: both fail, nothing ran, the lock rules kept (%r, %r)"
          % ([e[1][-300:] for e in ends], lock_rules(port)))
    parts = restore()
    check(all(p.ready() for p in parts), "both restored, waiting at the barrier")
    time.sleep(WAIT_S)
    rc0, err0 = parts[0].end(go=True)
    time.sleep(1)  # the server runs alone: the client's side still locked
    rc1, err1 = parts[1].end(go=True)
    check(rc0 == 0 and rc1 == 0, "both restores let go and done (%r, %r)" % (err0[-300:], err1[-300:]))
    criu_times(parts, "restore")
    t.flowing("the stream going on from where it was dumped, no line lost or repeated", n)
    check(not lock_rules(port), "the lock rules gone with the restore")


def main():
    if os.geteuid() != 0:
        print("SKIP: root only")
        return 77
    criu = cut_criu()
    if not criu:
        return 77
    top = tempfile.mkdtemp(prefix="cudackpt-cut.")
    env = dict(os.environ, CUDACKPT_CRIU=criu, CUDACKPT_RUN_DIR=os.path.join(top, "runs"))
    port = None
    try:
        with SimDaemon(os.environ["CUDACKPT_TEST_DAEMON"], os.environ["CUDACKPT_TEST_SIM"],
                       {"nvml": os.environ["CUDACKPT_TEST_SIM"]}, env) as d:
            t = Cut(os.environ["CUDACKPT_TEST_CTL"], d, top, env)
            t.start()
            port = case_aborted(t)
            case_signalled(t)
            case_moved(t, port)
    except (AssertionError, subprocess.TimeoutExpired, OSError) as e:
        print("FAIL: %s" % e)
        return 1
    finally:
        open(os.path.join(top, "stop"), "w").close()
        if port:
            drop_lock_rules(port)
        time.sleep(0.5)
        shutil.rmtree(top, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
