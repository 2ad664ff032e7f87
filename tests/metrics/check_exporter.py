#!/usr/bin/python3
"""metrics.exporter: cudackptctl metrics --listen, scraped over HTTP.

The daemon on the simulator, on a socket of its own; the exporter on a
loopback port the kernel picks (127.0.0.1:0, then [::1]:0 where the host
has IPv6), scraped with urllib and read by prometheus_client's parser:
  - GET /metrics is 200, text/plain; version=0.0.4, and a counter moves
    by exactly the calls made between two scrapes;
  - another path is 404, another method 405;
  - connections beyond the exporter's bound wait unserved, and it serves on;
  - slow clients (a header line now and then, never the end of the
    request), from one address and then from ten, cannot keep a scraper
    from 127.0.0.1 from its answer: the per-address bound, and a whole
    request's deadline, which the bytes they send do not extend;
  - the per-address bound counts all of 127.0.0.0/8 as one address (16
    clients from 127.0.0.1..127.0.0.16 get 4 connections, on an IPv4 and on
    a dual-stack listener, where they show as IPv4-mapped IPv6 addresses),
    and other IPv4 addresses by --ipv4-prefix;
  - a daemon that accepts but never answers is 503 within --timeout;
  - a stopped daemon is 503 with one line saying why, a restarted one 200;
  - SIGTERM ends the exporter with status 0.

The clients of other addresses than loopback come from 10.9.0.2..11, in a
network namespace of the test's own (unshare --net, root) whose lo also has
10.9.0.1/24; without root those checks are skipped, said on stdout.

Usage: check_exporter.py CUDACKPTD SIMULATOR CUDACKPTCTL
Exits 77 (skipped) without prometheus_client, or when cudackptctl was built
without libmicrohttpd."""
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("SKIP: prometheus_client is not installed (python3-prometheus-client)")
    sys.exit(77)

MAX_CONNECTIONS = 32  # EXPORTER_MAX_CONNECTIONS of client/ctl/exporter.c
PER_ADDRESS = 4  # CTL_SCRAPE_PER_ADDRESS of client/ctl/main/cudackptctl.c
# Addresses for clients other than the scraper (127.0.0.1): the exporter
# bounds connections per address, and counts all of 127.0.0.0/8 as one, so
# these are of a network namespace of the test's own (enter_netns()).
OTHER_ADDRESSES = ["10.9.0.%d" % i for i in range(2, 12)]
LOOPBACK_ADDRESSES = ["127.0.0.%d" % i for i in range(1, 17)]
NETNS_ENV = "CUDACKPT_TEST_EXPORTER_NETNS"
from metrics_check import check, verdict  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from simdaemon import SimDaemon  # noqa: E402


def get(url, method="GET", timeout=20):
    """(status, headers, body) of one request."""
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def scrape_ok(e):
    """Whether a scrape is answered 200 now (not refused, as one past the
    per-address bound is until connections that just closed have gone)."""
    try:
        return get(e.url("/metrics"))[0] == 200
    except OSError:
        return False


def wait_for(cond, what, timeout=10):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise RuntimeError("timed out waiting for " + what)
        time.sleep(0.01)


class Exporter:
    """cudackptctl metrics --listen ADDR, up once it says where it listens."""

    def __init__(self, ctl, sock, listen, *extra):
        self.p = subprocess.Popen([ctl, "--socket=" + sock, "metrics", "--listen=" + listen] + list(extra),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.err = b""
        deadline = time.monotonic() + 10
        while b"\n" not in self.err:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.p.stderr], [], [], left)[0]:
                raise RuntimeError("the exporter did not start: %r" % self.err)
            chunk = os.read(self.p.stderr.fileno(), 4096)
            if not chunk:
                raise RuntimeError("the exporter exited %s: %r" % (self.p.wait(), self.err))
            self.err += chunk
        line = self.err.decode().splitlines()[0]
        m = re.search(r"serving GET /metrics on (\S*):(\d+) ", line)
        if not m:
            raise RuntimeError("unexpected first line: " + line)
        self.host, self.port = m.group(1), int(m.group(2))

    def url(self, path):
        return "http://%s:%d%s" % (self.host or "127.0.0.1", self.port, path)  # ":PORT": every address

    def stop(self):
        """SIGTERM; returns (exit status, what it said)."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        try:
            rest = self.p.communicate(timeout=20)[1]
        except subprocess.TimeoutExpired:
            self.p.kill()
            rest = self.p.communicate()[1]
        return self.p.returncode, (self.err + rest).decode(errors="replace")


def counter(text, name, **labels):
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name and s.labels == labels:
                return s.value
    return 0.0


def check_scrapes(e, ctl, sock, target):
    status, headers, text = get(e.url("/metrics"))
    check(status == 200, "GET /metrics: %d %s" % (status, text[:200]))
    ctype = headers.get("Content-Type", "")
    check(ctype.startswith("text/plain; version=0.0.4"), "Content-Type %r" % ctype)
    check(text.startswith("# HELP cudackpt_build_info"), "the body is GetMetrics's text")
    before = counter(text, "cudackpt_operations_total", method="GetState", result="ok")
    for _ in range(3):
        r = subprocess.run([ctl, "--socket=" + sock, "state", str(target)], capture_output=True, text=True)
        check(r.returncode == 0 and r.stdout.strip() == "running", "state: %d %s" % (r.returncode, r.stderr))
    status, _, text = get(e.url("/metrics?x=1"))
    after = counter(text, "cudackpt_operations_total", method="GetState", result="ok")
    check(status == 200 and after == before + 3,
          "operations_total{GetState,ok} went from %s to %s over 3 calls" % (before, after))
    for path in ("/", "/metrics/", "/metricsx", "/favicon.ico"):
        status, _, body = get(e.url(path))
        check(status == 404, "GET %s: %d, want 404" % (path, status))
    for method in ("POST", "PUT", "DELETE", "HEAD"):
        status, headers, _ = get(e.url("/metrics"), method=method)
        check(status == 405 and headers.get("Allow") == "GET", "%s /metrics: %d, want 405, Allow: GET"
              % (method, status))


def sockets_of(pid):
    n = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            n += os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("socket:")
        except OSError:
            pass
    return n


def accept_backlog(port):
    """Connections waiting in the accept queue of the IPv4 listener on port."""
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[1].endswith(":%04X" % port) and fields[3] == "0A":
                return int(fields[4].split(":")[1], 16)
    return None


def check_connection_bound(e):
    """Idle connections past the bound wait in the kernel's accept queue,
    unserved; once they go, it serves again."""
    conns = [socket.create_connection(("127.0.0.1", e.port), timeout=10, source_address=(a, 0))
             for a in OTHER_ADDRESSES for _ in range(PER_ADDRESS)]
    check(len(conns) == MAX_CONNECTIONS + 8, "%d connections, want %d" % (len(conns), MAX_CONNECTIONS + 8))
    try:
        # The listener and MAX_CONNECTIONS accepted; 8 left to wait.
        wait_for(lambda: sockets_of(e.p.pid) == 1 + MAX_CONNECTIONS and accept_backlog(e.port) == 8,
                 "%d connections accepted and 8 waiting" % MAX_CONNECTIONS)
    except RuntimeError as err:
        check(False, "%s: the exporter holds %d sockets, %s wait" % (err, sockets_of(e.p.pid),
                                                                     accept_backlog(e.port)))
    for s in conns:
        s.close()
    wait_for(lambda: get(e.url("/metrics"))[0] == 200, "a scrape after the idle connections closed")


class SlowClients:
    """per_address connections from each of addresses that send a request a
    header line at a time, one line every `every` seconds, never ending it;
    one the exporter closes (or answers) is opened again, at most every
    `every` seconds.  A thread of their own, for at most `limit` seconds."""

    def __init__(self, port, addresses, per_address, every=0.5, limit=60):
        self.port, self.every, self.limit = port, every, limit
        self.slots = [[a, None, 0.0] for a in addresses for _ in range(per_address)]
        self.opened = 0
        self.stopping = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def step(self, slot):
        addr, s, _ = slot
        slot[2] = time.monotonic()
        try:
            if s is None:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                slot[1] = s
                s.settimeout(0.2)
                s.bind((addr, 0))
                s.connect(("127.0.0.1", self.port))
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                self.opened += 1
            elif select.select([s], [], [], 0)[0]:
                raise OSError("closed or answered")
            else:
                s.sendall(b"X-Slow: %d\r\n" % self.opened)
        except OSError:
            s.close()
            slot[1] = None

    def run(self):
        end = time.monotonic() + self.limit
        while not self.stopping and time.monotonic() < end:
            for slot in self.slots:
                if time.monotonic() - slot[2] >= self.every:
                    self.step(slot)
            time.sleep(0.02)
        for slot in self.slots:
            if slot[1]:
                slot[1].close()

    def stop(self):
        self.stopping = True
        self.thread.join()


def scrape_within(e, bound, what):
    """GET /metrics from 127.0.0.1 must be 200, parsed, within bound seconds."""
    t0 = time.monotonic()
    try:
        status, _, text = get(e.url("/metrics"), timeout=bound)
        ok = status == 200 and any(f.name == "cudackpt_build_info" for f in text_string_to_metric_families(text))
    except OSError as err:
        status, ok = err, False
    took = time.monotonic() - t0
    check(ok and took < bound, "%s: a scrape got %s after %.1f s, want 200 within %.1f s" % (what, status, took, bound))


def check_slow_clients(ctl, sock):
    """Slow clients beside a scraper: from one address they get
    --max-per-address connections, no more; from ten they fill every slot,
    and each loses its connection at --request-deadline however often it
    sends, so the scraper waits at most about one deadline for a slot."""
    deadline = 2.0
    for bad, why in ((["--request-deadline=1000", "--timeout=1000"], "a deadline not beyond --timeout"),
                     (["--max-per-address=33"], "more per address than connections")):
        r = subprocess.run([ctl, "--socket=" + sock, "metrics", "--listen=127.0.0.1:0"] + bad,
                           capture_output=True, text=True, timeout=10)
        check(r.returncode == 2, "%s: exit %d, want 2 (%s)" % (bad, r.returncode, r.stderr.strip()))
    r = subprocess.run([ctl, "--socket=" + sock, "metrics", "--max-per-address=2"], capture_output=True, text=True,
                       timeout=10)
    check(r.returncode == 2, "--max-per-address without --listen: exit %d, want 2" % r.returncode)
    e = Exporter(ctl, sock, "127.0.0.1:0", "--timeout=1000", "--request-deadline=%d" % (deadline * 1000),
                 "--max-per-address=%d" % PER_ADDRESS)
    try:
        slow = SlowClients(e.port, OTHER_ADDRESSES[:1], MAX_CONNECTIONS + 8)
        try:
            wait_for(lambda: sockets_of(e.p.pid) > PER_ADDRESS, "the slow clients of one address connected")
            for _ in range(3):
                scrape_within(e, deadline, "40 slow clients from one address")
        finally:
            slow.stop()
        slow = SlowClients(e.port, OTHER_ADDRESSES, PER_ADDRESS)
        try:
            wait_for(lambda: sockets_of(e.p.pid) > MAX_CONNECTIONS, "the slow clients filling every slot")
            for _ in range(3):
                scrape_within(e, 2 * deadline + 1, "40 slow clients from 10 addresses")
            try:
                wait_for(lambda: slow.opened > len(slow.slots), "the slow clients to connect again", timeout=5)
            except RuntimeError:
                check(False, "the slow clients were never cut off: %d connections opened" % slow.opened)
        finally:
            slow.stop()
    finally:
        rc, said = e.stop()
    check(rc == 0, "the exporter beside slow clients exited %d: %s" % (rc, said))


def enter_netns():
    """Runs this script again in a network namespace of its own whose lo
    has 10.9.0.1/24 (every address of it local), when root; True once in
    it, False where it cannot be."""
    if os.environ.get(NETNS_ENV) == "1":
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
        subprocess.run(["ip", "addr", "add", "10.9.0.1/24", "dev", "lo"], check=True)
        return True
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        return False
    os.environ[NETNS_ENV] = "1"
    sys.stdout.flush()
    os.execvp("unshare", ["unshare", "--net", sys.executable] + sys.argv)
    return False


def connect_from(addresses, port):
    """One idle connection to 127.0.0.1:port from each address."""
    conns = []
    for a in addresses:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(10)
        s.bind((a, 0))
        s.connect(("127.0.0.1", port))
        conns.append(s)
    return conns


def closed_by_peer(s):
    if not select.select([s], [], [], 0)[0]:
        return False
    try:
        return s.recv(1) == b""
    except OSError:
        return True


def check_group_bound(ctl, sock, listen, addresses, extra, what):
    """A client connecting from each of addresses, one group for the
    exporter: --max-per-address (4) of its connections are kept, the others
    closed at once; once they go, a scrape is answered."""
    e = Exporter(ctl, sock, listen, *extra)
    try:
        conns = connect_from(addresses, e.port)
        try:
            want = len(addresses) - PER_ADDRESS
            wait_for(lambda: sum(closed_by_peer(s) for s in conns) >= want, "%s: %d connections closed" % (what, want),
                     timeout=5)
        except RuntimeError:
            check(False, "%s: the exporter keeps %d sockets for %d connections from %d addresses, want %d"
                  % (what, sockets_of(e.p.pid) - 1, len(conns), len(addresses), PER_ADDRESS))
        else:
            kept = [s for s in conns if not closed_by_peer(s)]
            check(len(kept) == PER_ADDRESS and sockets_of(e.p.pid) == 1 + PER_ADDRESS,
                  "%s: %d connections kept, the exporter holds %d sockets, want %d" %
                  (what, len(kept), sockets_of(e.p.pid), PER_ADDRESS))
        for s in conns:
            s.close()
        wait_for(lambda: scrape_ok(e), "%s: a scrape once they closed" % what)
    finally:
        rc, said = e.stop()
    check(rc == 0, "the exporter of %s exited %d: %s" % (what, rc, said))


def check_address_groups(ctl, sock, netns):
    check_group_bound(ctl, sock, "127.0.0.1:0", LOOPBACK_ADDRESSES, [], "16 loopback addresses")
    check_group_bound(ctl, sock, ":0", LOOPBACK_ADDRESSES, [], "16 loopback addresses, dual stack (IPv4-mapped)")
    for bad in ("--ipv4-prefix=33", "--ipv6-prefix=129", "--ipv4-prefix=x"):
        r = subprocess.run([ctl, "--socket=" + sock, "metrics", "--listen=127.0.0.1:0", bad],
                           capture_output=True, text=True, timeout=10)
        check(r.returncode == 2, "%s: exit %d, want 2 (%s)" % (bad, r.returncode, r.stderr.strip()))
    if netns:
        check_group_bound(ctl, sock, "127.0.0.1:0", OTHER_ADDRESSES, ["--ipv4-prefix=24"],
                          "10 addresses of one /24 under --ipv4-prefix=24")


def check_silent_daemon(ctl, tmp):
    """A daemon that accepts and never answers: 503 within --timeout."""
    path = os.path.join(tmp, "silent")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(16)
    e = Exporter(ctl, path, "127.0.0.1:0", "--timeout=300")
    try:
        t0 = time.monotonic()
        status, _, body = get(e.url("/metrics"))
        took = time.monotonic() - t0
        check(status == 503 and took < 5, "a silent daemon: %d after %.1f s (%r), want 503 after 0.3 s"
              % (status, took, body))
    finally:
        rc, said = e.stop()
        srv.close()
    check(rc == 0, "the exporter of the silent daemon exited %d: %s" % (rc, said))


def main():
    daemon, sim, ctl = sys.argv[1:4]
    h = subprocess.run([ctl, "--help"], capture_output=True, text=True).stdout
    if "NOT in this build" in h:
        print("SKIP: cudackptctl was built without libmicrohttpd (metrics --listen)")
        return 77
    netns = enter_netns()
    if not netns:
        print("not root: no network namespace of 10.9.0.0/24, the bounds with clients of several addresses are "
              "not checked")
    tmp = tempfile.mkdtemp(prefix="cudackpt-exporter-")
    target = subprocess.Popen(["sleep", "600"], env=dict(os.environ, CUDACKPT_SIM="1", CUDACKPT_SIM_MEM_MIB="8"))
    exporters, d = [], None
    try:
        wait_for(lambda: "python" not in os.readlink("/proc/%d/exe" % target.pid), "the target's exec")
        d = SimDaemon(daemon, sim, prefix="cudackpt-exporter-")
        sock = d.socket
        exporters.append(Exporter(ctl, sock, "127.0.0.1:0"))
        check(exporters[0].host == "127.0.0.1", "listens on %s" % exporters[0].host)
        try:
            exporters.append(Exporter(ctl, sock, "[::1]:0"))
        except RuntimeError as err:
            print("no IPv6 loopback here, [::1] not checked: %s" % err)
        for e in exporters:
            check_scrapes(e, ctl, sock, target.pid)
        if netns:
            check_connection_bound(exporters[0])
            check_slow_clients(ctl, sock)
        check_address_groups(ctl, sock, netns)
        check_silent_daemon(ctl, tmp)

        d.terminate()
        status, _, body = get(exporters[0].url("/metrics"))
        check(status == 503, "a stopped daemon: %d, want 503" % status)
        check(body.count("\n") == 1 and body.startswith("cannot reach cudackptd at " + sock),
              "503's body is one line saying why: %r" % body)
        d.restart()
        status, _, _ = get(exporters[0].url("/metrics"))
        check(status == 200, "the daemon back: %d, want 200" % status)
        said = {}
        for e in exporters:
            rc, said[e] = e.stop()
            check(rc == 0 and "SIGTERM: stopping" in said[e], "SIGTERM: exit %d, said %r" % (rc, said[e]))
        said = said[exporters[0]]
        check("scrape failed (HTTP 503)" in said and "scrapes answered again" in said,
              "the exporter logs the daemon going and coming back: %r" % said)
    finally:
        for e in exporters:
            if e.p.poll() is None:
                e.p.kill()
                e.p.wait()
        target.kill()
        target.wait()
        said = d.stop() if d else ""
        shutil.rmtree(tmp, ignore_errors=True)
    return verdict(said, "the exporter serves, counts, refuses and fails as it should")


if __name__ == "__main__":
    sys.exit(main())
