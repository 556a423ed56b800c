"""In-progress acks: a batch slower than ``ack_wait_s`` is kept alive, a fast one sends none.

A real nats-server and the real ``Consumer`` on its writer thread; only the apply is made
slow (a sleep on the writer thread, as a long transaction or a held store fault would be).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from aimem_common import bus as busmod

from aimem_writer.batch import Applier
from aimem_writer.consumer import Consumer
from aimem_writer.metrics import WriterMetrics

from .realwriter import publish_prompt, real_writer, tuned, wait_stored

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


async def _drain(settings, bus, *, delay_s: float, slow_batches: int,
                 ack_wait_s: float = ACK_WAIT_S) -> tuple[SlowApplier, WriterMetrics, dict]:
    """Publish ``N`` observations, run a consumer until they are stored and ``2 * ack_wait``
    more has passed (a redelivery would show by then); return its applier, metrics and
    the consumer's final JetStream state (``deliveries`` counts redeliveries too)."""
    settings = tuned(settings, ack_wait_s=ack_wait_s, batch_max_msgs=N, batch_max_msgs_behind=N)
    js = bus.js
    async with real_writer(settings, bus, SlowApplier, delay_s=delay_s, slow_batches=slow_batches) as (
            thread, applier, metrics):
        for i in range(N):
            await publish_prompt(js, i)
        consumer = Consumer(settings, bus.nc, thread, applier, metrics)
        task = asyncio.create_task(consumer.run())
        try:
            assert len(await wait_stored(settings, N, 30)) == N
            await asyncio.sleep(2 * ack_wait_s)
            stored = len(await wait_stored(settings, N, 0))
        finally:
            consumer.stop()
            await asyncio.wait_for(task, 10)
        info = await js.consumer_info(busmod.MUT_STREAM, busmod.WRITER_DURABLE)
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
    # A 4 s ack wait: the first in-progress ack is due 1.3 s after a fetch. With 1 s, a loaded
    # CI machine once held a plain 39-message batch past the 0.33 s mark and sent 39.
    applier, metrics, state = await _drain(settings, bus, delay_s=0.0, slow_batches=0, ack_wait_s=4.0)
    assert applier.deliveries == [1] * N
    assert state == {"stored": N, "ack_pending": 0, "deliveries": N, "pending": 0}
    assert metrics.in_progress_acks._value.get() == 0
