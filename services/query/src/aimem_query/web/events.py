"""Live updates: the writer's event stream (``aimem.evt.>``) pushed to browsers over SSE.

``EventHub`` holds one core-NATS subscription per query process and fans each event out
to the open streams (a bounded queue each: a slow browser loses events, never memory).
``GET /web/events`` streams ``page.changed``, ``observations.appended``,
``session.ended``, ``handoff.*``, ``message.sent`` and ``proposals.staged`` of the
projects the user may read (optionally one project), as ``event: <kind>`` + JSON ``data``.
A stream lasts ``web.sse_max_s`` and tells the browser to reconnect after 2 s; comments
every 15 s keep proxies from closing it. The browser side is ``static/app.js``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import contextmanager
from typing import Any, Iterator

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from aimem_common.bus import EVT_SUBJECTS
from aimem_query.web.deps import UserDep
from aimem_query.web.render import SECURITY_HEADERS

log = logging.getLogger("aimem.web.events")

router = APIRouter()

QUEUE_MAX = 256
HEARTBEAT_S = 15.0
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


def visible(item: dict[str, Any], principal, workspace: str | None, project: str | None) -> bool:
    """Return True when the user may read the event's project (and it is the one asked for)."""
    ws, pj = item.get("workspace"), item.get("project")
    if not ws or not pj or not principal.can_read(ws, pj):
        return False
    return project is None or (ws == workspace and pj == project)


@router.get("/events")
async def events(request: Request, user: UserDep, workspace: str | None = None,
                 project: str | None = None) -> StreamingResponse:
    """Server-sent events of the user's readable projects (``project`` narrows to one)."""
    hub: EventHub = request.app.state.web_events
    max_s = request.app.state.settings.web.sse_max_s

    async def stream() -> AsyncIterator[bytes]:
        with hub.listen() as q:
            yield b"retry: 2000\n: connected\n\n"
            deadline = time.monotonic() + max_s
            while not hub.closed.is_set() and time.monotonic() < deadline:
                try:
                    item = await asyncio.wait_for(q.get(), HEARTBEAT_S)
                except asyncio.TimeoutError:
                    if await request.is_disconnected():
                        return
                    yield b": ping\n\n"
                    continue
                if item is None:
                    return
                if visible(item, user.principal, workspace, project):
                    yield f"event: {item['event']}\ndata: {json.dumps(item, ensure_ascii=False)}\n\n".encode()

    headers = {**SECURITY_HEADERS, "X-Accel-Buffering": "no"}
    return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)
