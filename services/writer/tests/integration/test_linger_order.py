"""The writer's linger (``Consumer._linger``) on a real nats-server with the real applier:
a writer stopped mid-linger keeps stream order, and the arrival rate counts what the linger
gathered (else it settles at its own threshold and every other batch is a single command).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time

import pytest

from aimem_common import bus as busmod
from aimem_common.commands import make_envelope
from aimem_common.db.connect import open_writer
from aimem_common.models import ObservationKind
from aimem_common.sanitize import RawObservation, sanitize
from aimem_common.telemetry import Telemetry

import aimem_writer.ops  # noqa: F401  (registers every handler)
from aimem_writer.batch import Applier
from aimem_writer.consumer import LINGER_MIN_EXPECTED, Consumer
from aimem_writer.metrics import WriterMetrics
from aimem_writer.thread import WriterThread
from aimem_writer.wiki import WikiRepo

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
        self.batches.append([int(json.loads(i.data)["payload"]["title"].split()[-1]) for i in items])
        if self.slow is not None and not self.slow.is_set():
            self.loop.call_soon_threadsafe(self.slow.set)
            time.sleep(0.5)  # the prefetch completes meanwhile
        return super().apply(items)


def _tuned(settings, **writer):
    return settings.model_copy(update={"writer": settings.writer.model_copy(update={"ack_wait_s": ACK_WAIT_S,
                                                                                     **writer})})


@contextlib.asynccontextmanager
async def _writer(settings, tuned, bus):
    """The writer's durable consumer, a real writer thread, database and wiki: yields
    ``(thread, RecordingApplier, metrics)`` for a ``Consumer``; closes them after."""
    await busmod.ensure_writer_consumer(bus.js, ack_wait_s=ACK_WAIT_S)
    thread = WriterThread()
    metrics = WriterMetrics.create(Telemetry("writer"))
    try:
        conn = await thread.call(open_writer, settings.db_path)
        wiki = await thread.call(WikiRepo, settings.wiki_dir)
        yield thread, RecordingApplier(conn, wiki, tuned, metrics), metrics
        await thread.call(conn.close)
    finally:
        thread.close()


async def _publish(js, i: int) -> None:
    raw = RawObservation(session_id="s1", kind=ObservationKind.USER_PROMPT, agent="claude-code",
                         cwd="/w/app", title=f"Prompt {i}", body=f"prompt number {i}")
    env = make_envelope("observation.append", sanitize(raw).to_payload(), project="app", idempotency_key=f"s1-{i}")
    await js.publish(busmod.mut_subject(env.op), env.model_dump_json().encode(),
                     headers={busmod.MSG_ID_HEADER: env.dedupe_id})


async def _trickle(js, stop: asyncio.Event, every_s: float) -> int:
    n = 0
    while not stop.is_set():
        n += 1
        await _publish(js, n)
        await asyncio.sleep(every_s)
    return n


@pytest.mark.parametrize("during", ["linger", "apply"])
async def test_a_writer_cancelled_mid_batch_keeps_stream_order(settings, bus, during) -> None:
    """Cancelled while it gathers a batch, or while it applies one with the next already
    prefetched, the writer hands nothing back out of order (a nak of the prefetch would let
    it overtake the unsettled batch): the next writer applies every command once, in the
    order they were published."""
    first = (_tuned(settings, batch_linger_ms=2000.0, batch_linger_msgs=10_000) if during == "linger"
             else _tuned(settings, batch_linger_ms=0.0))
    js = bus.js
    async with _writer(settings, first, bus) as (thread, applier, metrics):
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
        pub = asyncio.create_task(_trickle(js, stop, 0.004))
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
        ro = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and ro.execute("SELECT count(*) FROM observations").fetchone()[0] < published:
            await asyncio.sleep(0.05)
        stored = ro.execute("SELECT count(*) FROM observations").fetchone()[0]
        ro.close()
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
    tuned = _tuned(settings)  # the default linger: 50 ms, 64 commands
    js = bus.js
    async with _writer(settings, tuned, bus) as (thread, applier, metrics):
        consumer = Consumer(tuned, bus.nc, thread, applier, metrics)
        run = asyncio.create_task(consumer.run())
        stop = asyncio.Event()
        pub = asyncio.create_task(_trickle(js, stop, 0.004))
        await asyncio.sleep(2.0)  # past the warm-up (the rate starts at 0: the first batches are singles)
        start = len(applier.batches)
        rates = []
        for _ in range(20):
            rates.append(consumer.arrivals.per_s)
            await asyncio.sleep(0.05)
        stop.set()
        await pub
        consumer.stop()
        await asyncio.wait_for(run, 10)
    sizes = [len(b) for b in applier.batches[start:-1]]  # the last one is the trickle's tail
    threshold = LINGER_MIN_EXPECTED / (tuned.writer.batch_linger_ms / 1000)
    assert min(rates) > 1.5 * threshold, rates
    assert len(sizes) >= 10 and sum(1 for s in sizes if s == 1) <= len(sizes) // 5, sizes
