#!/usr/bin/env python3
"""group_tests.py: cudackptd's group methods and ListProcesses proven on a GPU.

Started by run-group-tests.sh (which checks for a GPU, root and the
programs first); standard library only, so that it runs on a GPU machine
whose python3 has no extra modules.  It starts its own cudackptd on a socket
in a fresh work directory and speaks Varlink to it directly (JSON + NUL over
AF_UNIX), with cudackpt-gpu-target processes that keep verifying a patterned
GPU buffer (their status files say whether the data survived).

Scenarios (one line each: PASS/FAIL/SKIP, time, details):
  group-pids      4 x GROUP_MIB: SuspendGroup {"pids"} with "more": true (one
                  progress reply per member per step, lock before any
                  checkpoint), all checkpointed and frozen, ResumeGroup, all
                  running with data intact; the same calls again converge at
                  once (nothing to do)
  group-managed   3 targets, one with managed memory: SuspendGroup fails with
                  GroupFailed (phase checkpoint, that member, NotSupported,
                  rolled_back true), every member back to running, data intact
  group-cgroup    a cgroup v2 made here (cgroup2 mounted first when it is not
                  mounted anywhere) holding 3 targets and one plain process:
                  SuspendGroup/ResumeGroup {"cgroup"}, the plain process
                  skipped "not-cuda", ListProcesses {"cgroup"} in between
  group-tree      a target with --children=3: SuspendGroup/ResumeGroup
                  {"tree": parent}, all four members, data intact
  group-errors    refusals that change nothing: an empty pids list and a
                  pid named twice (InvalidParameter), a plain process in a
                  pids group (GroupFailed, phase state, NotCudaProcess) and a
                  SIGSTOPped member (phase state, ProcessStopped)
  list-processes  ListProcesses: every target listed with uid, command,
                  cgroup and state; a stopped one with "stop": "signal" and no
                  state; a plain process not listed
At the end a markdown table of the scenarios and their details.

Sizes (environment, MiB): CUDACKPT_GROUP_MIB=1024 (group-pids),
CUDACKPT_GROUP_TEST_MIB=512 (group-managed, -cgroup, -tree),
CUDACKPT_GROUP_MANAGED_MIB=256, CUDACKPT_GROUP_SMALL_MIB=64 (group-errors,
list-processes); CUDACKPT_GROUP_STEP_TIMEOUT=300 (seconds per call),
CUDACKPT_GROUP_KEEP=1 keeps the work directory (kept anyway on failure),
CUDACKPT_GROUP_DRIVER=libcuda.so.1.

Simulator (--sim=PATH/libcudackpt-sim.so, --target=cudackpt-gpu-standin):
the daemon loads the simulator, targets get CUDACKPT_SIM=1,
CUDACKPT_SIM_MEM_MIB, LD_PRELOAD of the simulator (so that they map "the
driver") and CUDACKPT_SIM_MANAGED=1 for --managed; the stand-in does not
freeze while checkpointed, so the frozen checks are left out.

usage: group_tests.py --daemon=PATH --target=PATH [--sim=PATH] [SCENARIO...]
Exit status: 0 all passed, 1 a scenario failed, 2 usage, 77 all skipped.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ALL = ["group-pids", "group-managed", "group-cgroup", "group-tree", "group-errors", "list-processes"]
IFACE = "io.cudackpt.Process."
INTERVAL_MS = 100


def env_int(name, default):
    v = os.environ.get(name, "")
    if not v:
        return default
    if not v.isdigit() or int(v) <= 0:
        sys.exit("group_tests.py: %s must be a positive integer" % name)
    return int(v)


GROUP_MIB = env_int("CUDACKPT_GROUP_MIB", 1024)
TEST_MIB = env_int("CUDACKPT_GROUP_TEST_MIB", 512)
MANAGED_MIB = env_int("CUDACKPT_GROUP_MANAGED_MIB", 256)
SMALL_MIB = env_int("CUDACKPT_GROUP_SMALL_MIB", 64)
STEP_TIMEOUT = env_int("CUDACKPT_GROUP_STEP_TIMEOUT", 300)
KEEP = os.environ.get("CUDACKPT_GROUP_KEEP", "") == "1"
DRIVER = os.environ.get("CUDACKPT_GROUP_DRIVER", "libcuda.so.1")


class Fail(Exception):
    pass


class Skip(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


# --------------------------------------------------------------------------
# Varlink
# --------------------------------------------------------------------------
class Varlink:
    """One connection; one call at a time."""

    def __init__(self, path, timeout=STEP_TIMEOUT):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.buf = b""

    def close(self):
        self.s.close()

    def _read(self):
        while b"\0" not in self.buf:
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise Fail("the daemon closed the connection mid-reply")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg.decode())

    def call(self, method, params=None, more=False):
        """Returns (final reply, [continues replies]).  The final reply is
        the whole Varlink message: {"parameters": ...} or {"error": ...}."""
        req = {"method": method if "." in method else IFACE + method, "parameters": params or {}}
        if more:
            req["more"] = True
        self.s.sendall(json.dumps(req).encode() + b"\0")
        progress = []
        while True:
            r = self._read()
            if r.get("continues"):
                progress.append(r)
                continue
            return r, progress


def error_of(r):
    return r.get("error", "")


def short(name):
    return name.rsplit(".", 1)[-1] if name else "(success)"


def sim_preload(sim):
    """LD_PRELOAD for a target that maps the simulator.  A sanitizer build's
    simulator needs its sanitizer runtime first in the process's libraries
    (else the runtime aborts the target at start), so that runtime, as the
    dynamic linker resolves it for the simulator, is preloaded before it."""
    try:
        out = subprocess.run(["ldd", sim], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "=>" and parts[2].startswith("/") and \
                parts[0].startswith(("libasan.so", "libtsan.so")):
            return parts[2] + ":" + sim
    return sim


# --------------------------------------------------------------------------
# The run: daemon, targets, helpers
# --------------------------------------------------------------------------
class Run:
    def __init__(self, daemon, target, sim):
        self.daemon, self.target, self.sim = daemon, target, sim
        self.preload = sim_preload(sim) if sim else ""
        self.work = tempfile.mkdtemp(prefix="cudackpt-group-tests.")
        os.chmod(self.work, 0o755)
        self.sock = os.path.join(self.work, "cudackptd.sock")
        self.dproc = None
        self.dlog = None

    # -- daemon --
    def start_daemon(self):
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        self.dlog = open(os.path.join(self.work, "daemon.log"), "ab")
        driver = self.sim or DRIVER
        # CUDACKPT_TEST_DAEMON_WRAPPER: words put before the daemon's
        # command, as in suite-lib.sh.
        wrap = os.environ.get("CUDACKPT_TEST_DAEMON_WRAPPER", "").split()
        self.dproc = subprocess.Popen(
            wrap + [self.daemon, "--socket=" + self.sock, "--driver=" + driver, "--log-level=debug"],
            stdout=self.dlog, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.dproc.poll() is not None:
                break
            try:
                c = Varlink(self.sock, 5)
                r, _ = c.call("org.varlink.service.GetInfo")
                c.close()
                if "parameters" in r:
                    return r["parameters"]
            except OSError:
                pass
            time.sleep(0.1)
        raise Fail("cudackptd did not come up; log:\n" + self.daemon_tail(30))

    def daemon_alive(self):
        return self.dproc is not None and self.dproc.poll() is None

    def stop_daemon(self):
        if not self.daemon_alive():
            return
        self.dproc.terminate()
        try:
            self.dproc.wait(30)
        except subprocess.TimeoutExpired:
            self.dproc.kill()
            self.dproc.wait()

    def daemon_tail(self, n):
        try:
            with open(os.path.join(self.work, "daemon.log"), "rb") as f:
                return b"".join(f.readlines()[-n:]).decode(errors="replace")
        except OSError:
            return "(no log)"

    def call(self, method, params=None, more=False):
        c = Varlink(self.sock)
        try:
            return c.call(method, params, more)
        finally:
            c.close()


class Scenario:
    """Targets and notes of one scenario; everything it started dies with it."""

    def __init__(self, run, name):
        self.run, self.name = run, name
        self.dir = os.path.join(run.work, name)
        os.makedirs(self.dir, exist_ok=True)
        self.procs = []  # Popen objects (each the leader of its own session)
        self.status = {}  # pid -> status file
        self.notes = []
        self.cleanups = []

    def note(self, s):
        self.notes.append(s)

    def cleanup(self):
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                pass
        reap_orphans({self.run.dproc.pid} if self.run.dproc else set())
        for fn in reversed(self.cleanups):
            try:
                fn()
            except Exception as e:  # cleanup never hides the verdict
                self.note("cleanup: %s" % e)

    # -- processes --
    def start_target(self, tag, mib, *extra):
        status = os.path.join(self.dir, tag + ".status")
        env = dict(os.environ)
        if self.run.sim:
            env.update(CUDACKPT_SIM="1", CUDACKPT_SIM_MEM_MIB=str(mib), LD_PRELOAD=self.run.preload)
            if "--managed" in extra:
                env["CUDACKPT_SIM_MANAGED"] = "1"
        log = open(os.path.join(self.dir, tag + ".log"), "wb")
        p = subprocess.Popen(
            [self.run.target, "--mib=%d" % mib, "--interval-ms=%d" % INTERVAL_MS, "--status=" + status,
             "--quiet"] + list(extra),
            env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        self.procs.append(p)
        self.status[p.pid] = status
        return p.pid

    def start_plain(self, tag, env_add=None):
        """A process that never initialises CUDA (sleep)."""
        env = dict(os.environ)
        env.update(env_add or {})
        p = subprocess.Popen(["sleep", "100000"], env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(p)
        return p.pid

    def status_line(self, pid):
        try:
            with open(self.status[pid]) as f:
                line = f.read().strip()
        except OSError:
            return {}
        return dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)

    def iter_of(self, pid):
        return int(self.status_line(pid).get("iter", "0"))

    def wait_verified(self, pid, min_iter, limit=120):
        deadline = time.time() + limit
        while True:
            s = self.status_line(pid)
            if s:
                check(s.get("error") == "none", "target %d: CUDA error: %s" % (pid, s))
                check(s.get("total_mismatches") == "0", "target %d: data corrupted: %s" % (pid, s))
                if int(s.get("iter", "0")) >= min_iter:
                    return
            check(os.path.exists("/proc/%d" % pid) and proc_state(pid) != "Z",
                  "target %d exited (status %s)" % (pid, s))
            check(time.time() < deadline, "target %d: no verification %d within %ds (%s)" % (pid, min_iter, limit, s))
            time.sleep(0.05)

    def wait_running_again(self, pids):
        base = {p: self.iter_of(p) for p in pids}
        for p in pids:
            self.wait_verified(p, base[p] + 2)

    def expect_frozen(self, pids):
        """Real targets only: a checkpointed one completes no verification."""
        if self.run.sim:
            return
        a = {p: self.iter_of(p) for p in pids}
        time.sleep(INTERVAL_MS * 5 / 1000.0)
        for p in pids:
            b = self.iter_of(p)
            check(b <= a[p] + 1, "target %d kept verifying while checkpointed (iter %d -> %d)" % (p, a[p], b))

    # -- daemon calls --
    def state(self, pid):
        r, _ = self.run.call("GetState", {"pid": pid})
        check("parameters" in r, "GetState %d: %s" % (pid, r))
        return r["parameters"].get("state")

    def expect_states(self, pids, want):
        for p in pids:
            st = self.state(p)
            check(st == want, "GetState %d: %s (want %s)" % (p, st, want))

    def group(self, method, selector, want, more=False, **params):
        """A group call that must succeed with every member in state want.
        Returns (parameters, progress replies, client wall seconds)."""
        params["selector"] = selector
        t0 = time.time()
        r, prog = self.run.call(method, params, more)
        wall = time.time() - t0
        check("error" not in r, "%s %s: %s %s" % (method, json.dumps(selector), r.get("error"),
                                                  json.dumps(r.get("parameters"))))
        p = r.get("parameters", {})
        for m in p.get("members") or []:
            check(m.get("state") == want, "%s: member %s (want state %s)" % (method, m, want))
        return p, prog, wall


def become_subreaper():
    """Children of targets (--children) that outlive their parent come to
    this process, which reaps them (reap_orphans), instead of to a PID 1
    that may not."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def own_children(exclude):
    me, kids = os.getpid(), []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) in exclude:
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        if int(st[st.rindex(")") + 2:].split()[1]) == me:
            kids.append(int(d))
    return kids


def reap_orphans(exclude):
    """Kills and reaps what came to this subreaper (not the daemon)."""
    for pid in own_children(exclude):
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass


def proc_state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
        return s[s.rindex(")") + 2]
    except (OSError, ValueError):
        return ""


def member_pids(p):
    return sorted(m["pid"] for m in p.get("members") or [])


def wait_stopped(pid, limit=10):
    deadline = time.time() + limit
    while proc_state(pid) not in ("T", "t"):
        check(time.time() < deadline, "pid %d did not stop" % pid)
        time.sleep(0.01)


# --------------------------------------------------------------------------
# Scenarios
# --------------------------------------------------------------------------
def scenario_group_pids(sc):
    pids = [sc.start_target("t%d" % i, GROUP_MIB) for i in range(4)]
    for p in pids:
        sc.wait_verified(p, 1)
    sel = {"pids": [{"pid": p} for p in pids]}
    p, prog, wall = sc.group("SuspendGroup", sel, "checkpointed", more=True)
    check(member_pids(p) == sorted(pids), "SuspendGroup members %s (want %s)" % (member_pids(p), sorted(pids)))
    check(not p.get("skipped"), "SuspendGroup skipped %s" % p.get("skipped"))
    # Progress: one per member per step, every lock before any checkpoint.
    phases = [x["parameters"]["progress"]["phase"] for x in prog]
    check(phases == ["lock"] * 4 + ["checkpoint"] * 4,
          "progress phases %s (want 4 x lock then 4 x checkpoint)" % phases)
    done = [x["parameters"]["progress"]["done"] for x in prog]
    totals = {x["parameters"]["progress"]["total"] for x in prog}
    check(done == [1, 2, 3, 4, 1, 2, 3, 4] and totals == {4}, "progress done %s total %s" % (done, totals))
    sc.note("SuspendGroup 4 x %d MiB %.2f s (daemon %.1f ms; %d progress replies)"
            % (GROUP_MIB, wall, p.get("duration_ms", -1), len(prog)))
    sc.expect_states(pids, "checkpointed")
    sc.expect_frozen(pids)
    p, _, wall = sc.group("ResumeGroup", sel, "running")
    check(member_pids(p) == sorted(pids), "ResumeGroup members %s" % member_pids(p))
    sc.note("ResumeGroup %.2f s (daemon %.1f ms)" % (wall, p.get("duration_ms", -1)))
    sc.expect_states(pids, "running")
    sc.wait_running_again(pids)
    # Convergence: nothing left to do, both answer at once.
    _, _, w1 = sc.group("ResumeGroup", sel, "running")
    sc.note("ResumeGroup again (all running) %.1f ms" % (w1 * 1e3))
    sc.note("data intact in all 4")


def scenario_group_managed(sc):
    a = sc.start_target("plain0", TEST_MIB)
    m = sc.start_target("managed", MANAGED_MIB, "--managed")
    b = sc.start_target("plain1", TEST_MIB)
    pids = [a, m, b]
    for p in pids:
        sc.wait_verified(p, 1)
    check(sc.status_line(m).get("managed") == "1", "target %d does not report managed=1" % m)
    t0 = time.time()
    r, _ = sc.run.call("SuspendGroup", {"selector": {"pids": [{"pid": p} for p in pids]}})
    wall = time.time() - t0
    check(short(error_of(r)) == "GroupFailed", "SuspendGroup: %s (want GroupFailed)" % r)
    e = r["parameters"]
    sc.note("GroupFailed after %.2f s: phase %s pid %s %s rolled_back %s"
            % (wall, e.get("phase"), e.get("pid"), short(e.get("error")), e.get("rolled_back")))
    check(e.get("method") == "SuspendGroup", "method %s" % e.get("method"))
    check(e.get("phase") == "checkpoint", "phase %s (want checkpoint)" % e.get("phase"))
    check(e.get("pid") == m, "pid %s (want the managed target %d)" % (e.get("pid"), m))
    check(short(e.get("error")) == "NotSupported", "error %s (want NotSupported)" % e.get("error"))
    check(e.get("rolled_back") is True, "rolled_back %s (want true)" % e.get("rolled_back"))
    members = {x["pid"]: x for x in e.get("members") or []}
    check(sorted(members) == sorted(pids), "members %s" % sorted(members))
    for p, x in members.items():
        check(x.get("state") == "running", "member %d: %s (want running after the rollback)" % (p, x))
        check(not x.get("rollback_error"), "member %d: rollback_error %s" % (p, x.get("rollback_error")))
    check(short(members[m].get("error")) == "NotSupported", "managed member: %s" % members[m])
    sc.expect_states(pids, "running")
    sc.wait_running_again(pids)
    sc.note("all 3 running again, data intact")


def cgroup2_mount(sc):
    """A cgroup2 mount point: an existing one, else one mounted here."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, _, post = line.partition(" - ")
            if post.split()[0] == "cgroup2":
                return pre.split()[4]
    mnt = tempfile.mkdtemp(prefix="cgroup2.", dir=sc.run.work)
    r = subprocess.run(["mount", "-t", "cgroup2", "none", mnt], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    if r.returncode != 0:
        raise Skip("no cgroup2 mounted and mount -t cgroup2 failed: %s" % r.stdout.decode().strip())

    def umount():
        subprocess.run(["umount", mnt])
        os.rmdir(mnt)

    sc.cleanups.append(umount)
    sc.note("mounted cgroup2 on %s" % mnt)
    return mnt


def cgroup_of(pid):
    with open("/proc/%d/cgroup" % pid) as f:
        for line in f:
            if line.startswith("0::"):
                return line[3:].strip()
    return None


def scenario_group_cgroup(sc):
    if os.geteuid() != 0:
        raise Skip("needs root (cgroups)")
    sc.note("/sys/fs/cgroup is %s" % subprocess.run(["stat", "-fc", "%T", "/sys/fs/cgroup"],
                                                   stdout=subprocess.PIPE).stdout.decode().strip())
    mnt = cgroup2_mount(sc)
    cg = os.path.join(mnt, "cudackpt-group-test-%d" % os.getpid())
    os.mkdir(cg)

    def rm_cg():
        deadline = time.time() + 10
        while True:
            try:
                os.rmdir(cg)
                return
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)

    sc.cleanups.append(rm_cg)
    pids = [sc.start_target("c%d" % i, TEST_MIB) for i in range(3)]
    plain = sc.start_plain("plain")
    # On the simulator also one that maps the driver but never initialises it.
    mapped = sc.start_plain("mapped", {"LD_PRELOAD": sc.run.preload}) if sc.run.sim else None
    for p in pids:
        sc.wait_verified(p, 1)
    others = [plain] + ([mapped] if mapped else [])
    for p in pids + others:
        with open(os.path.join(cg, "cgroup.procs"), "w") as f:
            f.write(str(p))
    path = cgroup_of(pids[0])
    check(path and path.endswith("/cudackpt-group-test-%d" % os.getpid()), "target's cgroup is %s" % path)
    for p in pids + others:
        check(cgroup_of(p) == path, "pid %d is in %s, not %s" % (p, cgroup_of(p), path))
    sc.note("cgroup %s: 3 targets, %d plain" % (path, len(others)))
    sel = {"cgroup": path}
    p, _, wall = sc.group("SuspendGroup", sel, "checkpointed")
    check(member_pids(p) == sorted(pids), "members %s (want %s)" % (member_pids(p), sorted(pids)))
    skipped = {x["pid"]: x.get("reason") for x in p.get("skipped") or []}
    check(skipped == {o: "not-cuda" for o in others}, "skipped %s (want %s not-cuda)" % (skipped, others))
    sc.note("SuspendGroup %.2f s, skipped %s" % (wall, sorted(skipped)))
    sc.expect_states(pids, "checkpointed")
    sc.expect_frozen(pids)
    r, _ = sc.run.call("ListProcesses", {"selector": sel})
    check("error" not in r, "ListProcesses cgroup: %s" % r)
    listed = {x["pid"]: x for x in r["parameters"]["processes"]}
    check(sorted(listed) == sorted(pids), "ListProcesses cgroup: %s (want %s)" % (sorted(listed), sorted(pids)))
    for x in listed.values():
        check(x.get("state") == "checkpointed" and x.get("cgroup") == path, "ListProcesses entry %s" % x)
    p, _, wall = sc.group("ResumeGroup", sel, "running")
    check(member_pids(p) == sorted(pids), "ResumeGroup members %s" % member_pids(p))
    sc.note("ResumeGroup %.2f s" % wall)
    sc.expect_states(pids, "running")
    sc.wait_running_again(pids)
    sc.note("data intact in all 3")


def children_of(pid):
    kids = []
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
            kids += [int(x) for x in f.read().split()]
    return sorted(kids)


def scenario_group_tree(sc):
    root = sc.start_target("tree", TEST_MIB, "--children=3")
    deadline = time.time() + 30
    while len(children_of(root)) < 3:
        check(time.time() < deadline, "target %d did not fork 3 children" % root)
        time.sleep(0.05)
    kids = children_of(root)
    allp = [root] + kids
    files = [sc.status[root]] + [sc.status[root] + ".child%d" % k for k in (1, 2, 3)]
    deadline = time.time() + 120
    while not all(os.path.exists(f) for f in files):
        check(time.time() < deadline, "not every tree member wrote its status file")
        time.sleep(0.05)
    # Each status file names the pid that writes it.
    for fpath in files:
        with open(fpath) as f:
            pid = int(dict(kv.split("=", 1) for kv in f.read().split()[1:] if "=" in kv)["pid"])
        check(pid in allp, "%s written by pid %d, not a child of %d" % (fpath, pid, root))
        sc.status[pid] = fpath
    for p in allp:
        sc.wait_verified(p, 1)
    sel = {"tree": root}
    p, _, wall = sc.group("SuspendGroup", sel, "checkpointed")
    check(member_pids(p) == sorted(allp), "members %s (want %s)" % (member_pids(p), sorted(allp)))
    sc.note("tree of 4 x %d MiB: SuspendGroup %.2f s" % (TEST_MIB, wall))
    sc.expect_states(allp, "checkpointed")
    sc.expect_frozen(allp)
    p, _, wall = sc.group("ResumeGroup", sel, "running")
    check(member_pids(p) == sorted(allp), "ResumeGroup members %s" % member_pids(p))
    sc.note("ResumeGroup %.2f s" % wall)
    sc.expect_states(allp, "running")
    sc.wait_running_again(allp)
    sc.note("data intact in all 4")


def scenario_group_errors(sc):
    t = sc.start_target("e0", SMALL_MIB)
    u = sc.start_target("e1", SMALL_MIB)
    plain = sc.start_plain("plain")
    sc.wait_verified(t, 1)
    sc.wait_verified(u, 1)
    for params, what in (({"selector": {"pids": []}}, "empty pids"),
                         ({"selector": {"pids": [{"pid": t}, {"pid": t}]}}, "a pid twice"),
                         ({"selector": {"pids": [{"pid": t}], "tree": t}}, "two selector fields")):
        r, _ = sc.run.call("SuspendGroup", params)
        check(error_of(r) == "org.varlink.service.InvalidParameter", "%s: %s (want InvalidParameter)" % (what, r))
    sc.note("InvalidParameter x3")
    r, _ = sc.run.call("SuspendGroup", {"selector": {"pids": [{"pid": t}, {"pid": plain}]}})
    e = r.get("parameters", {})
    check(short(error_of(r)) == "GroupFailed" and e.get("phase") == "state" and e.get("pid") == plain
          and short(e.get("error")) == "NotCudaProcess", "plain member: %s" % r)
    sc.expect_states([t], "running")
    sc.note("plain member: phase state NotCudaProcess")
    os.kill(u, signal.SIGSTOP)
    wait_stopped(u)
    r, _ = sc.run.call("SuspendGroup", {"selector": {"pids": [{"pid": t}, {"pid": u}]}})
    os.kill(u, signal.SIGCONT)
    e = r.get("parameters", {})
    check(short(error_of(r)) == "GroupFailed" and e.get("phase") == "state" and e.get("pid") == u
          and short(e.get("error")) == "ProcessStopped", "stopped member: %s" % r)
    sc.note("stopped member: phase state ProcessStopped")
    sc.expect_states([t, u], "running")
    sc.wait_running_again([t, u])


def scenario_list_processes(sc):
    a = sc.start_target("l0", SMALL_MIB)
    b = sc.start_target("l1", SMALL_MIB)
    plain = sc.start_plain("plain")
    sc.wait_verified(a, 1)
    sc.wait_verified(b, 1)
    t0 = time.time()
    r, _ = sc.run.call("ListProcesses")
    ms = (time.time() - t0) * 1e3
    check("error" not in r, "ListProcesses: %s" % r)
    procs = r["parameters"]["processes"]
    listed = {x["pid"]: x for x in procs}
    check(a in listed and b in listed, "targets %d, %d not both listed: %s" % (a, b, sorted(listed)))
    check(plain not in listed, "plain process %d listed" % plain)
    check([x["pid"] for x in procs] == sorted(listed), "not sorted by pid")
    for p in (a, b):
        x = listed[p]
        check(x.get("state") == "running" and x.get("uid") == os.geteuid() and x.get("command")
              and x.get("cgroup") == cgroup_of(p) and "start_time" in x, "entry %s" % x)
    sc.note("%d CUDA processes listed in %.1f ms" % (len(procs), ms))
    os.kill(b, signal.SIGSTOP)
    wait_stopped(b)
    r, _ = sc.run.call("ListProcesses")
    os.kill(b, signal.SIGCONT)
    check("error" not in r, "ListProcesses (one stopped): %s" % r)
    x = {y["pid"]: y for y in r["parameters"]["processes"]}.get(b)
    check(x is not None and x.get("stop") == "signal" and "state" not in x, "stopped entry %s" % x)
    sc.note("stopped one: stop=signal, no state")
    sc.wait_running_again([a, b])


# --------------------------------------------------------------------------
def main(argv):
    daemon = os.environ.get("CUDACKPTD", "")
    target = os.environ.get("CUDACKPT_GPU_TARGET", "")
    sim = ""
    names = []
    for a in argv:
        if a.startswith("--daemon="):
            daemon = a.split("=", 1)[1]
        elif a.startswith("--target="):
            target = a.split("=", 1)[1]
        elif a.startswith("--sim="):
            sim = a.split("=", 1)[1]
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        elif a.startswith("-"):
            print("group_tests.py: unknown option %s" % a, file=sys.stderr)
            return 2
        else:
            names.append(a)
    names = names or os.environ.get("CUDACKPT_GROUP_SCENARIOS", "").split() or ALL
    for n in names:
        if n not in ALL:
            print("group_tests.py: unknown scenario %s (known: %s)" % (n, " ".join(ALL)), file=sys.stderr)
            return 2
    for what, p in (("--daemon", daemon), ("--target", target)):
        if not p or not os.access(p, os.X_OK):
            print("group_tests.py: %s not executable: '%s'" % (what, p), file=sys.stderr)
            return 2
    daemon, target = os.path.abspath(daemon), os.path.abspath(target)
    if sim:
        sim = os.path.abspath(sim)

    become_subreaper()
    run = Run(daemon, target, sim)
    results = []
    failed = passed = skipped = 0
    try:
        info = run.start_daemon()
        print("group tests: %s; daemon %s %s; target %s; work %s" % (
            "SIMULATOR " + sim if sim else "driver " + DRIVER, daemon, info.get("version", ""), target, run.work))
        print("  sizes: group-pids 4 x %d MiB, others %d MiB, managed %d MiB, small %d MiB"
              % (GROUP_MIB, TEST_MIB, MANAGED_MIB, SMALL_MIB))
        sys.stdout.flush()
        for n in names:
            if not run.daemon_alive():
                run.start_daemon()
            sc = Scenario(run, n)
            t0 = time.time()
            verdict, why = "PASS", ""
            try:
                globals()["scenario_" + n.replace("-", "_")](sc)
            except Skip as e:
                verdict, why = "SKIP", str(e)
            except Fail as e:
                verdict, why = "FAIL", "ASSERTION FAILED: %s" % e
            except Exception as e:  # an unexpected error fails this scenario only
                verdict, why = "FAIL", "unexpected %s: %s" % (type(e).__name__, e)
            finally:
                sc.cleanup()
            if verdict != "SKIP" and not run.daemon_alive():
                verdict, why = "FAIL", (why + "; " if why else "") + "cudackptd died during the scenario"
            dt = time.time() - t0
            details = "; ".join(sc.notes)
            if verdict == "PASS":
                passed += 1
            elif verdict == "SKIP":
                skipped += 1
                details = why + ("; " + details if details else "")
            else:
                failed += 1
                details = why[:300] + ("; " + details if details else "")
            # A skip with its reason on its line, which tests/skipped.py reports.
            print("%s %-16s %8.3f s%s%s" % (verdict, n, dt, " [%s]" % "; ".join(sc.notes) if sc.notes else "",
                                           ": " + why if verdict == "SKIP" else ""))
            if verdict == "FAIL":
                print("    " + why)
                print("    --- daemon log (last 15 lines) ---")
                print("".join("    " + line + "\n" for line in run.daemon_tail(15).splitlines()), end="")
            sys.stdout.flush()
            results.append((n, verdict, dt, details))
    except Fail as e:
        print("FAIL daemon-start: %s" % e)
        failed += 1
    finally:
        run.stop_daemon()

    print()
    print("| group scenario | result | time | details |")
    print("| --- | --- | --- | --- |")
    for n, v, dt, d in results:
        print("| %s | %s | %.1f s | %s |" % (n, v, dt, d.replace("|", "/")))
    print()
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    if failed or KEEP:
        print("work directory kept: %s" % run.work)
    else:
        shutil.rmtree(run.work, ignore_errors=True)
    if failed:
        return 1
    if passed == 0 and skipped > 0:
        return 77
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
