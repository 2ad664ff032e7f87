"""The blocking connection to the daemon: an AF_UNIX stream socket that
carries :mod:`cudackpt._codec`'s messages, one request at a time, each read
against a deadline (:mod:`cudackpt._config`).
"""

from __future__ import annotations

import os
import socket
import time
from typing import Iterator, Optional

from . import errors
from ._codec import Framer, Message, check, encode, method_name
from ._config import (Deadline, connect_error, default_connect_timeout, default_socket, default_timeout, is_retryable,
                      limit, retry_delays)

_SPIN_YIELD_EVERY = 64
"""A spinning call yields its core once every this many tries, so that a
thread sharing it (the daemon's, on a small machine) runs."""
_RECV_CHUNK = 1 << 16


class Connection:
    """One connection to the daemon; one request at a time."""

    def __init__(self, path: Optional[str] = None, timeout: Optional[float] = None,
                 connect_timeout: Optional[float] = None, spin_us: int = 0) -> None:
        """Connects to ``path`` within ``timeout`` seconds (None: the
        default, infinity: no limit).  While the socket is missing or
        refuses (a daemon restarting), tries again for ``connect_timeout``
        seconds (None: ``$CUDACKPT_CONNECT_TIMEOUT_MS``, else 3 s; 0: one
        try), never past ``timeout``; then DaemonUnavailable.  ``spin_us``:
        how long :meth:`call` and :meth:`stream` poll for their reply
        without sleeping, in microseconds (0: never; see
        :class:`cudackpt.Client`)."""
        self.path = path or default_socket()
        self.spin_us = spin_us
        self._framer = Framer()
        self.last_used = time.monotonic()
        deadline = Deadline(default_timeout() if timeout is None else timeout)
        delays = retry_delays(default_connect_timeout() if connect_timeout is None else connect_timeout,
                              deadline.left())
        while True:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self._sock.settimeout(deadline.left())
                self._sock.connect(self.path)
                return
            except socket.timeout:
                self._sock.close()
                raise errors.CallTimeout("connecting to %s timed out" % self.path) from None
            except OSError as raised:
                self._sock.close()
                e = connect_error(raised, self.path)
                delay = next(delays) if is_retryable(e) else None
                if delay is None:
                    raise errors.DaemonUnavailable("cannot connect to cudackptd at %s: %s"
                                                   % (self.path, e.strerror or e)) from e
                time.sleep(delay)

    def fileno(self) -> int:
        return self._sock.fileno()

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def is_open(self) -> bool:
        """False once the daemon has closed its end (an idle timeout) or
        sent something unasked."""
        if self._framer.pending() or self._sock.fileno() < 0:
            return False
        self._sock.settimeout(0.0)  # a peek that never waits
        try:
            data = self._sock.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False
        del data  # end of file, or bytes nobody asked for: either way not reusable
        return False

    def send(self, method: str, parameters: Optional[Message] = None, more: bool = False,
             timeout: Optional[float] = None) -> None:
        """Sends one call (``timeout``: None for the default, infinity for
        no limit)."""
        self._sock.settimeout(limit(default_timeout() if timeout is None else timeout))
        try:
            self._sock.sendall(encode(method, parameters, more))
        except socket.timeout:
            raise errors.CallTimeout("sending %s timed out" % method_name(method)) from None
        except OSError as e:
            raise errors.ConnectionLost("the daemon closed the connection: %s" % (e.strerror or e)) from e
        self.last_used = time.monotonic()

    def receive(self, deadline: Deadline, what: str = "a reply", spin_until: float = 0.0) -> Message:
        """The next message, waited for until the deadline (a message
        already read is returned whatever the time; one that keeps coming
        in pieces past the deadline is not waited for).  Until
        ``spin_until`` (monotonic seconds; 0: not at all) the socket is
        polled without sleeping, then waited on as usual."""
        message = self._framer.next()
        while message is None:
            self._framer.feed(self._read(deadline, what, spin_until))
            message = self._framer.next()
            if message is None and deadline.passed():
                raise errors.CallTimeout("no %s from cudackptd in time" % what)
        self.last_used = time.monotonic()
        return message

    def _read(self, deadline: Deadline, what: str, spin_until: float) -> bytes:
        """The next bytes the daemon sends (never none: end of file raises)."""
        try:
            # A spin over (later reads of a long reply, or of a stream)
            # goes straight to the wait.
            spinning = spin_until and time.monotonic() < spin_until
            chunk = self._recv_spinning(spin_until) if spinning else None
            if chunk is None:
                self._sock.settimeout(deadline.left())
                chunk = self._sock.recv(_RECV_CHUNK)
        except socket.timeout:
            raise errors.CallTimeout("no %s from cudackptd in time" % what) from None
        except OSError as e:
            raise errors.ConnectionLost("the connection to cudackptd failed: %s" % (e.strerror or e)) from e
        if not chunk:
            raise errors.ConnectionLost("cudackptd closed the connection")
        return chunk

    def _recv_spinning(self, until: float) -> Optional[bytes]:
        """The bytes the daemon sends next (b"" at end of file), polled for
        with non-blocking reads until ``until`` (monotonic seconds), never
        sleeping but yielding the core now and then; None when none came."""
        self._sock.settimeout(0.0)
        tries = 0
        while True:
            try:
                return self._sock.recv(_RECV_CHUNK)
            except (BlockingIOError, InterruptedError):
                pass
            if time.monotonic() >= until:
                return None
            tries += 1
            if tries % _SPIN_YIELD_EVERY == 0:
                os.sched_yield()

    def _spin_until(self, deadline: Deadline) -> float:
        """When a call whose request has just gone stops spinning: spin_us
        from now, never past its deadline; 0 for no spin."""
        return deadline.within(self.spin_us / 1e6) if self.spin_us else 0.0

    def call(self, method: str, parameters: Optional[Message] = None,
             timeout: Optional[float] = None) -> Message:
        """Sends a call and returns its reply's parameters (or raises its
        error).  ``timeout``: None for the default, infinity for no limit."""
        deadline = Deadline(default_timeout() if timeout is None else timeout)
        self.send(method, parameters, timeout=deadline.left())
        return check(self.receive(deadline, "reply to " + method_name(method), self._spin_until(deadline)))

    def stream(self, method: str, parameters: Optional[Message] = None,
               timeout: Optional[float] = None) -> Iterator[Message]:
        """Sends a call with ``more`` and yields each reply's parameters,
        the last one included; an error reply is raised.  ``timeout``
        bounds the whole exchange."""
        deadline = Deadline(default_timeout() if timeout is None else timeout)
        self.send(method, parameters, more=True, timeout=deadline.left())
        spin_until = self._spin_until(deadline)
        while True:
            reply = self.receive(deadline, "reply to " + method_name(method), spin_until)
            parameters_ = check(reply)
            yield parameters_
            if not reply.get("continues"):
                return
            if deadline.passed():  # replies that keep coming do not stretch it
                raise errors.CallTimeout("no %s from cudackptd in time" % ("reply to " + method_name(method)))
