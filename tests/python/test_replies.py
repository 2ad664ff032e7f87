"""Reply-level cases against a fake daemon (fakevarlink.py): what the real
daemon on the simulator cannot be made to send on cue (an error reply at
the very moment a client limit expires, replies left over on a connection,
late replies), and how the clients keep their connections in step."""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys
import threading
import time

import pytest

import cudackpt
from cudackpt import aio, errors

import fakevarlink
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


def _group_handler(call, conn: FakeConn) -> None:
    method = call["method"].rsplit(".", 1)[1]
    if method == "SuspendGroup":
        # The first progress at once, the rest of the stream a little later
        # (after a callback that raises has returned).
        for n in range(3):
            conn.reply({"progress": {"phase": "lock", "member": {"pid": 10, "start_time": 1, "state": "locked"},
                                     "done": n + 1, "total": 3}}, continues=True, delay=n * 0.1)
        conn.reply({"members": [{"pid": 10, "start_time": 1, "state": "checkpointed"}], "skipped": []}, delay=0.3)
    elif method == "GetState":
        conn.reply({"pid": 10, "state": "checkpointed"}, delay=0.5)


@pytest.mark.parametrize("raised", [errors.from_reply("io.cudackpt.Process.QueueFull", {"limit": 1}),
                                    KeyError("from the callback")])
def test_progress_callback_raising_closes_the_connection(raised) -> None:
    # A callback that raises leaves the stream unread: its connection must
    # not serve the next call, which would read the left-over replies.
    with FakeDaemon(_group_handler) as fake:
        with cudackpt.Client(fake.socket, timeout=10) as client:
            def progress(p: cudackpt.Progress) -> None:
                raise raised
            with pytest.raises(type(raised)):
                client.job([10]).suspend(progress=progress)
            assert client.get_state(10).state == "checkpointed"
            assert fake.connections == 2 and fake.await_closed(1)


def test_stream_read_to_its_end_keeps_the_connection() -> None:
    with FakeDaemon(_group_handler) as fake:
        with cudackpt.Client(fake.socket, timeout=10) as client:
            seen = []
            r = client.job([10]).suspend(progress=seen.append)
            assert [p.done for p in seen] == [1, 2, 3] and r.members[0].state == "checkpointed"
            assert client.get_state(10).state == "checkpointed"
            assert fake.connections == 1


def test_call_timeouts() -> None:
    from cudackpt import _requests
    call_timeout = _requests.call_timeout
    assert call_timeout(None, 300.0) == 300.0
    assert call_timeout(2, 300.0) == 2.0 and call_timeout(2, 300.0, 0) == 2.0  # the call's own, as given
    assert call_timeout(None, 300.0, 0) == math.inf  # a lock without limit: no client limit
    assert call_timeout(None, 300.0, 10_000) == 310.0
    assert call_timeout(None, 0.2, 10_000) == 10.0 + _requests.LOCK_MARGIN_S
    assert call_timeout(math.inf, 300.0) == math.inf
    for bad, exc in ((0, ValueError), (-1, ValueError), (float("nan"), ValueError), (True, TypeError),
                     ("5", TypeError)):
        with pytest.raises(exc):
            call_timeout(bad, 300.0)
        with pytest.raises(exc):
            cudackpt.Client("/nonexistent", timeout=bad)


@pytest.mark.parametrize("bad", [0, -1.5])
def test_call_paths_check_the_timeout(bad) -> None:
    # Checked before anything is sent (a 0 used to wait 1 ms, a negative
    # one failed in the socket module).
    with FakeDaemon(lambda call, conn: conn.reply({"pid": 10, "state": "running"})) as fake:
        with cudackpt.Client(fake.socket) as client:
            for call in (lambda: client.state(10, timeout=bad), lambda: client.call("GetState", {"pid": 10}, bad),
                         lambda: client.watch([10], timeout=bad), lambda: client.job([10]).lock(timeout=bad),
                         lambda: client.suspended(10, timeout=bad)):
                with pytest.raises(ValueError):
                    call()

            async def main() -> None:
                aclient = aio.Client(fake.socket)
                with pytest.raises(ValueError):
                    await aclient.state(10, timeout=bad)
                with pytest.raises(ValueError):
                    aclient.watch([10], timeout=bad)
                await aclient.close()
            run(main())
        assert fake.methods() == []


def _hold_handler(late: str):
    """Suspend/Lock take a lease on close; ``late`` (ReleaseLease or
    RenewLease) is answered after 0.5 s, past the hold's 0.2 s limit."""
    def handler(call, conn: FakeConn) -> None:
        method = call["method"].rsplit(".", 1)[1]
        if method in ("Suspend", "Lock"):
            conn.reply({"pid": 10, "state": "checkpointed" if method == "Suspend" else "locked", "duration_ms": 1.0,
                        "lease": {"id": 7, "on_close": True}})
        elif method == late:
            conn.reply({"lease_ms": 1000} if method == "RenewLease" else {}, delay=0.5)
        elif method in ("ReleaseLease", "RenewLease"):
            conn.reply({"lease_ms": 1000} if method == "RenewLease" else {})
        else:
            conn.reply(OK)
    return handler


@pytest.mark.parametrize("late", ["ReleaseLease", "RenewLease"])
def test_hold_call_that_timed_out_breaks_the_hold(late: str) -> None:
    # The late reply must never be read as the Resume's: the hold closes
    # its connection (the daemon undoes an on-close lease on close) and
    # says so, instead of undoing on a connection out of step.
    with FakeDaemon(_hold_handler(late)) as fake:
        with cudackpt.Client(fake.socket, timeout=10) as client:
            with pytest.raises(errors.ConnectionLost):
                with client.suspended(10, timeout=0.2) as hold:
                    with pytest.raises(errors.CallTimeout):
                        hold.release() if late == "ReleaseLease" else hold.renew(1000)
                    with pytest.raises(errors.ConnectionLost):
                        hold.renew(1000)  # nothing more on that connection
            assert fake.await_closed(1)
            assert fake.methods(1) == ["Suspend", late]
            # With the block's own exception, that one comes out.
            with pytest.raises(KeyError):
                with client.locked(10, timeout=0.2) as hold:
                    with pytest.raises(errors.CallTimeout):
                        hold.release() if late == "ReleaseLease" else hold.renew(1000)
                    raise KeyError("the block's")
            assert fake.await_closed(2)
            assert fake.methods(2) == ["Lock", late]


def test_hold_call_refused_keeps_the_hold() -> None:
    # An error reply read in full leaves the connection in step.
    def handler(call, conn: FakeConn) -> None:
        method = call["method"].rsplit(".", 1)[1]
        if method == "Suspend":
            conn.reply({"pid": 10, "state": "checkpointed", "lease": {"id": 7, "on_close": True}})
        elif method == "RenewLease":
            conn.error("NoSuchLease", {"lease": 7})
        else:
            conn.reply(OK)
    with FakeDaemon(handler) as fake:
        with cudackpt.Client(fake.socket, timeout=10) as client:
            with client.suspended(10) as hold:
                with pytest.raises(errors.NoSuchLease):
                    hold.renew(1000)
            assert fake.methods(1) == ["Suspend", "RenewLease", "Resume"]


@pytest.mark.parametrize("late", ["ReleaseLease", "RenewLease"])
@pytest.mark.parametrize("how", ["timeout", "cancelled"])
def test_aio_hold_call_that_failed_breaks_the_hold(late: str, how: str) -> None:
    with FakeDaemon(_hold_handler(late)) as fake:
        async def main() -> None:
            client = aio.Client(fake.socket, timeout=10)
            with pytest.raises(errors.ConnectionLost):
                async with client.suspended(10, timeout=0.2 if how == "timeout" else None) as hold:
                    call = hold.release() if late == "ReleaseLease" else hold.renew(1000)
                    with pytest.raises(TimeoutError if how == "timeout" else asyncio.TimeoutError):
                        await (call if how == "timeout" else asyncio.wait_for(call, 0.1))
                    with pytest.raises(errors.ConnectionLost):
                        await hold.renew(1000)
            await client.close()
        run(main())
        assert fake.await_closed(1)
        assert fake.methods(1) == ["Suspend", late]


def _watch_handler(last):
    """Watch: ``watching``, one ``state`` event, then ``last``: an error
    (a name) or a final event (a dict, without ``continues``)."""
    def handler(call, conn: FakeConn) -> None:
        conn.reply({"event": {"type": "watching", "time": 1.0}}, continues=True)
        conn.reply({"event": {"type": "state", "time": 2.0, "pid": 10, "state": "locked"}}, continues=True)
        if isinstance(last, str):
            conn.error(last, {})
        else:
            conn.reply({"event": last})
    return handler


@pytest.mark.parametrize("last", ["ShuttingDown", {"type": "exited", "time": 3.0, "pid": 10}])
def test_watcher_closes_at_the_stream_end(last) -> None:
    # After an error reply or a reply that does not continue, nothing more
    # comes: the watcher is closed, not left waiting forever.
    with FakeDaemon(_watch_handler(last)) as fake:
        with cudackpt.Client(fake.socket, timeout=10) as client:
            events = client.watch([10])
            assert events.next(timeout=5).type == "state"
            if isinstance(last, str):
                with pytest.raises(errors.ShuttingDown):
                    events.next(timeout=5)
            else:
                assert events.next(timeout=5).type == "exited"
            with pytest.raises(ValueError):
                events.next(timeout=5)
            assert list(events) == []
            assert fake.await_closed(1)


@pytest.mark.parametrize("last", ["ShuttingDown", {"type": "exited", "time": 3.0, "pid": 10}])
def test_aio_watcher_closes_at_the_stream_end(last) -> None:
    with FakeDaemon(_watch_handler(last)) as fake:
        async def main() -> None:
            client = aio.Client(fake.socket, timeout=10)
            async with client.watch([10]) as events:
                assert (await events.next(5)).type == "state"
                if isinstance(last, str):
                    with pytest.raises(errors.ShuttingDown):
                        await events.next(5)
                else:
                    assert (await events.next(5)).type == "exited"
                with pytest.raises(ValueError):
                    await events.next(5)
                assert [e async for e in events] == []
            await client.close()
        run(main())
        assert fake.await_closed(1)


def test_aio_event_timeout_is_a_call_timeout() -> None:
    # CallTimeout is a TimeoutError, so an OSError: it must not come out as
    # ConnectionLost, and the watcher stays open.
    def handler(call, conn: FakeConn) -> None:
        conn.reply({"event": {"type": "watching", "time": 1.0}}, continues=True)
        conn.reply({"event": {"type": "state", "time": 2.0, "pid": 10, "state": "locked"}}, continues=True,
                   delay=0.5)

    with FakeDaemon(handler) as fake:
        async def main() -> None:
            client = aio.Client(fake.socket, timeout=10)
            async with client.watch([10]) as events:
                with pytest.raises(errors.CallTimeout):
                    await events.next(0.05)
                assert (await events.next(5)).type == "state"
            await client.close()
        run(main())


@pytest.fixture
def flood():
    """A fake daemon of fakevarlink.flood_handler(mode), in a process of its
    own: flood(mode) -> its socket."""
    procs = []

    def start(mode: str) -> str:
        proc = subprocess.Popen([sys.executable, "-B", fakevarlink.__file__, mode], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, universal_newlines=True)
        procs.append(proc)
        assert proc.stdout is not None
        return proc.stdout.readline().strip()
    yield start
    for proc in procs:
        proc.kill()
        proc.wait(timeout=20)


def _timed(call) -> float:
    start = time.monotonic()
    with pytest.raises(errors.CallTimeout):
        call()
    return time.monotonic() - start


def test_deadline_holds_while_bytes_trickle_in(flood) -> None:
    # A reply that comes a few bytes at a time, each within a millisecond,
    # for longer than the call's limit.
    with cudackpt.Client(flood("trickle"), timeout=10) as client:
        assert _timed(lambda: client.state(10, timeout=0.3)) < 2.0


def test_deadline_holds_while_progress_keeps_coming(flood) -> None:
    with cudackpt.Client(flood("progress"), timeout=10) as client:
        assert _timed(lambda: client.job([10]).suspend(progress=lambda p: None, timeout=0.3)) < 2.0


def test_deadline_holds_while_events_keep_coming(flood) -> None:
    with cudackpt.Client(flood("events"), timeout=10) as client:
        with client.watch([10]) as events:
            assert _timed(lambda: events.wait_for(lambda e: e.type == "exited", timeout=0.3)) < 2.0


def test_reply_size_is_bounded() -> None:
    def handler(call, conn: FakeConn) -> None:
        def run_() -> None:
            chunk = b" " * (1 << 20)
            for _ in range(80):
                try:
                    conn.sock.sendall(chunk)
                except OSError:
                    return
        threading.Thread(target=run_, daemon=True).start()

    with FakeDaemon(handler) as fake:
        with cudackpt.Client(fake.socket, timeout=20) as client:
            with pytest.raises(errors.ProtocolError):
                client.state(10)
