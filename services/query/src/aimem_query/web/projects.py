"""Projects, a project's home (its brief) and the page tree."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from aimem_common.read import handoffs, pages, sessions
from aimem_common.read import status as status_reads
from aimem_query.deps import read
from aimem_query.web.deps import UserDep, renderer, scope_for

router = APIRouter()

RECENT_PAGES = 12
RECENT_SESSIONS = 8


@router.get("/")
async def root() -> Response:
    """``/web/`` → the projects list."""
    return RedirectResponse("/web/projects", status_code=303)


@router.get("/projects")
async def projects(request: Request, user: UserDep) -> Response:
    """Every project the user may read: live pages, sessions, open handoffs, last activity.

    A project with nothing left to show (no live page, no session, no open handoff: what a
    purge of its sessions and pages leaves) is not listed; its screens still answer.
    """
    rows = await read(request, status_reads.projects_overview)
    rows = [r for r in rows if user.principal.can_read(r["workspace"], r["project"])
            and (r["pages"] or r["sessions"] or r["handoffs_open"])]
    return renderer(request).page(request, "projects.html", projects=rows)


@router.get("/p/{workspace}/{project}")
async def home(request: Request, user: UserDep, workspace: str, project: str) -> Response:
    """The project's brief: rules, slots, open handoffs, recent sessions and pages."""
    scope = await scope_for(request, user, workspace, project)
    viewer = None if user.principal.is_root else user.name

    def brief(conn):
        return {
            "rules": pages.tree(conn, scope, "_rules/")["pages"],
            "slots": pages.tree(conn, scope, "_slots/")["pages"],
            "handoffs": handoffs.list_handoffs(conn, scope, viewer=viewer, status="open", limit=20, include_body=True),
            "sessions": sessions.list_sessions(conn, scope, limit=RECENT_SESSIONS),
            "recent": pages.recent(conn, scope, limit=RECENT_PAGES),
            "counts": status_reads.counts(conn, scope),
        }

    data = await read(request, brief)
    return renderer(request).page(request, "home.html", scope=scope, live=True, **data)


@router.get("/p/{workspace}/{project}/tree")
async def tree(request: Request, user: UserDep, workspace: str, project: str, folder: str = "",
               deleted: str = "") -> Response:
    """One folder of the page tree (subfolders with counts, then its pages); after a delete
    (``?deleted=<path>``) it says which page went and where to get it back."""
    scope = await scope_for(request, user, workspace, project)
    folder = folder.strip("/") + "/" if folder.strip("/") else ""
    data = await read(request, pages.tree, scope, folder)
    notice = (f"Deleted {deleted[:300]}. Its text stays in the wiki's git history: restore it from the "
              "history screen of that path.") if deleted else None
    return renderer(request).page(request, "tree.html", scope=scope, tree=data, live=True, notice=notice,
                                  deleted=deleted[:300])
