"""Helpers for tests of the real ``Consumer`` on a real nats-server (imported, not collected).

``real_writer`` sets up what ``aimem_writer.app`` would: the ``writer`` durable, a writer
thread, the database and the wiki; the tests then run a ``Consumer`` on them. Observations
are published as ingress does (``publish_prompt``), numbered so a test can read the order
in which they were applied back from their titles.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time

from aimem_common import bus as busmod
from aimem_common.commands import make_envelope
from aimem_common.db.connect import open_writer
from aimem_common.models import ObservationKind
from aimem_common.sanitize import RawObservation, sanitize
from aimem_common.telemetry import Telemetry

import aimem_writer.ops  # noqa: F401  (registers every handler)
from aimem_writer.batch import Applier
from aimem_writer.metrics import WriterMetrics
from aimem_writer.thread import WriterThread
from aimem_writer.wiki import WikiRepo


def tuned(settings, **writer):
    """Return ``settings`` with the ``[writer]`` fields in ``writer`` replaced."""
    return settings.model_copy(update={"writer": settings.writer.model_copy(update=writer)})


@contextlib.asynccontextmanager
async def real_writer(settings, bus, applier_cls: type[Applier] = Applier, **applier_kw):
    """Yield ``(thread, applier, metrics)`` for a ``Consumer``: the ``writer`` durable (with
    ``settings.writer.ack_wait_s``), a writer thread, database and wiki under ``settings``;
    ``applier_cls(conn, wiki, settings, metrics, **applier_kw)`` is built on them. Closes the
    connection and the thread after."""
    await busmod.ensure_writer_consumer(bus.js, ack_wait_s=settings.writer.ack_wait_s)
    thread = WriterThread()
    metrics = WriterMetrics.create(Telemetry("writer"))
    try:
        conn = await thread.call(open_writer, settings.db_path)
        wiki = await thread.call(WikiRepo, settings.wiki_dir)
        yield thread, applier_cls(conn, wiki, settings, metrics, **applier_kw), metrics
        await thread.call(conn.close)
    finally:
        thread.close()


@contextlib.asynccontextmanager
async def running(consumer):
    """Run ``consumer.run()`` for the block; stop it and wait for it (10 s) after, also when the
    block fails (a consumer left running would keep the test's event loop, and its
    nats-server, from ever being torn down)."""
    task = asyncio.create_task(consumer.run())
    try:
        yield task
    finally:
        consumer.stop()
        await asyncio.wait_for(task, 10)


def prompt_number(data: bytes) -> int:
    """Return ``i`` of an observation published by ``publish_prompt(js, i)`` (its raw message)."""
    return int(json.loads(data)["payload"]["title"].split()[-1])


async def publish_prompt(js, i: int, session: str = "s1") -> None:
    """Publish observation ``i`` of ``session`` (title ``Prompt i``) as ingress would."""
    raw = RawObservation(session_id=session, kind=ObservationKind.USER_PROMPT, agent="claude-code",
                         cwd="/w/app", title=f"Prompt {i}", body=f"prompt number {i}")
    env = make_envelope("observation.append", sanitize(raw).to_payload(), project="app",
                        idempotency_key=f"{session}-{i}")
    await js.publish(busmod.mut_subject(env.op), env.model_dump_json().encode(),
                     headers={busmod.MSG_ID_HEADER: env.dedupe_id})


async def trickle(js, stop: asyncio.Event, every_s: float) -> int:
    """Publish ``Prompt 1``, ``Prompt 2``, … one every ``every_s`` s (less the publish time, so
    the rate holds) until ``stop``; returns how many were published."""
    n = 0
    next_at = time.monotonic()
    while not stop.is_set():
        n += 1
        await publish_prompt(js, n)
        next_at += every_s
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
    return n


def stored_prompts(settings) -> list[int]:
    """Return the numbers of the stored observations in the order they were stored (``id``)."""
    ro = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True)
    try:
        rows = ro.execute("SELECT title FROM observations ORDER BY id").fetchall()
    except sqlite3.OperationalError:
        return []  # the schema is not there yet
    finally:
        ro.close()
    return [int(r[0].split()[-1]) for r in rows]


async def wait_stored(settings, n: int, timeout_s: float) -> list[int]:
    """Poll until ``n`` observations are stored or ``timeout_s`` passed; return ``stored_prompts``."""
    deadline = time.monotonic() + timeout_s
    while True:
        stored = stored_prompts(settings)
        if len(stored) >= n or time.monotonic() > deadline:
            return stored
        await asyncio.sleep(0.05)


async def durable_state(js, settle_s: float = 5.0) -> tuple[int, int, int]:
    """``(delivered, redelivered, ack pending)`` of the writer durable, once its acks are in:
    a batch's rows are visible at its COMMIT, its acks follow a moment later (up to
    ``settle_s`` s; CI saw 2 still pending when read at once)."""
    deadline = time.monotonic() + settle_s
    while True:
        info = await js.consumer_info(busmod.MUT_STREAM, busmod.WRITER_DURABLE)
        if not info.num_ack_pending or time.monotonic() > deadline:
            return info.delivered.consumer_seq, info.num_redelivered, info.num_ack_pending
        await asyncio.sleep(0.05)
