"""The mcp-gateway service app: health and metrics, bus connection, read-only DB."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack, asynccontextmanager

from fastapi import FastAPI

from aimem_common.config import Settings
from aimem_common.db.connect import open_reader
from aimem_common.service import connect_bus
from aimem_common.telemetry import Telemetry
from aimem_common.web import install_error_handlers, install_observability


def create_app(settings: Settings) -> FastAPI:
    """Build the mcp-gateway app for ``settings`` (nothing starts until the lifespan runs)."""
    telemetry = Telemetry("mcp-gateway")
    state: dict = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        async with AsyncExitStack() as stack:
            nc, bus = await connect_bus(settings, "mcp-gateway", telemetry)
            stack.push_async_callback(nc.drain)
            db = await asyncio.to_thread(open_reader, settings.db_path, wait_s=60)
            stack.callback(db.close)
            state.update(nc=nc, bus=bus, db=db)
            app.state.ctx = state
            yield

    async def health() -> dict:
        nc = state.get("nc")
        db = state.get("db")
        db_ok = db is not None and db.execute("SELECT 1").fetchone()[0] == 1
        return {"nats": bool(nc and nc.is_connected), "db": db_ok}

    app = FastAPI(title="aimem-mcp-gateway", lifespan=lifespan)
    install_error_handlers(app)
    install_observability(app, telemetry, health)
    return app
