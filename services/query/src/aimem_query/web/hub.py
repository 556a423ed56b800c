"""``EventHub``: the writer's events, fanned out to the open ``/web/events`` streams.

One core-NATS subscription to the writer's events (``aimem.evt.>``) per query process.

Each stream gets a bounded queue: a slow browser loses events, never memory. Only the
kinds a live view shows are forwarded, each trimmed to what a browser needs (never ids of
other rows or bodies). Started by the query lifespan (``app.py``), stopped at shutdown.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from aimem_common.bus import EVT_SUBJECTS

log = logging.getLogger("aimem.web.events")

QUEUE_MAX = 256
FORWARDED = ("page.changed", "observations.appended", "session.ended", "handoff.opened", "handoff.accepted",
             "handoff.cancelled", "message.sent", "proposals.staged")
# What a browser needs to show an event: never the whole event (ids of other rows, bodies).
FIELDS = ("workspace", "project", "action", "path", "page_id", "kind", "session_id", "count", "kinds",
          "last_observation_id", "handoff_id", "message_id", "to_workspace", "to_project", "at")


class EventHub:
    """Fan-out of writer events to live streams (one per open browser tab)."""

    def __init__(self) -> None:
        self._queues: set[asyncio.Queue] = set()
        self._sub = None
        self.closed = asyncio.Event()

    async def start(self, nc) -> None:
        """Subscribe to ``aimem.evt.>`` on ``nc`` (core NATS: live only, no replay)."""
        self._sub = await nc.subscribe(EVT_SUBJECTS, cb=self._on_msg)

    async def stop(self) -> None:
        """Unsubscribe and end every open stream."""
        self.closed.set()
        if self._sub is not None:
            try:
                await self._sub.unsubscribe()
            except Exception as exc:  # noqa: BLE001 - the connection may be gone at shutdown
                log.debug("unsubscribe at shutdown: %s", exc)
        for q in list(self._queues):
            if not q.full():
                q.put_nowait(None)  # a full queue's stream still ends: it checks ``closed``

    async def _on_msg(self, msg) -> None:
        kind = msg.subject.removeprefix("aimem.evt.")
        if kind not in FORWARDED:
            return
        try:
            data = json.loads(msg.data)
        except ValueError:
            return
        item = {**{k: data[k] for k in FIELDS if k in data}, "event": kind}  # "kind" is the page's kind
        for q in list(self._queues):
            if not q.full():
                q.put_nowait(item)

    @contextmanager
    def listen(self) -> Iterator[asyncio.Queue]:
        """Register a queue for the duration of one stream."""
        q: asyncio.Queue = asyncio.Queue(QUEUE_MAX)
        self._queues.add(q)
        try:
            yield q
        finally:
            self._queues.discard(q)
