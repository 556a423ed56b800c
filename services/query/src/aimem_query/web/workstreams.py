"""Managed workstreams (``aimem run``): the project's list and one workstream's timeline.

Read-only, under the project's read grant like every other screen: the ledger's events
(sanitised, redacted when written) are rendered as text by the autoescaping templates, so a
hostile transcript stays inert.
"""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from aimem_common.errors import NotFoundError
from aimem_common.models import DB_INT_MAX
from aimem_common.read import workstreams as wsread
from aimem_query.deps import read
from aimem_query.web.deps import UserDep, renderer, scope_for

router = APIRouter(prefix="/p/{workspace}/{project}")

TIMELINE_PAGE = 200


@router.get("/workstreams")
async def workstream_list(request: Request, user: UserDep, workspace: str, project: str) -> Response:
    """The project's workstreams, newest activity first: checkout, events, each harness's
    delivery cursor, the run holding a live lease."""
    scope = await scope_for(request, user, workspace, project)
    rows = await read(request, wsread.list_workstreams, scope)
    return renderer(request).page(request, "workstreams.html", scope=scope, workstreams=rows)


@router.get("/workstreams/{workstream_id}")
async def workstream_timeline(request: Request, user: UserDep, workspace: str, project: str, workstream_id: str,
                              start: int = Query(1, alias="from", ge=1, le=DB_INT_MAX)) -> Response:
    """One workstream: its runs (newest first) and its events from ``from`` on (200 a screen,
    oldest first), each with its harness, role and run.

    Raises:
        NotFoundError: no such workstream in this project (404, as an unreadable one).
    """
    scope = await scope_for(request, user, workspace, project)

    def load(conn):
        ws = wsread.show(conn, scope, workstream_id, last=0)
        return ws, (wsread.events_from(conn, workstream_id, start, limit=TIMELINE_PAGE) if ws else [])

    ws, events = await read(request, load)
    if ws is None:
        raise NotFoundError(f"workstream {workstream_id} not found", data={"workstream_id": workstream_id})
    following = events[-1]["seq"] + 1 if events and events[-1]["seq"] < ws["last_seq"] else None
    return renderer(request).page(request, "workstream.html", scope=scope, ws=ws, events=events, start=start,
                                  following=following, previous=max(1, start - TIMELINE_PAGE) if start > 1 else None)
