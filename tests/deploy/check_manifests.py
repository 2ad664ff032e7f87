#!/usr/bin/python3
"""check_manifests.py: deploy/ against itself, the project and the daemon.

The Kubernetes manifests must parse and hold what docs/kubernetes.md
promises: a DaemonSet in the node's pid namespace serving the socket in the
node's /run/cudackpt, root with exactly the unit's four capabilities, probes
that call the daemon (liveness and startup pass whatever the driver,
readiness only with a usable driver), and a pod without hostPID that
mounts the socket's directory.  Every container runs the image deploy/Containerfile says to
build, tagged with project(VERSION) of CMakeLists.txt, and the only one
the Containerfile and docs/kubernetes.md name.  Given the binaries
of this build, the flags and commands the manifests use must be ones they
list in --help, and the daemon must start with the ConfigMap's
configuration and the DaemonSet's flags and answer the probes: without a
driver the readiness probe fails (18, DriverUnavailable) and the others
pass; on the simulator (--sim) every probe passes.  The exporter
sidecar's command must serve GET /metrics from the daemon.

The daemon runs under its own seccomp profile (deploy/kubernetes/seccomp/
cudackptd.json): it must be a valid profile that allows what the unit's
SystemCallFilter= allows (every call the unit names, bpf among them; with
systemd-analyze, exactly its groups' expansion, as make-profile.py writes
it), and the DaemonSet must name it as a Localhost profile.  The exporter
sidecar runs as no root with nothing added, and the PodMonitor scrapes its
port.

Exit status: 0 all good, 1 a check failed (each is printed), 77 no yaml
module (Debian: python3-yaml, run with /usr/bin/python3).
"""
import argparse
import importlib.util
import json
import os
import re
import select
import shutil
import subprocess
import sys
import urllib.request

try:
    import yaml
except ImportError:
    print("SKIP: no yaml module in %s (Debian: apt-get install python3-yaml)" % sys.executable)
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from simdaemon import DaemonError, SimDaemon  # noqa: E402

SOCKET_DIR = "/run/cudackpt"
SOCKET = SOCKET_DIR + "/io.cudackpt.Process"
CAPS = {"SYS_PTRACE", "DAC_READ_SEARCH", "KILL", "SYS_ADMIN"}
GRACE_S = 900  # TimeoutStopSec=15min of systemd/cudackptd.service.in

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
    return ok


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def project_version(cmakelists):
    m = re.search(r"\bproject\s*\([^)]*\bVERSION\s+([0-9][0-9.]*)", read(cmakelists), re.S)
    return m.group(1) if m else None


def containerfile_facts(path, cmakelists):
    """The image name:tag of the build command, the version label, and
    whether every directory CMakeLists.txt adds is copied into the build."""
    text = read(path)
    tags = re.findall(r"^#.*\bbuild\b.*\s-t\s+(\S+)", text, re.M)
    label = re.findall(r'org\.opencontainers\.image\.version="([^"]*)"', text)
    check(len(set(tags)) == 1, "Containerfile: one 'podman build ... -t NAME:TAG' comment, found %s" % tags)
    check(len(label) == 1, "Containerfile: one org.opencontainers.image.version label, found %s" % label)
    copied = set()
    for line in re.findall(r"^COPY\s+(?!--from)(.*)$", text, re.M):
        copied.update(p.rstrip("/") for p in line.split()[:-1])
    subdirs = re.findall(r"add_subdirectory\(\s*([^\s)$]+)", read(cmakelists))
    for need in ["CMakeLists.txt"] + [d for d in subdirs if d != "tests"]:
        check(need in copied, "Containerfile: the build stage does not COPY %s (CMakeLists.txt adds it)" % need)
    return (tags[0] if tags else None), (label[0] if label else None)


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            docs = [d for d in yaml.safe_load_all(f) if d is not None]
    except yaml.YAMLError as e:
        check(False, "%s does not parse: %s" % (path, e))
        return []
    for d in docs:
        check(isinstance(d, dict) and d.get("apiVersion") and d.get("kind") and (d.get("metadata") or {}).get("name"),
              "%s: a document without apiVersion, kind or metadata.name" % path)
    return [d for d in docs if isinstance(d, dict)]


def containers(spec):
    return [c for key in ("initContainers", "containers") for c in spec.get(key) or []]


def argv(c):
    return [str(a) for a in (c.get("command") or []) + (c.get("args") or [])]


def hostpath_mount(spec, c, path):
    """The mount of hostPath `path` at `path` in container c, or None."""
    names = {v["name"] for v in spec.get("volumes") or [] if (v.get("hostPath") or {}).get("path") == path}
    for m in c.get("volumeMounts") or []:
        if m.get("name") in names and m.get("mountPath") == path:
            return m
    return None


def flags(words):
    return [w.split("=", 1)[0] for w in words if w.startswith("-")]


def help_of(binary):
    """(flags, commands) that `binary --help` lists, or None."""
    if not binary:
        return None
    out = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=10)
    if not check(out.returncode == 0, "%s --help exits %d" % (binary, out.returncode)):
        return None
    opts = set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", out.stdout))
    cmds, section = set(), None
    for line in out.stdout.splitlines():
        if re.match(r"^\S.*:$", line):
            section = line
        elif section == "Commands:":
            m = re.match(r"^  ([a-z][a-z-]*)\b", line)
            if m:
                cmds.add(m.group(1))
    return opts, cmds


def check_ctl_words(where, words, ctl_help):
    """cudackptctl's arguments: known flags and a known command."""
    if ctl_help is None:
        return
    opts, cmds = ctl_help
    for f in flags(words):
        check(f in opts, "%s: cudackptctl has no flag %s (cudackptctl --help)" % (where, f))
    cmd = [w for w in words if not w.startswith("-")][:1]
    check(cmd and cmd[0] in cmds, "%s: %s is not a command of cudackptctl" % (where, cmd))


def check_probe(name, probe, env, ctl_help):
    cmd = [str(a) for a in ((probe or {}).get("exec") or {}).get("command") or []]
    if not check(cmd and os.path.basename(cmd[0]) == "cudackptctl",
                 "DaemonSet: %s is not an exec of cudackptctl: %s" % (name, cmd)):
        return None
    check("--socket=" + SOCKET in cmd or ("--socket" not in flags(cmd) and env.get("CUDACKPT_SOCKET") == SOCKET),
          "DaemonSet: %s does not call %s" % (name, SOCKET))
    check_ctl_words("DaemonSet %s" % name, cmd[1:], ctl_help)
    return cmd


def check_seccomp(profile_path, unit_path, c, docs_text):
    """The profile's form, its calls against the unit's, and that the
    daemon container c names it."""
    try:
        with open(profile_path, encoding="utf-8") as f:
            prof = json.load(f)
    except (OSError, ValueError) as e:
        check(False, "seccomp profile %s: %s" % (profile_path, e))
        return
    known = {"defaultAction", "defaultErrnoRet", "architectures", "archMap", "syscalls", "flags",
             "listenerPath", "listenerMetadata"}
    check(isinstance(prof, dict) and set(prof) <= known, "seccomp profile: keys %s beyond %s"
          % (sorted(set(prof) - known) if isinstance(prof, dict) else prof, sorted(known)))
    if not isinstance(prof, dict):
        return
    check(prof.get("defaultAction") == "SCMP_ACT_ERRNO", "seccomp profile: defaultAction is not SCMP_ACT_ERRNO")
    check(prof.get("defaultErrnoRet", 1) == 1, "seccomp profile: refused calls do not fail with EPERM "
          "(the unit's SystemCallErrorNumber=EPERM)")
    arches = prof.get("architectures") or [a.get("architecture") for a in prof.get("archMap") or []]
    check(arches and all(isinstance(a, str) and a.startswith("SCMP_ARCH_") for a in arches),
          "seccomp profile: no architectures: %s" % arches)
    allowed = set()
    for rule in prof.get("syscalls") or []:
        names, action = rule.get("names"), rule.get("action")
        if not check(isinstance(names, list) and names and all(isinstance(n, str) for n in names)
                     and isinstance(action, str) and action.startswith("SCMP_ACT_"),
                     "seccomp profile: a rule without names or action: %s" % str(rule)[:200]):
            continue
        if action == "SCMP_ACT_ALLOW" and not rule.get("args"):
            allowed.update(names)
    spec = importlib.util.spec_from_file_location("make_profile", os.path.join(os.path.dirname(profile_path),
                                                                               "make-profile.py"))
    mp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mp)
    unit = read(unit_path)
    for name in sorted(mp.by_name(unit) | {"bpf", "perf_event_open"}):
        check(name in allowed, "seccomp profile: %s is not allowed (the unit allows it)" % name)
    if shutil.which("systemd-analyze"):
        want = mp.allowed(unit, mp.groups())
        check(allowed == want, "seccomp profile and the unit's SystemCallFilter= differ: the profile also "
              "allows %s, lacks %s (deploy/kubernetes/seccomp/make-profile.py writes it anew)"
              % (sorted(allowed - want)[:10], sorted(want - allowed)[:10]))
    sp = (c.get("securityContext") or {}).get("seccompProfile") or {}
    local = sp.get("localhostProfile") or ""
    check(sp.get("type") == "Localhost" and local.endswith("/" + os.path.basename(profile_path)),
          "DaemonSet: the daemon's seccompProfile is not Localhost %s: %s" % (os.path.basename(profile_path), sp))
    check(local and "seccomp/" + local in docs_text,
          "docs/kubernetes.md does not say where to install the profile (seccomp/%s)" % local)


def check_sidecar(spec, ds_labels, ctl_help):
    """The exporter: returns (container, port name, listen address) or None."""
    exp = [c for c in containers(spec) if argv(c)[:1] and os.path.basename(argv(c)[0]) == "cudackptctl"
           and "metrics" in argv(c) and any(w.startswith("--listen") for w in argv(c))]
    if not check(len(exp) == 1, "DaemonSet: one container running cudackptctl metrics --listen, found %d"
                 % len(exp)):
        return None
    c = exp[0]
    words = argv(c)
    check_ctl_words("DaemonSet exporter", words[1:], ctl_help)
    check("--socket=" + SOCKET in words, "DaemonSet: the exporter does not call %s" % SOCKET)
    sc = c.get("securityContext") or {}
    check(sc.get("runAsNonRoot") is True and sc.get("runAsUser", 1) != 0, "DaemonSet: the exporter may run as root")
    check(sc.get("readOnlyRootFilesystem") is True, "DaemonSet: the exporter's root file system is writable")
    check(sc.get("allowPrivilegeEscalation") is False, "DaemonSet: the exporter may escalate privileges")
    check(not sc.get("privileged") and (sc.get("capabilities") or {}).get("drop") == ["ALL"]
          and not (sc.get("capabilities") or {}).get("add"), "DaemonSet: the exporter keeps capabilities")
    check((sc.get("seccompProfile") or {}).get("type") in ("RuntimeDefault", "Localhost"),
          "DaemonSet: the exporter has no seccomp profile")
    m = hostpath_mount(spec, c, SOCKET_DIR)
    check(m is not None, "DaemonSet: the exporter does not mount %s" % SOCKET_DIR)
    listen = [w.split("=", 1)[1] for w in words if w.startswith("--listen=")]
    if not check(len(listen) == 1 and re.match(r"^.*:\d+$", listen[0]),
                 "DaemonSet: exporter --listen=ADDR: %s" % listen):
        return None
    port = int(listen[0].rsplit(":", 1)[1])
    ports = [p for p in c.get("ports") or [] if p.get("containerPort") == port]
    check(len(ports) == 1 and ports[0].get("name"), "DaemonSet: the exporter's port %d is not a named containerPort"
          % port)
    return c, (ports[0].get("name") if ports else None), listen[0]


def check_podmonitor(docs, namespace, labels, port_name):
    pms = [d for d in docs if d.get("kind") == "PodMonitor"]
    if not check(len(pms) == 1, "podmonitor.yaml: one PodMonitor, found %d" % len(pms)):
        return
    pm = pms[0]
    check(pm.get("apiVersion") == "monitoring.coreos.com/v1", "PodMonitor: apiVersion %s" % pm.get("apiVersion"))
    check(pm["metadata"].get("namespace") == namespace, "PodMonitor: not in the DaemonSet's namespace %s" % namespace)
    sel = ((pm.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    check(sel and all(labels.get(k) == v for k, v in sel.items()),
          "PodMonitor: selector %s does not match the DaemonSet's pods %s" % (sel, labels))
    eps = (pm.get("spec") or {}).get("podMetricsEndpoints") or []
    check(any(e.get("port") == port_name and e.get("path", "/metrics") == "/metrics" for e in eps),
          "PodMonitor: no endpoint on port %s, path /metrics: %s" % (port_name, eps))


def check_daemonset(docs, ctl_help):
    """The checks of the daemon's side; returns what the daemon run needs."""
    ns = [d["metadata"]["name"] for d in docs if d.get("kind") == "Namespace"]
    ds = [d for d in docs if d.get("kind") == "DaemonSet"]
    if not check(len(ds) == 1, "daemonset.yaml: one DaemonSet, found %d" % len(ds)):
        return None
    ds = ds[0]
    where = ds["metadata"].get("namespace")
    check(where in ns, "DaemonSet: its namespace %s is not created by daemonset.yaml (%s)" % (where, ns))
    spec = ds["spec"]["template"]["spec"]
    check(spec.get("hostPID") is True, "DaemonSet: hostPID is not true")
    check(any(t.get("key") == "nvidia.com/gpu" for t in spec.get("tolerations") or []),
          "DaemonSet: no toleration of nvidia.com/gpu")
    check(spec.get("nodeSelector") or spec.get("affinity"), "DaemonSet: no nodeSelector or affinity for GPU nodes")
    check((spec.get("terminationGracePeriodSeconds") or 30) >= GRACE_S,
          "DaemonSet: terminationGracePeriodSeconds below %d (TimeoutStopSec=15min)" % GRACE_S)
    daemons = [c for c in containers(spec) if any(os.path.basename(a) == "cudackptd" for a in argv(c))]
    if not check(len(daemons) == 1, "DaemonSet: one container running cudackptd, found %d" % len(daemons)):
        return None
    c = daemons[0]
    words = argv(c)
    dflags = words[[os.path.basename(a) for a in words].index("cudackptd") + 1:]
    check("--socket=" + SOCKET in dflags, "DaemonSet: cudackptd is not passed --socket=%s: %s" % (SOCKET, dflags))
    m = hostpath_mount(spec, c, SOCKET_DIR)
    check(m is not None, "DaemonSet: hostPath %s is not mounted at %s" % (SOCKET_DIR, SOCKET_DIR))
    check(m is None or not m.get("readOnly"), "DaemonSet: %s is mounted read-only" % SOCKET_DIR)
    sc = c.get("securityContext") or {}
    caps = sc.get("capabilities") or {}
    check(caps.get("drop") == ["ALL"], "DaemonSet: capabilities.drop is not [ALL]: %s" % caps.get("drop"))
    add = caps.get("add") or []
    check(len(add) == len(CAPS) and set(add) == CAPS,
          "DaemonSet: capabilities.add is not exactly %s: %s" % (sorted(CAPS), add))
    check(sc.get("allowPrivilegeEscalation") is False, "DaemonSet: allowPrivilegeEscalation is not false")
    check(sc.get("readOnlyRootFilesystem") is True, "DaemonSet: readOnlyRootFilesystem is not true")
    check(not sc.get("privileged"), "DaemonSet: the daemon is privileged")
    check(sc.get("runAsUser", 0) == 0 and not sc.get("runAsNonRoot"), "DaemonSet: the daemon does not run as root")
    check(hostpath_mount(spec, c, "/sys/kernel/tracing") is not None,
          "DaemonSet: hostPath /sys/kernel/tracing is not mounted there (the process index's tracepoint)")
    env = {e.get("name"): e.get("value") for e in c.get("env") or []}
    probes = {}
    for name in ("livenessProbe", "readinessProbe", "startupProbe"):
        if name != "startupProbe" or name in c:
            probes[name] = check_probe(name, c.get(name), env, ctl_help)
    labels = (ds["spec"]["template"].get("metadata") or {}).get("labels") or {}
    return {"container": c, "spec": spec, "daemon_flags": dflags, "probes": probes, "namespace": where,
            "labels": labels, "exporter": check_sidecar(spec, labels, ctl_help)}


def daemon_config(docs, info):
    """The JSON text of the file --config= names, from its ConfigMap."""
    cfg = [f.split("=", 1)[1] for f in info["daemon_flags"] if f.startswith("--config=")]
    if not check(len(cfg) == 1, "DaemonSet: cudackptd is not passed one --config=: %s" % info["daemon_flags"]):
        return None
    path = cfg[0]
    vols = {v["name"]: v for v in info["spec"].get("volumes") or []}
    for m in info["container"].get("volumeMounts") or []:
        cm = (vols.get(m.get("name")) or {}).get("configMap")
        if not cm or os.path.dirname(path) != m.get("mountPath").rstrip("/"):
            continue
        key = os.path.basename(path)
        for item in cm.get("items") or []:
            if item.get("path") == key:
                key = item.get("key")
        for d in docs:
            md = d.get("metadata") or {}
            if d.get("kind") == "ConfigMap" and md.get("name") == cm.get("name") \
                    and md.get("namespace") == info["namespace"] and key in (d.get("data") or {}):
                return d["data"][key]
    check(False, "DaemonSet: --config=%s is not a key of a ConfigMap mounted there" % path)
    return None


def check_config(text, default_path):
    try:
        cfg = json.loads(text)
    except ValueError as e:
        check(False, "ConfigMap: the configuration is not JSON: %s" % e)
        return False
    with open(default_path, encoding="utf-8") as f:
        default = json.load(f)
    for key, value in cfg.items():
        if check(key in default, "ConfigMap: %s is not a key of %s" % (key, default_path)):
            check(type(value) is type(default[key]), "ConfigMap: %s is a %s, not a %s"
                  % (key, type(value).__name__, type(default[key]).__name__))
    check(cfg.get("socket", SOCKET) == SOCKET, "ConfigMap: socket is not %s" % SOCKET)
    return True


# What each probe must exit with against a daemon without a usable driver:
# liveness is the loop's, readiness the driver's (DriverUnavailable).
EXIT_DRIVER_UNAVAILABLE = 18
# A driver that is not there: the daemon serves, answering DriverUnavailable.
NO_DRIVER = "/nonexistent/cudackpt-no-libcuda.so.1"
NO_DRIVER_EXITS = {"startupProbe": 0, "livenessProbe": 0, "readinessProbe": EXIT_DRIVER_UNAVAILABLE}


def run_daemon(cudackptd, cudackptctl, info, config_text, driver=None):
    """Start the daemon with the DaemonSet's flags and the ConfigMap on a
    socket of its own, on driver (None: none, so it serves answering
    DriverUnavailable), and run the probes against it."""
    flags = ["--config={config}" if a.startswith("--config=") else a for a in info["daemon_flags"]
             if not a.startswith("--socket=")]
    try:
        d = SimDaemon(cudackptd, driver or NO_DRIVER, config_text, flags=flags, prefix="cudackpt-deploy-",
                      ready_timeout=10)
    except DaemonError as e:
        check(False, "cudackptd did not start with the DaemonSet's flags %s and the ConfigMap: %s" % (flags, e))
        return
    try:
        sock = d.socket
        env = dict(os.environ, CUDACKPT_SOCKET=sock)
        for name, cmd in info["probes"].items():
            if not cmd or not cudackptctl:
                continue
            cmd = [cudackptctl] + ["--socket=" + sock if a.startswith("--socket=") else a for a in cmd[1:]]
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=10)
            want = 0 if driver else NO_DRIVER_EXITS[name]
            check(r.returncode == want, "DaemonSet: %s exits %d against the daemon %s, not %d: %s"
                  % (name, r.returncode, "on " + driver if driver else "without a driver", want,
                     r.stderr.strip()))
        if info.get("exporter") and cudackptctl:
            run_exporter(cudackptctl, info["exporter"][0], sock)
    finally:
        said = d.stop()
        if failures:
            sys.stdout.write("cudackptd said:\n" + said)


def run_exporter(cudackptctl, c, sock):
    """The sidecar's command on a loopback port: GET /metrics answers."""
    cmd = [cudackptctl] + ["--socket=" + sock if a.startswith("--socket=") else
                           "--listen=127.0.0.1:0" if a.startswith("--listen=") else a for a in argv(c)[1:]]
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        if not select.select([p.stderr], [], [], 10)[0]:
            check(False, "DaemonSet: the exporter %s said nothing in 10 s" % cmd)
            return
        m = re.search(r" on (\S+:\d+) ", p.stderr.readline().decode(errors="replace"))
        if not check(m, "DaemonSet: the exporter %s did not start" % cmd):
            return
        with urllib.request.urlopen("http://%s/metrics" % m.group(1), timeout=10) as r:
            check(r.status == 200 and r.read().startswith(b"# HELP cudackpt_"),
                  "DaemonSet: the exporter's GET /metrics is not the daemon's metrics")
    except OSError as e:
        check(False, "DaemonSet: the exporter %s: %s" % (cmd, e))
    finally:
        p.terminate()
        p.wait(10)


def check_pod(docs, ctl_help):
    pods = [d for d in docs if d.get("kind") == "Pod"]
    if not check(len(pods) == 1, "example-pod.yaml: one Pod, found %d" % len(pods)):
        return
    spec = pods[0]["spec"]
    check(not spec.get("hostPID"), "Pod: uses hostPID")
    check(any(hostpath_mount(spec, c, SOCKET_DIR) for c in containers(spec)),
          "Pod: hostPath %s is not mounted at %s" % (SOCKET_DIR, SOCKET_DIR))
    for c in containers(spec):
        script = "\n".join(argv(c))
        calls = re.findall(r"\bcudackptctl\b((?:[ \t]+[^\s;|&)#]+)*)", script)
        check(calls, "Pod: container %s never runs cudackptctl" % c.get("name"))
        for words in calls:
            check_ctl_words("Pod script 'cudackptctl%s'" % words, words.split(), ctl_help)


def main():
    ap = argparse.ArgumentParser()
    for a in ("cmakelists", "containerfile", "daemonset", "pod", "default-config", "docs", "podmonitor", "seccomp",
              "unit"):
        ap.add_argument("--" + a, required=True)
    ap.add_argument("--cudackptd")
    ap.add_argument("--cudackptctl")
    ap.add_argument("--sim", help="the simulated driver, for a run of the probes with a usable driver")
    o = ap.parse_args()

    version = project_version(o.cmakelists)
    check(version, "CMakeLists.txt: no project(... VERSION x.y.z)")
    image, label = containerfile_facts(o.containerfile, o.cmakelists)
    check(image and image.rsplit(":", 1)[-1] == version,
          "Containerfile: the image %s is not tagged with the project's version %s" % (image, version))
    check(label == version, "Containerfile: image.version label %s is not the project's version %s" % (label, version))

    for path in (o.containerfile, o.docs):
        for named in re.findall(r"[\w./-]*/cudackptd:[\w.-]+", read(path)):
            check(named == image, "%s names the image %s, not %s" % (path, named, image))

    ds_docs, pod_docs, pm_docs = load(o.daemonset), load(o.pod), load(o.podmonitor)
    for d in ds_docs + pod_docs:
        spec = d.get("spec") or {}
        spec = (spec.get("template") or {}).get("spec") or spec
        for c in containers(spec):
            check(c.get("image") == image, "%s %s: container %s runs %s, not %s"
                  % (d.get("kind"), (d.get("metadata") or {}).get("name"), c.get("name"), c.get("image"), image))

    d_help, ctl_help = help_of(o.cudackptd), help_of(o.cudackptctl)
    if o.cudackptd:
        out = subprocess.run([o.cudackptd, "--version"], capture_output=True, text=True, timeout=10).stdout
        check(out.split()[-1:] == [version], "cudackptd --version says %r, not %s" % (out.strip(), version))
    info = check_daemonset(ds_docs, ctl_help)
    if info and d_help:
        for f in flags(info["daemon_flags"]):
            check(f in d_help[0], "DaemonSet: cudackptd has no flag %s (cudackptd --help)" % f)
    if info:
        check_seccomp(o.seccomp, o.unit, info["container"], read(o.docs))
        if info["exporter"]:
            check_podmonitor(pm_docs, info["namespace"], info["labels"], info["exporter"][1])
    config = daemon_config(ds_docs, info) if info else None
    if config is not None and check_config(config, o.default_config) and o.cudackptd and not failures:
        run_daemon(o.cudackptd, o.cudackptctl, info, config)
        if o.sim and not failures:
            run_daemon(o.cudackptd, o.cudackptctl, info, config, o.sim)
    check_pod(pod_docs, ctl_help)

    for f in failures:
        print("FAIL: " + f)
    if not failures:
        print("ok: deploy/ matches cudackptd %s%s" % (version, "" if o.cudackptd else " (no binaries given)"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
