#!/usr/bin/python3
"""metrics.prometheus: GetMetrics's text, read by a real Prometheus parser
(prometheus_client's, Debian's python3-prometheus-client), and every
counter checked against the calls this script made to a daemon of its own
on the simulator.

Usage: check_metrics.py CUDACKPTD SIMULATOR CUDACKPTCTL
Exits 77 (skipped) without the prometheus_client module."""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("prometheus_client is not installed (python3-prometheus-client): skipped")
    sys.exit(77)

IFACE = "io.cudackpt.Process."
from metrics_check import check, failures  # noqa: E402


class Conn:
    opened = 0

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(20)
        self.s.connect(path)
        self.buf = b""
        Conn.opened += 1

    def send(self, obj):
        self.s.sendall(json.dumps(obj).encode() + b"\0")

    def recv(self):
        while b"\0" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise EOFError("the daemon closed the connection")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, **params):
        self.send({"method": method, "parameters": params})
        return self.recv()

    def close(self):
        self.s.close()


def main():
    daemon, sim, ctl = sys.argv[1:4]
    tmp = tempfile.mkdtemp(prefix="cudackpt-metrics-")
    sock = os.path.join(tmp, "sock")
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump({"watch_scan_ms": 0}, f)
    log = open(os.path.join(tmp, "log"), "w+")
    d = subprocess.Popen([daemon, "--socket=" + sock, "--driver=" + sim, "--config=" + os.path.join(tmp, "config.json")],
                         stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    env = dict(os.environ, CUDACKPT_SIM="1", CUDACKPT_SIM_MEM_MIB="8")
    targets = [subprocess.Popen(["sleep", "600"], env=env) for _ in range(2)]
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(sock):
            if d.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                print(log.read())
                return 1
            time.sleep(0.01)
        for t in targets:  # exec'd, so the simulator sees the environment
            while "python" in os.readlink("/proc/%d/exe" % t.pid):
                time.sleep(0.01)
        a, b = (t.pid for t in targets)
        made = {}  # (method, result) -> calls

        def call(c, method, **params):
            r = c.call(IFACE + method, **params)
            res = r.get("error", "ok").rsplit(".", 1)[-1]
            made[(method, res)] = made.get((method, res), 0) + 1
            return r

        c = Conn(sock)
        for _ in range(3):
            check(call(c, "GetState", pid=a)["parameters"]["state"] == "running", "GetState running")
        call(c, "Lock", pid=a)
        call(c, "Unlock", pid=a)
        check(call(c, "Unlock", pid=a).get("error") == IFACE + "InvalidState", "Unlock of a running process")
        r = call(c, "Suspend", pid=a, lease_ms=100000)
        lease = r["parameters"]["lease"]["id"]
        check(c.call(IFACE + "ReleaseLease", lease=lease)["parameters"]["lease"] == lease, "ReleaseLease")
        call(c, "Resume", pid=a)
        call(c, "Lock", pid=b, lease_ms=100)
        while True:  # the expired lease is undone, its last step ended
            p = call(c, "GetState", pid=b)["parameters"]
            if p["state"] == "running" and "in_flight" not in p:
                break
            time.sleep(0.02)
        dead = subprocess.Popen(["true"])
        dead.wait()
        check(call(c, "GetState", pid=dead.pid).get("error") == IFACE + "NoSuchProcess", "GetState of a dead pid")
        bad = Conn(sock)
        bad.s.sendall(b"this is not json\0")
        check(bad.recv().get("error") == IFACE + "InvalidRequest", "garbage refused")
        w = Conn(sock)
        w.send({"method": IFACE + "Watch", "parameters": {}, "more": True})
        check(w.recv()["parameters"]["event"]["type"] == "watching", "Watch")
        call(c, "Lock", pid=a)
        call(c, "Unlock", pid=a)
        events = 0
        while events < 6:  # started, finished, state of each
            check(w.recv().get("continues") is True, "events continue")
            events += 1

        text = c.call(IFACE + "GetMetrics")["parameters"]["text"]
        ctl_text = subprocess.run([ctl, "--socket=" + sock, "metrics"], stdout=subprocess.PIPE, check=True,
                                  universal_newlines=True).stdout
        Conn.opened += 1
        check(ctl_text.startswith("# HELP cudackpt_build_info"), "cudackptctl metrics prints the text")
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        samples = {}
        for f in fams.values():
            check(f.name.startswith("cudackpt_"), "%s has the cudackpt_ prefix" % f.name)
            for s in f.samples:
                samples[(s.name, tuple(sorted(s.labels.items())))] = s.value

        def value(name, **labels):
            return samples.get((name, tuple(sorted(labels.items()))))

        for (method, res), n in sorted(made.items()):
            got = value("cudackpt_operations_total", method=method, result=res)
            check(got == n, "operations_total{method=%s,result=%s} = %s, %d calls made" % (method, res, got, n))
        total_ops = sum(v for (n, l), v in samples.items() if n == "cudackpt_operations_total")
        check(total_ops == sum(made.values()), "operations_total sums to %s, %d calls made" %
              (total_ops, sum(made.values())))
        check(fams["cudackpt_operation_duration_seconds"].type == "histogram", "the duration is a histogram")
        for method in set(m for m, _ in made):
            count = value("cudackpt_operation_duration_seconds_count", method=method)
            n = sum(v for (m, _), v in made.items() if m == method)
            check(count == n, "duration count of %s = %s, %d calls" % (method, count, n))
            check(value("cudackpt_operation_duration_seconds_bucket", method=method, le="+Inf") == n,
                  "+Inf bucket of %s" % method)
            prev = 0
            bounds = sorted(float(dict(l)["le"]) for (nm, l) in samples
                            if nm == "cudackpt_operation_duration_seconds_bucket" and dict(l).get("method") == method)
            for le in bounds:
                v = value("cudackpt_operation_duration_seconds_bucket", method=method,
                          le="+Inf" if le == float("inf") else ("%g" % le))
                check(v is not None and v >= prev, "buckets of %s grow" % method)
                prev = v if v is not None else prev
        expect = {
            ("cudackpt_leases_granted_total", ()): 2,
            ("cudackpt_leases_ended_total", (("reason", "released"),)): 1,
            ("cudackpt_leases_ended_total", (("reason", "expired"),)): 1,
            ("cudackpt_leases_ended_total", (("reason", "closed"),)): 0,
            ("cudackpt_lease_undos_total", (("result", "ok"),)): 1,
            ("cudackpt_lease_undos_total", (("result", "failed"),)): 0,
            ("cudackpt_leases", ()): 0,
            ("cudackpt_leased_processes", ()): 0,
            ("cudackpt_watchers", ()): 1,
            ("cudackpt_watch_events_total", ()): 7,  # "watching" is not counted
            ("cudackpt_operations_in_flight", ()): 0,
            ("cudackpt_operations_queued", ()): 0,
            ("cudackpt_groups_in_flight", ()): 0,
            ("cudackpt_connections", ()): 2,  # c and w: bad was cut off after its InvalidRequest
            ("cudackpt_disconnects_total", (("reason", "invalid_request"),)): 1,
            ("cudackpt_connections_refused_total", (("reason", "max_connections"),)): 0,
        }
        for (name, labels), want in expect.items():
            got = samples.get((name, labels))
            if name == "cudackpt_watch_events_total":
                check(got is not None and got >= 6, "%s = %s, at least 6 sent" % (name, got))
                continue
            check(got == want, "%s%s = %s, want %s" % (name, dict(labels), got, want))
        accepted = value("cudackpt_connections_accepted_total")
        check(accepted == Conn.opened - 1, "connections_accepted_total = %s, %d made before the metrics call"
              % (accepted, Conn.opened - 1))
        check(value("cudackpt_driver_info", version="%s" % dict(next(
            l for (n, l) in samples if n == "cudackpt_driver_info"))["version"], simulated="true") == 1,
            "driver_info says simulated")
        check(any(n == "cudackpt_build_info" for (n, l) in samples), "build_info")
        for conn in (c, w):
            conn.close()
    finally:
        for t in targets:
            t.kill()
            t.wait()
        d.terminate()
        d.wait(timeout=30)
    if failures:
        log.seek(0)
        print(log.read())
        return 1
    print("every counter matches the calls made")
    return 0


if __name__ == "__main__":
    sys.exit(main())
