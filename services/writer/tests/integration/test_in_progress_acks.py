"""In-progress acks: a batch slower than ``ack_wait_s`` is kept alive, a fast one sends none.

A real nats-server and the real ``Consumer`` on its writer thread; only the apply is made
slow (a sleep on the writer thread, as a long transaction or a held store fault would be).
"""

from __future__ import annotations

import asyncio
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
from aimem_writer.consumer import Consumer
from aimem_writer.metrics import WriterMetrics
from aimem_writer.thread import WriterThread
from aimem_writer.wiki import WikiRepo

pytestmark = [pytest.mark.integration, pytest.mark.asyncio, pytest.mark.timeout(60)]

ACK_WAIT_S = 1.0
N = 40


class SlowApplier(Applier):
    """The real applier; its first ``slow_batches`` batches take ``delay_s`` longer. Records
    the delivery count of every message it is handed."""

    def __init__(self, *args, delay_s: float, slow_batches: int):
        super().__init__(*args)
        self.delay_s = delay_s
        self.slow_batches = slow_batches
        self.deliveries: list[int] = []

    def apply(self, items):
        self.deliveries.extend(item.num_delivered for item in items)
        if self.slow_batches > 0:
            self.slow_batches -= 1
            time.sleep(self.delay_s)
        return super().apply(items)


async def _drain(settings, bus, *, delay_s: float, slow_batches: int) -> tuple[SlowApplier, WriterMetrics, dict]:
    """Publish ``N`` observations, run a consumer until they are stored and ``2 * ack_wait``
    more has passed (a redelivery would show by then); return its applier, metrics and
    the consumer's final JetStream state (``deliveries`` counts redeliveries too)."""
    settings = settings.model_copy(update={"writer": settings.writer.model_copy(
        update={"ack_wait_s": ACK_WAIT_S, "batch_max_msgs": N, "batch_max_msgs_behind": N})})
    js = bus.js
    await busmod.ensure_writer_consumer(js, ack_wait_s=ACK_WAIT_S)
    for i in range(N):
        raw = RawObservation(session_id="s1", kind=ObservationKind.USER_PROMPT, agent="claude-code",
                             cwd="/w/app", title=f"Prompt {i}", body=f"prompt number {i}")
        env = make_envelope("observation.append", sanitize(raw).to_payload(), project="app",
                            idempotency_key=f"s1-{i}")
        await js.publish(busmod.mut_subject(env.op), env.model_dump_json().encode(),
                         headers={busmod.MSG_ID_HEADER: env.dedupe_id})
    thread = WriterThread()
    metrics = WriterMetrics.create(Telemetry("writer"))
    try:
        conn = await thread.call(open_writer, settings.db_path)
        wiki = await thread.call(WikiRepo, settings.wiki_dir)
        applier = SlowApplier(conn, wiki, settings, metrics, delay_s=delay_s, slow_batches=slow_batches)
        consumer = Consumer(settings, bus.nc, thread, applier, metrics)
        task = asyncio.create_task(consumer.run())
        try:
            ro = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True)
            deadline = time.monotonic() + 30
            stored = 0
            while time.monotonic() < deadline:
                await asyncio.sleep(0.05)
                try:
                    stored = ro.execute("SELECT count(*) FROM observations").fetchone()[0]
                except sqlite3.OperationalError:
                    continue  # the schema is not there yet
                if stored >= N:
                    break
            assert stored == N
            await asyncio.sleep(2 * ACK_WAIT_S)
            stored = ro.execute("SELECT count(*) FROM observations").fetchone()[0]
            ro.close()
        finally:
            consumer.stop()
            await asyncio.wait_for(task, 10)
        info = await js.consumer_info(busmod.MUT_STREAM, busmod.WRITER_DURABLE)
        await thread.call(conn.close)
    finally:
        thread.close()
    return applier, metrics, {"stored": stored, "ack_pending": info.num_ack_pending,
                              "deliveries": info.delivered.consumer_seq, "pending": info.num_pending}


async def test_a_batch_slower_than_the_ack_wait_is_kept_alive(settings, bus) -> None:
    applier, metrics, state = await _drain(settings, bus, delay_s=3 * ACK_WAIT_S, slow_batches=1)
    # Every message was handed over exactly once: no redelivery while the batch was held.
    assert applier.deliveries == [1] * N
    assert state == {"stored": N, "ack_pending": 0, "deliveries": N, "pending": 0}
    assert metrics.duplicates.labels("observation.append")._value.get() == 0
    # Each message went 3 s unacked: an in-progress ack every ~ack_wait/3 from 1/3 s on.
    sent = metrics.in_progress_acks._value.get()
    assert 2 * N <= sent <= 10 * N, sent


async def test_a_batch_within_the_ack_wait_sends_no_in_progress_ack(settings, bus) -> None:
    applier, metrics, state = await _drain(settings, bus, delay_s=0.0, slow_batches=0)
    assert applier.deliveries == [1] * N
    assert state == {"stored": N, "ack_pending": 0, "deliveries": N, "pending": 0}
    assert metrics.in_progress_acks._value.get() == 0
