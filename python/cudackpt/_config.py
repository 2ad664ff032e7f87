"""Where the daemon is and how long to wait for it: the environment's
defaults, deadlines, and the schedule of tries while it restarts.

No socket here (sans-I/O): the blocking connection and the asyncio one
both wait by these rules.
"""

from __future__ import annotations

import errno
import math
import os
import stat
import time
from typing import Iterator, Optional

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


def limit(timeout: Optional[float]) -> Optional[float]:
    """A timeout as sockets and asyncio take it: None (no limit) for None
    or infinity."""
    return None if timeout is None or math.isinf(timeout) else timeout


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
