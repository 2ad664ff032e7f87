"""A fake cudackptd for reply-level tests: a Varlink server on a unix socket
in a fresh directory that answers each call as a test's ``handler`` says,
replies the real daemon never sends in that order (late, stale, left over)
included.

``handler(call, conn)`` gets each call (the decoded message) and the
:class:`FakeConn` it came on, and answers by ``conn.reply(...)`` /
``conn.error(...)`` as many times as it likes (or not at all).  The server
records every call (``calls``: (connection number, method) pairs) and every
connection the client closed (``closed``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

PREFIX = "io.cudackpt.Process."


class FakeConn:
    def __init__(self, sock: socket.socket, number: int) -> None:
        self.sock, self.number = sock, number
        self._send_lock = threading.Lock()

    def send(self, message: Dict[str, Any]) -> None:
        with self._send_lock:
            try:
                self.sock.sendall(json.dumps(message).encode() + b"\0")
            except OSError:
                pass  # the client has gone: what a late reply meets

    def reply(self, parameters: Optional[Dict[str, Any]] = None, continues: bool = False,
              delay: float = 0.0) -> None:
        """A reply, after ``delay`` seconds (in the background: the server
        goes on reading calls meanwhile)."""
        message: Dict[str, Any] = {"parameters": parameters or {}}
        if continues:
            message["continues"] = True
        self._later(message, delay)

    def error(self, name: str, parameters: Optional[Dict[str, Any]] = None, delay: float = 0.0) -> None:
        self._later({"error": name if "." in name else PREFIX + name, "parameters": parameters or {}}, delay)

    def _later(self, message: Dict[str, Any], delay: float) -> None:
        if delay <= 0:
            self.send(message)
            return

        def later() -> None:
            time.sleep(delay)
            self.send(message)
        threading.Thread(target=later, daemon=True).start()


Handler = Callable[[Dict[str, Any], FakeConn], None]


class FakeDaemon:
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.dir = tempfile.mkdtemp(prefix="cudackpt-fake-")
        self.socket = os.path.join(self.dir, "sock")
        self.calls: List[Tuple[int, str]] = []
        self.closed: Set[int] = set()
        self.connections = 0
        self._cond = threading.Condition()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.socket)
        self._listener.listen(16)
        self._stopping = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            with self._cond:
                self.connections += 1
                number = self.connections
            threading.Thread(target=self._serve, args=(FakeConn(sock, number),), daemon=True).start()

    def _serve(self, conn: FakeConn) -> None:
        buf = b""
        try:
            while True:
                while b"\0" not in buf:
                    try:
                        chunk = conn.sock.recv(65536)
                    except OSError:
                        chunk = b""
                    if not chunk:
                        return
                    buf += chunk
                data, buf = buf.split(b"\0", 1)
                call = json.loads(data.decode())
                method = call["method"]
                with self._cond:
                    self.calls.append((conn.number, method[len(PREFIX):] if method.startswith(PREFIX) else method))
                    self._cond.notify_all()
                self.handler(call, conn)
        finally:
            with self._cond:
                self.closed.add(conn.number)
                self._cond.notify_all()
            conn.sock.close()

    def methods(self, number: Optional[int] = None) -> List[str]:
        with self._cond:
            return [m for n, m in self.calls if number is None or n == number]

    def await_closed(self, number: int, timeout: float = 10.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: number in self.closed, timeout)

    def stop(self) -> None:
        self._listener.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "FakeDaemon":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---- floods, served from a process of their own (no GIL shared with the
# client, so the client never waits a millisecond for the next bytes) --------

def _flood(conn: FakeConn, data: bytes, seconds: float, then: Optional[bytes] = None, pace_s: float = 0.0) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            conn.sock.sendall(data)
        except OSError:
            return
        if pace_s:
            until = time.monotonic() + pace_s
            while time.monotonic() < until:
                pass
    if then is not None:
        try:
            conn.sock.sendall(then)
        except OSError:
            pass


def _message(message: Dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\0"


def flood_handler(mode: str, seconds: float = 4.0) -> Handler:
    """``trickle``: every call's reply a few bytes at a time, each within
    0.1 ms, for ``seconds``; ``progress``: a stream of progress replies
    for ``seconds``; ``events``: Watch's ``watching``, then events."""
    def handler(call: Dict[str, Any], conn: FakeConn) -> None:
        if mode == "trickle":
            data = _message({"parameters": {"pid": 10, "state": "running", "pad": "x" * 1000000}})
            pieces = (data[i:i + 16] for i in range(0, len(data), 16))
            end = time.monotonic() + seconds
            for piece in pieces:
                if time.monotonic() > end:
                    break
                try:
                    conn.sock.sendall(piece)
                except OSError:
                    return
                until = time.monotonic() + 0.0001
                while time.monotonic() < until:
                    pass
        elif mode == "progress":
            progress = _message({"parameters": {"progress": {
                "phase": "lock", "member": {"pid": 10, "start_time": 1, "state": "locked"}, "done": 1, "total": 2}},
                "continues": True})
            _flood(conn, progress * 64, seconds, _message({"parameters": {"members": [], "skipped": []}}))
        elif mode == "events":
            conn.reply({"event": {"type": "watching", "time": 1.0}}, continues=True)
            event = _message({"parameters": {"event": {"type": "state", "time": 2.0, "pid": 10}}, "continues": True})
            _flood(conn, event * 64, seconds)
    return handler


if __name__ == "__main__":
    import sys
    fake = FakeDaemon(flood_handler(sys.argv[1]))
    print(fake.socket, flush=True)
    sys.stdin.read()  # until the test ends
    fake.stop()
