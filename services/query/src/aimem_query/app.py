"""The query service app: ``/api/v1`` (read-only JSON), ``/admin``, ``/web``, health and metrics.

The lifespan builds the query embedder (``embedding.provider`` set; before the bus, so a
bad config fails startup and a local model loads once), connects the bus and opens the
reader pool, into one ``QueryContext`` on ``app.state.ctx``; the routes reach it through
``aimem_query.deps``. The context also holds the ``/web`` live-update hub (subscribed to
the writer's events once the bus is up).
"""

from __future__ import annotations

from fastapi import FastAPI

from aimem_common.config import Settings
from aimem_common.search.access import AccessThrottle
from aimem_common.search.query_embed import QueryEmbedder
from aimem_common.search.service import Searcher
from aimem_common.rerank import RerankStage
from aimem_common.service import Startup, create_service_app
from aimem_common.telemetry import Telemetry
from aimem_query import admin, api
from aimem_query.context import QueryContext
from aimem_query.web.graphcache import ProjectGraphs
from aimem_query.web.health import HealthSampler
from aimem_query.web.hub import EventHub
from aimem_query.web.site import install as install_web


def create_app(settings: Settings) -> FastAPI:
    """Build the query app for ``settings`` (nothing starts until the lifespan runs)."""

    async def start(s: Startup) -> QueryContext:
        embedder = await QueryEmbedder.open(settings)
        s.stack.push_async_callback(embedder.aclose)
        reranker = RerankStage.from_settings(settings.rerank)
        s.stack.push_async_callback(reranker.aclose)
        nc, bus = await s.connect_bus()
        reranker.attach_bus(nc)  # reranker = "llm" asks the maintainer over NATS
        pool = await s.read_pool(size=settings.query.read_pool_size, budget_ms=settings.query.query_budget_ms)
        events = EventHub()
        await events.start(nc)
        s.stack.push_async_callback(events.stop)
        access = AccessThrottle(settings.query.access_bump_interval_s)
        searcher = Searcher(pool=pool, settings=settings, embedder=embedder, reranker=reranker, bus=bus,
                            throttle=access)
        health = HealthSampler(settings, bus)
        health.start()
        s.stack.push_async_callback(health.stop)
        graphs = ProjectGraphs(pool)
        if settings.web.enabled:
            graphs.start(events)
            s.stack.push_async_callback(graphs.stop)
        return QueryContext(settings=settings, telemetry=s.telemetry, nc=nc, bus=bus, read_pool=pool,
                            embedder=embedder, access=access, events=events, reranker=reranker, searcher=searcher,
                            web_health=health, web_graphs=graphs)

    app = create_service_app(
        "query", settings, Telemetry("query"), start, not_ready={"nats": False, "db": False},
        summary="Read-only memory API (/api/v1), the admin API (/admin) and the web interface (/web)",
    )
    app.include_router(api.router)
    app.include_router(admin.router)
    if settings.web.enabled:
        install_web(app, settings)
    return app
