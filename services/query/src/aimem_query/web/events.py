"""Live updates: the writer's event stream pushed to browsers over SSE.

``GET /web/events`` (fed by ``hub.EventHub``) streams ``page.changed``, ``observations.appended``,
``session.ended``, ``handoff.*``, ``message.sent`` and ``proposals.staged`` of the
projects the user may read (optionally one project), as ``event: <kind>`` + JSON ``data``.
A stream lasts ``web.sse_max_s`` and tells the browser to reconnect after 2 s; comments
every 15 s keep proxies from closing it. The browser side is ``static/app.js``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from aimem_query.deps import ctx_of
from aimem_query.web.deps import UserDep
from aimem_query.web.hub import EventHub
from aimem_query.web.render import SECURITY_HEADERS

router = APIRouter()

HEARTBEAT_S = 15.0


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
    ctx = ctx_of(request)
    hub: EventHub = ctx.events
    max_s = ctx.settings.web.sse_max_s

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
