"""watch(): the daemon's events as typed values, and list_processes(),
metrics(), through the package."""

from __future__ import annotations

import itertools

import pytest

import cudackpt

from conftest import dead_pid, start_time_of


def test_events_of_operations(daemon, target: int) -> None:
    with cudackpt.watch([target]) as events:
        cudackpt.lock(target)
        cudackpt.unlock(target)
        first = events.next(timeout=20)
        seen = [first] + list(itertools.islice(events, 5))  # iterating: these have been sent already
    assert [(e.type, e.method) for e in seen if e.type != "state"] == [
        ("started", "Lock"), ("finished", "Lock"), ("started", "Unlock"), ("finished", "Unlock")]
    assert [e.state for e in seen if e.type == "state"] == ["locked", "running"]
    for e in seen:
        assert isinstance(e, cudackpt.Event) and e.pid == target and e.start_time == start_time_of(target)
        assert e.time > 1e9 and e.raw["type"] == e.type
    finished = [e for e in seen if e.type == "finished"]
    assert all(e.result == "ok" and isinstance(e.duration_ms, float) for e in finished)


def test_appeared_and_exited(daemon, targets) -> None:
    with cudackpt.watch() as events:
        cudackpt.list_processes()  # a barrier: the baseline scan is under way
        pid = targets.start()
        appeared = events.wait_for(lambda e: e.type == "appeared" and e.pid == pid, timeout=30)
        assert appeared.command == "sleep" and appeared.uid == 0
        targets.kill(pid)
        exited = events.wait_for(lambda e: e.type == "exited" and e.pid == pid, timeout=30)
        assert exited.start_time == appeared.start_time


def test_watch_of_no_such_process(daemon, target: int) -> None:
    # A pid no process has would stream nothing for ever: it is refused.
    gone = dead_pid()
    with pytest.raises(cudackpt.NoSuchProcess) as e:
        with cudackpt.watch([target, gone], timeout=20):
            pass
    assert e.value.pid == gone


def test_next_times_out(daemon, target: int) -> None:
    with cudackpt.watch([target]) as events:
        with pytest.raises(TimeoutError):
            events.next(timeout=0.2)
        cudackpt.state(target)  # GetState makes no event; an operation does
        cudackpt.lock(target)
        assert events.next(timeout=20).type == "started"
    cudackpt.unlock(target)


def test_list_processes(daemon, targets) -> None:
    a, b, plain = targets.start(), targets.start(), targets.start(cuda=False)
    cudackpt.suspend(b)
    listed = {p.pid: p for p in cudackpt.list_processes([a, b])}
    assert set(listed) == {a, b}
    assert listed[a].state == "running" and listed[b].state == "checkpointed"
    assert listed[a].uid == 0 and listed[a].command == "sleep" and listed[a].start_time == start_time_of(a)
    everything = {p.pid for p in cudackpt.list_processes()}
    assert {a, b} <= everything and plain not in everything
    cudackpt.resume(b)


def test_metrics(daemon, target: int) -> None:
    cudackpt.lock(target)
    cudackpt.unlock(target)
    text = cudackpt.metrics()
    assert text.startswith("# HELP cudackpt_build_info")
    assert 'cudackpt_operations_total{method="Lock",result="ok"}' in text


def test_client_and_info(daemon, target: int) -> None:
    with cudackpt.Client(daemon.socket, timeout=10) as client:
        info = client.info()
        assert "io.cudackpt.Process" in info["interfaces"]
        assert client.get_state(target).state == "running"
        assert client.get_restore_thread_id(target) > 0
        r = client.suspend(target, 5000)
        assert isinstance(r, cudackpt.OperationResult) and r.state == "checkpointed" and r.duration_ms > 0
        assert client.resume(target).state == "running"
