"""The writer service: FastAPI app (health + metrics) around the command consumer.

The writer is the only process that opens SQLite read-write or touches ``wiki/``
(DESIGN.md invariant 2). Its lifespan opens the DB (applying migrations), connects to
NATS, provisions the streams and the durable ``writer`` consumer, then runs the consumer.
"""

from __future__ import annotations

from contextlib import AsyncExitStack, asynccontextmanager

from fastapi import FastAPI

from aimem_common import bus as busmod
from aimem_common.config import Settings
from aimem_common.db.connect import open_writer
from aimem_common.service import connect_bus
from aimem_common.telemetry import Telemetry
from aimem_common.web import install_error_handlers, install_observability


def create_app(settings: Settings) -> FastAPI:
    """Build the writer app for ``settings`` (nothing starts until the lifespan runs)."""
    telemetry = Telemetry("writer")
    state: dict = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        async with AsyncExitStack() as stack:
            conn = open_writer(settings.db_path)
            stack.callback(conn.close)
            nc, bus = await connect_bus(settings, "writer", telemetry)
            stack.push_async_callback(nc.drain)
            await busmod.ensure_writer_consumer(
                nc.jetstream(), ack_wait_s=settings.writer.ack_wait_s, max_deliver=settings.writer.max_deliver
            )
            state.update(conn=conn, nc=nc, bus=bus)
            app.state.ctx = state
            yield

    async def health() -> dict:
        nc = state.get("nc")
        conn = state.get("conn")
        db_ok = conn is not None and conn.execute("SELECT 1").fetchone()[0] == 1
        return {"nats": bool(nc and nc.is_connected), "db": db_ok}

    app = FastAPI(title="aimem-writer", lifespan=lifespan)
    install_error_handlers(app)
    install_observability(app, telemetry, health)
    return app
