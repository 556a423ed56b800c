"""The ingress service app: ``POST /hook``, session-start context, health and metrics.

Run with ``python -m aimem_ingress`` (``config.load()`` once, then uvicorn). The lifespan
connects to NATS (ensuring the streams), builds the ``IngressContext`` (bus, lag gate,
metrics) and starts the first writer-lag read; routes live in ``routes.py``.
"""

from __future__ import annotations

from contextlib import AsyncExitStack, asynccontextmanager

from fastapi import FastAPI

from aimem_common.bus import WRITER_STATUS_SUBJECT
from aimem_common.config import Settings
from aimem_common.service import close_nats, connect_bus
from aimem_common.telemetry import Telemetry
from aimem_common.web import install_error_handlers, install_guard, install_observability
from aimem_ingress.context import HookMetrics, IngressContext
from aimem_ingress.gate import LagGate
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
            gate = LagGate(bus.writer_progress, max_lag=cfg.max_writer_lag, max_delay_s=cfg.max_writer_delay_s,
                           interval_s=cfg.lag_check_interval_s, retry_after_s=cfg.retry_after_s,
                           status_stale_s=cfg.writer_status_stale_s)
            await nc.subscribe(WRITER_STATUS_SUBJECT, cb=gate.on_writer_status)
            await gate.refresh()
            gate.start()
            stack.push_async_callback(gate.close)
            ctx = IngressContext(settings=settings, nc=nc, bus=bus, gate=gate, metrics=metrics,
                                 claim_timeout_s=min(settings.bus.publish_timeout_s, 0.8))
            stack.callback(ctx.close)
            holder["ctx"] = app.state.ctx = ctx
            yield

    async def health() -> dict:
        ctx = holder.get("ctx")
        return {
            "nats": bool(ctx and ctx.nc.is_connected),
            # False while JetStream leaves publishes unacknowledged (its store failed).
            "jetstream": bool(ctx and ctx.bus.jetstream_storing()),
            "db": "open" if ctx and ctx.db_open else "lazy",
            "writer_lag": ctx.gate.lag if ctx else None,
            "writer_delay_s": round(ctx.gate.delay_s, 1) if ctx else None,
            # Red while the writer reports it cannot store: hooks get 503/507, not a 202.
            "writer_store": {"ok": False, **fault} if ctx and (fault := ctx.gate.store_fault()) else True,
        }

    app = FastAPI(title="aimem-ingress", lifespan=lifespan)
    install_error_handlers(app)
    install_guard(app, settings.allowed_hosts, settings.host)
    install_observability(app, telemetry, health)
    app.include_router(router)
    return app
