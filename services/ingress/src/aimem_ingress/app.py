"""The ingress service app: ``POST /hook``, session-start context, health and metrics.

Run with ``python -m aimem_ingress`` (``config.load()`` once, then uvicorn). The lifespan
connects to NATS (ensuring the streams), builds the ``IngressContext`` (bus, lag gate,
metrics) and starts the first writer-lag read; routes live in ``routes.py``.
"""

from __future__ import annotations

from contextlib import AsyncExitStack, asynccontextmanager

from fastapi import FastAPI

from aimem_common.config import Settings
from aimem_common.service import close_nats, connect_bus
from aimem_common.telemetry import Telemetry
from aimem_common.web import install_error_handlers, install_observability
from aimem_ingress.context import HookMetrics, IngressContext
from aimem_ingress.gate import LagGate
from aimem_ingress.imports import router as import_router
from aimem_ingress.routes import router


def create_app(settings: Settings) -> FastAPI:
    """Build the ingress app for ``settings`` (nothing starts until the lifespan runs)."""
    telemetry = Telemetry("ingress")
    metrics = HookMetrics(telemetry)
    holder: dict[str, IngressContext] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        async with AsyncExitStack() as stack:
            nc, bus = await connect_bus(settings, "ingress", telemetry)
            stack.push_async_callback(close_nats, nc)
            cfg = settings.ingress
            gate = LagGate(bus.writer_lag, max_lag=cfg.max_writer_lag, interval_s=cfg.lag_check_interval_s,
                           retry_after_s=cfg.retry_after_s)
            stack.push_async_callback(gate.close)
            await gate.refresh()
            ctx = IngressContext(settings=settings, nc=nc, bus=bus, gate=gate, metrics=metrics,
                                 claim_timeout_s=min(settings.bus.publish_timeout_s, 0.8))
            stack.callback(ctx.close)
            holder["ctx"] = app.state.ctx = ctx
            yield

    async def health() -> dict:
        ctx = holder.get("ctx")
        return {
            "nats": bool(ctx and ctx.nc.is_connected),
            "db": "open" if ctx and ctx.db_open else "lazy",
            "writer_lag": ctx.gate.lag if ctx else None,
        }

    app = FastAPI(title="aimem-ingress", lifespan=lifespan)
    install_error_handlers(app)
    install_observability(app, telemetry, health)
    app.include_router(router)
    app.include_router(import_router)
    return app
