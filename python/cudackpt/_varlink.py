"""Varlink transport: one JSON object per message, each ended by a NUL byte,
on an AF_UNIX stream socket.

This module knows bytes and messages only: it sends calls, reads replies
against a deadline, and turns an error reply into the exception that
:mod:`cudackpt.errors` names for it.  What the methods mean is elsewhere.
"""

from __future__ import annotations

import errno
import json
import math
import os
import socket
import stat
import time
from typing import Any, Dict, Iterator, Optional

from . import errors

INTERFACE = "io.cudackpt.Process"
DEFAULT_SOCKET = "/run/cudackpt/io.cudackpt.Process"
SOCKET_ENV = "CUDACKPT_SOCKET"
TIMEOUT_ENV = "CUDACKPT_TIMEOUT"
DEFAULT_TIMEOUT = 300.0
"""Seconds a call waits for its reply unless told otherwise: long enough for
the checkpoint of a large GPU's memory (about 0.8 s per GiB on an H200)."""
CONNECT_TIMEOUT_ENV = "CUDACKPT_CONNECT_TIMEOUT_MS"
DEFAULT_CONNECT_TIMEOUT = 3.0
"""Seconds connecting waits for a daemon that is not there (restarting,
upgraded), as the C library's CUDACKPT_CONNECT_TIMEOUT_MS default."""
MAX_CONNECT_TIMEOUT = 600.0
RETRY_ERRNOS = (errno.ENOENT, errno.ECONNREFUSED, errno.EAGAIN)
"""A daemon that is restarting has no socket file, a file nobody listens on,
or a full backlog, for a moment: connecting is tried again."""
_RETRY_FIRST_S, _RETRY_MAX_S = 0.02, 0.5
SPIN_ENV = "CUDACKPT_SPIN_US"
MAX_SPIN_US = 1000000
"""The longest spin for a reply, in microseconds, as the C library's
CUDACKPT_CLIENT_SPIN_MAX_US."""
_SPIN_YIELD_EVERY = 64
"""A spinning call yields its core once every this many tries, so that a
thread sharing it (the daemon's, on a small machine) runs."""

_RECV_CHUNK = 1 << 16
MAX_MESSAGE = 64 << 20
"""The longest message read (a ListProcesses of many processes), as aio's."""

Message = Dict[str, Any]


def default_socket() -> str:
    """The socket named by ``$CUDACKPT_SOCKET`` (when set and not empty),
    else the daemon's default path."""
    return os.environ.get(SOCKET_ENV) or DEFAULT_SOCKET


def default_timeout() -> float:
    """Seconds from ``$CUDACKPT_TIMEOUT`` (a positive number), else
    :data:`DEFAULT_TIMEOUT`."""
    value = os.environ.get(TIMEOUT_ENV)
    if value:
        try:
            seconds = float(value)
        except ValueError:
            seconds = 0.0
        if seconds > 0:
            return seconds
    return DEFAULT_TIMEOUT


def _env_number(value: Optional[str]) -> bool:
    """Whether an environment value is a plain decimal number short enough
    to convert (no sign, no spaces; ``int()`` refuses over 4300 digits)."""
    return bool(value) and len(value) <= 18 and value.isdigit() and value.isascii()


def default_connect_timeout() -> float:
    """Seconds from ``$CUDACKPT_CONNECT_TIMEOUT_MS`` (milliseconds, 0 to
    600000; 0: one try), else :data:`DEFAULT_CONNECT_TIMEOUT` (as the C
    library reads it)."""
    value = os.environ.get(CONNECT_TIMEOUT_ENV)
    if _env_number(value) and int(value) <= MAX_CONNECT_TIMEOUT * 1000:
        return int(value) / 1000.0
    return DEFAULT_CONNECT_TIMEOUT


def default_spin_us() -> int:
    """Microseconds from ``$CUDACKPT_SPIN_US`` (0 to :data:`MAX_SPIN_US`),
    else 0: no spin (as the C library reads it)."""
    value = os.environ.get(SPIN_ENV)
    if _env_number(value) and int(value) <= MAX_SPIN_US:
        return int(value)
    return 0


def retry_delays(connect_timeout: float, timeout: Optional[float]) -> Iterator[Optional[float]]:
    """The waits between tries of connecting: 20 ms, doubling up to 0.5 s,
    for ``connect_timeout`` seconds in all but never past ``timeout`` (the
    call's own limit; None or infinity: none).  Each value is the time to
    wait before the next try, or None once no time is left."""
    window = connect_timeout if limit(timeout) is None else min(connect_timeout, max(float(timeout or 0), 0.0))
    end = time.monotonic() + window
    delay = _RETRY_FIRST_S
    while True:
        left = end - time.monotonic()
        if left <= 0:
            yield None
            return
        yield min(delay, left)
        delay = min(delay * 2, _RETRY_MAX_S)


def connect_error(error: OSError, path: str) -> OSError:
    """The error of a failed connect() to path: ECONNREFUSED from a path
    that is no socket at all (a regular file) becomes ENOTSOCK, which no
    restart of the daemon mends, as the C library says it."""
    if error.errno == errno.ECONNREFUSED:
        try:
            if not stat.S_ISSOCK(os.stat(path).st_mode):
                return OSError(errno.ENOTSOCK, "not a socket", path)
        except OSError:
            pass
    return error


def is_retryable(error: OSError) -> bool:
    """Whether a failure to connect is one of a daemon restarting."""
    return error.errno in RETRY_ERRNOS


def method_name(method: str) -> str:
    """A full method name: short names belong to io.cudackpt.Process."""
    return method if "." in method else INTERFACE + "." + method


def limit(timeout: Optional[float]) -> Optional[float]:
    """A timeout as sockets and asyncio take it: None (no limit) for None
    or infinity."""
    return None if timeout is None or math.isinf(timeout) else timeout


class Deadline:
    """A point in time (monotonic) that calls must be answered by."""

    __slots__ = ("_at",)

    def __init__(self, timeout: Optional[float]) -> None:
        """``timeout`` seconds from now; None or infinity: never."""
        seconds = limit(timeout)
        self._at = None if seconds is None else time.monotonic() + seconds

    def left(self) -> Optional[float]:
        """Seconds left (never below a millisecond), None for no limit."""
        if self._at is None:
            return None
        return max(self._at - time.monotonic(), 0.001)

    def remaining(self) -> float:
        """Seconds left as a call's timeout takes them (infinity: none)."""
        left = self.left()
        return math.inf if left is None else left

    def passed(self) -> bool:
        return self._at is not None and time.monotonic() >= self._at

    def within(self, seconds: float) -> float:
        """The monotonic time ``seconds`` from now, or the deadline if that
        comes first."""
        end = time.monotonic() + seconds
        return end if self._at is None else min(end, self._at)


def encode(method: str, parameters: Optional[Message], more: bool = False) -> bytes:
    """One call message, NUL included."""
    call: Message = {"method": method_name(method)}
    if parameters:
        call["parameters"] = parameters
    if more:
        call["more"] = True
    return json.dumps(call, separators=(",", ":")).encode("utf-8") + b"\0"


def decode(data: bytes) -> Message:
    """One reply message (without its NUL)."""
    try:
        reply = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise errors.ProtocolError("the daemon sent a message that is not JSON: %s" % e) from None
    if not isinstance(reply, dict):
        raise errors.ProtocolError("the daemon sent a message that is not an object")
    return reply


def check(reply: Message) -> Message:
    """The reply's parameters, or the error it carries raised."""
    name = reply.get("error")
    parameters = reply.get("parameters") or {}
    if name is not None:
        raise errors.from_reply(str(name), parameters)
    return parameters


def in_step_after(error: BaseException) -> bool:
    """Whether a connection whose call raised ``error`` may serve another
    call: only when the error is the daemon's own reply, read in full
    (neither a limit that expired, nor a failure of the transport, nor an
    exception raised by the caller's code in the middle of a stream)."""
    return (isinstance(error, errors.CudackptError) and bool(error.name)
            and not isinstance(error, (errors.InvalidRequest, errors.MessageTooLarge)))


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
        self._buf = bytearray()
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
        if self._buf or self._sock.fileno() < 0:
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
        end = self._buf.find(b"\0")
        while end < 0:
            if len(self._buf) > MAX_MESSAGE:
                raise errors.ProtocolError("a reply longer than %d bytes" % MAX_MESSAGE)
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
            end = chunk.find(b"\0")  # only the new bytes are searched
            if end >= 0:
                end += len(self._buf)
            self._buf += chunk
            if end < 0 and deadline.passed():
                raise errors.CallTimeout("no %s from cudackptd in time" % what)
        data = bytes(self._buf[:end])
        del self._buf[:end + 1]
        self.last_used = time.monotonic()
        return decode(data)

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
