"""cudackpt.aio: the same calls for asyncio, concurrent on separate
connections; leases as async context managers; async watch; cancellation."""

from __future__ import annotations

import asyncio

import pytest

import cudackpt
from cudackpt import aio


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 120))


def test_operations_and_concurrency(daemon, targets) -> None:
    a, b = targets.start(), targets.start()

    async def main() -> None:
        async with aio.Client(daemon.socket, timeout=30) as client:
            assert await client.state(a) == "running"
            assert (await client.get_state(a)).in_flight is None
            assert await client.get_restore_thread_id(a) > 0
            results = await asyncio.gather(client.suspend(a), client.suspend(b))
            assert [r.state for r in results] == ["checkpointed", "checkpointed"]
            assert {p.pid: p.state for p in await client.list_processes([a, b])} == {a: "checkpointed",
                                                                                      b: "checkpointed"}
            assert [r.state for r in await asyncio.gather(client.resume(a), client.resume(b))] == ["running"] * 2
            await client.lock(a, 5000)
            await client.checkpoint(a)
            await client.restore(a)
            assert (await client.unlock(a)).state == "running"
            with pytest.raises(cudackpt.InvalidState) as e:
                await client.unlock(a)
            assert isinstance(e.value, cudackpt.errors.CUDAError) and e.value.required_state == "locked"
            assert "cudackpt_operations_total" in await client.metrics()
    run(main())


def test_suspended_and_watch(daemon, target: int) -> None:
    async def main() -> None:
        client = aio.Client(daemon.socket)
        async with client.watch([target]) as events:
            async with client.suspended(target, lease_ms=600000) as hold:
                assert await client.state(target) == "checkpointed" and hold.lease.on_close
            assert await client.state(target) == "running"
            with pytest.raises(ZeroDivisionError):
                async with client.locked(target):
                    assert await client.state(target) == "locked"
                    1 / 0
            assert await client.state(target) == "running"
            ended = await events.wait_for(lambda e: e.type == "lease-ended", timeout=20)
            assert ended.reason == "finished" and ended.lease == hold.lease.id
            types = []
            async for event in events:
                types.append(event.type)
                if event.type == "lease-ended":
                    break
            assert types[0] == "started" and "lease-taken" in types and "finished" in types
        await client.close()
    run(main())


def test_job_with_async_progress(daemon, targets) -> None:
    a, b = targets.start(), targets.start()

    async def main() -> None:
        seen = []

        async def progress(p: cudackpt.Progress) -> None:
            seen.append(p.phase)

        job = aio.Job([a, b], client=aio.Client(daemon.socket))
        r = await job.suspend(progress=progress)
        assert {m.state for m in r.members} == {"checkpointed"}
        assert seen == ["lock", "lock", "checkpoint", "checkpoint"]
        async with aio.Job([a, b], client=job.client).suspended() as hold:
            assert sorted(hold.result.pids) == sorted([a, b])
        # The hold's undo resumed what was already checkpointed.
        assert {m.state for m in (await job.resume()).members} == {"running"}
        await job.client.close()
    run(main())


def test_cancelled_call_leaves_the_client_usable(daemon, targets) -> None:
    busy = targets.start(CUDACKPT_SIM_BUSY_MS="1500")

    async def main() -> None:
        client = aio.Client(daemon.socket)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(client.lock(busy, 0), 0.1)
        with pytest.raises(TimeoutError):
            await client.lock(busy, 0, timeout=0.1)
        # The daemon carried both on, one after the other: locked, then
        # ILLEGAL_STATE for the second; the client still works.
        while (await client.get_state(busy)).in_flight is not None or await client.state(busy) != "locked":
            await asyncio.sleep(0.01)
        await client.unlock(busy)
        await client.close()
    run(main())


def test_empty_job_for_a_block(daemon, targets) -> None:
    plain = targets.start(cuda=False)

    async def main() -> None:
        client = aio.Client(daemon.socket)
        async with aio.Job(tree=plain, client=client).suspended() as hold:
            assert hold.result.members == [] and [s.pid for s in hold.result.skipped] == [plain]
        with pytest.raises(KeyError):
            async with aio.Job(tree=plain, client=client).suspended():
                raise KeyError("the block's")
        await client.close()
    run(main())
