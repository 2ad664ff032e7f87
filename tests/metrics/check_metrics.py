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
import time

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("prometheus_client is not installed (python3-prometheus-client): skipped")
    sys.exit(77)

IFACE = "io.cudackpt.Process."
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "lib"), os.path.join(HERE, "..", "..", "python")]
import cudackpt  # noqa: E402
from metrics_check import check, verdict  # noqa: E402
from simdaemon import SimDaemon  # noqa: E402


class CountingClient(cudackpt.Client):
    """The package's client, counting the connections it opens (the
    daemon's accepted counter is checked against them)."""
    opened = 0

    def connect(self, timeout=None):
        CountingClient.opened += 1
        return super().connect(timeout)


def garbage(sock):
    """Bytes that are not JSON on a connection of their own: the daemon's
    error reply, after which it closes the connection."""
    CountingClient.opened += 1
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(20)
        s.connect(sock)
        s.sendall(b"this is not json\0")
        buf = b""
        while b"\0" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    return json.loads(buf.split(b"\0", 1)[0]) if buf else {}


def main():
    daemon, sim, ctl = sys.argv[1:4]
    d = SimDaemon(daemon, sim, {"watch_scan_ms": 0}, prefix="cudackpt-metrics-")
    sock = d.socket
    env = dict(os.environ, CUDACKPT_SIM="1", CUDACKPT_SIM_MEM_MIB="8")
    targets = [subprocess.Popen(["sleep", "600"], env=env) for _ in range(2)]
    try:
        for t in targets:  # exec'd, so the simulator sees the environment
            while "python" in os.readlink("/proc/%d/exe" % t.pid):
                time.sleep(0.01)
        a, b = (t.pid for t in targets)
        made = {}  # (method, result) -> calls
        c = CountingClient(sock, timeout=20)

        def call(method, **params):
            try:
                r = c.call(method, params)
                res = "ok"
            except cudackpt.CudackptError as e:
                r = {"error": e.name}
                res = e.name.rsplit(".", 1)[-1]
            made[(method, res)] = made.get((method, res), 0) + 1
            return r

        for _ in range(3):
            check(call("GetState", pid=a)["state"] == "running", "GetState running")
        call("Lock", pid=a)
        call("Unlock", pid=a)
        check(call("Unlock", pid=a).get("error") == IFACE + "InvalidState", "Unlock of a running process")
        r = call("Suspend", pid=a, lease_ms=100000)
        lease = r["lease"]["id"]
        check(c.call("ReleaseLease", {"lease": lease})["lease"] == lease, "ReleaseLease")
        call("Resume", pid=a)
        call("Lock", pid=b, lease_ms=100)
        while True:  # the expired lease is undone, its last step ended
            p = call("GetState", pid=b)
            if p["state"] == "running" and "in_flight" not in p:
                break
            time.sleep(0.02)
        dead = subprocess.Popen(["true"])
        dead.wait()
        check(call("GetState", pid=dead.pid).get("error") == IFACE + "NoSuchProcess", "GetState of a dead pid")
        check(garbage(sock).get("error") == IFACE + "InvalidRequest", "garbage refused")
        w = c.watch()  # its first event, "watching", read
        call("Lock", pid=a)
        call("Unlock", pid=a)
        for _ in range(6):  # started, finished, state of each
            w.next(timeout=20)

        text = c.metrics()
        ctl_text = subprocess.run([ctl, "--socket=" + sock, "metrics"], stdout=subprocess.PIPE, check=True,
                                  universal_newlines=True).stdout
        CountingClient.opened += 1
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
            ("cudackpt_connections", ()): 2,  # c's and w's: garbage's was cut off after its InvalidRequest
            ("cudackpt_disconnects_total", (("reason", "invalid_request"),)): 1,
            ("cudackpt_connections_refused_total", (("reason", "max_connections"),)): 0,
            ("cudackpt_accept_pauses_total", (("reason", "descriptors"),)): 0,
            ("cudackpt_accept_pauses_total", (("reason", "other"),)): 0,
        }
        for (name, labels), want in expect.items():
            got = samples.get((name, labels))
            if name == "cudackpt_watch_events_total":
                check(got is not None and got >= 6, "%s = %s, at least 6 sent" % (name, got))
                continue
            check(got == want, "%s%s = %s, want %s" % (name, dict(labels), got, want))
        accepted = value("cudackpt_connections_accepted_total")
        check(accepted == CountingClient.opened - 1, "connections_accepted_total = %s, %d made before the metrics call"
              % (accepted, CountingClient.opened - 1))
        check(value("cudackpt_driver_info", version="%s" % dict(next(
            l for (n, l) in samples if n == "cudackpt_driver_info"))["version"], simulated="true") == 1,
            "driver_info says simulated")
        check(any(n == "cudackpt_build_info" for (n, l) in samples), "build_info")
        w.close()
        c.close()
    finally:
        for t in targets:
            t.kill()
            t.wait()
        said = d.stop()
    return verdict(said, "every counter matches the calls made")


if __name__ == "__main__":
    sys.exit(main())
