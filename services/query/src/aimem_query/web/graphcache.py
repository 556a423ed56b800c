"""Project link graphs drawn ahead of the first view and kept fresh as pages change.

The writer keeps each page's link degree, so drawing a project anew (``project_graph`` plus
its ring layout) takes a few tens of ms at 10,000 pages; a drawing is still kept per
``(project, its names, nodes, graph_version)`` so a viewer mostly gets it in a few ms. The
writer counts a project's graph version up with every change of what its graph shows (a page
going live or not, a link between two of its live pages added, removed or repointed), and the
names are in the key because the drawing's links carry them (a rename draws it anew): a kept
drawing is never shown after its project changed. The most recently viewed (and, at startup,
the largest) projects are drawn again in the background when the writer announces a
``page.changed`` for them (at most once per ``settle_s``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from typing import Any

from aimem_common.models import Scope
from aimem_common.read import pictures, scopes
from aimem_common.readpool import ReaderPool
from aimem_query.web.hub import EventHub

log = logging.getLogger(__name__)

DEFAULT_NODES = 150  # the route's default ``nodes``
KEEP = 16  # drawings kept (each a few hundred nodes)
WARM_PROJECTS = 8  # the largest projects drawn at startup


def _largest_projects(conn, limit: int) -> list[Scope]:
    rows = conn.execute("SELECT project_id FROM page_degrees WHERE degree > 0 GROUP BY project_id"
                        " ORDER BY count(*) DESC LIMIT ?", (limit,)).fetchall()
    return [s for s in (scopes.find_by_id(conn, r[0]) for r in rows) if s is not None]


class ProjectGraphs:
    """Kept drawings of project graphs: ``get`` answers from them while the project is
    unchanged; ``start`` draws the largest projects and then redraws a kept project after
    each ``page.changed`` event of it (core NATS events: one missed only costs a slow view)."""

    def __init__(self, pool: ReaderPool, *, keep: int = KEEP, settle_s: float = 1.0) -> None:
        self._pool = pool
        self._keep = keep
        self._settle_s = settle_s
        self._cache: OrderedDict[tuple, tuple[dict, dict]] = OrderedDict()
        self._ids: dict[tuple[str, str], str] = {}  # (workspace, project) names -> project id, of drawn projects
        self._dirty: set[tuple[str, str]] = set()
        self._task: asyncio.Task | None = None

    async def get(self, scope: Scope, nodes: int = DEFAULT_NODES) -> tuple[dict[str, Any], dict[str, Any]]:
        """Return ``(Graph, drawing)`` of ``scope``'s ``nodes`` most connected pages (drawing:
        ``graph_view``'s ring layout), from the kept drawing while no page of the project changed."""
        from aimem_query.web.pictures import graph_view

        key = (scope.project_id, nodes, scope.workspace, scope.project,
               await self._pool.run(pictures.graph_version, scope))
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        data = await self._pool.run(pictures.project_graph, scope, max_nodes=nodes)
        drawn = (data, graph_view(data))
        self._cache[key] = drawn
        self._ids[(scope.workspace, scope.project)] = scope.project_id
        while len(self._cache) > self._keep:
            self._cache.popitem(last=False)
        return drawn

    def start(self, events: EventHub, *, warm_projects: int = WARM_PROJECTS) -> None:
        """Draw the ``warm_projects`` largest projects, then follow ``events`` (background task)."""
        self._task = asyncio.create_task(self._run(events, warm_projects))

    async def stop(self) -> None:
        """End the background task."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self, events: EventHub, warm_projects: int) -> None:
        with events.listen() as queue:
            try:
                for scope in await self._pool.run(_largest_projects, warm_projects):
                    await self.get(scope)
            except Exception as exc:  # noqa: BLE001 - warming is an optimisation: a view draws it anyway
                log.warning("project graphs not drawn at startup: %s", exc)
            while True:
                item = await queue.get()
                if item is None:
                    return
                if item.get("event") == "page.changed":
                    self._dirty.add((item.get("workspace"), item.get("project")))
                if queue.empty() and self._dirty:
                    await asyncio.sleep(self._settle_s)  # a burst of writes: draw once after it
                    await self._redraw()

    async def _redraw(self) -> None:
        dirty, self._dirty = self._dirty, set()
        for names in dirty:
            pid = self._ids.get(names)
            counts = {key[1] for key in self._cache if key[0] == pid}  # only drawings still kept (≤ ``keep``)
            if not counts:
                continue  # not kept here: its next view draws it
            try:
                scope = await self._pool.run(scopes.find, *names)
                if scope is not None:
                    for n in sorted(counts):
                        await self.get(scope, n)
            except Exception as exc:  # noqa: BLE001 - the next view draws it
                log.warning("project graph of %s/%s not redrawn: %s", *names, exc)
