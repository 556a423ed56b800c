"""Debounced git checkpoints.

The first batch that touched the wiki schedules one ``writer.git_debounce_ms`` later; the
batches in between ride along. Event loop; the commit runs on the writer thread
(``Applier.checkpoint``).
"""

from __future__ import annotations

import asyncio
import logging

from aimem_common.config import Settings

from aimem_writer.batch import Applier
from aimem_writer.thread import WriterThread

log = logging.getLogger("aimem.writer.consumer")


class Checkpoints:
    """Schedules and runs the wiki's git checkpoints.

    Args:
        settings: the writer's settings (``git_debounce_ms``).
        thread: the writer thread.
        applier: the ``Applier`` living on that thread.
    """

    def __init__(self, settings: Settings, thread: WriterThread, applier: Applier):
        self.settings = settings
        self.thread = thread
        self.applier = applier
        self._ckpt_task: asyncio.Task | None = None
        self._ckpt_pending = False

    def schedule(self) -> None:
        """Schedule a git checkpoint after the debounce (no-op when one is pending)."""
        if self._ckpt_pending:
            return
        self._ckpt_pending = True
        self._ckpt_task = asyncio.create_task(self._later(), name="writer-checkpoint")

    async def _later(self) -> None:
        try:
            await asyncio.sleep(self.settings.writer.git_debounce_ms / 1000)
        finally:
            self._ckpt_pending = False
        try:
            await self.thread.call(self.applier.checkpoint)
        except Exception:  # noqa: BLE001 - retried with the next batch's checkpoint
            log.exception("git checkpoint failed")

    async def flush(self, reason: str | None = None) -> str | None:
        """Run any pending checkpoint now (shutdown, admin backup, ``aimem commit`` whose
        message is ``reason``); return the commit id or None."""
        if self._ckpt_task and not self._ckpt_task.done():
            self._ckpt_task.cancel()
            try:
                await self._ckpt_task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        self._ckpt_pending = False
        return await self.thread.call(self.applier.checkpoint, reason)


async def vacuum(thread: WriterThread, applier: Applier) -> str:
    """VACUUM the DB and checkpoint its WAL to zero on the writer thread (``db.compact``, after
    COMMIT: VACUUM cannot run inside a transaction); return ``done``, or ``wal_busy`` when a
    reader kept the WAL from being truncated, or ``failed: <reason>`` (the compaction's index
    rebuild stands either way)."""
    def run() -> str:
        conn = applier.conn
        conn.execute("VACUUM")
        busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        return "wal_busy" if busy else "done"

    try:
        return await thread.call(run)
    except Exception as exc:  # noqa: BLE001 - reported to the caller, the writer goes on
        log.warning("compact: VACUUM failed: %s", exc)
        return f"failed: {exc}"
