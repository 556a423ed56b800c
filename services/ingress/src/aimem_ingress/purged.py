"""The session ids ingress answers 410 for: a cache of the live purge tombstones.

The writer is the authority (it drops and counts every late event of a purged session at
apply time, ``aimem_writer.tombstones``); ingress answers ``410 purged`` when it can already
see the tombstone, so the hook client drops the event from its spool instead of sending it
again. A background task (``start``) refreshes the cache every ``refresh_s`` (a version probe,
the ids re-read only when they changed), so a purge committed more than ``refresh_s`` plus one
read ago is answered 410 even by the first request after it. (Refreshing only on demand
answered that first request from the old ids: 202 however long after the purge it came.)
Until the first refresh (or without a database) the cache is empty and the writer alone refuses. Refusals are sent back to the writer in counts
(``purge.refused``) so the tombstone shows them; no text of a refused event goes anywhere.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections import Counter

from aimem_common.commands import make_envelope
from aimem_common.commands.admin import PurgeRefused
from aimem_common.errors import AimemError
from aimem_common.readpool import ReaderPool
from aimem_common.read.tombstones import live_session_ids

log = logging.getLogger("aimem.ingress.purged")
REFRESH_S = 1.0  # staleness bound of the 410 answers (the writer refuses regardless)


class PurgedSessions:
    """Purged session ids as last read (event loop; the read runs on the pool's threads)."""

    def __init__(self, pool: ReaderPool, bus, *, refresh_s: float = REFRESH_S):
        self.pool = pool
        self.bus = bus
        self.refresh_s = refresh_s
        self.ids: frozenset[str] = frozenset()
        self.refused: Counter[tuple[str, str]] = Counter()  # (session id, op) -> refusals not yet reported
        self._version: tuple[int, int] | None = None
        self._read_at = float("-inf")
        self._task: asyncio.Task | None = None
        self._loop: asyncio.Task | None = None

    def start(self) -> None:
        """Refresh every ``refresh_s`` in the background until ``close`` (call on the event loop)."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop().create_task(self._refresh_forever(), name="purged-refresh")

    async def close(self) -> None:
        """Stop the background refresh (idempotent)."""
        for task in (self._loop, self._task):
            if task is not None and not task.done():
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
        self._loop = None

    async def _refresh_forever(self) -> None:
        while True:
            self._read_at = time.monotonic()
            try:
                await self.refresh()
            except Exception:  # noqa: BLE001 - one failed refresh must not end the loop
                log.exception("purged sessions refresh failed")
            await asyncio.sleep(self.refresh_s)

    def is_purged(self, session_id: str | None) -> bool:
        """True when ``session_id`` has a live tombstone (as of ≤ ``refresh_s`` + one read ago).

        Never waits: the background task (``start``) keeps the ids fresh; without it a due
        refresh is started here.
        """
        now = time.monotonic()
        if self._loop is None and now - self._read_at >= self.refresh_s and (self._task is None or self._task.done()):
            self._read_at = now
            self._task = asyncio.get_running_loop().create_task(self.refresh())
        return bool(session_id) and session_id in self.ids

    def note_refused(self, session_id: str, op: str = "observation.append") -> None:
        """Count one refused ``op`` of ``session_id`` (reported with the next refresh)."""
        self.refused[(session_id, op)] += 1

    async def refresh(self) -> None:
        """Re-read the ids when they changed, then report the counted 410s to the writer."""
        try:
            version, ids = await self.pool.run(live_session_ids, self._version)
        except AimemError as exc:  # no database yet, or a read over budget: keep what we have
            log.debug("purged sessions not refreshed: %s", exc.message)
        except sqlite3.Error as exc:  # a locked or damaged file: the writer still refuses
            log.warning("purged sessions not refreshed: %s", exc)
        else:
            self._version = version
            if ids is not None:
                self.ids = ids
        await self.report()

    async def report(self) -> None:
        """Send the counted refusals as ``purge.refused`` commands (kept on failure)."""
        while self.refused:
            (sid, op), n = next(iter(self.refused.items()))
            env = make_envelope("purge.refused", PurgeRefused(session_id=sid, op=op, count=n), actor="ingress")
            try:
                await self.bus.publish(env)
            except AimemError as exc:
                log.info("purge refusals not reported yet: %s", exc.message)
                return
            self.refused[(sid, op)] -= n
            if self.refused[(sid, op)] <= 0:
                del self.refused[(sid, op)]
