#!/usr/bin/python3
"""test_jobcmd.py: integration.jobcmd, `cudackptctl job` (client/ctl/saves)
against the real daemon on the simulator, with real CRIU for the saves:
  - start: the job's exit status is the command's; --json gives its events
    as lines; a command that cannot start exits with run's status (125);
    SIGTERM to `job start` ends it (143) and the daemon stops the job;
    the job has the caller's resource limits, umask and cgroups (a Slurm
    step's), not the daemon's;
  - start --save=S with no S: started afresh; the signal of --save-on
    (USR1) saves the job into S (exit 0, S listed with its job); start
    --save=S again restores S in place of a fresh start (the target's
    counter came back); a job killed keeps S, one that exits 0 removes it;
  - a job of two processes talking over a TCP connection on the loopback
    (as the ranks of a PyTorch job do): saved and restored with its
    connection (save_tcp_established, the default), its count going on
    from where it was saved; with save_tcp_established false, the save
    fails (CommandFailed, criu's reason in the daemon's log) and the job
    runs on; a root dump of it that fails after criu (its archive on a
    file system too small) leaves it running with its connection, out
    of criu's repair mode;
  - a dump's temporary directory left in the saves directory by this
    node's earlier daemon (SIGKILLed during a save) is removed at start;
  - where root lacks CAP_SYS_RESOURCE (so CRIU cannot dump another uid's
    process): the daemon warns at start, and another uid's SaveJob is
    CommandFailed naming it, the job running on;
  - two daemons sharing the saves directory (two nodes): while one
    restores a save and runs its job, neither restores nor removes it
    (31, SaveBusy); once the job ended, the other removes it;
  - a save whose output file was swapped after it (its directory made a
    link to one holding another uid's file, as /etc/passwd): restore is
    refused with 12 (CommandFailed of restore --owner, the file named)
    before the job runs, the file untouched;
  - a caller confined more than its job would be (in a pid namespace of
    its own, as in a container; root without capabilities): job start is
    refused (12, PermissionDenied) and nothing runs;
  - restore, rm and saves of a save the caller does not have: 30; a
    daemon without saves_dir (jobs and saves off): 32; save into an existing save: 31 unless
    --replace; usage errors: 2; a daemon without CAP_SETUID (the packaged
    unit's sandbox) refuses jobs, saying what is missing.
The saved job is root's where root lacks CAP_SYS_RESOURCE (CRIU cannot
dump another user's process there: CI's container), else nobody's.
Exit 0 passed, 1 failed, 77 skipped."""
import json
import resource
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from savejobs import NOBODY, await_true, check, criu_target_pid, saves_owner, usable_criu  # noqa: E402
from simdaemon import SimDaemon  # noqa: E402

LIMIT_S = 20


def as_user(uid):
    def drop():
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
    return drop


class Env:
    def __init__(self, ctl, daemon, uid, work):
        self.ctl, self.daemon, self.uid, self.work = ctl, daemon, uid, work

    def argv(self, args):
        return [self.ctl, "job", "--socket=" + self.daemon.socket] + args

    def run(self, args, uid=-1):
        return subprocess.run(self.argv(args), preexec_fn=as_user(self.uid if uid == -1 else uid), cwd=self.work,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)

    def run_with(self, args, preexec):
        """args as the user, after preexec() (in the child, before the drop)."""
        drop = as_user(self.uid)

        def both():
            preexec()
            drop()
        return subprocess.run(self.argv(args), preexec_fn=both, cwd=self.work, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=60)

    def popen(self, args):
        return subprocess.Popen(self.argv(args), preexec_fn=as_user(self.uid), cwd=self.work,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def report(result, pid, n):
    os.kill(pid, signal.SIGUSR1)

    def got():
        try:
            with open(result) as f:
                return [line.split() for line in f if line.split()[:1] == ["ok"] and line.split()[2] == str(n)]
        except OSError:
            return None
    return await_true("report %d" % n, got)


def case_plain(e):
    r = e.run(["start", "--json", "--", "/bin/sh", "-c", "exit 7"])
    events = [json.loads(line)["job"]["event"] for line in r.stdout.splitlines()]
    check(r.returncode == 7 and events == ["started", "ended"],
          "job start: exit status 7 as the command's, --json events started, ended (%r, %r)" % (r.stdout, r.stderr))
    r = e.run(["start", "--name=nodir", "--", "/nonexistent/program"])
    check(r.returncode == 127 or r.returncode == 125, "a command that cannot run: its status (%r, %r)"
          % (r.returncode, r.stderr))
    p = e.popen(["start", "--name=long", "--", "/bin/sleep", "300"])
    pid = await_true("the job's init", lambda: json.loads(e.run(["list", "--json"]).stdout or "null"))["pid"]
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=LIMIT_S)
    check(p.returncode == 128 + signal.SIGTERM, "SIGTERM ends job start: 143 (%r, %r)" % (p.returncode, err))
    await_true("the job stopped", lambda: not os.path.exists("/proc/%d" % pid))
    check(e.run(["list"]).stdout.strip() == "NAME\tPID", "the daemon stopped the job: none listed")


def case_slurm_task(e):
    """Under Slurm (SLURM_JOB_ID set), start --save warns when slurmstepd
    did not start it (Slurm would signal its parent only); elsewhere not."""
    def run(extra):
        return subprocess.run(e.argv(["start", "--name=st", "--save=st", "--", "/bin/true"]),
                              preexec_fn=as_user(e.uid), cwd=e.work, env=dict(os.environ, **extra),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    slurm, plain = run({"SLURM_JOB_ID": "7"}), run({})
    check(slurm.returncode == 0 and "warning: started by python3" in slurm.stderr and plain.returncode == 0
          and "warning" not in plain.stderr, "job start --save under Slurm, not slurmstepd's task: warned (%r, %r)"
          % (slurm.stderr, plain.stderr))


def case_limits(e):
    out = os.path.join(e.work, "limits.out")

    def limits():
        resource.setrlimit(resource.RLIMIT_NOFILE, (777, 888))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        os.umask(0o027)
    r = e.run_with(["start", "--name=limits", "--output=" + out, "--", "/bin/sh", "-c",
                    "ulimit -n; ulimit -Hn; ulimit -c; umask"], limits)
    with open(out) as f:
        got = f.read().split()
    check(r.returncode == 0 and got == ["777", "888", "0", "0027"],
          "the job has its caller's resource limits and umask, not the daemon's (%r, %r)" % (got, r.stderr))


def case_cgroups(e):
    """The job in its caller's cgroups (a v1 hierarchy made here), not the
    daemon's."""
    cg = "/sys/fs/cgroup/pids/cudackpt-jobcmd-%d" % os.getpid()
    if not os.path.isdir("/sys/fs/cgroup/pids"):
        print("SKIP: the cgroup case: no cgroup v1 pids hierarchy here")
        return
    os.mkdir(cg)
    out = os.path.join(e.work, "cgroup.out")

    def enter():
        with open(cg + "/cgroup.procs", "w") as f:
            f.write("0")
    try:
        r = e.run_with(["start", "--name=cg", "--output=" + out, "--", "/bin/cat", "/proc/self/cgroup"], enter)
        with open(out) as f:
            got = [line.strip() for line in f if ":pids:" in line]
    finally:
        await_true("the cgroup empty", lambda: not open(cg + "/cgroup.procs").read())
        os.rmdir(cg)
    check(r.returncode == 0 and got == ["%s:pids:/%s" % (got[0].split(":")[0] if got else "?", os.path.basename(cg))],
          "the job runs in its caller's cgroups, not the daemon's (%r, %r)" % (got, r.stderr))


def case_save_restore(e, target, sim):
    result = os.path.join(e.work, "result")
    cmd = ["/bin/sh", "-c", "exec 3>/dev/null; exec env CUDACKPT_SIM=1 CUDACKPT_SIM_STATE=r %s single 1 %s 8 %s"
           % (target, result, sim)]
    start = ["start", "--name=train", "--save=s1", "--save-on=USR1", "--output=" + os.path.join(e.work, "log"), "--"]
    p = e.popen(start + cmd)
    pid = await_true("the target", lambda: criu_target_pid(result))
    check(report(result, pid, 1), "started afresh: the target's first report")
    p.send_signal(signal.SIGUSR1)
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "saving job train into s1" in err and "saved into s1" in err,
          "USR1 saves the job into s1, exit 0 (%r, %r)" % (p.returncode, err))
    r = e.run(["saves", "--json", "s1"])
    check(r.returncode == 0 and json.loads(r.stdout)["job"] == "train", "s1 listed with its job (%r)" % r.stdout)
    r = e.run(["save", "train", "s1"])
    check(r.returncode == 30, "save of a job that is gone: 30 (%r)" % r.stderr)

    p = e.popen(start + ["/bin/false"])
    pid = await_true("the restored target", lambda: criu_target_pid(result))
    check(report(result, pid, 2), "start --save=s1 again restores s1: the target's counter came back (report 2)")
    await_true("the restore said", lambda: "job train started from save s1 (init pid" in p.stderr.readline())
    # The daemon names the job once the restore's resume is done.
    await_true("the restored job listed", lambda: '"train"' in e.run(["list", "--json"]).stdout)
    r = e.run(["save", "train", "s1", "--leave-running"])
    check(r.returncode == 31, "save into an existing save without --replace: 31 (%r)" % r.stderr)
    r = e.run(["save", "train", "s1", "--leave-running", "--replace"])
    check(r.returncode == 0 and criu_target_pid(result) == pid, "--replace --leave-running: saved, the job runs on (%r)"
          % r.stderr)
    os.kill(pid, signal.SIGKILL)  # the job crashes
    out, err = p.communicate(timeout=LIMIT_S)
    check(p.returncode == 128 + signal.SIGKILL and "save s1 kept" in err
          and e.run(["saves", "s1"]).returncode == 0,
          "the job killed: its status, and s1 kept to restore again (%r, %r)" % (p.returncode, err))
    check(e.run(["rm", "s1"]).returncode == 0 and e.run(["saves", "s1"]).returncode == 30, "job rm removes s1")


TCP_JOB = r"""
import os, socket, sys, time
out = sys.argv[1]
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(1)
if os.fork() == 0:
    c = socket.create_connection(srv.getsockname())
    srv.close()
    n = 0
    while c.recv(1):
        n += 1
        c.sendall(b"%d\n" % n)
    sys.exit(0)
a = srv.accept()[0]
srv.close()
f = a.makefile("rb")
while not os.path.exists(out + ".stop"):
    a.sendall(b"?")
    with open(out + ".tmp", "wb") as o:
        o.write(f.readline())
    os.rename(out + ".tmp", out)
    time.sleep(0.02)
"""


def tcp_count(path):
    try:
        with open(path) as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def start_tcp_job(e, name, save):
    script, count = os.path.join(e.work, "tcp_job.py"), os.path.join(e.work, name + ".count")
    with open(script, "w") as f:
        f.write(TCP_JOB)
    os.chmod(script, 0o644)
    p = e.popen(["start", "--name=" + name, "--save=" + save, "--save-on=USR1", "--", sys.executable, script, count])
    await_true("the TCP job counting", lambda: (tcp_count(count) or 0) >= 3)
    return p, count


def case_tcp(e):
    p, count = start_tcp_job(e, "tcp", "s3")
    p.send_signal(signal.SIGUSR1)
    _, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "saved into s3" in err,
          "USR1 saves a job with a TCP connection between its processes (%r, %r)" % (p.returncode, err))
    saved = tcp_count(count)
    p = e.popen(["start", "--name=tcp", "--save=s3", "--", "/bin/false"])
    try:
        first = await_true("the restored job counting", lambda: tcp_count(count) != saved and tcp_count(count))
        later = await_true("the restored job counting on", lambda: (tcp_count(count) or 0) > first + 2 and
                           tcp_count(count))
        check(first > saved and later > first, "restored with its connection: the count goes on from %d (%d, %d)"
              % (saved, first, later))
        open(count + ".stop", "w").close()
        _, err = p.communicate(timeout=60)
        check(p.returncode == 0 and "save s3 removed" in err and e.run(["saves", "s3"]).returncode == 30,
              "the restored job exits 0: s3 removed (%r, %r)" % (p.returncode, err))
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            p.communicate(timeout=60)
        e.run(["rm", "s3"])


def case_tcp_finish_fails(e, ctl, top, env):
    """A dump that fails after criu dumped (step 3: its archive does not
    fit): the job goes on with its TCP connection working, not with its
    sockets left in criu's repair mode (where recv fails)."""
    small = os.path.join(top, "small")
    os.mkdir(small)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", small], check=True)
    p, count = start_tcp_job(e, "tcpfail", "s6")
    try:
        r = subprocess.run([ctl, "dump", "--socket=" + e.daemon.socket, "--run=u%d-tcpfail" % (e.uid or 0),
                            "--archive=" + os.path.join(small, "a.tar.zst"), "--work-dir=" + top,
                            "--", "--tcp-established", "--network-lock", "skip"],
                           env=dict(os.environ, **env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=120)
        n = tcp_count(count)
        ok = await_true("the job counting on over its connection", lambda: (tcp_count(count) or 0) > n + 5)
        check(r.returncode == 1 and "step 3 of 3 failed" in r.stderr and ok and p.poll() is None,
              "a dump failing after criu (archive too big): the job runs on with its connection (%r, %r)"
              % (r.returncode, r.stderr[-400:]))
        open(count + ".stop", "w").close()
        _, err = p.communicate(timeout=60)
        check(p.returncode == 0, "... and ends as it would have, 0 (%r, %r)" % (p.returncode, err))
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            p.communicate(timeout=60)
        subprocess.run(["umount", small])


def case_tcp_off(ctl, sim, uid, work, env, config):
    with SimDaemon(os.environ["CUDACKPT_TEST_DAEMON"], sim, dict(config, save_tcp_established=False), env) as d:
        os.chmod(d.socket, 0o666)
        e = Env(ctl, d, uid, work)
        p, count = start_tcp_job(e, "tcpoff", "s4")
        p.send_signal(signal.SIGUSR1)
        await_true("the save to fail", lambda: "method=SaveJob" in d.log(), timeout=60)
        n = tcp_count(count)
        ok = await_true("the unsaved job counting on", lambda: (tcp_count(count) or 0) > n + 2)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
        log = d.log()
    check(ok and "CommandFailed" in err and "runs on" in err and "tcp-established" in log,
          "save_tcp_established false: the save fails, criu's reason in the log, the job runs on (%r)" % err)


def case_unsaveable(e, d):
    """Root without CAP_SYS_RESOURCE (CI's container): another uid's job
    runs, but its save is refused up front, saying why."""
    u = Env(e.ctl, e.daemon, NOBODY, e.work)
    p = u.popen(["start", "--name=nosave", "--save=s5", "--save-on=USR1", "--", "/bin/sleep", "300"])
    await_true("the job", lambda: u.run(["list", "--json"]).stdout.strip())
    p.send_signal(signal.SIGUSR1)
    await_true("the refusal", lambda: "method=SaveJob" in d.log())
    listed = u.run(["list", "--json"]).stdout
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    check("CAP_SYS_RESOURCE" in err and "runs on" in err and '"nosave"' in listed and
          "lacks CAP_SYS_RESOURCE" in d.log(),
          "a daemon without CAP_SYS_RESOURCE refuses to save another uid's job, which runs on (%r)" % err)


def case_two_nodes(e, ctl, sim, uid, work, env, config):
    """A second daemon sharing the saves directory (another node): while the
    first restores a save and runs its job, the second neither restores it
    (a second copy of the job) nor removes it: SaveBusy (31), nor does the
    first; once the job ended, it removes it."""
    p = e.popen(["start", "--name=tw", "--save=s6", "--save-on=USR1", "--", "/bin/sleep", "300"])
    await_true("the job", lambda: '"tw"' in e.run(["list", "--json"]).stdout)
    p.send_signal(signal.SIGUSR1)
    _, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "saved into s6" in err, "USR1 saves the job into s6 (%r, %r)" % (p.returncode, err))
    p = e.popen(["restore", "s6"])
    try:
        await_true("the restore said", lambda: "job tw started from save s6" in p.stderr.readline())
        r, r2 = e.run(["restore", "s6"]), e.run(["rm", "s6"])
        check(r.returncode == 31 and "SaveBusy" in r.stderr and r2.returncode == 31,
              "nor does this node, its own job restored from it running: 31, SaveBusy (%r, %r)" % (r.stderr, r2.stderr))
        with SimDaemon(os.environ["CUDACKPT_TEST_DAEMON"], sim, config, env) as d2:
            os.chmod(d2.socket, 0o666)
            other = Env(ctl, d2, uid, work)
            r, r2 = other.run(["restore", "s6"]), other.run(["rm", "s6"])
            check(r.returncode == 31 and "SaveBusy" in r.stderr and r2.returncode == 31,
                  "another node neither restores nor removes a save whose job runs here: 31, SaveBusy (%r, %r)"
                  % (r.stderr, r2.stderr))
            p.send_signal(signal.SIGTERM)
            p.communicate(timeout=60)
            r = other.run(["rm", "s6"])
            check(r.returncode == 0, "once that job ended, the other node removes the save (%r)" % r.stderr)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()


def case_swapped_output(e):
    out, vdir = os.path.join(e.work, "out"), os.path.join(e.work, "vdir")
    victim, text = os.path.join(vdir, "log"), "root:x:0:0:root:/root:/bin/sh\n"
    for d in (out, vdir):
        os.mkdir(d)
    if e.uid is not None:
        os.chown(out, e.uid, e.uid)
    with open(victim, "w") as f:
        f.write(text)
    # Another uid's (0644, as the output is made): root's for the user, nobody's for root's job.
    os.chown(victim, 0 if e.uid is not None else NOBODY, 0)
    os.chmod(victim, 0o644)
    p = e.popen(["start", "--name=out", "--save=s2", "--save-on=USR1", "--output=" + out + "/log", "--",
                 "/bin/sleep", "300"])
    await_true("the job", lambda: e.run(["list", "--json"]).stdout.strip())
    p.send_signal(signal.SIGUSR1)
    _, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "saved into s2" in err, "USR1 saves the job into s2 (%r, %r)" % (p.returncode, err))
    os.rename(out, out + ".was")
    os.symlink(vdir, out)
    p = e.popen(["restore", "s2"])
    try:
        _, err = p.communicate(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        raise AssertionError("restore with the output swapped for %s: the job runs, holding it to append to" % victim)
    with open(victim) as f:
        kept = f.read() == text
    check(p.returncode == 12 and victim in err and kept,
          "restore with the output swapped for another uid's file: 12, the file named and untouched (%r, %r)"
          % (p.returncode, err))
    check(e.run(["rm", "s2"]).returncode == 0, "the refused save is whole: removed")


def case_confined_callers(e):
    out = os.path.join(e.work, "escaped")
    job = ["start", "--name=esc", "--", "/bin/sh", "-c", "grep CapEff /proc/self/status > " + out]
    for what, wrap in (("in a pid namespace of its own", ["unshare", "--pid", "--fork", "--mount-proc"]),
                       ("without capabilities", ["setpriv", "--bounding-set=-all", "--inh-caps=-all"])):
        r = subprocess.run(wrap + e.argv(job), cwd=e.work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=60)
        escaped = os.path.exists(out)
        check(r.returncode == 12 and "PermissionDenied" in r.stderr and not escaped,
              "root %s: job start refused, nothing run (%r, %r%s)" % (what, r.returncode, r.stderr,
                                                                      ", the job ran" if escaped else ""))


def case_refusals(e):
    for args in (["restore", "nosuch"], ["rm", "nosuch"], ["saves", "nosuch"]):
        r = e.run(args)
        check(r.returncode == 30, "job %s of a save the caller lacks: 30 (%r)" % (" ".join(args), r.stderr))
    for args in (["start"], ["save"], ["rm", "a/b"], ["start", "--save-on=KILL", "--", "true"], ["nosuch"]):
        r = e.run(args)
        check(r.returncode == 2, "usage error %r: 2 (%r)" % (args, r.stderr))


def plant_stale_dump(saves):
    """What a daemon SIGKILLed during a dump leaves: a dump's temporary
    directory under this node's name and another daemon's life."""
    node = "".join(c if c.isalnum() and c.isascii() or c in "._-" else "_" for c in socket.gethostname())[:63]
    uid_dir = os.path.join(saves, "0")
    os.makedirs(uid_dir, mode=0o700)
    os.chmod(saves, 0o700)
    path = os.path.join(uid_dir, ".dump-%s-%016x" % (node, 0x0123456789abcdef))
    os.makedirs(os.path.join(path, "tree-1"))
    return path


class Unsandboxed(SimDaemon):
    """The daemon without CAP_SETUID in its bounding set, as the packaged
    unit's sandbox leaves it."""

    def argv(self):
        return ["setpriv", "--bounding-set=-setuid", "--"] + super().argv()


def case_no_caps(ctl, sim, uid, work, env, config):
    with Unsandboxed(os.environ["CUDACKPT_TEST_DAEMON"], sim, config, env) as d:
        os.chmod(d.socket, 0o666)
        r = Env(ctl, d, uid, work).run(["start", "--", "/bin/true"])
        log = d.log()
    check(r.returncode == 127 and "CAP_SETUID" in r.stderr and "cudackptd-jobs.conf" in log,
          "a daemon without the capabilities its commands need refuses jobs, naming what is missing and the "
          "drop-in (%r, %r)" % (r.returncode, r.stderr))


def main():
    if os.geteuid() != 0:
        print("SKIP: root only (the daemon's jobs run as root's cudackptctl)")
        return 77
    for var in ("CUDACKPT_TEST_DAEMON", "CUDACKPT_TEST_SIM", "CUDACKPT_TEST_CTL", "CUDACKPT_TEST_CRIU_TARGET"):
        if not os.environ.get(var):
            print("FAIL: %s is unset: run through ctest" % var)
            return 1
    criu = usable_criu()
    has_criu = criu is not None
    uid = saves_owner()
    top = tempfile.mkdtemp(prefix="cudackpt-jobcmd.")
    os.chmod(top, 0o755)
    work = os.path.join(top, "work")
    os.mkdir(work)
    os.chmod(work, 0o1777)
    bins = os.path.join(top, "bin")
    os.mkdir(bins)
    ctl, sim, target = (shutil.copy(os.environ[v], bins) for v in
                        ("CUDACKPT_TEST_CTL", "CUDACKPT_TEST_SIM", "CUDACKPT_TEST_CRIU_TARGET"))
    for f in os.listdir(bins):
        os.chmod(os.path.join(bins, f), 0o755)
    env = {"CUDACKPT_CRIU": criu or "", "CUDACKPT_RUN_DIR": os.path.join(top, "jobs")}
    config = {"nvml": sim, "saves_dir": os.path.join(top, "saves"), "ctl_path": os.environ["CUDACKPT_TEST_CTL"],
              "socket_mode": "0666"}
    stale = plant_stale_dump(config["saves_dir"])
    try:
        with SimDaemon(os.environ["CUDACKPT_TEST_DAEMON"], sim, config, env) as d:
            os.chmod(d.socket, 0o666)
            await_true("the stale dump swept", lambda: not os.path.exists(stale) and
                       "Removed 1 unfinished dump" in d.log())
            check(True, "a dump left by this node's earlier daemon is swept at start")
            e = Env(ctl, d, uid, work)
            case_plain(e)
            case_slurm_task(e)
            case_limits(e)
            case_cgroups(e)
            case_refusals(e)
            case_confined_callers(e)
            if has_criu:
                case_save_restore(e, target, sim)
                case_tcp(e)
                case_tcp_finish_fails(e, ctl, top, env)
                if uid is None:
                    case_unsaveable(e, d)
                case_two_nodes(e, ctl, sim, uid, work, env, config)
                case_swapped_output(e)
            else:
                print("SKIP: the save and restore cases: no criu that passes `criu check` ($CUDACKPT_CRIU)")
        if has_criu:
            case_tcp_off(ctl, sim, uid, work, env, config)
        case_no_caps(ctl, sim, uid, work, env, config)
        with SimDaemon(os.environ["CUDACKPT_TEST_DAEMON"], sim, {"nvml": sim}, env) as d:
            os.chmod(d.socket, 0o666)
            r = Env(ctl, d, uid, work).run(["saves"])
            r2 = Env(ctl, d, uid, work).run(["start", "--", "/bin/true"])
            check(r.returncode == 32 and r2.returncode == 32,
                  "a daemon without saves_dir runs no job and keeps no save: 32 (%r, %r)" % (r.stderr, r2.stderr))
    except (AssertionError, subprocess.TimeoutExpired) as e:
        print("FAIL: %s" % e)
        return 1
    finally:
        shutil.rmtree(top, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
