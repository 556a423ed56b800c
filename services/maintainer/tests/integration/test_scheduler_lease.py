"""The KV lease: one replica at a time, store-wide interval, non-overlapping ticks."""

from __future__ import annotations

import asyncio

import pytest

from aimem_maintainer.scheduler import Leases, Schedule, run_schedule

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]


async def test_two_replicas_never_run_a_job_together(bus):
    a = await Leases.open(bus.js, "replica-a", ttl_s=5)
    b = await Leases.open(bus.js, "replica-b", ttl_s=5)
    assert await a.acquire("sweep") is True
    assert await b.acquire("sweep") is False
    assert await a.renew("sweep") is True
    await a.release("sweep")
    assert await b.acquire("sweep") is True
    await b.release("sweep")

    running, peak, runs = 0, 0, 0

    async def slow_pass():
        nonlocal running, peak, runs
        running += 1
        peak = max(peak, running)
        runs += 1
        await asyncio.sleep(0.3)
        running -= 1
        return {"outcome": "ok"}

    stop = asyncio.Event()
    sched = Schedule("lint", 0.5, slow_pass)
    tasks = [asyncio.create_task(run_schedule(sched, lz, stop, started_at=0.0)) for lz in (a, b)]
    await asyncio.sleep(2.2)
    stop.set()
    await asyncio.wait_for(asyncio.gather(*tasks), 10)
    assert peak == 1  # never concurrently, across both replicas
    assert 2 <= runs <= 5  # the interval is store-wide, not per replica
    assert await a.last_run("lint") is not None
