"""Live first on a real nats-server with the real applier: the writer's two lanes.

Imports travel in the bulk lane (``AIMEM_BULK``, durable ``writer-bulk``); the writer takes a
slice of it only when the live lane (``AIMEM_MUT``) has nothing pending. A live command
published behind a bulk backlog is applied before most of that backlog; the bulk lane is
applied in its own order, each command once (a re-sent key too), and a command of it that
cannot be applied is a dead letter like a live one.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time

import pytest

from aimem_common import bus as busmod
from aimem_common.commands import make_envelope
from aimem_common.models import ObservationKind
from aimem_common.sanitize import RawObservation, sanitize
from aimem_writer.consumer import Consumer

from .realwriter import real_writer, running, stored_prompts, tuned, wait_stored

pytestmark = [pytest.mark.integration, pytest.mark.asyncio, pytest.mark.timeout(120)]

BACKLOG = 3000
LIVE = 1_000_000  # the live prompt's number, told apart from the imported 1..BACKLOG


async def publish(js, i: int, lane: str, *, key: str | None = None, session: str = "s1") -> None:
    """Publish observation ``i`` (title ``Prompt i``) on ``lane`` as ingress would."""
    raw = RawObservation(session_id=session, kind=ObservationKind.USER_PROMPT, agent="claude-code",
                         cwd="/w/app", title=f"Prompt {i}", body=f"prompt number {i}")
    env = make_envelope("observation.append", sanitize(raw).to_payload(), project="app",
                        idempotency_key=key or f"{lane}-{session}-{i}")
    await js.publish(busmod.mut_subject(env.op, lane), env.model_dump_json().encode(),
                     headers={busmod.MSG_ID_HEADER: env.dedupe_id if key is None else f"{key}-{time.time_ns()}"})


async def test_a_live_command_overtakes_an_import_backlog_and_the_backlog_keeps_its_order(settings, bus) -> None:
    w = tuned(settings, ack_wait_s=5.0, batch_linger_ms=0.0)
    await asyncio.gather(*(publish(bus.js, i, busmod.BULK, session=f"imp{i % 7}") for i in range(1, BACKLOG + 1)))
    async with real_writer(w, bus) as (thread, applier, metrics):
        consumer = Consumer(w, bus.nc, thread, applier, metrics)
        async with running(consumer):
            while len(stored_prompts(settings)) < 50:  # the import is under way
                await asyncio.sleep(0.01)
            await publish(bus.js, LIVE, busmod.LIVE, session="live")
            stored = await wait_stored(settings, BACKLOG + 1, 60)
    assert sorted(stored) == [*range(1, BACKLOG + 1), LIVE]  # each once
    before_live = stored.index(LIVE)
    # Behind at most the slice being applied and the one fetched, never the backlog.
    assert before_live < BACKLOG // 3, f"{before_live} imported commands went before the live one"
    imported = [n for n in stored if n != LIVE]
    assert imported == sorted(imported)  # the bulk lane in its stream order (a session's end after its events)


async def test_the_bulk_lane_dedupes_re_sent_keys_and_keeps_dead_letters(settings, bus) -> None:
    w = tuned(settings, ack_wait_s=1.0, max_deliver=2)
    await publish(bus.js, 1, busmod.BULK, key="imp-k1")
    await publish(bus.js, 1, busmod.BULK, key="imp-k1")  # a re-sent import past JetStream's dedupe
    await bus.js.publish(busmod.mut_subject("observation.append", busmod.BULK), b"not an envelope")
    await publish(bus.js, 2, busmod.BULK)
    async with real_writer(w, bus) as (thread, applier, metrics):
        consumer = Consumer(w, bus.nc, thread, applier, metrics)
        async with running(consumer):
            stored = await wait_stored(settings, 2, 30)
            deadline = time.monotonic() + 30
            while metrics.dead_letters.labels("unknown")._value.get() < 1 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)  # a late duplicate would show
            stored = stored_prompts(settings)
    assert stored == [1, 2]
    ro = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True)
    try:
        letters = ro.execute("SELECT envelope FROM dead_letters").fetchall()
    finally:
        ro.close()
    assert len(letters) == 1 and "not an envelope" in letters[0][0]
    assert await bus.writer_lag(busmod.BULK) == 0

