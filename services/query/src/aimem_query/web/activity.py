"""Sessions (list and timeline), handoffs and messages — read without claiming anything.

Viewing a handoff or a message never claims it (only ``handoff.accept`` / ``message.pop``
do, which the web never sends); cancelling one is a writer op and needs the write grant.
"""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response

from aimem_common.models import DB_INT_MAX
from aimem_common.read import handoffs, messages, pictures, sessions
from aimem_query.deps import read
from aimem_query.web import layout
from aimem_query.web.deps import UserDep, form, renderer, scope_for, send
from aimem_query.web.render import page_url

router = APIRouter(prefix="/p/{workspace}/{project}")

TIMELINE_PAGE = 200


@router.get("/sessions")
async def session_list(request: Request, user: UserDep, workspace: str, project: str,
                       day: str = Query("", pattern=r"^(\d{4}-\d{2}-\d{2})?$"),
                       agent: str = Query("", max_length=64)) -> Response:
    """The project's sessions by last event, newest first; ``day`` (and ``agent``): those active
    that UTC day (where an activity bar leads)."""
    scope = await scope_for(request, user, workspace, project)
    if day:
        rows = await read(request, pictures.sessions_on_day, scope, day, agent=agent or None)
    else:
        rows = await read(request, sessions.list_sessions, scope, limit=200)
    return renderer(request).page(request, "sessions.html", scope=scope, sessions=rows, live=not day, day=day,
                                  agent=agent)


@router.get("/sessions/{session_id:path}")  # an id may hold "/" (page_url keeps it)
async def timeline(request: Request, user: UserDep, workspace: str, project: str, session_id: str,
                   offset: int = Query(0, ge=0, le=DB_INT_MAX)) -> Response:
    """One session's observations in arrival order, with their kinds (200 a screen)."""
    scope = await scope_for(request, user, workspace, project)
    def load(conn):
        data = sessions.session_observations(conn, scope, session_id, offset=offset, limit=TIMELINE_PAGE,
                                             body_max_chars=4000, reader=user.principal)
        return data, pictures.session_strip(conn, scope, data["session_id"])

    data, marks = await read(request, load)
    strip = {**layout.strip(marks["marks"], page_size=TIMELINE_PAGE), "total": marks["total"],
             "left_out": marks["left_out"]}
    return renderer(request).page(request, "timeline.html", scope=scope, data=data, strip=strip, live=True)


@router.get("/handoffs")
async def handoff_list(request: Request, user: UserDep, workspace: str, project: str,
                       status: str = "open", cancelled: str = "") -> Response:
    """Handoffs (``status`` open/accepted/expired/any) and pending messages; claims nothing.
    After a cancel (``?cancelled=handoff:<id>`` or ``message:<id>``) it says what was done."""
    scope = await scope_for(request, user, workspace, project)
    status = status if status in ("open", "accepted", "expired", "any") else "open"
    viewer = None if user.principal.is_root else user.name

    def load(conn):
        return {
            "handoffs": handoffs.list_handoffs(conn, scope, viewer=viewer, status=status, limit=200),
            "inbox": messages.list_messages(conn, scope, box="inbox", status="pending", limit=200,
                                            reader=user.principal),
            "outbox": messages.list_messages(conn, scope, box="outbox", status="pending", limit=200,
                                             reader=user.principal),
        }

    data = await read(request, load)
    kind, _, num = cancelled.partition(":")
    notice = None
    if kind == "handoff" and num.isdigit():
        notice = f"Handoff #{num} cancelled: no agent will receive it."
    elif kind == "message" and num.isdigit():
        notice = f"Message #{num} retracted: it will not be delivered."
    return renderer(request).page(request, "handoffs.html", scope=scope, status=status, live=True, notice=notice,
                                  can_write=user.principal.can_write(workspace, project), **data)


async def _cancel(request: Request, user, workspace: str, project: str, op: str, payload: dict,
                  done: str) -> Response:
    """Send ``op``, then 303 to the handoffs screen, which says what was done (``done``)."""
    scope = await scope_for(request, user, workspace, project, write=True)
    await form(request, user)
    await send(request, user, op, payload, workspace=scope.workspace, project=scope.project)
    return RedirectResponse(page_url(workspace, project, screen="handoffs") + f"?cancelled={done}", status_code=303)


@router.post("/handoffs/{handoff_id}/cancel")
async def handoff_cancel(request: Request, user: UserDep, workspace: str, project: str, handoff_id: int) -> Response:
    """Expire an open handoff created by mistake (``handoff.cancel``)."""
    return await _cancel(request, user, workspace, project, "handoff.cancel", {"handoff_id": handoff_id},
                         f"handoff:{handoff_id}")


@router.post("/messages/{message_id}/cancel")
async def message_cancel(request: Request, user: UserDep, workspace: str, project: str, message_id: int) -> Response:
    """Retract a pending message this project sent (``message.cancel``)."""
    return await _cancel(request, user, workspace, project, "message.cancel", {"message_id": message_id},
                         f"message:{message_id}")
