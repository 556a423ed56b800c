"""Pictures: a project's activity, its handoff chains and its link graph (server-drawn SVG).

Reads go through ``aimem_common.read.pictures``; ``web.layout`` places the marks and the
``_pictures.html`` macros draw them (autoescaped: every label is agent data). Each picture
has a table or list beside it that says the same in text.
"""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from markupsafe import Markup, escape

from aimem_common.read import pictures
from aimem_query.deps import ctx_of, read
from aimem_query.web import layout
from aimem_query.web.deps import UserDep, renderer, scope_for
from aimem_query.web.render import page_url

router = APIRouter(prefix="/p/{workspace}/{project}")


def activity_view(data: dict) -> dict:
    """Return the two bar charts (sessions, observations per day by agent) of an ``Activity``."""
    by_day: dict[str, dict[str, dict[str, int]]] = {"sessions": {}, "observations": {}}
    for (day, agent), counts in data["cells"].items():
        for what in by_day:
            if counts[what]:
                by_day[what].setdefault(day, {})[agent] = counts[what]
    return {
        "sessions": layout.bar_chart(data["days"], data["agents"], by_day["sessions"]),
        "observations": layout.bar_chart(data["days"], data["agents"], by_day["observations"]),
        "legend": [{"agent": a, "style": layout.series_style(i)} for i, a in enumerate(data["agents"])],
        "rows": [{"day": d, "agents": [{"agent": a, **data["cells"].get((d, a), {"sessions": 0, "observations": 0})}
                                       for a in data["agents"]]}
                 for d in reversed(data["days"]) if data["totals"]["sessions"][d] or data["totals"]["observations"][d]],
    }


def graph_view(data: dict) -> dict:
    """Return the ring layout of a ``Graph`` with each node's page address and short label
    (computed once here: a template filter per node is most of a 300-node render) and
    ``edge_lines``, the edges' SVG lines as markup."""
    pic = layout.rings(data)
    # the edges are numbers and a kind: drawn here in one string rather than ~6 template
    # prints each (a 300-node graph has hundreds of edges)
    pic["edge_lines"] = Markup("".join(
        f'<line x1="{e["x1"]}" y1="{e["y1"]}" x2="{e["x2"]}" y2="{e["y2"]}" class="edge edge-{escape(e["kind"])}"/>'
        for e in pic["edges"]))
    for n in pic["nodes"]:
        n["href"] = page_url(n["workspace"], n["project"], n["path"])
        n["short"] = n["title"] if len(n["title"]) <= 28 else n["title"][:27] + "…"
    return pic


@router.get("/activity")
async def activity(request: Request, user: UserDep, workspace: str, project: str,
                   days: int = Query(28, ge=1, le=pictures.MAX_DAYS)) -> Response:
    """Sessions and observations per day by agent (bars lead to that day's sessions)."""
    scope = await scope_for(request, user, workspace, project)
    data = await read(request, pictures.activity, scope, days=days)
    return renderer(request).page(request, "activity.html", scope=scope, data=data, chart=activity_view(data),
                                  days=days)


@router.get("/handoffs/chains")
async def handoff_chains(request: Request, user: UserDep, workspace: str, project: str) -> Response:
    """Who handed to whom: each chain of handoffs, open and stale ones marked."""
    scope = await scope_for(request, user, workspace, project)
    viewer = None if user.principal.is_root else user.name
    data = await read(request, pictures.handoff_chains, scope, viewer=viewer)
    return renderer(request).page(request, "chains.html", scope=scope, data=data, pic=layout.chains(data["chains"]))


@router.get("/graph")
async def project_graph(request: Request, user: UserDep, workspace: str, project: str,
                        nodes: int = Query(150, ge=10, le=pictures.MAX_GRAPH)) -> Response:
    """The project's most connected pages on rings by degree rank (a node opens its page)."""
    scope = await scope_for(request, user, workspace, project)
    data, pic = await ctx_of(request).web_graphs.get(scope, nodes)
    return renderer(request).page(request, "graph.html", scope=scope, data=data, pic=pic, center=None, hops=None)


@router.get("/graph/{path:path}")
async def page_graph(request: Request, user: UserDep, workspace: str, project: str, path: str,
                     hops: int = Query(1, ge=1, le=2)) -> Response:
    """One page's links, backlinks and shared-entity pages, one or two hops out, on rings by hop."""
    scope = await scope_for(request, user, workspace, project)
    data = await read(request, pictures.page_graph, scope, path, hops=hops, reader=user.principal)
    return renderer(request).page(request, "graph.html", scope=scope, data=data, pic=graph_view(data),
                                  center=path, hops=hops)
