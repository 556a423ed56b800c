"""The writer service: FastAPI app (health + metrics) around the command consumer.

The writer is the only process that opens SQLite read-write or touches ``wiki/``
(DESIGN.md invariant 2). Its lifespan takes the writer lock (a second writer on the same
data dir refuses to start), opens the DB on the writer thread (applying migrations), opens
the wiki repository and replays any wiki effects a crash left in ``wiki_outbox``, connects
to NATS, provisions the streams and the durable ``writer`` consumer, then runs the consumer,
the hand-edit watcher and, when configured, the replicator (wiki push, lag of both copies).
Shutdown stops the consumer after its current batch, takes a final git checkpoint, pushes
it, and closes everything in reverse order.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from fastapi import FastAPI
from nats.aio.client import Client as NATS

from aimem_common import bus as busmod
from aimem_common.config import Settings
from aimem_common.db.connect import open_writer
from aimem_common.service import ServiceContext, Startup, create_service_app
from aimem_common.telemetry import Telemetry

from aimem_writer import ops as _ops  # noqa: F401  (registers every handler)
from aimem_writer.batch import Applier
from aimem_writer.consumer import Consumer
from aimem_writer.lock import WriterLock
from aimem_writer.metrics import WriterMetrics
from aimem_writer.reindex import index_hand_edits
from aimem_writer.replicate import Replicator
from aimem_writer.textindex import TextIndexWriter
from aimem_writer.thread import WriterThread
from aimem_writer.watcher import WikiWatcher, candidate_rel
from aimem_writer.wiki import WikiRepo, replay_outbox

log = logging.getLogger("aimem.writer")

HEALTH_TIMEOUT_S = 3.0


@dataclass(slots=True, kw_only=True)
class WriterContext(ServiceContext):
    """Everything the running writer holds (on ``app.state.ctx``); no read pool: the writer
    owns the one read-write connection, on its thread."""

    thread: WriterThread
    applier: Applier
    consumer: Consumer
    metrics: WriterMetrics
    task: asyncio.Task

    async def health(self) -> dict:
        """``nats``, ``db`` (a ping on the writer thread within 3 s), ``wiki``, ``consumer`` running,
        ``store`` (``{ok: False, reason, ...}`` while a store fault holds a batch), ``text_index``
        (``{enabled, ready, failed}``: informational, never red — searches use FTS5 while the
        page text index is not ready)."""
        try:
            db_ok = await asyncio.wait_for(self.thread.call(self.applier.ping), HEALTH_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - reported as a failed check
            db_ok = False
        wiki_ok = await asyncio.to_thread(self.applier.wiki.healthy)
        # Red while a store fault holds a batch: the DB may still answer reads (SELECT 1).
        status = self.consumer.status()
        store = True if status["state"] == "ok" else {"ok": False, **status}
        return {"nats": bool(self.nc.is_connected), "db": db_ok, "wiki": wiki_ok, "consumer": not self.task.done(),
                "store": store, "text_index": self.applier.text_index.status() if self.applier.text_index else None}


def create_app(settings: Settings) -> FastAPI:
    """Build the writer app for ``settings`` (nothing starts until the lifespan runs)."""
    telemetry = Telemetry("writer")
    metrics = WriterMetrics.create(telemetry)

    async def start(s: Startup) -> WriterContext:
        stack = s.stack
        lock = WriterLock(settings.data_dir).acquire()
        stack.callback(lock.release)
        thread = WriterThread()
        stack.callback(thread.close)
        conn = await thread.call(open_writer, settings.db_path)
        stack.callback(thread.call_sync, conn.close)
        wiki = await thread.call(WikiRepo, settings.wiki_dir)
        # Opened (a crash's outbox rows drained) or, when missing/outdated, rebuilt in the
        # background; searches use FTS5 until it is complete. Disabled: removed, outbox emptied.
        text_index = TextIndexWriter(settings.search_dir, settings.db_path, enabled=settings.search.text_index)
        await thread.call(text_index.start, conn)
        stack.callback(text_index.close)
        applier = Applier(conn, wiki, settings, metrics, text_index=text_index)
        await thread.call(replay_outbox, conn, wiki)
        # Files changed while no writer ran (hand edits, a crash before the checkpoint):
        # index them; the writer's own files hash equal and are no-ops.
        offline = [r for r in sorted(wiki.dirty) if candidate_rel(wiki.root, str(wiki.root / r))]
        if offline:
            await thread.call(index_hand_edits, applier, offline)
        await thread.call(applier.checkpoint, "startup")
        if settings.replication.git_remote or settings.replication.s3_bucket:
            replicator = Replicator(settings, wiki.head, metrics)
            repl_task = asyncio.create_task(replicator.run(), name="writer-replication")

            async def stop_replication() -> None:  # runs after the consumer's final checkpoint
                repl_task.cancel()
                await asyncio.gather(repl_task, return_exceptions=True)
                await replicator.flush()

            stack.push_async_callback(stop_replication)
        nc, bus = await s.connect_bus()
        await busmod.ensure_writer_consumer(nc.jetstream(), ack_wait_s=settings.writer.ack_wait_s)
        consumer = Consumer(settings, nc, thread, applier, metrics)
        task = asyncio.create_task(consumer.run(), name="writer-consumer")

        async def stop_consumer() -> None:
            consumer.stop()
            try:
                await asyncio.wait_for(task, 15)
            except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - shutting down anyway
                log.exception("consumer did not stop cleanly")
            await consumer.flush_checkpoint()

        stack.push_async_callback(stop_consumer)
        await asyncio.wait_for(consumer.ready.wait(), 10)
        if settings.writer.watch_wiki:

            async def reindex(rels: list[str]) -> None:
                events = await thread.call(index_hand_edits, applier, rels)
                if events:
                    await consumer.publish_events(events)
                    consumer.schedule_checkpoint()

            watcher = WikiWatcher(settings.wiki_dir, reindex)
            await watcher.start()
            stack.push_async_callback(watcher.stop)
        log.info("writer ready: db %s, wiki %s", settings.db_path, settings.wiki_dir)
        return WriterContext(settings=settings, telemetry=telemetry, nc=nc, bus=bus, thread=thread,
                             applier=applier, consumer=consumer, metrics=metrics, task=task)

    return create_service_app("writer", settings, telemetry, start,
                              not_ready={"nats": False, "db": False, "wiki": False, "consumer": False})
