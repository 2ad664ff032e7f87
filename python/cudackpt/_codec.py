"""The Varlink codec: one JSON object per message, each ended by a NUL byte.

Bytes and messages only, no socket (sans-I/O): the blocking connection and
the asyncio one both frame, encode and decode through here, and turn an
error reply into the exception that :mod:`cudackpt.errors` names for it.
What the methods mean is elsewhere.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Optional

from . import errors

INTERFACE = "io.cudackpt.Process"
MAX_MESSAGE = 64 << 20
"""The longest message read (a ListProcesses of many processes)."""

Message = Dict[str, Any]


def method_name(method: str) -> str:
    """A full method name: short names belong to io.cudackpt.Process."""
    return method if "." in method else INTERFACE + "." + method


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


class Framer:
    """The messages in a stream of bytes: fed what the socket gives, it
    hands back each whole message, decoded, in order."""

    __slots__ = ("_buf", "_searched", "_limit")

    def __init__(self, limit: int = MAX_MESSAGE) -> None:
        self._buf = bytearray()
        self._searched = 0  # bytes known to hold no NUL: only new ones are searched
        self._limit = limit

    def pending(self) -> bool:
        """Whether bytes of a message not yet whole (or not yet taken) are held."""
        return bool(self._buf)

    def feed(self, data: bytes) -> None:
        self._buf += data

    def next(self) -> Optional[Message]:
        """The next whole message, or None until more bytes come;
        ProtocolError once a message is longer than the limit."""
        end = self._buf.find(b"\0", self._searched)
        if end < 0:
            self._searched = len(self._buf)
            if self._searched > self._limit:
                raise errors.ProtocolError("a reply longer than %d bytes" % self._limit)
            return None
        data = bytes(self._buf[:end])
        del self._buf[:end + 1]
        self._searched = 0
        return decode(data)
