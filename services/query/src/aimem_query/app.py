"""The query service app: ``/api/v1`` (read-only JSON), ``/admin``, health and metrics.

The lifespan builds the query embedder (``embedding.provider`` set), connects the bus and
opens the reader pool; all live on ``app.state`` (``settings``, ``bus``, ``nc``,
``read_pool``, ``access``, ``query_embedder``) for the route dependencies
(``aimem_query.deps``, ``aimem_common.auth``). The ``/admin`` router
(``aimem_query.admin.router``) is included when that package is installed.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
from contextlib import AsyncExitStack, asynccontextmanager

from fastapi import FastAPI

from aimem_common.config import Settings
from aimem_common.read.access import AccessThrottle
from aimem_common.read.pool import ReaderPool
from aimem_common.read.query_embed import QueryEmbedder
from aimem_common.service import close_nats, connect_bus
from aimem_common.telemetry import Telemetry
from aimem_common.web import install_error_handlers, install_guard, install_observability
from aimem_query import api


def create_app(settings: Settings) -> FastAPI:
    """Build the query app for ``settings`` (nothing starts until the lifespan runs)."""
    telemetry = Telemetry("query")

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        async with AsyncExitStack() as stack:
            # Before the bus: a ConfigError fails startup; a local model loads once, here.
            embedder = await QueryEmbedder.open(settings)
            stack.push_async_callback(embedder.aclose)
            nc, bus = await connect_bus(settings, "query", telemetry)
            stack.push_async_callback(close_nats, nc)
            pool = ReaderPool(
                settings.db_path, size=settings.query.read_pool_size, budget_ms=settings.query.query_budget_ms,
                wait_s=60,
            )
            stack.callback(pool.close)
            await asyncio.to_thread(pool.open)  # waits for the writer's schema
            app.state.nc, app.state.bus, app.state.read_pool = nc, bus, pool
            app.state.access = AccessThrottle(settings.query.access_bump_interval_s)
            app.state.query_embedder = embedder
            app.state.ctx = {"settings": settings, "nc": nc, "bus": bus, "read_pool": pool}
            yield

    async def health() -> dict:
        nc = getattr(app.state, "nc", None)
        pool = getattr(app.state, "read_pool", None)
        db_ok = pool is not None and await pool.run(lambda c: c.execute("SELECT 1").fetchone()[0] == 1)
        return {"nats": bool(nc and nc.is_connected), "db": db_ok}

    app = FastAPI(
        title="aimem-query",
        summary="Read-only memory API (/api/v1) and the admin API (/admin)",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.telemetry = telemetry
    install_error_handlers(app)
    install_guard(app, settings.allowed_hosts, settings.host)
    install_observability(app, telemetry, health)
    app.include_router(api.router)
    # The admin half of issue 5 lives in aimem_query.admin (another owner): include it when present.
    if importlib.util.find_spec("aimem_query.admin") is not None:
        app.include_router(importlib.import_module("aimem_query.admin").router)
    return app
