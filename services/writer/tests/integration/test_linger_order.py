"""The writer's linger (``Consumer._linger``) on a real nats-server with the real applier:
a writer stopped mid-linger keeps stream order, and the arrival rate counts what the linger
gathered (else it settles at its own threshold and every other batch is a single command).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from aimem_writer.batch import Applier
from aimem_writer.consumer import Consumer
from aimem_writer.pacing import LINGER_MIN_EXPECTED

from .realwriter import prompt_number, real_writer, trickle, tuned, wait_stored

pytestmark = [pytest.mark.integration, pytest.mark.asyncio, pytest.mark.timeout(90)]

ACK_WAIT_S = 1.0


class RecordingApplier(Applier):
    """The real applier; records the number of every observation it is handed, per batch.
    ``slow`` (an event) makes the next apply wait 0.5 s on the writer thread and sets it."""

    def __init__(self, *args):
        super().__init__(*args)
        self.batches: list[list[int]] = []
        self.slow: asyncio.Event | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    def apply(self, items):
        self.batches.append([prompt_number(i.data) for i in items])
        if self.slow is not None and not self.slow.is_set():
            self.loop.call_soon_threadsafe(self.slow.set)
            time.sleep(0.5)  # the prefetch completes meanwhile
        return super().apply(items)


def _tuned(settings, **writer):
    return tuned(settings, ack_wait_s=ACK_WAIT_S, **writer)


@pytest.mark.parametrize("during", ["linger", "apply"])
async def test_a_writer_cancelled_mid_batch_keeps_stream_order(settings, bus, during) -> None:
    """Cancelled while it gathers a batch, or while it applies one with the next already
    prefetched, the writer hands nothing back out of order (a nak of the prefetch would let
    it overtake the unsettled batch): the next writer applies every command once, in the
    order they were published."""
    first = (_tuned(settings, batch_linger_ms=2000.0, batch_linger_msgs=10_000) if during == "linger"
             else _tuned(settings, batch_linger_ms=0.0))
    js = bus.js
    async with real_writer(first, bus, RecordingApplier) as (thread, applier, metrics):
        consumer = Consumer(first, bus.nc, thread, applier, metrics)
        lingering = asyncio.Event()
        inner = consumer._linger

        async def spy(msgs, fetch):
            lingering.set()
            return await inner(msgs, fetch)

        consumer._linger = spy
        if during == "apply":
            applier.slow, applier.loop = asyncio.Event(), asyncio.get_running_loop()
        stop = asyncio.Event()
        pub = asyncio.create_task(trickle(js, stop, 0.004))
        run = asyncio.create_task(consumer.run())
        await asyncio.wait_for((lingering if during == "linger" else applier.slow).wait(), 20)
        await asyncio.sleep(0.3)  # several prefetch rounds merged, or the next batch prefetched
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
        stop.set()
        published = await pub
        applied_first = [n for b in applier.batches for n in b]

        second = Consumer(_tuned(settings, batch_linger_ms=0.0), bus.nc, thread, applier, metrics)
        task = asyncio.create_task(second.run())
        stored = len(await wait_stored(settings, published, 30))
        second.stop()
        await asyncio.wait_for(task, 10)
    assert stored == published
    handed = [n for b in applier.batches for n in b]
    first_seen = list(dict.fromkeys(handed))
    assert first_seen == sorted(first_seen), (
        f"commands applied out of stream order after the cancel (first writer applied {len(applied_first)}): "
        f"{[n for a, n in zip(first_seen, first_seen[1:]) if n < a][:10]}")
    assert set(first_seen) == set(range(1, published + 1))


async def test_the_arrival_rate_counts_what_the_linger_gathered(settings, bus) -> None:
    """At 250 commands/s the rate stays above the linger's threshold, so batches stay
    gathered (without counting the merged commands it sat at 40/s and every other batch
    was a single command)."""
    gathered = _tuned(settings)  # the default linger: 50 ms, 64 commands
    js = bus.js
    async with real_writer(gathered, bus, RecordingApplier) as (thread, applier, metrics):
        consumer = Consumer(gathered, bus.nc, thread, applier, metrics)
        run = asyncio.create_task(consumer.run())
        stop = asyncio.Event()
        pub = asyncio.create_task(trickle(js, stop, 0.004))
        await asyncio.sleep(2.0)  # past the warm-up (the rate starts at 0: the first batches are singles)
        start = len(applier.batches)
        rates = []
        for _ in range(40):
            rates.append(consumer.arrivals.per_s)
            await asyncio.sleep(0.05)
        stop.set()
        await pub
        consumer.stop()
        await asyncio.wait_for(run, 10)
    sizes = [len(b) for b in applier.batches[start:-1]]  # the last one is the trickle's tail
    threshold = LINGER_MIN_EXPECTED / (gathered.writer.batch_linger_ms / 1000)
    assert min(rates) > 1.5 * threshold, rates
    assert len(sizes) >= 10 and sum(1 for s in sizes if s == 1) <= len(sizes) // 5, sizes
