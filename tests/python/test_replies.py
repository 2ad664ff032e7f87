"""Reply-level cases against a fake daemon (fakevarlink.py): what the real
daemon on the simulator cannot be made to send on cue (an error reply at
the very moment a client limit expires, replies left over on a connection,
late replies), and how the clients keep their connections in step."""

from __future__ import annotations

import asyncio

import pytest

import cudackpt
from cudackpt import aio, errors

from fakevarlink import FakeConn, FakeDaemon

OK = {"pid": 10, "state": "running", "duration_ms": 1.0}


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_aio_daemon_timeout_error_is_not_a_call_timeout() -> None:
    # The daemon's Timeout (a TimeoutError too) must come through as it is,
    # and the connection (answered in full) go back to the pool.
    def handler(call, conn: FakeConn) -> None:
        if call["method"].endswith(".Lock"):
            conn.error("Timeout", {"pid": 10, "timeout_ms": 5})
        else:
            conn.reply({"pid": 10, "state": "running"})

    with FakeDaemon(handler) as fake:
        async def main() -> None:
            client = aio.Client(fake.socket, timeout=10)
            with pytest.raises(errors.Timeout) as e:
                await client.lock(10, 5)
            assert not isinstance(e.value, errors.CallTimeout)
            assert e.value.timeout_ms == 5
            assert await client.state(10) == "running"
            await client.close()
        run(main())
        assert fake.connections == 1
