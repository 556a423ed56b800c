"""A batch whose apply fails unexpectedly is retried in place (``inplace.py``), on a real
nats-server with the real consumer, writer thread, database and wiki.

The failure is a handler raising ``FileNotFoundError`` (an ``OSError`` that is no store
fault: it leaves ``Applier.apply`` as an unexpected error, and the batch is rolled back)
for one numbered prompt, a few times or for good, while prompts keep arriving.
"""

from __future__ import annotations

import asyncio
import errno
import json
import sqlite3
import time

import pytest

from aimem_common.commands import make_envelope

from aimem_writer.batch import Applier
from aimem_writer.consumer import Consumer

from .realwriter import (durable_state, prompt_number, publish_prompt, real_writer, running, stored_prompts,
                         trickle, tuned, wait_stored)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

ACK_WAIT_S = 30.0  # far beyond each test's bound: a batch left to JetStream would show


class DeliveryRecorder(Applier):
    """The real applier; records ``(prompt number, num_delivered)`` of every observation it
    is handed, per call of ``apply``."""

    def __init__(self, *args):
        super().__init__(*args)
        self.calls: list[list[tuple[int, int]]] = []

    def apply(self, items):
        self.calls.append([(prompt_number(i.data), i.num_delivered) for i in items
                           if b'"observation.append"' in i.data])
        return super().apply(items)


def _fail_prompt(patch_handler, number: int, times: float):
    """Make the ``observation.append`` handler raise ``FileNotFoundError`` on ``Prompt
    <number>`` its first ``times`` times (``math.inf``: always); returns the failure count."""
    failed = [0]

    def handler(tx, env, cmd):
        if cmd.title == f"Prompt {number}" and failed[0] < times:
            failed[0] += 1
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", f"/gone/{failed[0]}")
        return original(tx, env, cmd)

    original = patch_handler("observation.append", handler)
    return failed


@pytest.mark.timeout(60)
@pytest.mark.parametrize("times", [1, 3])
async def test_a_batch_failing_a_few_times_is_applied_in_place_in_order(settings, bus, patch_handler, times) -> None:
    """Prompt 60 fails ``times`` times while prompts keep arriving at 250/s: its batch is
    applied again in place ~1 s apart, before anything fetched after it, so every prompt is
    stored once, in published order, each delivered once, well before ``ack_wait_s``."""
    failed = _fail_prompt(patch_handler, 60, times)
    w = tuned(settings, ack_wait_s=ACK_WAIT_S)
    async with real_writer(w, bus, DeliveryRecorder) as (thread, applier, metrics):
        consumer = Consumer(w, bus.nc, thread, applier, metrics)
        run = asyncio.create_task(consumer.run())
        stop = asyncio.Event()
        pub = asyncio.create_task(trickle(bus.js, stop, 0.004))
        await asyncio.sleep(times + 1.0)  # the retries last ~times s: commands pile up behind them
        stop.set()
        published = await pub
        t0 = time.monotonic()
        stored = await wait_stored(settings, published, 10)
        waited_s = time.monotonic() - t0
        delivered, redelivered, ack_pending = await durable_state(bus.js)
        consumer.stop()
        await asyncio.wait_for(run, 10)
    assert failed[0] == times
    assert stored == list(range(1, published + 1)), f"stored {len(stored)} of {published} after {waited_s:.1f} s"
    assert (delivered, redelivered, ack_pending) == (published, 0, 0)
    assert {n for call in applier.calls for n, _ in call} == set(range(1, published + 1))
    assert {d for call in applier.calls for _, d in call} == {1}
    assert metrics.batch_failures.labels("batch")._value.get() == times
    assert metrics.batch_failures.labels("command")._value.get() == 0
    # attempts of the failing batch: the first and ``times`` more, each with prompt 60
    assert sum(1 for call in applier.calls if 60 in {n for n, _ in call}) == times + 1


POISON = 100


@pytest.mark.timeout(150)
@pytest.mark.parametrize("rate", [250, 1000])
async def test_a_poison_command_is_the_only_one_left_out(settings, bus, patch_handler, rate) -> None:
    """Prompt 100 fails for good while prompts arrive at ``rate``/s: its first delivery is
    attempted ``max_deliver`` times in its batch, then the batch goes one command at a time
    and only prompt 100 is nak'ed; each later delivery is tried alone once, with no pause
    (the commands around it applied in their own runs), and at its ``max_deliver``-th
    delivery it is a dead letter. Every other prompt is stored, once and in published order,
    whatever backlog the retries built."""
    max_deliver = 3
    _fail_prompt(patch_handler, POISON, float("inf"))
    w = tuned(settings, ack_wait_s=ACK_WAIT_S, max_deliver=max_deliver)
    async with real_writer(w, bus, DeliveryRecorder) as (thread, applier, metrics):
        consumer = Consumer(w, bus.nc, thread, applier, metrics)
        run = asyncio.create_task(consumer.run())
        stop = asyncio.Event()
        t0 = time.monotonic()
        pub = asyncio.create_task(trickle(bus.js, stop, 1 / rate))
        deadline = t0 + 90
        while time.monotonic() < deadline and metrics.dead_letters.labels("observation.append")._value.get() < 1:
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)  # the stream goes on past the dead letter
        stop.set()
        published = await pub
        rate_seen = published / (time.monotonic() - t0)
        stored = await wait_stored(settings, published - 1, 30)
        await asyncio.sleep(0.5)  # a late duplicate would show
        stored = await wait_stored(settings, published - 1, 0)
        consumer.stop()
        await asyncio.wait_for(run, 10)
    ro = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True)
    letters = ro.execute("SELECT envelope, reason, deliveries FROM dead_letters").fetchall()
    ro.close()
    # The retries built a backlog behind them: at least half a second of the nominal rate is
    # applied as one batch after a stall. (Not the publish rate itself: the publisher shares this
    # process and the GIL with the writer, which now works through the run instead of sitting out
    # ~max_deliver² pauses; a loaded 2-core machine reaches ~650/s here with no poison at all.)
    biggest = max(len(call) for call in applier.calls)
    assert biggest >= 0.5 * rate, f"largest batch {biggest}; published {published} at {rate_seen:.0f}/s"
    assert stored == [n for n in range(1, published + 1) if n != POISON]
    assert [(prompt_number(e.encode()), d) for e, _, d in letters] == [(POISON, max_deliver)]
    assert letters[0][1].startswith(f"unexpected error after {max_deliver} deliveries: FileNotFoundError")
    # the first delivery of the poison: max_deliver attempts of its batch, then alone once
    # (unless its batch was it alone); each later one: alone once, its batch never whole
    deliveries = sorted({d for call in applier.calls for n, d in call if n == POISON})
    assert deliveries == list(range(1, max_deliver + 1))
    with_poison = [call for call in applier.calls if POISON in {n for n, _ in call}]
    assert len(with_poison) in {2 * max_deliver - 1, 2 * max_deliver}, [len(c) for c in with_poison]
    assert all(len(call) == 1 for call in with_poison[max_deliver:]), [len(c) for c in with_poison]
    assert metrics.batch_failures.labels("batch")._value.get() == max_deliver
    assert max_deliver - 1 <= metrics.batch_failures.labels("command")._value.get() <= max_deliver
    innocent = {d for call in applier.calls for n, d in call if n != POISON}
    assert innocent == {1}, "a command other than the poison was redelivered"


@pytest.mark.timeout(60)
async def test_a_failure_after_the_commit_is_not_applied_again(settings, bus, patch_handler, monkeypatch) -> None:
    """The wiki flush after the COMMIT fails once with ``UnicodeEncodeError``: the files stay
    owed (written once the flush works) and the batch is not attempted again, so a waiting
    caller gets one reply (not a duplicate) and a handler bug in the same batch is one dead
    letter (a re-run would store it twice)."""
    def broken(tx, env, cmd):
        raise RuntimeError("handler bug")

    patch_handler("observation.append", broken)
    w = tuned(settings, ack_wait_s=ACK_WAIT_S, batch_linger_ms=0.0)
    async with real_writer(w, bus, DeliveryRecorder) as (thread, applier, metrics):
        flush = applier.wiki.flush
        flushes = [0]

        def flaky(ops):
            flushes[0] += 1
            if flushes[0] == 1:
                raise UnicodeEncodeError("utf-8", "\udc80", 0, 1, "surrogates not allowed")
            return flush(ops)

        monkeypatch.setattr(applier.wiki, "flush", flaky)
        replies: list[dict] = []

        async def on_reply(msg) -> None:
            replies.append(json.loads(msg.data))

        inbox = bus.nc.new_inbox()
        sub = await bus.nc.subscribe(inbox, cb=on_reply)
        write = make_envelope("page.write", {"path": "notes/owed.md", "body": "owed then written"}, project="app")
        await bus.publish(write, reply_to=inbox)
        await publish_prompt(bus.js, 1)  # the handler bug, nobody waits for it: a dead letter
        consumer = Consumer(w, bus.nc, thread, applier, metrics)
        run = asyncio.create_task(consumer.run())
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (not replies or flushes[0] < 2):
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.5)  # a retry in place would come within ~1 s
        consumer.stop()
        await asyncio.wait_for(run, 10)
        await sub.unsubscribe()
        pages = [p.read_text() for p in applier.wiki.root.rglob("owed.md")]
    ro = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True)
    letters = ro.execute("SELECT reason FROM dead_letters").fetchall()
    ro.close()
    assert [(r["cmd_id"], r["ok"], r.get("duplicate")) for r in replies] == [(write.cmd_id, True, None)]
    assert letters == [("RuntimeError: handler bug",)]
    assert len(applier.calls) == 1 and metrics.batch_failures.labels("batch")._value.get() == 0
    assert flushes[0] == 2 and len(pages) == 1 and "owed then written" in pages[0]
    assert consumer.fault is None


@pytest.mark.timeout(60)
async def test_a_writer_stopped_mid_retry_hands_the_batch_back_in_order(settings, bus, patch_handler) -> None:
    """Stopped while it retries a failing batch, the writer hands that batch back with what
    it fetched after it, in stream order (not left for ``ack_wait_s``): the next writer, on
    a store where the failure is gone, applies every prompt once, in published order."""
    failed = _fail_prompt(patch_handler, 60, float("inf"))
    w = tuned(settings, ack_wait_s=ACK_WAIT_S)
    async with real_writer(w, bus, DeliveryRecorder) as (thread, applier, metrics):
        first = Consumer(w, bus.nc, thread, applier, metrics)
        run = asyncio.create_task(first.run())
        stop = asyncio.Event()
        pub = asyncio.create_task(trickle(bus.js, stop, 0.004))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and metrics.batch_failures.labels("batch")._value.get() < 2:
            await asyncio.sleep(0.05)
        first.stop()
        await asyncio.wait_for(run, 10)
        stop.set()
        published = await pub
        assert failed[0] == 2 and 60 not in stored_prompts(settings)
        failed[0] = float("inf")  # the failure is gone: prompt 60 applies now
        second = Consumer(w, bus.nc, thread, applier, metrics)
        run = asyncio.create_task(second.run())
        stored = await wait_stored(settings, published, 10)
        second.stop()
        await asyncio.wait_for(run, 10)
    assert stored == list(range(1, published + 1)), f"stored {len(stored)} of {published}"


class FailsInItsBatch(DeliveryRecorder):
    """Fails any batch of more than one command that holds ``Prompt 60`` (a command that
    only conflicts with its neighbours); applies single commands 0.1 s slower."""

    def apply(self, items):
        if len(items) > 1 and b'"Prompt 60"' in b"".join(i.data for i in items):
            super().apply([])  # recorded as an empty call
            raise RuntimeError("conflicts with its batch")
        if len(items) == 1:
            time.sleep(0.1)
        return super().apply(items)


@pytest.mark.timeout(60)
async def test_a_writer_stopped_one_command_at_a_time_hands_the_rest_back(settings, bus) -> None:
    """Stopped while it applies a failed batch one command at a time, the writer settles
    what it applied and hands the rest back in stream order: the next writer applies every
    prompt once, in published order (left unsettled, the rest would wait ``ack_wait_s``)."""
    w = tuned(settings, ack_wait_s=ACK_WAIT_S, max_deliver=1)
    async with real_writer(w, bus, FailsInItsBatch) as (thread, applier, metrics):
        first = Consumer(w, bus.nc, thread, applier, metrics)
        run = asyncio.create_task(first.run())
        stop = asyncio.Event()
        pub = asyncio.create_task(trickle(bus.js, stop, 0.004))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and sum(1 for c in applier.calls if len(c) == 1) < 3:
            await asyncio.sleep(0.01)
        first.stop()
        await asyncio.wait_for(run, 10)
        stop.set()
        published = await pub
        singles = sum(1 for c in applier.calls if len(c) == 1)
        second = Consumer(w, bus.nc, thread, DeliveryRecorder(applier.conn, applier.wiki, w, metrics), metrics)
        run = asyncio.create_task(second.run())
        stored = await wait_stored(settings, published, 10)
        second.stop()
        await asyncio.wait_for(run, 10)
    assert metrics.batch_failures.labels("batch")._value.get() == 1
    assert 3 <= singles < 20, singles  # stopped part-way through the failed batch
    assert stored == list(range(1, published + 1)), f"stored {len(stored)} of {published}"


@pytest.mark.timeout(60)
async def test_a_command_handed_back_that_then_applies_is_stored_once_and_forgotten(settings, bus,
                                                                                  patch_handler) -> None:
    """Prompt 60 fails through its batch's attempts and alone (handed back), then applies on
    its redelivery, tried alone without a pause: every prompt is stored once, the others in
    published order, no dead letter, and the writer no longer counts it a suspect."""
    max_deliver = 3
    failed = _fail_prompt(patch_handler, 60, max_deliver + 1)
    w = tuned(settings, ack_wait_s=ACK_WAIT_S, max_deliver=max_deliver)
    async with real_writer(w, bus, DeliveryRecorder) as (thread, applier, metrics):
        consumer = Consumer(w, bus.nc, thread, applier, metrics)
        async with running(consumer):
            stop = asyncio.Event()
            pub = asyncio.create_task(trickle(bus.js, stop, 0.004))
            await asyncio.sleep(max_deliver + 2.0)
            stop.set()
            published = await pub
            stored = await wait_stored(settings, published, 10)
            await asyncio.sleep(0.3)
            stored = stored_prompts(settings)
    ro = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True)
    letters = ro.execute("SELECT count(*) FROM dead_letters").fetchone()[0]
    ro.close()
    assert failed[0] == max_deliver + 1
    assert sorted(stored) == list(range(1, published + 1)), f"stored {len(stored)} of {published}"
    assert [n for n in stored if n != 60] == [n for n in range(1, published + 1) if n != 60]
    assert letters == 0 and not consumer._retry.suspects
    redelivered = [call for call in applier.calls if (60, 2) in call]
    assert [len(call) for call in redelivered] == [1], redelivered  # alone, once
    assert metrics.batch_failures.labels("batch")._value.get() == max_deliver
