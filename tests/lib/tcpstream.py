"""tcpstream.py: the TCP stream between two parts of a job that the tests
of a job cut across parts share (tests/jobcmd/test_cut.py, test_parts.py):
a server part that checks every numbered line a client part sends it,
writing how far it got (or "BAD ...") to a file, the network lock's rules
CRIU leaves for the connection, and what the tests need to run at all.  Scripts import it after putting
tests/lib on sys.path, as simdaemon.py."""

from __future__ import annotations

import shutil
import subprocess
from typing import List, Optional

from savejobs import usable_criu

# python3 SERVER PORTFILE OUTFILE: listens on the loopback (its port in
# PORTFILE), then checks the lines of the one connection it accepts.
SERVER = r"""
import os, socket, sys
port, out = sys.argv[1], sys.argv[2]
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(1)
with open(port + ".tmp", "w") as f:
    f.write(str(srv.getsockname()[1]))
os.rename(port + ".tmp", port)
c = srv.accept()[0]
srv.close()
want, f = 1, c.makefile("rb")
for line in f:
    n = int(line)
    state = str(n) if n == want else "BAD %d after %d" % (n, want - 1)
    if n % 50 == 0 or n != want:
        with open(out + ".tmp", "w") as o:
            o.write(state)
        os.rename(out + ".tmp", out)
    if n != want:
        sys.exit(1)
    want += 1
"""

# python3 CLIENT PORTFILE STOPFILE: sends numbered lines until STOPFILE exists.
CLIENT = r"""
import os, socket, sys, time
port, stop = sys.argv[1], sys.argv[2]
c = socket.create_connection(("127.0.0.1", int(open(port).read())))
n = 0
while not os.path.exists(stop):
    n += 1
    c.sendall(b"%d\n" % n)
    time.sleep(0.0005)
"""


def read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def count(path: str) -> int:
    """The server's count: the last line it checked, -1 once one was lost
    or repeated, 0 before the first report."""
    s = read(path)
    return int(s) if s.isdigit() else (-1 if s.startswith("BAD") else 0)


def lock_rules(port: int) -> List[str]:
    """CRIU's iptables rules dropping the packets of a connection to port."""
    out = subprocess.run(["iptables", "-S"], stdout=subprocess.PIPE, text=True).stdout
    return [line for line in out.splitlines() if "DROP" in line and str(port) in line.split()]


def drop_lock_rules(port: int) -> None:
    """Removes what lock_rules(port) finds (a test's cleanup)."""
    for rule in lock_rules(port):
        subprocess.run(["iptables"] + rule.replace("-A", "-D", 1).split())


def cut_criu() -> Optional[str]:
    """The criu to cut a stream with: usable_criu(), where iptables works
    too (CRIU's lock); else None, said, for the test to skip."""
    criu = usable_criu()
    if not criu or not shutil.which("iptables") or subprocess.run(["iptables", "-S"], stdout=subprocess.DEVNULL,
                                                                 stderr=subprocess.DEVNULL).returncode != 0:
        print("SKIP: no criu that passes `criu check` ($CUDACKPT_CRIU), or no usable iptables")
        return None
    return criu
