"""Search with an explain view: the same ``memory_query`` as ``/api/v1/search``.

Scope: one project (``/web/p/<ws>/<project>/search``) or every project the user may read
(``/web/search``). The form offers every ``SearchParams`` field, rendered from its spec
(``aimem_common.search.params.param_specs``: the API's names, bounds, defaults and help), and
is read back through the same model. With ``explain`` each hit shows its rank and score in
every stream and the authority multiplier.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, BackgroundTasks, Request
from fastapi.responses import Response
from pydantic import ValidationError

from aimem_common.commands.envelope import first_error
from aimem_common.search.params import ParamSpec, SearchQuery, param_specs
from aimem_query.api.search import MAX_QUERY_CHARS, run_search
from aimem_query.web.deps import UserDep, renderer, scope_for

router = APIRouter()

# Every search parameter, as the form offers it; a project's screen takes these from its path.
PARAMS = param_specs()
PATH_PARAMS = ("workspace", "project")
# Shown above the fold; the others sit under "More options".
MAIN_PARAMS = ("query", "explain")


def form_params(*, project_screen: bool) -> list[ParamSpec]:
    """The ``SearchParams`` fields the search form renders as inputs, in the model's order
    (on a project's screen the workspace and project come from the URL instead)."""
    return [p for p in PARAMS if not (project_screen and p.name in PATH_PARAMS)]


def read_form(request: Request) -> dict[str, Any]:
    """The submitted form (the query string) as ``SearchParams`` input, by public name.

    A blank input is left out (the model's default applies); a list input may repeat or
    hold comma-separated entries; the question is cut to ``MAX_QUERY_CHARS``, as the API
    reads no more of it. ``q`` and ``search`` still name the question (old links).
    """
    qs = request.query_params
    values: dict[str, Any] = {}
    for spec in PARAMS:
        names = (spec.name, "q", "search") if spec.name == "query" else (spec.name,)
        raw = [v for n in names for v in qs.getlist(n) if v.strip()]
        if raw:
            values[spec.name] = raw if spec.kind == "list" else raw[0]
    values["query"] = values.get("query", "")[:MAX_QUERY_CHARS]
    return values


def search_values(submitted: dict[str, Any], workspace: str | None, project: str | None) -> dict[str, Any]:
    """The ``SearchQuery`` input of one submitted form: a project's screen searches its path's
    project; the all-projects screen searches every readable project (``global``) unless the
    form names a project, scopes or its own ``global`` value (validated as submitted, so a
    value that is not a boolean is a 400, never read as true)."""
    values = dict(submitted)
    if project is not None:
        values.update(workspace=workspace, project=project)
    elif "global" not in values and not values.get("project") and not values.get("scopes"):
        values["global"] = "true"
    return values


async def _search(request: Request, user: UserDep, tasks: BackgroundTasks,
                  workspace: str | None, project: str | None) -> Response:
    scope = await scope_for(request, user, workspace, project) if project else None
    submitted = read_form(request)
    values = search_values(submitted, workspace, project)
    result, error, status = None, None, 200
    try:
        params = SearchQuery.model_validate(values)
    except ValidationError as exc:
        error, status = first_error(exc), 400
    else:
        if params.query.strip():
            result = await run_search(request, user.principal, params, tasks)
    return renderer(request).page(
        request, "search.html", http_status=status, scope=scope, params=form_params(project_screen=bool(project)),
        main_params=MAIN_PARAMS, values=submitted, explain=result is not None and params.explain, result=result,
        error=error)


@router.get("/search")
async def search_all(request: Request, user: UserDep, tasks: BackgroundTasks) -> Response:
    """Search every project the user may read (or the ones the form names)."""
    return await _search(request, user, tasks, None, None)


@router.get("/p/{workspace}/{project}/search")
async def search_project(request: Request, user: UserDep, tasks: BackgroundTasks, workspace: str,
                         project: str) -> Response:
    """Search one project (raw observations answer when no page matches)."""
    return await _search(request, user, tasks, workspace, project)
