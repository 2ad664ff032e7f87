"""The default client's slot: the client the module-level functions,
``cudackpt.checkpoint`` and a :class:`~cudackpt.job.Job` given none use.

The slot sits below the objects that use it and imports none of them: it
does not know how to make a client.  :mod:`cudackpt.client`, which does,
hands it its maker when it is imported (``cudackpt/__init__.py`` imports
it), so that a Job reaches the default client without importing the
module above it.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable, Optional

if TYPE_CHECKING:
    from .client import Client

_make: Optional[Callable[[], "Client"]] = None
_default: Optional["Client"] = None
_lock = threading.Lock()


def set_maker(make: Callable[[], "Client"]) -> None:
    """How the default client is made at first use (the client module's
    ``Client``, from the environment)."""
    global _make
    _make = make


def default_client() -> "Client":
    """The client the module-level functions and ``cudackpt.checkpoint``
    use: made at first use from ``$CUDACKPT_SOCKET`` and
    ``$CUDACKPT_TIMEOUT``."""
    global _default
    with _lock:
        if _default is None:
            if _make is None:
                raise RuntimeError("cudackpt.client is not imported: import cudackpt")
            _default = _make()
        return _default


def set_default_client(client: Optional["Client"]) -> None:
    """Replaces the default client (None: made again from the environment
    at next use)."""
    global _default
    with _lock:
        old, _default = _default, client
    if old is not None and old is not client:
        old.close()
