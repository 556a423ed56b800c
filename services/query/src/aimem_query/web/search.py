"""Search with an explain view: the same ``memory_query`` as ``/api/v1/search``.

Scope: one project (``/web/p/<ws>/<project>/search``) or every project the user may read
(``/web/search``). With ``explain`` each hit shows its rank and score in every stream
(fts, entity, vector, superseded, links) and the authority multiplier.
"""

from __future__ import annotations

from fastapi import APIRouter, BackgroundTasks, Request
from fastapi.responses import Response

from aimem_common.search.params import SearchParams
from aimem_query.api.search import MAX_QUERY_CHARS, run_search
from aimem_query.web.deps import UserDep, renderer, scope_for

router = APIRouter()


async def _search(request: Request, user: UserDep, tasks: BackgroundTasks, q: str, explain: bool,
                  workspace: str | None, project: str | None) -> Response:
    scope = await scope_for(request, user, workspace, project) if project else None
    result = None
    q = q[:MAX_QUERY_CHARS]
    if q.strip():
        req = SearchParams(query=q, workspace=workspace, project=project, global_=project is None, limit=20,
                           explain=explain)
        result = await run_search(request, user.principal, req, tasks)
    return renderer(request).page(request, "search.html", scope=scope, q=q, explain=explain, result=result)


@router.get("/search")
async def search_all(request: Request, user: UserDep, tasks: BackgroundTasks, q: str = "",
                     explain: bool = False) -> Response:
    """Search every project the user may read."""
    return await _search(request, user, tasks, q, explain, None, None)


@router.get("/p/{workspace}/{project}/search")
async def search_project(request: Request, user: UserDep, tasks: BackgroundTasks, workspace: str, project: str,
                         q: str = "", explain: bool = False) -> Response:
    """Search one project (raw observations answer when no page matches)."""
    return await _search(request, user, tasks, q, explain, workspace, project)
